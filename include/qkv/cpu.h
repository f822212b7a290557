/* Which instruction-set path the hand-written kernels take, chosen once per process at run time.
 *
 * One build runs on any x86-64: the kernels are compiled for AVX-512, for AVX2 + FMA and for the baseline, and
 * the first kernel call picks the widest path the CPU (and the OS) supports. QKV_ISA=avx512|avx2|generic forces
 * a path, for tests and comparisons; a path the CPU lacks is refused (qkv_cpu_check() says why) and the detected
 * one is used. Other architectures have only the generic path, which compilers vectorise for the target.
 */
#ifndef QKV_CPU_H
#define QKV_CPU_H

#include <stdbool.h>

#include "qkv/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_isa {
    QKV_ISA_GENERIC = 0, /* portable C, vectorised by the compiler for the build's baseline */
    QKV_ISA_AVX2 = 1,    /* x86-64-v3: AVX2, FMA, BMI2 */
    QKV_ISA_AVX512 = 2,  /* x86-64-v4: AVX-512 F/BW/DQ/VL/CD */
} qkv_isa;

/* The path in use (QKV_ISA if set and supported, else the widest the CPU supports). */
qkv_isa qkv_cpu_isa(void);
/* Whether this CPU and this build can run a path. */
bool qkv_cpu_supports(qkv_isa isa);
/* "avx512", "avx2", "generic". */
const char *qkv_cpu_isa_name(qkv_isa isa);
/* Use `isa` from now on; QKV_ERR_UNSUPPORTED (message set) if this CPU or build cannot run it. Not meant to be
 * called while kernels run on other threads. */
qkv_status qkv_cpu_set_isa(qkv_isa isa);
/* QKV_ERR_INVALID if QKV_ISA names no path, QKV_ERR_UNSUPPORTED if it names one this CPU lacks; QKV_OK when
 * unset or usable. */
qkv_status qkv_cpu_check(void);
/* OpenBLAS's kernel family for this CPU ("SkylakeX", "Haswell", ...), or "unknown". */
const char *qkv_cpu_blas_core(void);
/* The OPENBLAS_CORETYPE this CPU deserves when OpenBLAS picked a family with a narrower vector ISA than the CPU
 * has ("SkylakeX" for AVX-512, "Haswell" for AVX2 + FMA), or NULL when its pick is as wide. A CPU newer than the
 * OpenBLAS build (Debian 12's 0.3.21 takes a 5th-generation Xeon for "Prescott", SSE3 only) gets GEMMs several
 * times slower than it could run; OpenBLAS reads the variable once, when it loads, so a program can only set it
 * and start again (qkv's CLI does, unless OPENBLAS_CORETYPE is already set). */
const char *qkv_cpu_blas_core_wanted(void);

#ifdef __cplusplus
}
#endif
#endif

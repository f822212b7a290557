/* Kernel dispatch by instruction set (see qkv/cpu.h). Not installed.
 *
 * Two ways to compile a kernel per ISA:
 *  - a whole file several times: a wrapper file per path defines QKV_KERNEL_ISA and includes it, and CMake gives
 *    the wrapper -march=x86-64-v3 / -v4 (src/ops/attention_fused*.c: hand-written intrinsics);
 *  - one function three times: QKV_ISA_KERNEL / QKV_ISA_KERNEL_VOID below clone a loop the compiler vectorises
 *    into target("arch=...") functions and a dispatcher, so the same C loop gets AVX2 or AVX-512 code in a
 *    portable build. In a -DQKV_NATIVE=ON build (QKV_NATIVE_BUILD) everything is already compiled for the building
 *    CPU, and a native body could not be inlined into a narrower clone, so the clones collapse into one function
 *    and QKV_ISA steers the whole-file kernels only.
 */
#ifndef QKV_CORE_ISA_H
#define QKV_CORE_ISA_H

#include "qkv/cpu.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QKV_X86_KERNELS 1
#define QKV_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#define QKV_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#else
#define QKV_X86_KERNELS 0
#endif

/* The path in use, cheap enough for every kernel call (one relaxed load after the first). */
static inline qkv_isa qkv__isa(void) { return qkv_cpu_isa(); }

/* Force a body into each clone, where it is compiled for the clone's target. */
#define QKV_KERNEL_BODY static inline __attribute__((always_inline))

/* QKV_ISA_KERNEL(ret, name, (params), (args)): given `QKV_KERNEL_BODY ret name##_body(params)`, defines
 * `static ret name(params)` that runs the body compiled for the path in use. */
#if QKV_X86_KERNELS && !defined(QKV_NATIVE_BUILD)
#define QKV_ISA_KERNEL(ret, name, params, args)                                                                   \
    static QKV_TARGET_AVX512 ret name##_avx512 params { return name##_body args; }                                \
    static QKV_TARGET_AVX2 ret name##_avx2 params { return name##_body args; }                                    \
    static ret name##_generic params { return name##_body args; }                                                 \
    static ret name params {                                                                                      \
        switch (qkv__isa()) {                                                                                     \
        case QKV_ISA_AVX512: return name##_avx512 args;                                                           \
        case QKV_ISA_AVX2: return name##_avx2 args;                                                               \
        default: return name##_generic args;                                                                      \
        }                                                                                                         \
    }
#define QKV_ISA_KERNEL_VOID(name, params, args)                                                                   \
    static QKV_TARGET_AVX512 void name##_avx512 params { name##_body args; }                                      \
    static QKV_TARGET_AVX2 void name##_avx2 params { name##_body args; }                                          \
    static void name##_generic params { name##_body args; }                                                       \
    static void name params {                                                                                     \
        switch (qkv__isa()) {                                                                                     \
        case QKV_ISA_AVX512: name##_avx512 args; break;                                                           \
        case QKV_ISA_AVX2: name##_avx2 args; break;                                                               \
        default: name##_generic args; break;                                                                      \
        }                                                                                                         \
    }
#else
#define QKV_ISA_KERNEL(ret, name, params, args)                                                                   \
    static ret name params { return name##_body args; }
#define QKV_ISA_KERNEL_VOID(name, params, args)                                                                   \
    static void name params { name##_body args; }
#endif

#endif

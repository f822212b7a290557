/* Run-time choice of the kernel instruction-set path (see qkv/cpu.h and docs/design.md "Kernel dispatch"). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/isa.h"
#include "qkv/cpu.h"

/* OpenBLAS's own query; declared here to avoid depending on which cblas.h variant is installed. */
extern char *openblas_get_corename(void);

static const char *const names[] = {"generic", "avx2", "avx512"};

/* The path in use, -1 until the first query. Written once (a race only stores the same value twice). */
static int chosen = -1;

bool qkv_cpu_supports(qkv_isa isa) {
    switch (isa) {
    case QKV_ISA_GENERIC: return true;
#if QKV_X86_KERNELS
    case QKV_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
               __builtin_cpu_supports("bmi2");
    case QKV_ISA_AVX512:
        __builtin_cpu_init();
        return qkv_cpu_supports(QKV_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd");
#endif
    default: return false;
    }
}

const char *qkv_cpu_isa_name(qkv_isa isa) {
    return (unsigned)isa < sizeof names / sizeof names[0] ? names[isa] : "unknown";
}

static qkv_isa best(void) {
    if (qkv_cpu_supports(QKV_ISA_AVX512)) return QKV_ISA_AVX512;
    if (qkv_cpu_supports(QKV_ISA_AVX2)) return QKV_ISA_AVX2;
    return QKV_ISA_GENERIC;
}

/* QKV_ISA parsed: the path, or -1 when unset, -2 when it names no path. */
static int requested(void) {
    const char *env = getenv("QKV_ISA");
    if (!env || !*env) return -1;
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(env, names[i])) return i;
    return -2;
}

qkv_status qkv_cpu_check(void) {
    int r = requested();
    if (r == -2)
        return qkv_error_set(QKV_ERR_INVALID, "QKV_ISA='%s': expected avx512, avx2 or generic", getenv("QKV_ISA"));
    if (r >= 0 && !qkv_cpu_supports((qkv_isa)r))
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "QKV_ISA=%s: this CPU (or this build) cannot run the %s kernels",
                             names[r], names[r]);
    return QKV_OK;
}

qkv_isa qkv_cpu_isa(void) {
    int c = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    if (c < 0) {
        int r = requested();
        c = r >= 0 && qkv_cpu_supports((qkv_isa)r) ? r : (int)best();
        __atomic_store_n(&chosen, c, __ATOMIC_RELAXED);
    }
    return (qkv_isa)c;
}

qkv_status qkv_cpu_set_isa(qkv_isa isa) {
    if (!qkv_cpu_supports(isa))
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "ISA path '%s' is not supported by this CPU or build",
                             qkv_cpu_isa_name(isa));
    __atomic_store_n(&chosen, (int)isa, __ATOMIC_RELAXED);
    return QKV_OK;
}

const char *qkv_cpu_blas_core(void) {
    const char *core = openblas_get_corename();
    return core && *core ? core : "unknown";
}

/* The widest vector ISA an OpenBLAS kernel family uses: 2 AVX-512, 1 AVX2 + FMA, 0 older or unknown. */
static int core_level(const char *core) {
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const avx2[] = {"Haswell", "Zen", "Skylake", "Broadwell"};
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
        if (!strcasecmp(core, avx512[i])) return 2;
    for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
        if (!strcasecmp(core, avx2[i])) return 1;
    return 0;
}

const char *qkv_cpu_blas_core_wanted(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    int cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
                  ? 2
              : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1
                                                                                  : 0;
    if (cpu > core_level(qkv_cpu_blas_core())) return cpu == 2 ? "SkylakeX" : "Haswell";
#endif
    return NULL;
}

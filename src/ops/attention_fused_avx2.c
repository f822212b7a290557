/* The fused attention compiled for the avx2 path: CMake gives this file -march=x86-64-v3 (attention_fused.c). */
#if defined(__x86_64__)
#define QKV_KERNEL_ISA 1
#include "attention_fused.c"
#else
typedef int qkv__attention_fused_avx2_unused; /* ISO C wants at least one declaration */
#endif

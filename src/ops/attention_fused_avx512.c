/* The fused attention compiled for the avx512 path: CMake gives this file -march=x86-64-v4 (attention_fused.c). */
#if defined(__x86_64__)
#define QKV_KERNEL_ISA 2
#include "attention_fused.c"
#else
typedef int qkv__attention_fused_avx512_unused; /* ISO C wants at least one declaration */
#endif

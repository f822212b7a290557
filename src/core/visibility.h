/* The library's internal cross-file functions (qkv__*) are declared between QKV_INTERNAL_BEGIN and
 * QKV_INTERNAL_END, placed after a header's includes: hidden visibility, so a shared build of the library exports
 * the public qkv_ API alone. A static libqkv.a links as before (its objects, and the tests that reach inside, still
 * see each other). Not installed. */
#ifndef QKV_CORE_VISIBILITY_H
#define QKV_CORE_VISIBILITY_H

#define QKV_INTERNAL_BEGIN _Pragma("GCC visibility push(hidden)")
#define QKV_INTERNAL_END _Pragma("GCC visibility pop")

#endif

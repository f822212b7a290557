/* Shared by the fuzz harnesses: most readers take a path, so an input is written to a per-process scratch file
 * first; inputs made of several files are split at a separator line. */
#ifndef QKV_FUZZ_H
#define QKV_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs larger than this are ignored: the limits under test are far smaller, and big inputs only slow fuzzing. */
#define FUZZ_MAX_INPUT ((size_t)1 << 20)

/* A scratch path "<tmp>/qkv-fuzz-<pid>-<tag><suffix>" (static storage per tag slot). */
static inline const char *fuzz_path(int slot, const char *suffix) {
    static char paths[4][512];
    const char *tmp = getenv("TMPDIR");
    snprintf(paths[slot], sizeof paths[slot], "%s/qkv-fuzz-%ld-%d%s", tmp && *tmp ? tmp : "/tmp", (long)getpid(),
             slot, suffix ? suffix : "");
    return paths[slot];
}

/* Writes data to scratch slot `slot` and returns its path (NULL if it cannot be written). */
static inline const char *fuzz_file(int slot, const char *suffix, const void *data, size_t size) {
    const char *p = fuzz_path(slot, suffix);
    FILE *f = fopen(p, "wb");
    if (!f) return NULL;
    int ok = fwrite(data, 1, size, f) == size;
    ok &= fclose(f) == 0;
    return ok ? p : NULL;
}

/* A NUL-terminated copy of data (caller frees). */
static inline char *fuzz_str(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Splits data at the first line "#----\n": *a = before it, *b = after (all of data and an empty b without it). */
static inline void fuzz_split(const uint8_t *data, size_t size, size_t *alen, const uint8_t **b, size_t *blen) {
    static const char sep[] = "\n#----\n";
    const size_t n = sizeof sep - 1;
    for (size_t i = 0; i + n <= size; i++) {
        if (!memcmp(data + i, sep, n)) {
            *alen = i + 1;
            *b = data + i + n;
            *blen = size - i - n;
            return;
        }
    }
    *alen = size;
    *b = data + size;
    *blen = 0;
}

/* A file of the shared pretrained directory ($QKV_SHARED/pretrained/rel), or NULL when QKV_SHARED is not set. */
static inline const char *fuzz_shared(const char *rel, char *buf, size_t size) {
    const char *root = getenv("QKV_SHARED");
    if (!root || !*root) return NULL;
    snprintf(buf, size, "%s/pretrained/%s", root, rel);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

#endif

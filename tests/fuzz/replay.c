/* Runs inputs through a harness without libFuzzer (the normal build, for ctest): every file given, and every file
 * of every directory given, once. A crash or sanitizer report fails the test; refusals are the expected outcome. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: cannot open\n", path);
        return 1;
    }
    size_t cap = 1 << 16, len = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: %s: out of memory\n", path);
        return 1;
    }
    /* A copy of exactly len bytes, so that ASan sees reads past the input. */
    uint8_t *in = malloc(len ? len : 1);
    if (!in) abort();
    if (len) memcpy(in, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(in, len);
    free(in);
    return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    int bad = 0;
    long n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) continue; /* a harness without regression inputs yet */
        if (!S_ISDIR(st.st_mode)) {
            bad |= run_file(argv[i]);
            n++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) continue;
        char **names = NULL;
        size_t count = 0, cap = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            if (count == cap) {
                cap = cap ? 2 * cap : 64;
                names = realloc(names, cap * sizeof *names);
                if (!names) abort();
            }
            names[count] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
            if (!names[count]) abort();
            sprintf(names[count++], "%s/%s", argv[i], e->d_name);
        }
        closedir(d);
        qsort(names, count, sizeof *names, cmp);
        for (size_t k = 0; k < count; k++) {
            bad |= run_file(names[k]);
            n++;
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %ld inputs\n", n);
    return bad;
}

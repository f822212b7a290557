/* Records a run writes to its log.jsonl before the training loop opens it (what a fine-tuning run loaded, which
 * parameters train): qkv train shows them, and the loop keeps them (step 0) on resume. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "train_internal.h"

qkv_status qkv__run_log_line(const qkv_run *r, const char *line) {
    size_t n = strlen(r->dir) + 16;
    char *log = malloc(n);
    if (!log) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    snprintf(log, n, "%s/log.jsonl", r->dir);
    FILE *f = fopen(log, "a");
    qkv_status st = QKV_OK;
    if (!f) {
        st = qkv_error_set(QKV_ERR_IO, "%s: cannot open: %s", log, strerror(errno));
    } else {
        bool bad = fprintf(f, "%s\n", line) < 0;
        if (fclose(f) != 0 || bad) st = qkv_error_set(QKV_ERR_IO, "%s: write error", log);
    }
    free(log);
    return st;
}

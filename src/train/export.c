/* A run's model as a Hugging Face directory (train.h, qkv_run_export_hf): the model type writes its weights and
 * config.json; the run adds its WordPiece vocabulary, so `qkv attend --model DIR` and transformers find a tokenizer
 * beside the weights. */
#include <stdio.h>
#include <stdlib.h>

#include "qkv/fsutil.h"
#include "train_internal.h"

qkv_status qkv_run_export_hf(qkv_run *r, const char *dir) {
    if (!r || !dir) return qkv_error_set(QKV_ERR_INVALID, "export: NULL run or directory");
    if (!r->type->save_pretrained)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "model type '%s' has no Hugging Face layout to export",
                             r->type->name);
    qkv_status st = qkv_fs_mkdirs(dir);
    if (!st) st = r->type->save_pretrained(r->model, r->params, dir);
    if (st || !r->task.wp) return st;
    char from[4096], to[4096];
    snprintf(from, sizeof from, "%s/vocab.txt", r->dir);
    snprintf(to, sizeof to, "%s/vocab.txt", dir);
    FILE *in = fopen(from, "rb");
    if (!in) return QKV_OK; /* a wordpiece vocabulary named by data.vocab_file only: nothing of the run's own */
    fclose(in);
    return qkv_fs_copy(from, to);
}

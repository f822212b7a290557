/* Batched translation of texts with a seq2seq run (translate_run.h). */
#include "translate_run.h"

#include <stdlib.h>
#include <string.h>

translate_opts translate_defaults(void) {
    return (translate_opts){.beam = 1, .n_best = 1, .batch = 32, .seed = 1, .alpha = 0.6f, .temperature = 1.0f,
                            .utility = QKV_MBR_BLEU, .no_repeat_ngram = 0, .repetition_penalty = 1.0f,
                            .repeat_scope = QKV_REPEAT_GENERATED};
}

char *translate_text(qkv_run *r, const int32_t *tokens, int len) {
    char *text = NULL;
    if (qkv_run_decode_target(r, tokens, (size_t)len, &text) != QKV_OK) return NULL;
    return text;
}

static char *detok(const int32_t *tokens, int len, void *user) { return translate_text(user, tokens, len); }

qkv_status translate_prepare(translate_job *j, qkv_run *r, const translate_opts *t, int n, const char *const *texts,
                             int *bad) {
    memset(j, 0, sizeof *j);
    *bad = -1;
    j->r = r;
    if (qkv_model_decoder(qkv_run_model_type(r), qkv_run_model(r), &j->dec) != QKV_OK || !j->dec.info.needs_source)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "model type '%s' is not a translation model",
                             qkv_run_model_type(r)->name);
    int64_t src_max;
    j->o = qkv_decode_defaults();
    qkv_run_target_ids(r, &j->o.bos, &j->o.eos, &j->o.pad, &src_max);
    j->o.beam = t->beam;
    j->o.n_best = t->n_best;
    j->o.alpha = t->alpha;
    j->o.temperature = t->temperature;
    j->o.n_samples = t->mbr ? t->mbr : 1;
    j->o.no_repeat_ngram = t->no_repeat_ngram;
    j->o.repetition_penalty = t->repetition_penalty;
    j->o.repeat_scope = t->repeat_scope;
    j->mbr = t->mbr > 0;
    j->utility = t->utility;
    j->bo = qkv_batch_defaults();
    j->bo.search = t->mbr ? QKV_SEARCH_SAMPLE : t->beam > 1 ? QKV_SEARCH_BEAM : QKV_SEARCH_GREEDY;
    j->bo.batch_size = t->batch;
    j->bo.batch_tokens = t->batch_tokens;
    j->bo.seed = t->seed;
    size_t cap = n ? (size_t)n : 1;
    j->ids = calloc(cap, sizeof *j->ids);
    j->lens = malloc(sizeof(int) * cap);
    j->max_lens = malloc(sizeof(int) * cap);
    if (!j->ids || !j->lens || !j->max_lens) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    j->n = n;
    for (int l = 0; l < n; l++) {
        size_t k = 0;
        if (qkv_run_encode(r, texts[l], &j->ids[l], &k) != QKV_OK) {
            *bad = l;
            return qkv_last_status();
        }
        if ((int64_t)k > src_max) k = (size_t)src_max;
        if (!k) { /* an empty text still has one (pad) position to attend to */
            free(j->ids[l]);
            if (!(j->ids[l] = malloc(sizeof(int32_t)))) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            j->ids[l][0] = j->o.pad >= 0 ? j->o.pad : 0;
            k = 1;
        }
        j->lens[l] = (int)k;
        j->max_lens[l] = t->max_len ? t->max_len : 2 * (int)k + 10;
    }
    return QKV_OK;
}

typedef struct {
    translate_job *j;
    qkv_batch_emit_fn emit;
    void *user;
} reduce_ctx;

static qkv_status reduce_then_emit(int index, qkv_hyps *hs, void *user) {
    reduce_ctx *c = user;
    qkv_status st = c->j->mbr ? qkv_mbr_reduce(hs, c->j->utility, detok, c->j->r) : QKV_OK;
    return st ? st : c->emit(index, hs, c->user);
}

qkv_status translate_decode(translate_job *j, qkv_batch_emit_fn emit, void *user) {
    reduce_ctx c = {j, emit, user};
    return qkv_decode_batch(&j->dec, j->n, (const int32_t *const *)j->ids, j->lens, j->max_lens, &j->o, &j->bo,
                            reduce_then_emit, &c);
}

void translate_free(translate_job *j) {
    for (int l = 0; j->ids && l < j->n; l++) free(j->ids[l]);
    free(j->ids);
    free(j->lens);
    free(j->max_lens);
    memset(j, 0, sizeof *j);
}

/* A language model's decoder as a decoder from a prompt (include/qkv/prompted.h). */
#include <stdlib.h>

#include "decode_internal.h"
#include "qkv/prompted.h"

typedef struct {
    const qkv_prompted *p;
    qkv_decoder_state *inner;
} prompted_state;

static const qkv_prompted *of(const qkv_model *m) { return (const qkv_prompted *)m; }

static void p_info(const qkv_model *m, qkv_decoder_info *out) {
    *out = of(m)->lm.info;
    out->needs_source = true;
    out->source_attention = false;
}

static qkv_decoder_state *p_start(const qkv_model *m, const int32_t *src, const int32_t *lengths, int n_src,
                                  int src_len, int rows_per_src, int max_steps) {
    const qkv_decoder *lm = &of(m)->lm;
    if (!src || n_src < 1 || src_len < 1 || rows_per_src < 1) {
        qkv_error_set(QKV_ERR_INVALID, "prompted decoder: needs >= 1 prompts of >= 1 tokens and >= 1 rows each");
        return NULL;
    }
    int len = lengths ? lengths[0] : src_len;
    for (int i = 0; i < n_src; i++)
        if ((lengths ? lengths[i] : src_len) != len || len < 1) {
            qkv_error_set(QKV_ERR_INVALID, "prompted decoder: prompts of one batch must have one length (>= 1): "
                          "%d and %d", len, lengths ? lengths[i] : src_len);
            return NULL;
        }
    int rows = n_src * rows_per_src, fed = len - 1; /* the last prompt token is the caller's BOS */
    prompted_state *s = calloc(1, sizeof *s);
    int32_t *tok = malloc(sizeof *tok * (size_t)rows * (size_t)(fed > 0 ? fed : 1));
    if (!s || !tok) {
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        free(s);
        s = NULL;
    }
    if (s) {
        s->p = of(m);
        s->inner = lm->ops->start(lm->model, NULL, NULL, n_src, 0, rows_per_src, max_steps ? max_steps + fed : 0);
        for (int r = 0; r < rows; r++)
            for (int t = 0; t < fed; t++)
                tok[(size_t)r * (size_t)fed + (size_t)t] = src[(size_t)(r / rows_per_src) * (size_t)src_len + t];
        qkv_status st = s->inner ? qkv__decode_feed(lm, s->inner, rows, tok, fed) : qkv_last_status();
        if (st != QKV_OK) {
            if (s->inner) lm->ops->free(s->inner);
            free(s);
            s = NULL;
        }
    }
    free(tok);
    return (qkv_decoder_state *)s;
}

static qkv_status p_step(qkv_decoder_state *st, const int32_t *tokens, float *scores, float *attn) {
    (void)attn;
    prompted_state *s = (prompted_state *)st;
    return s->p->lm.ops->step(s->inner, tokens, scores, NULL);
}

static qkv_status p_reorder(qkv_decoder_state *st, const int32_t *from, int n_rows) {
    prompted_state *s = (prompted_state *)st;
    return s->p->lm.ops->reorder(s->inner, from, n_rows);
}

static void p_free(qkv_decoder_state *st) {
    prompted_state *s = (prompted_state *)st;
    if (!s) return;
    s->p->lm.ops->free(s->inner);
    free(s);
}

static const qkv_decoder_ops PROMPTED = {
    .info = p_info, .start = p_start, .step = p_step, .reorder = p_reorder, .free = p_free};

qkv_status qkv_prompted_decoder(const qkv_decoder *lm, qkv_prompted *p, qkv_decoder *out) {
    if (lm->info.needs_source || lm->info.start_token >= 0)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "prompted decoder: needs a language model that %s",
                             lm->info.needs_source ? "takes no source" : "reads no start token");
    p->lm = *lm;
    out->ops = &PROMPTED;
    out->model = (const qkv_model *)p;
    p_info(out->model, &out->info);
    return QKV_OK;
}

bool qkv__decode_prompted(const qkv_decoder *d) { return d && d->ops == &PROMPTED; }

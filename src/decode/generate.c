/* Incremental decoders over the LM model types, and the generation loop (prompt, sampling, stop tokens, streaming
 * callback). See include/qkv/decode.h. */
#include <stdlib.h>
#include <string.h>

#include "qkv/decode.h"
#include "qkv/gpt.h"
#include "qkv/rnnlm.h"

struct qkv_lm_decoder {
    qkv_gpt_decoder *gpt;
    qkv_rnnlm_decoder *rnn;
    const qkv_rnnlm *rnnlm;
    int64_t vocab, capacity;
    bool primed;
    float *logits;
};

qkv_lm_decoder *qkv_lm_decoder_new(const qkv_model_type *type, qkv_model *model) {
    if (!type || !model) {
        qkv_error_set(QKV_ERR_INVALID, "lm decoder: no model");
        return NULL;
    }
    qkv_lm_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        qkv_error_set(QKV_ERR_NOMEM, "lm decoder: out of memory");
        return NULL;
    }
    if (!strcmp(type->name, "gpt")) {
        const qkv_gpt *g = (const qkv_gpt *)model;
        d->vocab = g->cfg.vocab_size;
        d->capacity = g->cfg.n_ctx;
        d->gpt = qkv_gpt_decoder_new(g, 1);
    } else if (!strcmp(type->name, "rnnlm")) {
        d->rnnlm = (const qkv_rnnlm *)model;
        d->vocab = d->rnnlm->cfg.vocab_size;
        d->rnn = qkv_rnnlm_decoder_new(d->rnnlm, 1);
    } else {
        qkv_error_set(QKV_ERR_UNSUPPORTED, "lm decoder: model type '%s' has no incremental decoder (gpt, rnnlm)",
                      type->name);
        free(d);
        return NULL;
    }
    d->logits = malloc(sizeof(float) * (size_t)d->vocab);
    if ((!d->gpt && !d->rnn) || !d->logits) {
        if (!d->logits) qkv_error_set(QKV_ERR_NOMEM, "lm decoder: out of memory");
        qkv_lm_decoder_free(d);
        return NULL;
    }
    if (qkv_lm_decoder_reset(d) != QKV_OK) {
        qkv_lm_decoder_free(d);
        return NULL;
    }
    return d;
}

void qkv_lm_decoder_free(qkv_lm_decoder *d) {
    if (!d) return;
    qkv_gpt_decoder_free(d->gpt);
    qkv_rnnlm_decoder_free(d->rnn);
    free(d->logits);
    free(d);
}

int64_t qkv_lm_decoder_vocab(const qkv_lm_decoder *d) { return d->vocab; }
int64_t qkv_lm_decoder_capacity(const qkv_lm_decoder *d) { return d->capacity; }
bool qkv_lm_decoder_primed(const qkv_lm_decoder *d) { return d->primed; }
float *qkv_lm_decoder_logits(qkv_lm_decoder *d) { return d->logits; }

qkv_status qkv_lm_decoder_step(qkv_lm_decoder *d, int32_t token) {
    return d->gpt ? qkv_gpt_decoder_step(d->gpt, &token, d->logits) : qkv_rnnlm_decoder_step(d->rnn, &token, d->logits);
}

qkv_status qkv_lm_decoder_reset(qkv_lm_decoder *d) {
    d->primed = false;
    if (d->gpt) {
        qkv_gpt_decoder_reset(d->gpt);
        return QKV_OK;
    }
    qkv_rnnlm_decoder_reset(d->rnn);
    if (!d->rnnlm->cfg.shift_right) return QKV_OK;
    /* The model was trained on ShiftRight(text): its first input is always the start id. */
    qkv_status st = qkv_lm_decoder_step(d, d->rnnlm->cfg.start_id);
    d->primed = st == QKV_OK;
    return st;
}

qkv_gen_opts qkv_gen_defaults(void) {
    qkv_gen_opts o = {.sample = qkv_sample_defaults(), .max_new_tokens = 64};
    o.sample.temperature = 0.0f;
    return o;
}

static bool is_stop(const qkv_gen_opts *o, int32_t t) {
    for (int i = 0; i < o->n_stop; i++)
        if (o->stop[i] == t) return true;
    return false;
}

int64_t qkv_generate(qkv_lm_decoder *d, const int32_t *prompt, int64_t n_prompt, const qkv_gen_opts *o,
                     int32_t *out, int64_t capacity, qkv_gen_end *end) {
    qkv_gen_opts def = qkv_gen_defaults();
    if (!o) o = &def;
    if (o->max_new_tokens < 0 || capacity < o->max_new_tokens || (o->n_stop > 0 && !o->stop) || n_prompt < 0 ||
        (n_prompt > 0 && !prompt)) {
        qkv_error_set(QKV_ERR_INVALID, "generate: max_new_tokens %lld must be >= 0 and fit the output (%lld), with "
                      "a prompt and stop list matching their counts", (long long)o->max_new_tokens,
                      (long long)capacity);
        return -1;
    }
    if (qkv_lm_decoder_reset(d) != QKV_OK) return -1;
    if (n_prompt == 0 && !d->primed) {
        qkv_error_set(QKV_ERR_INVALID, "generate: this model needs a prompt of at least one token");
        return -1;
    }
    if (d->capacity > 0 && n_prompt > d->capacity) {
        qkv_error_set(QKV_ERR_RANGE, "generate: prompt of %lld tokens exceeds the model's context of %lld",
                      (long long)n_prompt, (long long)d->capacity);
        return -1;
    }
    qkv_sampler *s = qkv_sampler_new(d->vocab, &o->sample, o->seed);
    /* The history (prompt + generated) is what the repetition penalty looks at. */
    int32_t *hist = malloc(sizeof(int32_t) * (size_t)(n_prompt + o->max_new_tokens + 1));
    if (!s || !hist) {
        if (s) qkv_error_set(QKV_ERR_NOMEM, "generate: out of memory");
        qkv_sampler_free(s);
        free(hist);
        return -1;
    }
    int64_t n = 0, nh = 0;
    qkv_gen_end why = QKV_GEN_MAX_TOKENS;
    for (int64_t i = 0; i < n_prompt; i++) {
        if (qkv_lm_decoder_step(d, prompt[i]) != QKV_OK) goto fail;
        hist[nh++] = prompt[i];
    }
    for (int64_t fed = n_prompt;; fed++) {
        if (n == o->max_new_tokens) break;
        int32_t t = qkv_sampler_next(s, d->logits, hist, nh);
        if (is_stop(o, t)) {
            why = QKV_GEN_STOP_TOKEN;
            break;
        }
        out[n++] = t;
        hist[nh++] = t;
        if (o->on_token && o->on_token(t, o->user)) {
            why = QKV_GEN_CALLBACK;
            break;
        }
        if (n == o->max_new_tokens) break;
        if (d->capacity > 0 && fed >= d->capacity) {
            why = QKV_GEN_CONTEXT_FULL;
            break;
        }
        if (qkv_lm_decoder_step(d, t) != QKV_OK) goto fail;
    }
    qkv_sampler_free(s);
    free(hist);
    if (end) *end = why;
    return n;
fail:
    qkv_sampler_free(s);
    free(hist);
    return -1;
}

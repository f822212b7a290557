/* One-row decoding of a language model through its type's incremental decoder (decoder.h), and the generation
 * loop (prompt, sampling, stop tokens, streaming callback). See include/qkv/decode.h. */
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"
#include "qkv/decode.h"

/* One row of the model type's incremental decoder (decoder.h). */
struct qkv_lm_decoder {
    qkv_decoder dec;
    qkv_decoder_state *st;
    bool primed;
    float *logits;
};

qkv_lm_decoder *qkv_lm_decoder_new(const qkv_model_type *type, qkv_model *model) {
    if (!type || !model) {
        qkv_error_set(QKV_ERR_INVALID, "lm decoder: no model");
        return NULL;
    }
    qkv_decoder dec;
    if (qkv_model_decoder(type, model, &dec) != QKV_OK) return NULL;
    if (dec.info.needs_source) {
        qkv_error_set(QKV_ERR_UNSUPPORTED, "lm decoder: model type '%s' (task %s) decodes from a source sentence, "
                      "not from a prompt", type->name, type->task);
        return NULL;
    }
    qkv_lm_decoder *d = calloc(1, sizeof *d);
    if (d) d->logits = malloc(sizeof(float) * (size_t)dec.info.vocab);
    if (!d || !d->logits) {
        qkv_error_set(QKV_ERR_NOMEM, "lm decoder: out of memory");
        qkv_lm_decoder_free(d);
        return NULL;
    }
    d->dec = dec;
    if (qkv_lm_decoder_reset(d) != QKV_OK) {
        qkv_lm_decoder_free(d);
        return NULL;
    }
    return d;
}

void qkv_lm_decoder_free(qkv_lm_decoder *d) {
    if (!d) return;
    if (d->st) d->dec.ops->free(d->st);
    free(d->logits);
    free(d);
}

int64_t qkv_lm_decoder_vocab(const qkv_lm_decoder *d) { return d->dec.info.vocab; }
int64_t qkv_lm_decoder_capacity(const qkv_lm_decoder *d) { return d->dec.info.capacity; }
bool qkv_lm_decoder_primed(const qkv_lm_decoder *d) { return d->primed; }
float *qkv_lm_decoder_logits(qkv_lm_decoder *d) { return d->logits; }

qkv_status qkv_lm_decoder_step(qkv_lm_decoder *d, int32_t token) {
    if (!d->st) return qkv_error_set(QKV_ERR_INVALID, "lm decoder: not started (a reset failed)");
    return d->dec.ops->step(d->st, &token, d->logits, NULL);
}

qkv_status qkv_lm_decoder_reset(qkv_lm_decoder *d) {
    d->primed = false;
    if (d->st) d->dec.ops->free(d->st);
    if (!(d->st = d->dec.ops->start(d->dec.model, NULL, NULL, 1, 0, 1, 0))) return qkv_last_status();
    if (d->dec.info.start_token < 0) return QKV_OK;
    /* The model was trained on ShiftRight(text): its first input is always the start token. */
    qkv_status st = qkv_lm_decoder_step(d, d->dec.info.start_token);
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
    /* Tokens that fit after the start token a ShiftRight model reads first (it takes a position too); -1: no limit. */
    const int64_t cap = d->dec.info.capacity > 0 ? d->dec.info.capacity - (d->primed ? 1 : 0) : -1;
    if (cap >= 0 && n_prompt > cap) {
        qkv_error_set(QKV_ERR_RANGE, "generate: prompt of %lld tokens exceeds the model's context of %lld%s",
                      (long long)n_prompt, (long long)cap, d->primed ? " (after its start token)" : "");
        return -1;
    }
    qkv_sampler *s = qkv_sampler_new(d->dec.info.vocab, &o->sample, o->seed);
    /* The history (prompt + generated) is kept whole; the repetition rules look at the generated part, or at all of
     * it with repeat_scope QKV_REPEAT_ALL. */
    int32_t *hist = malloc(sizeof(int32_t) * (size_t)(n_prompt + o->max_new_tokens + 1));
    if (!s || !hist) {
        if (s) qkv_error_set(QKV_ERR_NOMEM, "generate: out of memory");
        qkv_sampler_free(s);
        free(hist);
        return -1;
    }
    int64_t n = 0, nh = 0;
    qkv_gen_end why = QKV_GEN_MAX_TOKENS;
    /* All but the last prompt token in one pass where the model can (no scores); the last one is a step. */
    for (int64_t i = 0; i + 1 < n_prompt;) {
        int k = n_prompt - 1 - i < (1 << 30) ? (int)(n_prompt - 1 - i) : (1 << 30);
        if (qkv__decode_feed(&d->dec, d->st, 1, prompt + i, k) != QKV_OK) goto fail;
        i += k;
    }
    for (int64_t i = 0; i < n_prompt; i++) {
        if (i + 1 == n_prompt && qkv_lm_decoder_step(d, prompt[i]) != QKV_OK) goto fail;
        hist[nh++] = prompt[i];
    }
    int64_t from = o->sample.repeat_scope == QKV_REPEAT_ALL ? 0 : n_prompt;
    for (int64_t fed = n_prompt;; fed++) {
        if (n == o->max_new_tokens) break;
        int32_t t = qkv_sampler_next(s, d->logits, hist + from, nh - from);
        if (t < 0 || is_stop(o, t)) { /* t < 0: no_repeat_ngram left nothing */
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
        if (cap >= 0 && fed >= cap) {
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

/* The "qa" task (data.task "qa"): extractive question answering on SQuAD JSONL (include/qkv/qa.h) for any model
 * type that exposes per-token features (qkv_model_type.features). docs/qa.md describes it.
 *
 * An example is [CLS] question [SEP] context (WordPiece: [CLS] question [SEP] context [SEP], its own tokenizer),
 * cut to data.max_len. Every context token keeps its byte span in the context, so a predicted token span maps back
 * to text. The engine adds one head over the features, "qa_outputs" (Linear d -> 2, Hugging Face's name), whose two
 * outputs are the start and end logits; the loss is qkv_span_loss over the context positions. The gold span is the
 * first context token that ends after the answer's first byte to the last that starts before its end; a training
 * example whose answer was cut away is dropped (and counted), an evaluation example is kept (its EM and F1 count;
 * its loss does not). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "qkv/metrics.h"
#include "qkv/ops.h"
#include "qkv/qa.h"
#include "qkv/span.h"
#include "train_internal.h"

#define TOP_N 20

/* ---- tokens with byte spans ----------------------------------------------------------------------------------- */

/* Word tokens of the qa task: runs of letters and digits (any non-ASCII byte counts as a letter), each other
 * non-space character a token of its own unless data.strip_punct; lowercased (ASCII) with data.lowercase. */
typedef struct {
    char *buf;      /* the tokens, NUL-separated */
    int64_t *span;  /* [n, 2] byte spans */
    size_t n;
} words;

static bool wordch(unsigned char c) {
    return c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static qkv_status split_qa(const task *t, const char *s, words *w) {
    size_t len = strlen(s);
    w->buf = malloc(len * 2 + 1);
    w->span = malloc(sizeof *w->span * (len * 2 + 2));
    w->n = 0;
    if (!w->buf || !w->span) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        size_t j = i + 1;
        if (wordch(c)) {
            while (j < len && wordch((unsigned char)s[j])) j++;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || t->wopts.strip_punct) {
            i = j;
            continue;
        }
        for (size_t k = i; k < j; k++) {
            char ch = s[k];
            w->buf[o++] = t->wopts.lowercase && ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
        }
        w->buf[o++] = '\0';
        w->span[2 * w->n] = (int64_t)i;
        w->span[2 * w->n + 1] = (int64_t)j;
        w->n++;
        i = j;
    }
    return QKV_OK;
}

static void words_free(words *w) {
    free(w->buf);
    free(w->span);
}

static const char *word_at(const words *w, size_t k) {
    const char *p = w->buf;
    for (size_t i = 0; i < k; i++) p += strlen(p) + 1;
    return p;
}

/* ids and context spans of one example (malloc'd, n tokens). */
static qkv_status encode_example(const task *t, const char *question, const char *context, int32_t **ids,
                                 int64_t **span, int64_t *n) {
    *ids = NULL;
    *span = NULL;
    *n = 0;
    int64_t cap = t->max_len;
    if (cap < 4) return qkv_error_set(QKV_ERR_INVALID, "data.max_len: qa needs at least 4 tokens");
    *ids = malloc(sizeof **ids * (size_t)cap);
    *span = malloc(sizeof **span * (size_t)cap * 2);
    if (!*ids || !*span) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    int64_t k = 0;
    qkv_status st = QKV_OK;
    if (t->tok == TOK_WORDPIECE) {
        qkv_encoding e = {0};
        st = qkv_wordpiece_encode(t->wp, question, strlen(question), context, strlen(context), true, &e);
        for (size_t i = 0; st == QKV_OK && i < e.n && k < cap; i++, k++) {
            bool ctx_tok = e.type_ids[i] == 1 && e.offsets[2 * i + 1] > e.offsets[2 * i];
            (*ids)[k] = e.ids[i];
            (*span)[2 * k] = ctx_tok ? (int64_t)e.offsets[2 * i] : -1;
            (*span)[2 * k + 1] = ctx_tok ? (int64_t)e.offsets[2 * i + 1] : -1;
        }
        if (st == QKV_OK && (size_t)k < e.n) { /* cut: end with [SEP] as BERT expects */
            (*ids)[k - 1] = t->sep;
            (*span)[2 * (k - 1)] = (*span)[2 * (k - 1) + 1] = -1;
        }
        qkv_encoding_free(&e);
    } else {
        words q = {0}, c = {0};
        st = split_qa(t, question, &q);
        if (st == QKV_OK) st = split_qa(t, context, &c);
        (*ids)[k] = t->cls;
        (*span)[2 * k] = (*span)[2 * k + 1] = -1;
        k++;
        for (size_t i = 0; st == QKV_OK && i < q.n && k < cap - 1; i++, k++) {
            const char *tok = word_at(&q, i);
            int32_t id = qkv_vocab_id(t->vocab, tok, strlen(tok));
            (*ids)[k] = id < 0 ? t->unk : id;
            (*span)[2 * k] = (*span)[2 * k + 1] = -1;
        }
        (*ids)[k] = t->sep;
        (*span)[2 * k] = (*span)[2 * k + 1] = -1;
        k++;
        for (size_t i = 0; st == QKV_OK && i < c.n && k < cap; i++, k++) {
            const char *tok = word_at(&c, i);
            int32_t id = qkv_vocab_id(t->vocab, tok, strlen(tok));
            (*ids)[k] = id < 0 ? t->unk : id;
            (*span)[2 * k] = c.span[2 * i];
            (*span)[2 * k + 1] = c.span[2 * i + 1];
        }
        words_free(&q);
        words_free(&c);
    }
    *n = k;
    return st;
}

/* ---- preparing and loading ------------------------------------------------------------------------------------- */

qkv_status qkv__qa_prepare(task *t, const qkv_run_settings *rs, const char *dir, bool fresh) {
    t->kind = TASK_QA;
    t->max_len = rs->data.max_len;
    t->wopts.lowercase = rs->data.lowercase;
    t->wopts.strip_punct = rs->data.strip_punct;
    const char *tk = rs->data.tokenizer;
    if (!strcmp(tk, "wordpiece")) {
        t->tok = TOK_WORDPIECE;
        if (!*rs->data.vocab_file)
            return qkv_error_set(QKV_ERR_INVALID, "data.vocab_file: the wordpiece tokenizer needs a vocab.txt");
        qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
        o.lowercase = rs->data.lowercase;
        if (!(t->wp = qkv_wordpiece_load(rs->data.vocab_file, &o))) return qkv_last_status();
        t->vocab_size = (int64_t)qkv_wordpiece_vocab_size(t->wp);
        t->pad = qkv_wordpiece_id(t->wp, "[PAD]");
        t->unk = qkv_wordpiece_id(t->wp, "[UNK]");
        t->cls = qkv_wordpiece_id(t->wp, "[CLS]");
        t->sep = qkv_wordpiece_id(t->wp, "[SEP]");
        if (t->pad < 0) t->pad = 0;
        return QKV_OK;
    }
    if (strcmp(tk, "auto") && strcmp(tk, "word"))
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "data.tokenizer: qa data supports the word and wordpiece tokenizers");
    t->tok = TOK_WORD;
    size_t n = strlen(dir) + 16;
    char *path = malloc(n);
    if (!path) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    snprintf(path, n, "%s/vocab.txt", dir);
    qkv_status st = QKV_OK;
    if (fresh) {
        qkv_qa_example *ex = NULL;
        size_t ne = 0;
        qkv_token_counter *c = qkv_token_counter_new();
        st = c ? qkv_qa_read(rs->data.train, &ex, &ne) : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        for (size_t i = 0; st == QKV_OK && i < ne; i++)
            for (int side = 0; st == QKV_OK && side < 2; side++) {
                words w = {0};
                st = split_qa(t, side ? ex[i].context : ex[i].question, &w);
                const char *p = w.buf;
                for (size_t k = 0; st == QKV_OK && k < w.n; k++, p += strlen(p) + 1)
                    st = qkv_token_counter_add(c, p, strlen(p));
                words_free(&w);
            }
        qkv_qa_free(ex, ne);
        unsigned sp = QKV_SPECIAL_PAD | QKV_SPECIAL_UNK | QKV_SPECIAL_CLS | QKV_SPECIAL_SEP;
        if (st == QKV_OK &&
            !(t->vocab = qkv_vocab_build(c, sp, 0, rs->data.min_freq, (size_t)rs->data.max_vocab)))
            st = qkv_last_status();
        qkv_token_counter_free(c);
        if (st == QKV_OK) st = qkv_vocab_save(t->vocab, path);
    } else if (!(t->vocab = qkv_vocab_load(path))) {
        st = qkv_last_status();
    }
    free(path);
    if (st) return st;
    t->vocab_size = (int64_t)qkv_vocab_size(t->vocab);
    t->pad = qkv_vocab_id(t->vocab, "<pad>", 5);
    t->unk = qkv_vocab_id(t->vocab, "<unk>", 5);
    t->cls = qkv_vocab_id(t->vocab, "[CLS]", 5);
    t->sep = qkv_vocab_id(t->vocab, "[SEP]", 5);
    return QKV_OK;
}

static qkv_status qa_grow(struct qa_split *q) {
    if (q->n < q->cap) return QKV_OK;
    int64_t cap = q->cap ? q->cap * 2 : 256;
#define GROW(f)                                                                   \
    do {                                                                          \
        void *p = realloc(q->f, sizeof *q->f * (size_t)cap);                      \
        if (!p) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");             \
        q->f = p;                                                                 \
    } while (0)
    GROW(context);
    GROW(answers);
    GROW(n_answers);
    GROW(tok_span);
    GROW(gold);
#undef GROW
    q->cap = cap;
    return QKV_OK;
}

/* Adds one example; keep_unanswerable: keep it when its answer was cut away (evaluation). */
static qkv_status add_example(const task *t, split *s, qkv_qa_example *e, bool keep_unanswerable) {
    struct qa_split *q = s->qa;
    int32_t *ids;
    int64_t *span, n;
    qkv_status st = encode_example(t, e->question, e->context, &ids, &span, &n);
    int32_t gold[2] = {-1, -1};
    int64_t ab = e->answer_byte[0], ae = ab + (int64_t)strlen(e->answers[0]);
    for (int64_t k = 0; st == QKV_OK && k < n; k++) {
        if (span[2 * k] < 0) continue;
        if (gold[0] < 0 && span[2 * k + 1] > ab) gold[0] = (int32_t)k;
        if (span[2 * k] < ae) gold[1] = (int32_t)k;
    }
    if (gold[0] < 0 || gold[1] < gold[0] || span[2 * gold[0]] >= ae) gold[0] = gold[1] = -1;
    if (st == QKV_OK && gold[0] < 0 && !keep_unanswerable) {
        q->dropped++;
        free(ids);
        free(span);
        return QKV_OK;
    }
    if (st == QKV_OK) st = qa_grow(q);
    example *x = st == QKV_OK ? qkv__split_example(s) : NULL;
    if (st == QKV_OK && !x) st = qkv_last_status();
    if (st == QKV_OK) {
        x->off = s->pool_n;
        x->n = n;
        st = qkv__split_append(s, ids, n);
    }
    if (st == QKV_OK) {
        q->context[q->n] = e->context;
        q->answers[q->n] = malloc(sizeof(char *) * (size_t)e->n_answers);
        if (!q->answers[q->n]) {
            st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        } else {
            for (int k = 0; k < e->n_answers; k++) q->answers[q->n][k] = e->answers[k];
            q->n_answers[q->n] = e->n_answers;
            e->n_answers = 0;
            e->context = NULL;
            q->tok_span[q->n] = span;
            span = NULL;
            q->gold[q->n][0] = gold[0];
            q->gold[q->n][1] = gold[1];
            q->n++;
        }
    }
    free(ids);
    free(span);
    return st;
}

qkv_status qkv__qa_load(task *t, const char *path, split *s, bool training) {
    memset(s, 0, sizeof *s);
    qkv_qa_example *ex;
    size_t n;
    qkv_status st = qkv_qa_read(path, &ex, &n);
    if (st) return st;
    if (!(s->qa = calloc(1, sizeof *s->qa))) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == QKV_OK && i < n; i++) st = add_example(t, s, &ex[i], !training);
    qkv_qa_free(ex, n);
    if (st == QKV_OK && s->n == 0)
        st = qkv_error_set(QKV_ERR_FORMAT, "%s: no example keeps its answer within data.max_len %lld tokens", path,
                           (long long)t->max_len);
    if (st) qkv__split_free(s);
    return st;
}

int64_t qkv__qa_dropped(const split *s) { return s->qa ? s->qa->dropped : 0; }

/* ---- batches, logits, loss --------------------------------------------------------------------------------- */

qkv_status qkv__qa_batch_make(qkv_ctx *ctx, const task *t, const split *s, const int64_t *idx, int64_t B,
                              qkv_batch *b, int64_t *tokens) {
    memset(b, 0, sizeof *b);
    int64_t T = 1, real = 0;
    for (int64_t i = 0; i < B; i++)
        if (s->ex[idx[i]].n > T) T = s->ex[idx[i]].n;
    b->ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, T));
    b->mask = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, T));
    b->allowed = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS(B, T));
    b->spans = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(B, 2));
    b->type_ids = qkv_ctx_zeros(ctx, QKV_I32, QKV_DIMS(B, T));
    if (!b->ids || !b->mask || !b->allowed || !b->spans || !b->type_ids) return qkv_last_status();
    int32_t *ids = qkv_i32(b->ids), *sp = qkv_i32(b->spans), *ty = qkv_i32(b->type_ids);
    float *mask = qkv_f32(b->mask), *allowed = qkv_f32(b->allowed);
    for (int64_t i = 0; i < B * T; i++) ids[i] = t->pad;
    for (int64_t i = 0; i < B; i++) {
        const example *e = &s->ex[idx[i]];
        const int64_t *span = s->qa->tok_span[idx[i]];
        bool second = false; /* segment 1 after the question's [SEP], as BERT's token_type_ids */
        for (int64_t j = 0; j < e->n; j++) {
            ids[i * T + j] = s->pool[e->off + j];
            mask[i * T + j] = 1;
            allowed[i * T + j] = span[2 * j] >= 0;
            ty[i * T + j] = second;
            if (ids[i * T + j] == t->sep) second = true;
        }
        sp[2 * i] = s->qa->gold[idx[i]][0];
        sp[2 * i + 1] = s->qa->gold[idx[i]][1];
        real += e->n;
    }
    b->n_tokens = B;
    if (tokens) *tokens = real;
    return QKV_OK;
}

qkv_status qkv__qa_head_init(qkv_run *r, qkv_rng *rng) {
    if (!r->type->features)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "data.task qa: model type '%s' exposes no per-token features "
                             "(qkv_model_type.features)", r->type->name);
    int64_t d = qkv_model_type_info(r->type, r->model).features_dim;
    if (d < 1)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "data.task qa: model type '%s' reports no feature width",
                             r->type->name);
    return qkv_nn_linear_init(&r->qa_head, r->params, "qa_outputs", d, 2, true, rng);
}

/* Start and end logits [B, T], contiguous. */
static qkv_status logits(qkv_run *r, const qkv_batch *b, qkv_tensor **start, qkv_tensor **end) {
    qkv_tensor *h = r->type->features(r->ctx, r->model, b);
    qkv_tensor *z = qkv_nn_linear_forward(r->ctx, &r->qa_head, h);
    if (!z) return qkv_last_status();
    int64_t B = z->shape[0], T = z->shape[1];
    *start = qkv_reshape(r->ctx, qkv_contiguous(r->ctx, qkv_slice(r->ctx, z, 2, 0, 1, 1)), QKV_DIMS(B, T));
    *end = qkv_reshape(r->ctx, qkv_contiguous(r->ctx, qkv_slice(r->ctx, z, 2, 1, 2, 1)), QKV_DIMS(B, T));
    return *start && *end ? QKV_OK : qkv_last_status();
}

qkv_tensor *qkv__qa_loss(qkv_run *r, const qkv_batch *b) {
    qkv_tensor *s, *e;
    if (logits(r, b, &s, &e)) return NULL;
    return qkv_span_loss(r->ctx, s, e, b->spans, b->allowed);
}

/* ---- evaluation and answering -------------------------------------------------------------------------------- */

/* The predicted answer text of example i from its logits rows (malloc'd; "" when no span qualifies). */
static char *predict_text(const struct qa_split *q, int64_t i, const float *s, const float *e, const float *allowed,
                          int64_t T, int64_t n, float *score) {
    qkv_span sp;
    if (qkv_span_decode(s, e, allowed, n < T ? n : T, TOP_N, 30, &sp) || sp.start < 0) return strdup("");
    *score = sp.score;
    const int64_t *span = q->tok_span[i];
    int64_t a = span[2 * sp.start], z = span[2 * sp.end + 1];
    return strndup(q->context[i] + a, (size_t)(z - a));
}

cJSON *qkv__qa_evaluate(qkv_run *r, const split *s, int64_t max_batches) {
    int64_t bs = r->set.eval.batch_size, nb = (s->n + bs - 1) / bs;
    if (max_batches > 0 && max_batches < nb) nb = max_batches;
    int64_t *idx = malloc(sizeof *idx * (size_t)bs);
    if (!idx) {
        qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        return NULL;
    }
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    double nll = 0, em_sum = 0, f1_sum = 0;
    int64_t n_loss = 0, n_scored = 0;
    qkv_status st = QKV_OK;
    for (int64_t bi = 0; st == QKV_OK && bi < nb; bi++) {
        int64_t start = bi * bs, count = s->n - start < bs ? s->n - start : bs;
        for (int64_t i = 0; i < count; i++) idx[i] = start + i;
        qkv_ctx_reset(r->ctx);
        qkv_batch b;
        qkv_tensor *ls = NULL, *le = NULL;
        st = qkv__qa_batch_make(r->ctx, &r->task, s, idx, count, &b, NULL);
        if (st == QKV_OK) st = logits(r, &b, &ls, &le);
        if (st) break;
        int64_t T = ls->shape[1];
        for (int64_t i = 0; st == QKV_OK && i < count; i++) {
            const float *x[2] = {qkv_f32(ls) + i * T, qkv_f32(le) + i * T}, *al = qkv_f32(b.allowed) + i * T;
            const int32_t *gold = s->qa->gold[start + i];
            if (gold[0] >= 0) { /* loss as the op computes it: -log softmax over the allowed positions, both ends */
                for (int side = 0; side < 2; side++) {
                    double m = -INFINITY, sum = 0;
                    for (int64_t j = 0; j < T; j++)
                        if (al[j] != 0 && x[side][j] > m) m = x[side][j];
                    for (int64_t j = 0; j < T; j++)
                        if (al[j] != 0) sum += exp((double)x[side][j] - m);
                    nll += (m + log(sum) - (double)x[side][gold[side]]) / 2;
                }
                n_loss++;
            }
            float score = 0;
            char *pred = predict_text(s->qa, start + i, x[0], x[1], al, T, s->ex[start + i].n, &score);
            double em = 0, f1 = 0;
            st = pred ? qkv_squad_score(pred, (const char *const *)s->qa->answers[start + i],
                                        s->qa->n_answers[start + i], &em, &f1)
                      : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            free(pred);
            em_sum += em;
            f1_sum += f1;
            n_scored++;
        }
    }
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    free(idx);
    if (st) return NULL;
    if (!n_scored) {
        qkv_error_set(QKV_ERR_INVALID, "evaluation: no examples to score");
        return NULL;
    }
    cJSON *out = cJSON_CreateObject();
    cJSON_AddNumberToObject(out, "loss", n_loss ? nll / (double)n_loss : NAN);
    cJSON_AddNumberToObject(out, "exact_match", 100.0 * em_sum / (double)n_scored);
    cJSON_AddNumberToObject(out, "f1", 100.0 * f1_sum / (double)n_scored);
    cJSON_AddNumberToObject(out, "examples", (double)n_scored);
    cJSON_AddNumberToObject(out, "answer_cut", (double)(n_scored - n_loss));
    return out;
}

cJSON *qkv__qa_answer(qkv_run *r, const char *context, const char *question) {
    if (r->task.kind != TASK_QA) {
        qkv_error_set(QKV_ERR_UNSUPPORTED, "this run is not a qa run (data.task \"qa\")");
        return NULL;
    }
    split s = {0};
    qkv_qa_example e = {.context = strdup(context), .question = (char *)question, .n_answers = 1};
    e.answers[0] = strdup("");
    qkv_status st = e.context && e.answers[0] && (s.qa = calloc(1, sizeof *s.qa))
                        ? add_example(&r->task, &s, &e, true)
                        : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    free(e.context);
    for (int k = 0; k < e.n_answers; k++) free(e.answers[k]);
    cJSON *out = NULL;
    bool g = qkv_ctx_set_grad(r->ctx, false), tr = qkv_ctx_set_training(r->ctx, false);
    if (st == QKV_OK) {
        qkv_ctx_reset(r->ctx);
        qkv_batch b;
        qkv_tensor *ls = NULL, *le = NULL;
        int64_t zero = 0;
        st = qkv__qa_batch_make(r->ctx, &r->task, &s, &zero, 1, &b, NULL);
        if (st == QKV_OK) st = logits(r, &b, &ls, &le);
        if (st == QKV_OK) {
            float score = NAN;
            char *text = predict_text(s.qa, 0, qkv_f32(ls), qkv_f32(le), qkv_f32(b.allowed), ls->shape[1], s.ex[0].n,
                                      &score);
            out = cJSON_CreateObject();
            cJSON_AddStringToObject(out, "answer", text ? text : "");
            cJSON_AddNumberToObject(out, "score", score);
            cJSON_AddNumberToObject(out, "context_tokens", 0);
            int64_t nctx = 0;
            for (int64_t j = 0; j < s.ex[0].n; j++) nctx += s.qa->tok_span[0][2 * j] >= 0;
            cJSON_ReplaceItemInObject(out, "context_tokens", cJSON_CreateNumber((double)nctx));
            free(text);
        }
    }
    qkv_ctx_set_grad(r->ctx, g);
    qkv_ctx_set_training(r->ctx, tr);
    qkv_ctx_reset(r->ctx);
    qkv__split_free(&s);
    return out;
}

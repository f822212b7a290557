/* Lesson 2 of the embeddings seed: learn word vectors so that words which occur together are close.
 *
 * Every pair of words in the same sentence is a positive pair; random pairs are negatives. The loss pushes the
 * cosine similarity of positives towards 1 and of negatives towards 0 (mean squared error on the cosine). The
 * learned similarity matrix is written as a heatmap page: open cooccurrence.html in a browser.
 *   build/examples/cooccurrence [OUT.html]                                                                     */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/qkv.h"

static const char *corpus[] = {
    "the cat chased the mouse", "the dog chased the cat",   "a cat and a dog play",
    "the king rules the land",  "the queen rules the land", "a king and a queen dine",
    "we eat bread and cheese",  "they eat cheese and fruit", "bread and fruit for breakfast",
};
#define N_SENT (sizeof corpus / sizeof corpus[0])
#define DIM 16
#define MAXW 64

int main(int argc, char **argv) {
    const char *out = argc > 1 ? argv[1] : "cooccurrence.html";
    qkv_word_opts opts = {.lowercase = true, .strip_punct = true, .drop_stopwords = true};
    qkv_vocab *vocab = qkv_vocab_new();
    int32_t sent_ids[N_SENT][8];
    int sent_len[N_SENT];
    for (size_t s = 0; s < N_SENT; s++) {
        char **w = NULL;
        size_t n = 0;
        if (qkv_word_split(corpus[s], strlen(corpus[s]), &opts, &w, &n) != QKV_OK) return 1;
        sent_len[s] = (int)n;
        for (size_t i = 0; i < n && i < 8; i++) sent_ids[s][i] = qkv_vocab_add(vocab, w[i], strlen(w[i]));
        free(w);
    }
    int V = (int)qkv_vocab_size(vocab);
    static int together[MAXW][MAXW];
    for (size_t s = 0; s < N_SENT; s++)
        for (int i = 0; i < sent_len[s]; i++)
            for (int j = 0; j < sent_len[s]; j++) together[sent_ids[s][i]][sent_ids[s][j]] = 1;

    qkv_params *params = qkv_params_new();
    qkv_tensor *E = qkv_params_add(params, "embedding", "weight", QKV_DIMS(V, DIM));
    qkv_rng rng;
    qkv_rng_init(&rng, 3);
    qkv_rng_fill_normal(&rng, E, 0, 1);
    qkv_optim *opt = qkv_optim_new(params, &(qkv_optim_config){.kind = QKV_ADAM, .lr = 0.05f, .beta1 = 0.9f,
                                                                .beta2 = 0.999f, .eps = 1e-8f});
    qkv_ctx *ctx = qkv_ctx_new();
    enum { PAIRS = 64 };
    float loss_v = 0;
    for (int step = 1; step <= 300; step++) {
        qkv_ctx_reset(ctx);
        qkv_tensor *a = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(PAIRS)), *b = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(PAIRS));
        qkv_tensor *y = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(PAIRS));
        for (int k = 0; k < PAIRS; k++) { /* half positives from a random sentence, half random pairs */
            int i, j;
            if (k % 2 == 0) {
                size_t s = qkv_rng_below(&rng, N_SENT);
                i = sent_ids[s][qkv_rng_below(&rng, (uint32_t)sent_len[s])];
                j = sent_ids[s][qkv_rng_below(&rng, (uint32_t)sent_len[s])];
            } else {
                i = (int)qkv_rng_below(&rng, (uint32_t)V);
                j = (int)qkv_rng_below(&rng, (uint32_t)V);
            }
            qkv_i32(a)[k] = i;
            qkv_i32(b)[k] = j;
            qkv_f32(y)[k] = (float)together[i][j];
        }
        qkv_tensor *cos = qkv_cosine_similarity(ctx, qkv_embedding(ctx, E, a), qkv_embedding(ctx, E, b), -1, 1e-8f);
        qkv_tensor *loss = qkv_mse(ctx, cos, y, QKV_REDUCE_MEAN);
        qkv_optim_zero_grad(opt);
        if (!loss || qkv_backward(ctx, loss) || qkv_optim_step(opt)) {
            fprintf(stderr, "cooccurrence: %s\n", qkv_last_error());
            return 1;
        }
        loss_v = qkv_f32(loss)[0];
        if (step % 100 == 0) printf("step %d  loss %.4f\n", step, loss_v);
    }

    /* The similarity matrix of all words, and how well it separates pairs seen together from the rest. */
    static float sim[MAXW * MAXW];
    const char *labels[MAXW];
    double in_sum = 0, out_sum = 0;
    int in_n = 0, out_n = 0;
    const float *e = E->data;
    for (int i = 0; i < V; i++) {
        labels[i] = qkv_vocab_token(vocab, i, NULL);
        for (int j = 0; j < V; j++) {
            double dot = 0, ni = 0, nj = 0;
            for (int d = 0; d < DIM; d++) {
                dot += (double)e[i * DIM + d] * e[j * DIM + d];
                ni += (double)e[i * DIM + d] * e[i * DIM + d];
                nj += (double)e[j * DIM + d] * e[j * DIM + d];
            }
            float c = (float)(dot / (sqrt(ni * nj) + 1e-12));
            sim[i * V + j] = c > 0 ? c : 0; /* the heatmap shows 0..1 */
            if (i != j) {
                if (together[i][j]) in_sum += c, in_n++;
                else out_sum += c, out_n++;
            }
        }
    }
    printf("mean cosine: words seen together %.2f, other pairs %.2f\n", in_sum / in_n, out_sum / out_n);
    qkv_viz_map map = {.name = "cosine similarity", .kind = "self", .n_heads = 1, .n_rows = V, .n_cols = V,
                       .weights = sim, .row_labels = labels};
    qkv_viz_example ex = {.title = "word vectors trained on co-occurrence", .n_tokens = V, .tokens = labels,
                          .highlight_row = -1, .probability = -1, .n_maps = 1, .maps = &map};
    qkv_viz_page page = {.title = "qkv: learned word similarities", .n_examples = 1, .examples = &ex};
    int rc = qkv_viz_write_html(out, &page) == QKV_OK && in_sum / in_n > out_sum / out_n + 0.3 ? 0 : 1;
    printf("%s %s\n", rc ? "FAILED:" : "wrote", rc ? qkv_last_error() : out);
    qkv_ctx_free(ctx);
    qkv_optim_free(opt);
    qkv_params_free(params);
    qkv_vocab_free(vocab);
    return rc;
}

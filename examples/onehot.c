/* Lesson 1 of the embeddings seed: a sentence as one-hot vectors.
 *
 * Each word gets an id from a vocabulary; its one-hot vector is the row of the identity matrix at that id. An
 * embedding lookup is exactly "one-hot vector times a matrix": this program checks that on a small matrix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/qkv.h"

int main(void) {
    const char *sentence = "the cat sat on the mat";
    char **words = NULL;
    size_t n = 0;
    qkv_word_opts opts = {.lowercase = true, .strip_punct = true};
    qkv_vocab *vocab = qkv_vocab_new();
    if (!vocab || qkv_word_split(sentence, strlen(sentence), &opts, &words, &n) != QKV_OK) {
        fprintf(stderr, "onehot: %s\n", qkv_last_error());
        return 1;
    }
    int32_t ids[16];
    for (size_t i = 0; i < n; i++) ids[i] = qkv_vocab_add(vocab, words[i], strlen(words[i]));
    size_t V = qkv_vocab_size(vocab);
    printf("sentence: \"%s\"\nvocabulary (%zu words):", sentence, V);
    for (size_t v = 0; v < V; v++) printf(" %zu:%s", v, qkv_vocab_token(vocab, (int32_t)v, NULL));
    printf("\n\none-hot vectors, one row per word:\n");
    for (size_t i = 0; i < n; i++) {
        printf("  %-4s [", words[i]);
        for (size_t v = 0; v < V; v++) printf("%s%d", v ? " " : "", (size_t)ids[i] == v);
        printf("]\n");
    }

    /* one_hot(ids) @ E equals embedding(E, ids). */
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_tensor *E = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS((int64_t)V, 3));
    qkv_tensor *onehot = qkv_ctx_zeros(ctx, QKV_F32, QKV_DIMS((int64_t)n, (int64_t)V));
    qkv_tensor *t_ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS((int64_t)n));
    qkv_rng rng;
    qkv_rng_init(&rng, 7);
    qkv_rng_fill_uniform(&rng, E, -1, 1);
    for (size_t i = 0; i < n; i++) {
        qkv_f32(onehot)[i * V + (size_t)ids[i]] = 1.0f;
        qkv_i32(t_ids)[i] = ids[i];
    }
    qkv_tensor *a = qkv_matmul(ctx, onehot, E), *b = qkv_embedding(ctx, E, t_ids);
    int same = a && b && memcmp(a->data, b->data, n * 3 * sizeof(float)) == 0;
    printf("\none-hot @ E == embedding lookup: %s\n", same ? "yes" : "NO");
    qkv_ctx_free(ctx);
    free(words);
    qkv_vocab_free(vocab);
    return same ? 0 : 1;
}

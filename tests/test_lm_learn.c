/* Learning tests: a character-level GPT and GRU LM, built through the model registry, trained for a few hundred
 * steps on a slice of Jane Austen ($QKV_SHARED/data/lm/train.txt), must bring the dev loss well below the unigram
 * level. Skipped (visibly) when the shared data is absent. */

#include "corpus.h"
#include "qkv/decode.h"
#include "qkv/model.h"
#include "qkv/threads.h"
#include "test.h"

enum { TRAIN_BYTES = 300000, DEV_BYTES = 20000, B = 16, T = 64 };

/* Trains `type` with the JSON model config for `steps` AdamW steps; returns the mean dev loss (nats). */
static double train_and_eval(const test_char_corpus *c, const char *type_name, const char *json, int steps, float lr) {
    test_char_lm lm;
    test_char_lm_train(&lm, c, type_name, json, type_name, steps, lr, B, T, true);
    if (lm.model) {
        /* A short greedy sample, for the eye. */
        qkv_lm_decoder *d = qkv_lm_decoder_new(lm.type, lm.model);
        int32_t prompt[1] = {c->map['T'] >= 0 ? c->map['T'] : 0}, out[60];
        qkv_gen_opts o = qkv_gen_defaults();
        o.max_new_tokens = 60;
        int64_t n = d ? qkv_generate(d, prompt, 1, &o, out, 60, NULL) : -1;
        CHECK(n == 60);
        char text[64] = "";
        for (int64_t i = 0; i < n; i++)
            for (int ch = 0; ch < 256; ch++)
                if (c->map[ch] == out[i]) text[i] = ch == '\n' ? ' ' : (char)ch;
        printf("  %s sample: T%s\n", type_name, text);
        qkv_lm_decoder_free(d);
    }
    double dev = lm.dev_loss;
    test_char_lm_free(&lm);
    return dev;
}

TEST(char_gpt_and_gru_learn) {
    test_char_corpus c;
    if (!test_char_corpus_load(&c, TRAIN_BYTES, DEV_BYTES)) {
        test_skip("QKV_SHARED/data/lm/{train,dev}.txt not found (set QKV_SHARED)");
        return;
    }
    double h = test_char_corpus_entropy(&c);
    printf("  unigram entropy of the slice: %.3f nats\n", h);
    double gpt = train_and_eval(&c, "gpt", "{\"d_model\": 64, \"n_heads\": 4, \"d_ff\": 256, \"n_layers\": 2}", 200,
                                3e-3f);
    double gru = train_and_eval(&c, "rnnlm", "{\"rnn\": \"gru\", \"d_model\": 96, \"n_layers\": 1}", 200, 5e-3f);
    /* Both must use context: clearly below the unigram entropy (about 3.1 nats for this text). */
    CHECKF(gpt < h - 0.5, "gpt dev loss %.3f not below unigram %.3f - 0.5", gpt, h);
    CHECKF(gru < h - 0.5, "gru dev loss %.3f not below unigram %.3f - 0.5", gru, h);
    test_char_corpus_free(&c);
}

int main(void) {
    qkv_threads_set(1); /* models this small gain nothing from threads and keep the test quick on a busy machine */
    RUN(char_gpt_and_gru_learn);
    return test_finish();
}

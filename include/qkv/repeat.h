/* Repetition control in decoding: the no-repeat n-gram rule and the repetition penalty, as Hugging Face's
 * NoRepeatNGramLogitsProcessor and RepetitionPenaltyLogitsProcessor define them. Every search of src/decode applies
 * them (decode.h's sampler and generation loops; beam.h's greedy, sampling, beam search and MBR, batched or not)
 * through the options no_repeat_ngram, repetition_penalty and repeat_scope.
 *
 *   no_repeat_ngram N >= 1 (0 = off): before a hypothesis picks its next token, every token that would complete an
 *     n-gram of N tokens already present in its history gets score -inf. N = 1 forbids every token of the history.
 *     The end-of-sequence token is no exception (HF bans it too when it completes a repeated n-gram).
 *   repetition_penalty r > 0 (1 = off; CTRL, Keskar et al. 2019): every distinct token of the history has its score
 *     divided by r when positive and multiplied by r when negative. decode.h's sampler applies it to raw logits (as
 *     HF's greedy search and sampling do); beam.h's searches to log-probabilities (as HF's beam search does: every
 *     penalised log-probability is multiplied by r), and their scores then sum the penalised log-probabilities.
 *   If every token is banned, the hypothesis ends: decode.h's generation loops end as if a stop token had been
 *     chosen; beam.h's searches keep end-of-sequence as the one token left (its log-probability unchanged).
 *
 * The history is a hypothesis's own tokens: beam search extends a hypothesis's history by one token from its
 * parent's, so reordering hypotheses carries their histories with them. What it covers is repeat_scope:
 *   QKV_REPEAT_GENERATED (the default, 0): the generated tokens only. A summariser may then copy phrases of its
 *     article, which HF's rule for decoder-only models would forbid.
 *   QKV_REPEAT_ALL: the prompt too, then the generated tokens: HF's rule for decoder-only models (its input_ids are
 *     prompt + generated). A summarize prompt ends "</s> <sep>", so there N = 1 bans </s> from the start (a summary
 *     then runs to its length limit) and N = 2 bans it after the article's last token, as HF would. For a model
 *     that decodes from a source sentence (seq2seq), the source is never part of the history (HF's
 *     encoder-decoder rule: input_ids are the decoder's tokens); a language model decoding from a prompt through
 *     prompted.h counts its prompt. */
#ifndef QKV_REPEAT_H
#define QKV_REPEAT_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_repeat_scope {
    QKV_REPEAT_GENERATED = 0, /* the generated tokens */
    QKV_REPEAT_ALL,           /* the prompt and the generated tokens */
} qkv_repeat_scope;

/* "generated" or "all"; false if unknown (*scope unchanged). */
bool qkv_repeat_scope_parse(const char *name, qkv_repeat_scope *scope);
/* "generated" or "all" ("?" when out of range). */
const char *qkv_repeat_scope_name(qkv_repeat_scope scope);

#ifdef __cplusplus
}
#endif
#endif

/* The viewer page for a trained run: what it attends to on some texts, plus its training curves. Shared by
 * `qkv viz`, `qkv demo`, `qkv generate --view`, `qkv translate --view` and `qkv attend --run`.
 *
 * Every function returns a qkv_status with the message set (naming the file, text or model); the page is written
 * atomically, so on an error no page (or the old one) is left. Everything passed in is borrowed. */
#ifndef QKV_RUN_VIEW_H
#define QKV_RUN_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/beam.h"
#include "qkv/train.h"

/* Writes out_html (and, if svg_dir is non-NULL, one SVG heatmap per text and layer, averaged over heads, into it).
 * Classifiers show their prediction and self-attention; language models each whole text's causal maps (the last
 * token's row highlighted; svg_dir unsupported); taggers each text's words with their predicted tags and entities
 * (svg_dir unsupported); seq2seq runs get run_view_write_translations. */
int run_view_write(qkv_run *r, const char *run_dir, const char *const *texts, int n, const char *out_html,
                   const char *svg_dir);

/* QKV_OK when the run's model returns attention maps; otherwise QKV_ERR_UNSUPPORTED, "<model> has no attention to
 * show". Cheap (one forward over one token), so commands call it before long work. */
int run_view_check_attention(qkv_run *r);

/* A language model's text (prompt and generated tokens, ids in the run's vocabulary): one full forward with the
 * maps captured, one causal map per layer (all heads), tokens shown readably ("␣" for a space, "⏎" for a newline).
 * Sequences longer than the model's context show their first n_ctx tokens. title: e.g. the prompt, or NULL. */
int run_view_write_lm(qkv_run *r, const char *run_dir, const int32_t *ids, size_t n, const char *title,
                      const char *out_html);

/* One translated sentence: its source ids (as fed to the decoder) and the produced target tokens (no BOS; EOS
 * last when the hypothesis finished). */
typedef struct run_view_pair {
    const char *source_text;
    const int32_t *src;
    int n_src;
    const int32_t *tgt;
    int n_tgt;
} run_view_pair;

/* The alignment page of a seq2seq run: per pair, one teacher-forced forward on (source, produced target) with the
 * attention captured. Rows are target tokens, columns source tokens: LSTM: one map "attention" (one head);
 * Transformer: "decoder N cross" per decoder layer (all heads), then "encoder N self" and "decoder N self"
 * (causal, rows and columns the decoder inputs "<s>", y1, ...). */
int run_view_write_pairs(qkv_run *r, const char *run_dir, const run_view_pair *pairs, int n, const char *out_html);

/* Greedy translation of each text, then run_view_write_pairs (for `qkv viz` on a seq2seq run). */
int run_view_write_translations(qkv_run *r, const char *run_dir, const char *const *texts, int n,
                                const char *out_html);

/* The self-attention view of one sentence (`qkv attend --run`): a classifier's layers (from [CLS]), a GPT's causal
 * layers, or a Transformer seq2seq's encoder layers. The words are highlighted by the attention of the first token
 * of `word` (NULL: [CLS] / the first token; the last token for a GPT). Models without self-attention: an error
 * naming the model. */
int run_view_write_attend(qkv_run *r, const char *run_dir, const char *text, const char *word, const char *out_html);

/* The readable text of one token of the run's vocabulary (target: a seq2seq run's target side): spaces as "␣",
 * newlines as "⏎", tabs as "⇥"; "#<id>" when it decodes to nothing. malloc'd, NULL when out of memory. */
char *run_view_token(qkv_run *r, int32_t id, bool target);

#endif

/* Task data: from files in a task's format to encoded examples, and the tokenizer files a run keeps.
 *
 *   classify  TSV "label<TAB>text"; labels get ids in sorted (byte) order of the training labels
 *   lm        plain text (one paragraph a line; each line ends with a "<nl>" token for word/char tokenizers, a
 *             "\n" byte for BPE) or a token shard; windows of seq_len + 1 tokens, stride seq_len
 *   seq2seq   TSV "source<TAB>target"; the target is stored as <s> y </s> (BPE: those specials get ids after the
 *             byte-level vocabulary)
 *   pairs     TSV "label<TAB>text1<TAB>text2", label 1 = duplicate, 0 = not (task_pairs.c)
 * A bpe tokenizer without vocab_file/merges_file is trained on the training split when the run starts and kept in
 * the run dir, so a resumed or reopened run encodes exactly as training did. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/config.h"
#include "qkv/data.h"
#include "qkv/fsutil.h"
#include "qkv/shard.h"
#include "pairs.h"
#include "task_tagging.h"
#include "train_internal.h"

static const char NL[] = "<nl>";

/* ---- building tokenizers from the training file ------------------------------------------------------------ */

/* Classify rows with WordPiece may hold a sentence pair: label<TAB>first<TAB>second. */
static qkv_dataset *read_rows(const task *t, const char *path) {
    if (t->span) return qkv__docs_dataset(path); /* documents: a file's lines, or a corpus directory's documents */
    bool lines = t->kind == TASK_LM || t->span, pairs_ok = t->kind == TASK_CLASSIFY && t->tok == TOK_WORDPIECE;
    qkv_data_opts o = {.format = lines ? QKV_DATA_LINES : QKV_DATA_TSV,
                       .n_fields = lines || pairs_ok ? 0 : t->kind == TASK_PAIRS ? 3 : 2};
    qkv_dataset *d = qkv_data_read_all(path, &o);
    for (size_t i = 0; d && pairs_ok && i < d->n_rows; i++)
        if (d->rows[i].n_fields != 2 && d->rows[i].n_fields != 3) {
            qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: expected 2 tab-separated fields (label, text) or 3 (label, first "
                          "text, second text), got %d", path, (long long)d->rows[i].line, d->rows[i].n_fields);
            qkv_dataset_free(d);
            return NULL;
        }
    return d;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static qkv_status count_text(const task *t, qkv_token_counter *c, const char *text, size_t len) {
    char **toks = NULL;
    size_t n = 0;
    qkv_status st = qkv__task_words(t, text, len, &toks, &n);
    if (st == QKV_OK) st = qkv_token_counter_add_all(c, toks, n);
    free(toks);
    return st;
}

static qkv_status save_lines(const char *path, char *const *lines, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return qkv_error_set(QKV_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    for (int i = 0; i < n; i++) fprintf(f, "%s\n", lines[i]);
    if (fclose(f)) return qkv_error_set(QKV_ERR_IO, "%s: write error", path);
    return QKV_OK;
}

static qkv_status load_labels(task *t, const char *path) {
    qkv_dataset *d = qkv_data_read_all(path, NULL);
    if (!d) return qkv_last_status();
    if (d->n_rows == 0) {
        qkv_dataset_free(d);
        return qkv_error_set(QKV_ERR_FORMAT, "%s: no labels (the run's classes, one a line, written by training)", path);
    }
    t->labels = calloc(d->n_rows ? d->n_rows : 1, sizeof *t->labels);
    qkv_status st = t->labels ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == QKV_OK && i < d->n_rows; i++) {
        t->labels[i] = strdup(d->rows[i].fields[0]);
        if (!t->labels[i]) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        t->n_labels = (int)i + 1;
    }
    qkv_dataset_free(d);
    return st;
}

/* Builds (fresh) or loads the vocabulary saved as run_dir/name. */
static qkv_status word_vocab(task *t, const qkv_run_settings *rs, const qkv_dataset *train, int field, bool both,
                             unsigned specials, const char *path, bool fresh, qkv_vocab **out) {
    if (!fresh) {
        *out = qkv_vocab_load(path);
        return *out ? QKV_OK : qkv_last_status();
    }
    qkv_token_counter *c = qkv_token_counter_new();
    qkv_status st = c ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == QKV_OK && i < train->n_rows; i++) {
        const qkv_row *row = &train->rows[i];
        for (int f = both ? t->kind == TASK_PAIRS : field; st == QKV_OK && f <= field; f++) /* pairs: no label */
            st = count_text(t, c, row->fields[f], row->lens[f]);
        if (st == QKV_OK && t->kind == TASK_LM) st = qkv_token_counter_add(c, NL, strlen(NL));
    }
    if (st == QKV_OK) {
        *out = qkv_vocab_build(c, specials, 0, rs->data.min_freq,
                               (size_t)rs->data.max_vocab);
        if (!*out) st = qkv_last_status();
    }
    if (st == QKV_OK) st = qkv_vocab_save(*out, path);
    qkv_token_counter_free(c);
    return st;
}

static qkv_status prepare_labels(task *t, const qkv_dataset *train, const char *train_path, const char *path,
                                 bool fresh) {
    if (!fresh) return load_labels(t, path);
    for (size_t i = 0; i < train->n_rows; i++)
        if (!train->rows[i].fields[0][0])
            return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: empty label", train_path, (long long)train->rows[i].line);
    char **all = malloc(sizeof *all * (train->n_rows ? train->n_rows : 1));
    if (!all) return qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < train->n_rows; i++) all[i] = train->rows[i].fields[0];
    qsort(all, train->n_rows, sizeof *all, cmp_str);
    int n = 0;
    for (size_t i = 0; i < train->n_rows; i++)
        if (n == 0 || strcmp(all[n - 1], all[i])) all[n++] = all[i];
    qkv_status st = save_lines(path, all, n);
    free(all);
    return st == QKV_OK ? load_labels(t, path) : st;
}

/* Special tokens of a seq2seq BPE: ids after the byte-level vocabulary (written into a trained vocab.json, appended
 * to GPT-2's). The byte-level regex never puts '<' and a letter in one pre-token, so no merge can collide. */
static const char *const S2S_SPECIALS[] = {"<pad>", "<s>", "</s>", NULL};

/* Learns a BPE on fields f0..f1 of every training row (seq2seq with a shared vocabulary: source and target). */
static qkv_status train_bpe(const qkv_run_settings *rs, const qkv_dataset *train, int f0, int f1, const char *const *specials,
                            const char *vocab_json, const char *merges_txt) {
    size_t per = (size_t)(f1 - f0 + 1), n = 0;
    const char **texts = malloc(sizeof *texts * (train->n_rows * per + 1));
    size_t *lens = malloc(sizeof *lens * (train->n_rows * per + 1));
    qkv_status st = texts && lens ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == QKV_OK && i < train->n_rows; i++)
        for (int f = f0; f <= f1; f++, n++) {
            texts[n] = train->rows[i].fields[f];
            lens[n] = train->rows[i].lens[f];
        }
    if (st == QKV_OK)
        st = qkv_bpe_train(texts, lens, n, (size_t)rs->data.bpe_vocab_size,
                           rs->data.bpe_min_freq, specials, vocab_json, merges_txt);
    if (st != QKV_OK) st = qkv_error_set(st, "data: training the BPE tokenizer: %s", qkv_last_error());
    free(texts);
    free(lens);
    return st;
}

/* Loads a BPE; for seq2seq registers its special tokens with literal matching off, so a "<s>" in a sentence is
 * encoded as text and only the pipeline itself produces those ids. */
static qkv_status load_bpe(const task *t, const char *vocab_json, const char *merges_txt, qkv_bpe **out) {
    if (!(*out = qkv_bpe_load(vocab_json, merges_txt))) return qkv_last_status();
    if (t->kind != TASK_SEQ2SEQ) return QKV_OK;
    for (int i = 0; S2S_SPECIALS[i]; i++) {
        qkv_status st = qkv_bpe_add_special(*out, S2S_SPECIALS[i]);
        if (st != QKV_OK) return st;
    }
    qkv_bpe_set_specials_enabled(*out, false);
    return QKV_OK;
}

/* GPT-2 files given in the config (one tokenizer for both seq2seq sides), or BPEs trained on the training split
 * into run_dir (fresh) / reloaded from it: vocab.json + merges.txt, and with separate seq2seq vocabularies
 * tgt_vocab.json + tgt_merges.txt for the target side. */
static qkv_status prepare_bpe(task *t, const qkv_run_settings *rs, const qkv_dataset *train, const char *dir, bool fresh) {
    const char *vf = rs->data.vocab_file, *mf = rs->data.merges_file;
    if (*vf || *mf) {
        if (!*vf || !*mf)
            return qkv_error_set(QKV_ERR_INVALID, "data: the bpe tokenizer needs both vocab_file and merges_file");
        return load_bpe(t, vf, mf, &t->bpe);
    }
    bool s2s = t->kind == TASK_SEQ2SEQ, separate = s2s && !rs->data.shared_vocab && !t->span;
    const char *const *specials = s2s ? S2S_SPECIALS : NULL;
    char *v = qkv_fs_join(dir, "vocab.json"), *m = qkv_fs_join(dir, "merges.txt");
    char *tv = qkv_fs_join(dir, "tgt_vocab.json"), *tm = qkv_fs_join(dir, "tgt_merges.txt");
    qkv_status st = v && m && tv && tm ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    /* lm: the text; classify: the text after the label; seq2seq: the source, or (shared) source and target */
    int f0 = t->kind == TASK_CLASSIFY ? 1 : 0;
    int f1 = t->kind == TASK_CLASSIFY || (s2s && !separate && !t->span) ? 1 : 0;
    if (st == QKV_OK && fresh) st = train_bpe(rs, train, f0, f1, specials, v, m);
    if (st == QKV_OK && fresh && separate) st = train_bpe(rs, train, 1, 1, specials, tv, tm);
    if (st == QKV_OK) st = load_bpe(t, v, m, &t->bpe);
    if (st == QKV_OK && separate) st = load_bpe(t, tv, tm, &t->tgt_bpe);
    free(v);
    free(m);
    free(tv);
    free(tm);
    return st;
}

static tok_kind parse_tok(const char *s, task_kind kind) {
    if (!strcmp(s, "word")) return TOK_WORD;
    if (!strcmp(s, "char")) return TOK_CHAR;
    if (!strcmp(s, "bpe")) return TOK_BPE;
    if (!strcmp(s, "wordpiece")) return TOK_WORDPIECE;
    return kind == TASK_LM ? TOK_CHAR : TOK_WORD; /* "auto" */
}

/* The tokenizer files a seq2seq run directory holds (those present) copied into dir. */
static qkv_status copy_tokenizer(const char *from, const char *dir) {
    static const char *const names[] = {"vocab.txt", "tgt_vocab.txt", "vocab.json", "merges.txt", "tgt_vocab.json",
                                        "tgt_merges.txt"};
    int copied = 0;
    qkv_status st = qkv_fs_mkdirs(dir);
    for (size_t i = 0; st == QKV_OK && i < sizeof names / sizeof names[0]; i++) {
        char *src = qkv_fs_join(from, names[i]), *dst = qkv_fs_join(dir, names[i]);
        FILE *in = src ? fopen(src, "rb") : NULL, *out = in && dst ? fopen(dst, "wb") : NULL;
        if (!src || !dst) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
        else if (in && !out) st = qkv_error_set(QKV_ERR_IO, "%s: cannot write: %s", dst, strerror(errno));
        char buf[1 << 14];
        size_t n;
        while (st == QKV_OK && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
            if (fwrite(buf, 1, n, out) != n) st = qkv_error_set(QKV_ERR_IO, "%s: write error", dst);
        if (st == QKV_OK && in && ferror(in)) st = qkv_error_set(QKV_ERR_IO, "%s: read error", src);
        if (out && fclose(out) != 0 && st == QKV_OK) st = qkv_error_set(QKV_ERR_IO, "%s: write error", dst);
        if (in) fclose(in);
        copied += in != NULL;
        free(src);
        free(dst);
    }
    if (st == QKV_OK && !copied)
        st = qkv_error_set(QKV_ERR_INVALID, "data.tokenizer_from: %s holds no tokenizer files (vocab.txt, vocab.json)",
                           from);
    return st;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

qkv_status qkv__task_prepare(task *t, const cJSON *cfg, const char *task_name, const char *dir, bool fresh) {
    memset(t, 0, sizeof *t);
    if (!strcmp(task_name, "classify"))
        t->kind = TASK_CLASSIFY;
    else if (!strcmp(task_name, "lm"))
        t->kind = TASK_LM;
    else if (!strcmp(task_name, "seq2seq"))
        t->kind = TASK_SEQ2SEQ;
    else if (!strcmp(task_name, "tagging"))
        t->kind = TASK_TAGGING;
    else if (!strcmp(task_name, "pairs"))
        t->kind = TASK_PAIRS;
    else if (!strcmp(task_name, "pretrain"))
        t->kind = TASK_PRETRAIN;
    else
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "the training engine has no data pipeline for task '%s'", task_name);
    qkv_run_settings settings;
    const qkv_run_settings *rs = &settings;
    qkv_status cst = qkv_config_settings(cfg, &settings);
    if (cst != QKV_OK) return cst;
    if (!strcmp(rs->data.task, "qa")) return qkv__qa_prepare(t, rs, dir, fresh);
    if (t->kind == TASK_TAGGING) return qkv__tagging_prepare(t, rs, dir, fresh);
    if (t->kind == TASK_PRETRAIN) return qkv__pretrain_prepare(t, rs, dir, fresh);
    if (!strcmp(rs->data.task, "summarize")) {
        if (t->kind != TASK_LM)
            return qkv_error_set(QKV_ERR_INVALID, "data.task: summarize trains a language model (e.g. model.type gpt), "
                                 "not a %s model", task_name);
        t->kind = TASK_SUMMARIZE;
    }
    if (!strcmp(rs->data.task, "span_corruption")) {
        if (t->kind != TASK_SEQ2SEQ)
            return qkv_error_set(QKV_ERR_INVALID, "data.task: span_corruption trains an encoder-decoder (e.g. model.type "
                                 "t5), not a %s model", task_name);
        t->span = true;
        t->noise_density = (float)rs->data.noise_density;
        t->mean_span = (float)rs->data.mean_span;
        t->span_seed = (uint64_t)rs->seed;
        t->span_redraw = rs->data.span_redraw;
    }
    const char *train_path = rs->data.train;
    const char *format = rs->data.format;
    t->shard = t->kind == TASK_LM && (!strcmp(format, "shard") ||
                                      (!strcmp(format, "auto") && (ends_with(train_path, ".tok") ||
                                                                    ends_with(train_path, ".shard"))));
    t->tok = t->shard ? TOK_NONE : parse_tok(rs->data.tokenizer, t->kind);
    t->wopts.lowercase = rs->data.lowercase;
    t->wopts.strip_punct = rs->data.strip_punct;
    t->max_len = rs->data.max_len;
    t->per_example = !strcmp(rs->train.loss_average, "examples");
    if (t->per_example && t->kind != TASK_SEQ2SEQ)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "train.loss_average: examples is for seq2seq tasks");
    t->cls = -1;
    t->seq_len = rs->data.seq_len;
    if (t->kind == TASK_SUMMARIZE && strcmp(rs->data.tokenizer, "auto") && t->tok != TOK_BPE)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "data.tokenizer: summarize data uses the bpe tokenizer");
    if (t->kind == TASK_SUMMARIZE) t->tok = TOK_BPE;
    if (t->tok == TOK_WORDPIECE && t->kind != TASK_CLASSIFY)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "data.tokenizer: wordpiece is for classify tasks");
    if (t->kind == TASK_SEQ2SEQ && t->tok != TOK_WORD && t->tok != TOK_BPE)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "data.tokenizer: seq2seq data supports the word and bpe tokenizers");
    if (t->kind == TASK_PAIRS && t->tok != TOK_WORD)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "data.tokenizer: pairs data supports the word tokenizer");
    if (t->tok == TOK_CHAR && t->kind == TASK_CLASSIFY)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "data.tokenizer: char is for lm tasks");
    /* Only bpe, wordpiece and shards read them: anywhere else a given file (existing or not) would be ignored. Runs
     * made before this check open as they did. */
    for (int k = 0; fresh && !t->shard && t->tok != TOK_BPE && k < 2; k++) {
        const char *key = k ? "data.merges_file" : "data.vocab_file";
        if (*qkv_config_str(cfg, key, "") && (k || t->tok != TOK_WORDPIECE))
            return qkv_error_set(QKV_ERR_INVALID, "%s: the %s tokenizer reads no such file (set data.tokenizer to %s)",
                                 key, t->tok == TOK_CHAR ? "char" : t->tok == TOK_WORDPIECE ? "wordpiece" : "word",
                                 k ? "bpe" : "bpe or wordpiece");
    }

    if (t->shard) {
        qkv_shard *s = qkv_shard_open(train_path);
        if (!s) return qkv_last_status();
        t->vocab_size = (int64_t)qkv_shard_vocab(s);
        qkv_shard_close(s);
        return qkv__task_shard_tokenizer(t, cfg, train_path, dir, fresh);
    }
    /* data.tokenizer_from: that run's tokenizer files become this run's, loaded as a resumed run loads its own. */
    if (fresh && rs->data.tokenizer_from[0] && t->kind == TASK_SEQ2SEQ) {
        qkv_status cs = copy_tokenizer(rs->data.tokenizer_from, dir);
        if (cs != QKV_OK) return cs;
        fresh = false;
    }
    /* The training file is read only to build tokenizers and labels. */
    qkv_dataset *train = NULL;
    bool need_train = fresh && (t->tok == TOK_WORD || t->tok == TOK_CHAR || t->kind == TASK_CLASSIFY ||
                                (t->tok == TOK_BPE && !*rs->data.vocab_file));
    if (need_train && !(train = read_rows(t, train_path))) return qkv_last_status();
    qkv_status st = QKV_OK;
    char *vocab_path = qkv_fs_join(dir, "vocab.txt"), *tgt_path = qkv_fs_join(dir, "tgt_vocab.txt"),
         *label_path = qkv_fs_join(dir, "labels.txt");
    if (!vocab_path || !tgt_path || !label_path) st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
    if (st == QKV_OK && t->kind == TASK_CLASSIFY) st = prepare_labels(t, train, train_path, label_path, fresh);
    if (st == QKV_OK && t->kind == TASK_SUMMARIZE) {
        st = qkv__summ_prepare(t, rs, train, dir, fresh);
    } else if (st == QKV_OK) {
        switch (t->tok) {
        case TOK_WORD:
        case TOK_CHAR: {
            unsigned sp = QKV_SPECIAL_PAD | QKV_SPECIAL_UNK;
            if (t->kind == TASK_SEQ2SEQ) sp |= QKV_SPECIAL_BOS | QKV_SPECIAL_EOS;
            if (t->kind == TASK_CLASSIFY && rs->data.cls_token) sp |= QKV_SPECIAL_CLS;
            bool shared = t->kind != TASK_SEQ2SEQ || rs->data.shared_vocab || t->span;
            int field = t->kind == TASK_CLASSIFY ? 1 : t->kind == TASK_PAIRS ? 2 : 0;
            /* one vocabulary over source and target (pairs: over both texts) */
            bool both = (shared && t->kind == TASK_SEQ2SEQ && !t->span) || t->kind == TASK_PAIRS;
            st = word_vocab(t, rs, train, both ? 1 : field, both, sp, vocab_path, fresh, &t->vocab);
            if (st == QKV_OK && !shared) st = word_vocab(t, rs, train, 1, false, sp, tgt_path, fresh, &t->tgt_vocab);
            if (st == QKV_OK) {
                t->vocab_size = (int64_t)qkv_vocab_size(t->vocab);
                t->pad = qkv_vocab_id(t->vocab, "<pad>", 5);
                t->unk = qkv_vocab_id(t->vocab, "<unk>", 5);
                t->bos = qkv_vocab_id(t->vocab, "<s>", 3);
                t->eos = qkv_vocab_id(t->vocab, "</s>", 4);
                t->cls = (sp & QKV_SPECIAL_CLS) ? qkv_vocab_id(t->vocab, "[CLS]", 5) : -1;
                const qkv_vocab *tv = t->tgt_vocab ? t->tgt_vocab : t->vocab;
                t->tgt_vocab_size = t->tgt_vocab ? (int64_t)qkv_vocab_size(tv) : 0;
                t->tgt_bos = qkv_vocab_id(tv, "<s>", 3);
                t->tgt_eos = qkv_vocab_id(tv, "</s>", 4);
                t->tgt_pad = qkv_vocab_id(tv, "<pad>", 5);
            }
            break;
        }
        case TOK_BPE:
            st = prepare_bpe(t, rs, train, dir, fresh);
            if (st == QKV_OK) t->vocab_size = (int64_t)qkv_bpe_vocab_size(t->bpe);
            if (st == QKV_OK && t->kind == TASK_SEQ2SEQ) {
                const qkv_bpe *tb = t->tgt_bpe ? t->tgt_bpe : t->bpe;
                t->pad = qkv_bpe_id(t->bpe, "<pad>");
                t->unk = -1; /* byte-level: every text has ids */
                t->bos = qkv_bpe_id(t->bpe, "<s>");
                t->eos = qkv_bpe_id(t->bpe, "</s>");
                t->tgt_vocab_size = t->tgt_bpe ? (int64_t)qkv_bpe_vocab_size(tb) : 0;
                t->tgt_pad = qkv_bpe_id(tb, "<pad>");
                t->tgt_bos = qkv_bpe_id(tb, "<s>");
                t->tgt_eos = qkv_bpe_id(tb, "</s>");
            }
            break;
        case TOK_WORDPIECE: {
            const char *vf = rs->data.vocab_file;
            if (!*vf) {
                st = qkv_error_set(QKV_ERR_INVALID, "data.vocab_file: the wordpiece tokenizer needs a vocab.txt");
                break;
            }
            qkv_wordpiece_opts o = qkv_wordpiece_default_opts();
            o.lowercase = t->wopts.lowercase;
            if (!(t->wp = qkv_wordpiece_load(vf, &o))) st = qkv_last_status();
            if (st == QKV_OK) {
                t->vocab_size = (int64_t)qkv_wordpiece_vocab_size(t->wp);
                t->pad = qkv_wordpiece_id(t->wp, "[PAD]");
                t->unk = qkv_wordpiece_id(t->wp, "[UNK]");
            }
            break;
        }
        case TOK_NONE: break;
        }
    }
    if (t->pad < 0) t->pad = 0;
    /* The sentinels go on top of the tokenizer's ids, one vocabulary both sides; data.keep_sentinels keeps them in a
     * seq2seq run fine-tuned from a span-corruption run, so its embedding has that run's shape. */
    if (st == QKV_OK && (t->span || (t->kind == TASK_SEQ2SEQ && rs->data.keep_sentinels))) {
        t->base_vocab = t->vocab_size;
        t->vocab_size += rs->data.sentinels;
        t->tgt_vocab_size = 0;
    }
    qkv_dataset_free(train);
    free(vocab_path);
    free(tgt_path);
    free(label_path);
    return st;
}

void qkv__task_free(task *t) {
    qkv_vocab_free(t->vocab);
    qkv_vocab_free(t->tgt_vocab);
    qkv_bpe_free(t->bpe);
    qkv_bpe_free(t->tgt_bpe);
    qkv_wordpiece_free(t->wp);
    qkv__pretrain_free(t->pre);
    for (int i = 0; i < t->n_labels; i++) free(t->labels[i]);
    free(t->labels);
    memset(t, 0, sizeof *t);
}

void qkv__task_info(const task *t, qkv_task_info *info) {
    memset(info, 0, sizeof *info);
    info->vocab_size = t->vocab_size;
    info->tgt_vocab_size = t->tgt_vocab_size;
    /* qa: a model that builds a classifier gets two classes (the task reads its features alone); pretrain: NSP */
    info->n_classes = t->kind == TASK_QA || t->kind == TASK_PRETRAIN ? 2 : t->n_labels;
    info->pad_id = t->pad;
    info->max_len = t->kind == TASK_LM ? t->seq_len : t->kind == TASK_SEQ2SEQ ? t->max_len + 1 : t->max_len;
    if (t->kind == TASK_SUMMARIZE) info->pad_id = t->pad;
}

/* ---- encoding files ---------------------------------------------------------------------------------------- */

static int find_label(const task *t, const char *label) {
    int lo = 0, hi = t->n_labels - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(t->labels[mid], label);
        if (!c) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Cuts the stream into windows of seq_len + 1 tokens (stride seq_len); a shorter tail of >= 2 tokens is kept. */
static qkv_status lm_windows(task *t, split *s) {
    int64_t L = t->seq_len;
    for (int64_t start = 0; start + 1 < s->pool_n; start += L) {
        example *e = qkv__split_example(s);
        if (!e) return qkv_last_status();
        e->off = start;
        e->n = s->pool_n - start < L + 1 ? s->pool_n - start : L + 1;
    }
    return QKV_OK;
}

static qkv_status load_shard(task *t, const char *path, split *s) {
    qkv_shard *sh = qkv_shard_open(path);
    if (!sh) return qkv_last_status();
    uint64_t n = qkv_shard_tokens(sh);
    qkv_status st = QKV_OK;
    if ((int64_t)qkv_shard_vocab(sh) > t->vocab_size)
        st = qkv_error_set(QKV_ERR_FORMAT, "%s: vocabulary size %llu is larger than the training shard's %lld", path,
                           (unsigned long long)qkv_shard_vocab(sh), (long long)t->vocab_size);
    if (st == QKV_OK) st = qkv__split_reserve(s, (int64_t)n);
    if (st == QKV_OK) st = qkv_shard_read(sh, 0, (size_t)n, s->pool);
    if (st == QKV_OK) s->pool_n = (int64_t)n;
    qkv_shard_close(sh);
    return st == QKV_OK ? lm_windows(t, s) : st;
}

static qkv_status add_row(task *t, const char *path, const qkv_row *row, split *s) {
    int32_t *ids = NULL;
    size_t n = 0;
    qkv_status st = QKV_OK;
    if (t->kind == TASK_SUMMARIZE) return qkv__summ_add_row(t, path, row, s);
    if (t->kind == TASK_LM) {
        st = qkv__task_encode(t, false, row->fields[0], row->lens[0], &ids, &n);
        if (st == QKV_OK) st = qkv__split_append(s, ids, (int64_t)n);
        free(ids);
        ids = NULL;
        if (st == QKV_OK && t->tok == TOK_BPE) {
            st = qkv_bpe_encode(t->bpe, "\n", 1, &ids, &n);
            if (st == QKV_OK) st = qkv__split_append(s, ids, (int64_t)n);
        } else if (st == QKV_OK) {
            int32_t nl = qkv_vocab_id(t->vocab, NL, strlen(NL));
            if (nl < 0) nl = t->unk;
            st = qkv__split_append(s, &nl, 1);
        }
        s->n_chars += (int64_t)qkv_utf8_count(row->fields[0], row->lens[0]) + 1;
        free(ids);
        return st;
    }
    if (t->kind == TASK_PAIRS) return qkv__pairs_add_row(t, path, row, s);
    example *e = qkv__split_example(s);
    if (!e) return qkv_last_status();
    int text = t->kind == TASK_CLASSIFY ? 1 : 0;
    if (t->kind == TASK_CLASSIFY) {
        e->label = find_label(t, row->fields[0]);
        if (e->label < 0)
            return qkv_error_set(QKV_ERR_FORMAT, "%s:%lld: label '%s' is not one of the training labels", path,
                                 (long long)row->line, row->fields[0]);
    }
    if (t->kind == TASK_CLASSIFY && row->n_fields == 3) { /* [CLS] first [SEP] second [SEP], segment ids 0 / 1 */
        qkv_encoding enc = {0};
        st = qkv_wordpiece_encode(t->wp, row->fields[1], row->lens[1], row->fields[2], row->lens[2], true, &enc);
        for (size_t j = 0; st == QKV_OK && j < enc.n && !e->seg; j++)
            if (enc.type_ids[j] == 1) e->seg = (int64_t)j;
        ids = enc.ids, n = enc.n;
        enc.ids = NULL;
        qkv_encoding_free(&enc);
    } else {
        st = qkv__task_encode(t, false, row->fields[text], row->lens[text], &ids, &n);
    }
    if (st != QKV_OK) {
        free(ids);
        return qkv_error_set(st, "%s:%lld: %s", path, (long long)row->line, qkv_last_error());
    }
    e->off = s->pool_n;
    int64_t room = t->max_len - (t->cls >= 0); /* the [CLS] counts towards max_len */
    e->n = (int64_t)n < room ? (int64_t)n : room;
    if (t->cls >= 0) st = qkv__split_append(s, &t->cls, 1);
    if (st == QKV_OK) st = qkv__split_append(s, ids, e->n);
    e->n += t->cls >= 0;
    free(ids);
    ids = NULL;
    s->n_chars += (int64_t)qkv_utf8_count(row->fields[text], row->lens[text]);
    if (st != QKV_OK || t->kind != TASK_SEQ2SEQ) return st;
    st = qkv__task_encode(t, true, row->fields[1], row->lens[1], &ids, &n);
    if (st == QKV_OK) {
        int64_t keep = (int64_t)n < t->max_len ? (int64_t)n : t->max_len;
        e->toff = s->pool_n;
        e->tn = keep + 2;
        st = qkv__split_append(s, &t->tgt_bos, 1);
        if (st == QKV_OK) st = qkv__split_append(s, ids, keep);
        if (st == QKV_OK) st = qkv__split_append(s, &t->tgt_eos, 1);
    }
    free(ids);
    return st;
}

qkv_status qkv__task_load(task *t, const char *path, split *s) {
    memset(s, 0, sizeof *s);
    if (t->shard) return load_shard(t, path, s);
    if (t->kind == TASK_TAGGING) return qkv__tagging_load(t, path, s);
    if (t->kind == TASK_QA) return qkv__qa_load(t, path, s, false);
    if (t->span) return qkv__span_load(t, path, s);
    if (t->kind == TASK_PRETRAIN)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "%s: pretraining evaluates on documents held out of data.train "
                             "(data.heldout), not on a separate file", path);
    qkv_dataset *d = read_rows(t, path);
    if (!d) return qkv_last_status();
    qkv_status st = QKV_OK;
    for (size_t i = 0; st == QKV_OK && i < d->n_rows; i++) st = add_row(t, path, &d->rows[i], s);
    qkv_dataset_free(d);
    if (st == QKV_OK && t->kind == TASK_LM) st = lm_windows(t, s);
    if (st == QKV_OK && s->n == 0) st = qkv_error_set(QKV_ERR_FORMAT, "%s: no examples", path);
    if (st != QKV_OK) qkv__split_free(s);
    return st;
}

qkv_status qkv__task_encode_text(task *t, const char *text, split *s) {
    return qkv__task_encode_texts(t, &text, 1, s);
}

qkv_status qkv__task_encode_texts(task *t, const char *const *texts, size_t n_texts, split *s) {
    memset(s, 0, sizeof *s);
    if (t->tok == TOK_NONE) return qkv__task_no_tokenizer();
    if (t->kind == TASK_QA) return qkv_error_set(QKV_ERR_UNSUPPORTED, "a qa run answers questions: use qkv answer");
    if (t->kind == TASK_SEQ2SEQ || t->kind == TASK_TAGGING || t->kind == TASK_PAIRS || t->kind == TASK_SUMMARIZE)
        return qkv_error_set(QKV_ERR_UNSUPPORTED, "predicting from text is not supported for this %s",
                             t->kind == TASK_PAIRS       ? "model type (pairs: use qkv similar)"
                             : t->kind == TASK_SUMMARIZE ? "task (use qkv summarize)"
                                                         : "model type");
    qkv_status st = QKV_OK;
    for (size_t i = 0; i < n_texts && st == QKV_OK; i++) {
        const char *text = texts[i];
        qkv_row row = {.line = (int64_t)i + 1, .n_fields = t->kind == TASK_CLASSIFY ? 2 : 1};
        char *fields[2];
        size_t lens[2];
        row.fields = fields;
        row.lens = lens;
        fields[0] = t->kind == TASK_CLASSIFY ? t->labels[0] : (char *)text;
        lens[0] = strlen(fields[0]);
        fields[1] = (char *)text;
        lens[1] = strlen(text);
        st = add_row(t, "<input>", &row, s);
    }
    if (st == QKV_OK && t->kind == TASK_LM) st = lm_windows(t, s);
    if (st == QKV_OK && s->n == 0) st = qkv_error_set(QKV_ERR_INVALID, "the text is too short to score");
    if (st != QKV_OK) qkv__split_free(s);
    return st;
}

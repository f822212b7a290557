/* qkv attend: what a Hugging Face checkpoint (BERT, RoBERTa, GPT-2) or a qkv-trained Transformer run attends to in a
 * sentence, per layer and head, as the HTML attention viewer (viz.h). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "qkv/hf.h"
#include "qkv/qkv.h"
#include "qkv/train.h"
#include "qkv/viz.h"
#include "run_view.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv attend --model DIR [--tokenizer TDIR] [--word W] [--pair \"second\"] [-o FILE] \"sentence\"\n"
            "       qkv attend --run RUN [--checkpoint FILE] [--word W] [-o FILE] \"sentence\"\n\n"
            "Runs a Hugging Face BERT / RoBERTa / GPT-2 checkpoint (DIR: config.json + model.safetensors) on the\n"
            "sentence with output_attentions and writes the attention viewer page (default attend.html): every\n"
            "layer's per-head maps, and the words highlighted by the attention of the target word W (its first\n"
            "token; default: [CLS] / <s> for BERT and RoBERTa, the last token for GPT-2).\n"
            "--pair \"second\": a BERT (WordPiece) checkpoint reads [CLS] sentence [SEP] second [SEP] with segment\n"
            "ids 0 then 1, as in pretraining's sentence pairs (the [SEP] heads show there).\n"
            "The tokenizer comes from TDIR (default DIR): vocab.txt (BERT WordPiece, uncased) or vocab.json +\n"
            "merges.txt (GPT-2 / RoBERTa byte-level BPE; RoBERTa needs its own vocab.json, not GPT-2's).\n"
            "--run RUN: a qkv-trained run instead, with its own tokenizer: transformer_classifier (default row:\n"
            "[CLS]), bert (default row: [CLS]), gpt (causal maps; default row: the last token) or\n"
            "transformer_seq2seq (the encoder's self-attention; default row: the first token). Models without self-attention are an error.\n");
}

typedef struct {
    qkv_wordpiece *wp;
    qkv_bpe *bpe;
} tokenizer;

static int load_tokenizer(const char *dir, tokenizer *t) {
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/vocab.txt", dir);
    if (access(a, R_OK) == 0) {
        t->wp = qkv_wordpiece_load(a, NULL);
        return t->wp ? CLI_OK : cli_error("attend", CLI_INPUT, "%s", qkv_last_error());
    }
    snprintf(a, sizeof a, "%s/vocab.json", dir);
    snprintf(b, sizeof b, "%s/merges.txt", dir);
    if (access(a, R_OK) == 0 && access(b, R_OK) == 0) {
        t->bpe = qkv_bpe_load(a, b);
        return t->bpe ? CLI_OK : cli_error("attend", CLI_INPUT, "%s", qkv_last_error());
    }
    return cli_error("attend", CLI_INPUT, "%s: no vocab.txt or vocab.json + merges.txt (use --tokenizer DIR)", dir);
}

/* Ids and display labels of the sentence, with the model's special tokens. labels: n strdup'ed strings. */
static int tokenize(const tokenizer *t, const qkv_hf_config *cfg, const char *text, const char *pair, qkv_encoding *e,
                    char ***labels) {
    size_t len = strlen(text);
    qkv_status st;
    if (pair && (!t->wp || cfg->arch != QKV_HF_BERT))
        return cli_error("attend", CLI_USAGE, "--pair needs a BERT checkpoint with a WordPiece vocab.txt");
    if (t->wp) {
        st = qkv_wordpiece_encode(t->wp, text, len, pair, pair ? strlen(pair) : 0, true, e);
    } else {
        st = qkv_bpe_encode_full(t->bpe, text, len, e);
        if (!st && cfg->arch == QKV_HF_ROBERTA) {
            int32_t bos = qkv_bpe_id(t->bpe, "<s>"), eos = qkv_bpe_id(t->bpe, "</s>");
            if (bos < 0 || eos < 0)
                return cli_error("attend", CLI_INPUT, "RoBERTa needs <s> and </s> in its vocab.json");
            int32_t *ids = malloc(sizeof *ids * (e->n + 2));
            if (!ids) return CLI_RUNTIME;
            ids[0] = bos, ids[e->n + 1] = eos;
            memcpy(ids + 1, e->ids, sizeof *ids * e->n);
            free(e->ids);
            e->ids = ids, e->n += 2;
        }
    }
    if (st) return cli_error("attend", cli_status_exit(st), "%s", qkv_last_error());
    if (e->n == 0) return cli_error("attend", CLI_INPUT, "the sentence has no tokens");
    *labels = calloc(e->n, sizeof **labels);
    if (!*labels) return CLI_RUNTIME;
    for (size_t i = 0; i < e->n; i++) {
        if (t->wp) {
            const char *tok = qkv_wordpiece_token(t->wp, e->ids[i]);
            (*labels)[i] = strdup(tok ? tok : "?");
        } else {
            char *s = NULL;
            size_t n;
            (*labels)[i] = qkv_bpe_decode(t->bpe, &e->ids[i], 1, &s, &n) ? strdup("?") : s;
        }
        if (!(*labels)[i]) return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* First token whose label (without "##", a leading space, case) equals the word; -1 if none. */
static int find_word(char **labels, size_t n, const char *word) {
    for (size_t i = 0; i < n; i++) {
        const char *l = labels[i];
        if (!strncmp(l, "##", 2)) l += 2;
        while (*l == ' ') l++;
        if (!strcasecmp(l, word)) return (int)i;
    }
    for (size_t i = 0; i < n; i++) { /* a word split into pieces: its first piece */
        const char *l = labels[i];
        while (*l == ' ') l++;
        if (*l && !strncasecmp(word, l, strlen(l)) && strncmp(l, "##", 2)) return (int)i;
    }
    return -1;
}

/* A qkv-trained run: its tokenizer, its model's own attention maps. */
static int attend_run(const char *run_dir, const char *ckpt, const char *text, const char *word, const char *out) {
    qkv_run *r = qkv_run_open(run_dir, ckpt);
    if (!r) return cli_error("attend", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    int rc = CLI_OK;
    if (run_view_write_attend(r, run_dir, text, word, out) != QKV_OK)
        rc = cli_error("attend", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    else printf("wrote %s (model %s)\n", out, qkv_run_model_type(r)->name);
    qkv_run_free(r);
    return rc;
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *tdir = NULL, *word = NULL, *out = "attend.html", *text = NULL, *run_dir = NULL,
               *ckpt = NULL, *pair = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--model") && v) dir = argv[++i];
        else if (!strcmp(a, "--run") && v) run_dir = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "--tokenizer") && v) tdir = argv[++i];
        else if (!strcmp(a, "--word") && v) word = argv[++i];
        else if (!strcmp(a, "--pair") && v) pair = argv[++i];
        else if (!strcmp(a, "-o") && v) out = argv[++i];
        else if (a[0] == '-' && a[1]) return cli_error("attend", CLI_USAGE, "unknown option '%s'", a);
        else if (!text) text = a;
        else return cli_error("attend", CLI_USAGE, "one sentence only (quote it): unexpected '%s'", a);
    }
    if (run_dir && dir) return cli_error("attend", CLI_USAGE, "--model and --run exclude each other");
    if (run_dir && tdir) return cli_error("attend", CLI_USAGE, "--tokenizer goes with --model (a run has its own)");
    if (run_dir && pair) return cli_error("attend", CLI_USAGE, "--pair goes with --model");
    if (text && cli_prepare_out("attend", out, false)) return CLI_INPUT;
    if (run_dir && text) return attend_run(run_dir, ckpt, text, word, out);
    if (!(dir || run_dir) || !text)
        return cli_error("attend", CLI_USAGE, "need --model DIR or --run RUN, and a sentence (see qkv attend --help)");
    if (ckpt) return cli_error("attend", CLI_USAGE, "--checkpoint goes with --run");
    qkv_hf_model *m = qkv_hf_load(dir);
    if (!m) return cli_error("attend", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    const qkv_hf_config *cfg = qkv_hf_config_of(m);
    tokenizer tk = {0};
    qkv_encoding e = {0};
    char **labels = NULL;
    qkv_ctx *ctx = qkv_ctx_new();
    int rc = load_tokenizer(tdir ? tdir : dir, &tk);
    if (!rc) rc = tokenize(&tk, cfg, text, pair, &e, &labels);
    if (!rc && qkv_hf_check_vocab(m, (int64_t)(tk.wp ? qkv_wordpiece_vocab_size(tk.wp) : qkv_bpe_vocab_size(tk.bpe))))
        rc = cli_error("attend", CLI_INPUT, "%s", qkv_last_error());
    int row = cfg->arch == QKV_HF_GPT2 ? (int)e.n - 1 : 0;
    if (!rc && word && (row = find_word(labels, e.n, word)) < 0)
        rc = cli_error("attend", CLI_INPUT, "the word '%s' is not among the sentence's tokens", word);
    qkv_hf_outputs o;
    if (!rc) {
        qkv_ctx_set_grad(ctx, false);
        qkv_tensor *ids = qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, (int64_t)e.n));
        qkv_tensor *types = pair ? qkv_ctx_tensor(ctx, QKV_I32, QKV_DIMS(1, (int64_t)e.n)) : NULL;
        if (ids) memcpy(ids->data, e.ids, sizeof(int32_t) * e.n);
        if (types) memcpy(types->data, e.type_ids, sizeof(int32_t) * e.n);
        if (!ids || (pair && !types) ||
            qkv_hf_forward(ctx, m, &(qkv_hf_inputs){.input_ids = ids, .token_type_ids = types}, true, &o))
            rc = cli_error("attend", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    }
    if (!rc) {
        qkv_viz_map maps[QKV_HF_MAX_LAYERS];
        char names[QKV_HF_MAX_LAYERS][32], title[512], sub[512];
        for (int l = 0; l < o.n_layers && !rc; l++) {
            memset(&maps[l], 0, sizeof maps[l]);
            snprintf(names[l], sizeof names[l], "layer %d", l + 1);
            if (qkv_viz_map_from_tensor(&maps[l], o.attentions[l], 0)) rc = CLI_RUNTIME;
            maps[l].name = names[l];
            maps[l].kind = cfg->arch == QKV_HF_GPT2 ? "causal" : "self";
            maps[l].row_labels = (const char *const *)labels;
            maps[l].highlight = true;
        }
        snprintf(title, sizeof title, pair ? "%s | %s" : "%s%s", text, pair ? pair : "");
        snprintf(sub, sizeof sub, "%s (%s, %lld layers, %lld heads): attention of '%s'", dir,
                 qkv_hf_arch_name(cfg->arch), (long long)cfg->num_layers, (long long)cfg->num_heads, labels[row]);
        qkv_viz_example ex = {.title = title, .n_tokens = (int)e.n, .tokens = (const char *const *)labels,
                              .highlight_row = row, .probability = -1, .n_maps = o.n_layers, .maps = maps};
        qkv_viz_page page = {.title = "qkv attend", .subtitle = sub, .n_examples = 1, .examples = &ex};
        if (!rc && qkv_viz_write_html(out, &page))
            rc = cli_error("attend", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
        if (!rc) printf("wrote %s (%zu tokens, %d layers x %lld heads; row %d '%s')\n", out, e.n, o.n_layers,
                        (long long)cfg->num_heads, row, labels[row]);
    }
    for (size_t i = 0; labels && i < e.n; i++) free(labels[i]);
    free(labels);
    qkv_encoding_free(&e);
    qkv_wordpiece_free(tk.wp);
    qkv_bpe_free(tk.bpe);
    qkv_ctx_free(ctx);
    qkv_hf_free(m);
    return rc;
}

const cli_command cmd_attend = {"attend", "attention of a Hugging Face checkpoint on a sentence, as a viewer page",
                                run, help};

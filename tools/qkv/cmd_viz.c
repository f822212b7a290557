/* qkv viz: the attention viewer page for a trained run. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "run_view.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: qkv viz --run DIR [--checkpoint FILE] [-o PAGE.html] [--svg DIR] [TEXT ...]\n\n"
            "Writes a self-contained HTML page (open it in a browser; no network needed) showing, for each\n"
            "text (the arguments, else one per line of standard input): the model's prediction, the words\n"
            "highlighted by the attention from the classifying token (per layer and averaged), per-layer and\n"
            "per-head attention heatmaps with token labels, and the run's loss and metric curves.\n"
            "For a translation run (a seq2seq model) each text is a source sentence: it is\n"
            "translated greedily and the page shows the alignments (rows: target tokens, columns: source\n"
            "tokens), as qkv translate --view does. For a language model run each text is shown whole\n"
            "with its causal maps, the last token's row highlighted (qkv generate --view shows generated text).\n"
            "For a tagger run each text's words are shown with their predicted tags, coloured by tag (entities\n"
            "by type), as qkv tag --view does.\n"
            "--svg DIR also writes each heatmap (averaged over heads) as a standalone SVG (classifiers).\n"
            "Default page: DIR/viewer.html. The best checkpoint is used unless --checkpoint is given.\n");
}

static int run(int argc, char **argv) {
    const char *dir = NULL, *ckpt = NULL, *out = NULL, *svg = NULL;
    const char **texts = calloc((size_t)argc, sizeof *texts);
    int n = 0;
    if (!texts) return cli_error("viz", CLI_RUNTIME, "out of memory");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--run") && v) dir = argv[++i];
        else if (!strcmp(a, "--checkpoint") && v) ckpt = argv[++i];
        else if (!strcmp(a, "-o") && v) out = argv[++i];
        else if (!strcmp(a, "--svg") && v) svg = argv[++i];
        else if (a[0] == '-' && a[1]) {
            free(texts);
            return cli_error("viz", CLI_USAGE, "unexpected argument '%s' (see qkv viz --help)", a);
        } else texts[n++] = a;
    }
    if (!dir) {
        free(texts);
        return cli_error("viz", CLI_USAGE, "which run? (--run DIR)");
    }
    cli_lines *lines = NULL;
    if (n == 0) {
        if (!(lines = cli_read_lines("viz", "-"))) {
            free(texts);
            return CLI_INPUT;
        }
        const char **t = realloc(texts, sizeof *t * (lines->n ? lines->n : 1));
        if (!t) {
            free(texts);
            cli_lines_free(lines);
            return cli_error("viz", CLI_RUNTIME, "out of memory");
        }
        texts = t;
        for (size_t i = 0; i < lines->n; i++)
            if (lines->line[i][0]) texts[n++] = lines->line[i];
    }
    char page[4096];
    if (!out) {
        snprintf(page, sizeof page, "%s/viewer.html", dir);
        out = page;
    }
    int rc = CLI_OK;
    qkv_run *r = qkv_run_open(dir, ckpt);
    if (!r) rc = cli_error("viz", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    else if (n == 0) rc = cli_error("viz", CLI_USAGE, "no text to show");
    else if (cli_prepare_out("viz", out, false) || cli_prepare_out("viz", svg, true)) rc = CLI_INPUT;
    else if (run_view_write(r, dir, texts, n, out, svg) != QKV_OK)
        rc = cli_error("viz", cli_status_exit(qkv_last_status()), "%s", qkv_last_error());
    else printf("%s\n", out);
    qkv_run_free(r);
    cli_lines_free(lines);
    free(texts);
    return rc;
}

const cli_command cmd_viz = {"viz", "attention viewer page (HTML, SVG) for a trained run", run, help};

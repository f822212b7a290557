/* The attention viewer: page and SVG contents, escaping, input errors, atomic writes, a page built from a real
 * model's maps, and that page rendered by headless Chromium (DOM checked: tokens, highlights, heatmap cells,
 * curves; a screenshot viz_page.png is left in the test's working directory). Chromium absent: visible SKIP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qkv/threads.h"
#include "qkv/transformer_classifier.h"
#include "qkv/viz.h"
#include "test.h"

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static const char *const words[] = {"[CLS]", "a", "<b>wonderful</b>", "film"};
static const float w2x4[2 * 4 * 4] = {
    0.1f, 0.2f, 0.6f, 0.1f, 0.25f, 0.25f, 0.25f, 0.25f, 0.5f, 0.5f, 0, 0, 1, 0, 0, 0, /* head 1 */
    0.7f, 0.1f, 0.1f, 0.1f, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1,                          /* head 2 */
};

TEST(page_contents_and_errors) {
    qkv_viz_map maps[2] = {
        {.name = "layer 1", .n_heads = 2, .n_rows = 4, .n_cols = 4, .weights = w2x4, .row_labels = words,
         .highlight = true},
        {.name = "layer 2", .n_heads = 2, .n_rows = 4, .n_cols = 4, .weights = w2x4, .row_labels = words,
         .highlight = true},
    };
    qkv_viz_example ex = {.title = "a wonderful film", .n_tokens = 4, .tokens = words, .highlight_row = 0,
                          .prediction = "positive", .probability = 0.9, .truth = "positive", .n_maps = 2,
                          .maps = maps};
    double x[3] = {1, 2, 3}, y[3] = {0.7, 0.5, 0.0 / 0.0};
    qkv_viz_curve curve = {.chart = "loss", .name = "train", .n = 3, .x = x, .y = y};
    qkv_viz_page page = {.title = "test </script> page", .n_examples = 1, .examples = &ex, .n_curves = 1,
                         .curves = &curve};
    CHECK_OK(qkv_viz_write_html("viz_unit.html", &page));
    char *s = test_read_file("viz_unit.html");
    CHECK(s != NULL);
    if (s) {
        CHECK(strncmp(s, "<!DOCTYPE html>", 15) == 0);
        CHECK(count(s, "</script>") == 2); /* only the two real closing tags: labels and title are escaped */
        CHECK(strstr(s, "\\u003cb\\u003ewonderful") != NULL);
        CHECK(strstr(s, "\"y\":[0.7,0.5,null]") != NULL);
        CHECK(strstr(s, "\"w\":[0.1,0.2,0.6,0.1,") != NULL);
        CHECK(strstr(s, "http") == NULL || !strstr(s, "src=\"http")); /* nothing fetched from the network */
        CHECK(strstr(s, "<link") == NULL);
    }
    free(s);

    /* Bad inputs: an error naming the problem, the old file untouched. */
    qkv_viz_map bad = maps[0];
    bad.n_cols = 3;
    bad.col_labels = words;
    qkv_viz_example bex = ex;
    bex.maps = &bad;
    bex.n_maps = 1;
    qkv_viz_page bpage = {.n_examples = 1, .examples = &bex};
    CHECK(qkv_viz_write_html("viz_unit.html", &bpage) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "example 0 map 0") && strstr(qkv_last_error(), "highlights"));
    bad = maps[0];
    bad.weights = NULL;
    CHECK(qkv_viz_write_html("viz_unit.html", &bpage) == QKV_ERR_INVALID);
    const char *nul[] = {"a", NULL, "c", "d"};
    bex = ex;
    bex.tokens = nul;
    CHECK(qkv_viz_write_html("viz_unit.html", &bpage) == QKV_ERR_INVALID);
    CHECK(strstr(qkv_last_error(), "token 1") != NULL);
    CHECK(qkv_viz_write_html("/nonexistent-dir/x.html", &page) == QKV_ERR_IO);
    CHECK(strstr(qkv_last_error(), "/nonexistent-dir/") != NULL);
    s = test_read_file("viz_unit.html");
    CHECK(s && strstr(s, "wonderful")); /* still the good page */
    free(s);
    CHECK(qkv_viz_write_html(NULL, &page) == QKV_ERR_INVALID);
}

TEST(svg_heatmap) {
    const char *const src[] = {"la", "casa", "<x>"};
    float wts[4 * 3];
    for (int i = 0; i < 12; i++) wts[i] = (float)i / 11.0f;
    qkv_viz_map cross = {.name = "cross", .kind = "cross", .n_heads = 1, .n_rows = 4, .n_cols = 3,
                         .weights = wts, .row_labels = words, .col_labels = src};
    CHECK_OK(qkv_viz_write_svg("viz_unit.svg", &cross, 0, "decoder 1 cross & more"));
    char *s = test_read_file("viz_unit.svg");
    CHECK(s != NULL);
    if (s) {
        CHECK(count(s, "class=\"cell\"") == 12);
        CHECK(strstr(s, "&lt;x&gt;") != NULL && strstr(s, "&amp; more") != NULL);
        CHECK(strstr(s, "<x>") == NULL);
        CHECK(strstr(s, "fill=\"rgb(0,12,255)\"") != NULL); /* weight 1 -> the darkest blue */
    }
    free(s);
    CHECK_OK(qkv_viz_write_svg("viz_unit.svg", &cross, -1, NULL));
    CHECK(qkv_viz_write_svg("viz_unit.svg", &cross, 1, NULL) == QKV_ERR_INVALID);
    cross.col_labels = NULL; /* 4 x 3 needs column labels */
    CHECK(qkv_viz_write_svg("viz_unit.svg", &cross, 0, NULL) == QKV_ERR_INVALID);
}

TEST(map_from_tensor) {
    qkv_viz_map m = {0};
    qkv_tensor *w = qkv_tensor_new(QKV_F32, QKV_DIMS(2, 3, 4, 5));
    CHECK_OK(qkv_viz_map_from_tensor(&m, w, 1));
    CHECK(m.n_heads == 3 && m.n_rows == 4 && m.n_cols == 5 && m.weights == qkv_f32(w) + 60);
    CHECK(qkv_viz_map_from_tensor(&m, w, 2) == QKV_ERR_RANGE);
    qkv_tensor *w3 = qkv_tensor_new(QKV_F32, QKV_DIMS(2, 4, 5));
    CHECK_OK(qkv_viz_map_from_tensor(&m, w3, 0));
    CHECK(m.n_heads == 1 && m.n_rows == 4);
    qkv_tensor *i2 = qkv_tensor_new(QKV_I32, QKV_DIMS(4, 5));
    CHECK(qkv_viz_map_from_tensor(&m, i2, 0) == QKV_ERR_INVALID);
    qkv_tensor_free(w);
    qkv_tensor_free(w3);
    qkv_tensor_free(i2);
}

/* ---- A page from a real classifier, rendered by Chromium ------------------------------------------------- */

#define NS 2
#define NT 7
static const char *const sent[NS][NT] = {
    {"[CLS]", "the", "acting", "was", "truly", "wonderful", "!"},
    {"[CLS]", "worst", "service", "ever", "<pad>", "<pad>", "<pad>"},
};
static const int lens[NS] = {7, 4};
static const char *const labels[2] = {"negative", "positive"};

/* Writes viz_page.html from a 2-layer, 2-head classifier's maps (untrained: the page, not the model, is tested). */
static bool write_model_page(const char *path, int *n_cells, int *n_tokens) {
    qkv_rng rng;
    qkv_rng_init(&rng, 5);
    static qkv_tcls m;
    qkv_params *p = qkv_params_new();
    qkv_tcls_config c = qkv_tcls_config_default(16, 2);
    c.d_model = 16;
    c.n_heads = 2;
    c.d_ff = 32;
    c.max_len = 16;
    bool ok = qkv_tcls_init(&m, p, &c, &rng) == QKV_OK;
    qkv_ctx *ctx = qkv_ctx_new();
    qkv_ctx_set_training(ctx, false);
    qkv_tensor *ids = qkv_ctx_zeros(ctx, QKV_I32, 2, (const int64_t[]){NS, NT});
    qkv_tensor *pad = qkv_ctx_zeros(ctx, QKV_I32, 2, (const int64_t[]){NS, NT});
    for (int b = 0; b < NS; b++)
        for (int t = 0; t < NT; t++) {
            qkv_i32(ids)[b * NT + t] = t < lens[b] ? 1 + (b * 5 + t * 3) % 15 : 0;
            qkv_i32(pad)[b * NT + t] = t >= lens[b];
        }
    qkv_tensor *w[2] = {0};
    qkv_tensor *lp = ok ? qkv_tcls_forward(ctx, &m, ids, pad, w) : NULL;
    ok = lp != NULL;
    qkv_viz_map maps[NS][2] = {{{0}}};
    qkv_viz_example ex[NS];
    const char *names[2] = {"layer 1", "layer 2"};
    *n_cells = *n_tokens = 0;
    for (int b = 0; ok && b < NS; b++) {
        /* Padding is left out of the view: the maps are cut to the sentence (rows and columns). */
        for (int l = 0; l < 2; l++) {
            ok &= qkv_viz_map_from_tensor(&maps[b][l], w[l], b) == QKV_OK;
            maps[b][l].name = names[l];
            maps[b][l].row_labels = sent[b];
            maps[b][l].highlight = true;
        }
        int L = lens[b];
        float *cut = malloc(sizeof(float) * 2 * 2 * (size_t)(L * L));
        for (int l = 0; l < 2; l++) {
            for (int h = 0; h < 2; h++)
                for (int i = 0; i < L; i++)
                    for (int j = 0; j < L; j++)
                        cut[((l * 2 + h) * L + i) * L + j] = maps[b][l].weights[(h * NT + i) * NT + j];
            maps[b][l].weights = cut + l * 2 * L * L;
            maps[b][l].n_rows = maps[b][l].n_cols = L;
        }
        float p1 = qkv_f32(lp)[b * 2 + 1];
        int pred = p1 > qkv_f32(lp)[b * 2];
        ex[b] = (qkv_viz_example){.title = b ? "worst service ever" : "the acting was truly wonderful !",
                                  .n_tokens = L, .tokens = sent[b], .highlight_row = 0,
                                  .prediction = labels[pred], .probability = pred ? expf(p1) : 1 - expf(p1),
                                  .truth = labels[!b], .n_maps = 2, .maps = maps[b]};
        *n_cells += L * L;
        *n_tokens += L;
    }
    double step[20], tl[20], dl[20], acc[20];
    for (int i = 0; i < 20; i++) {
        step[i] = 50.0 * (i + 1);
        tl[i] = 0.69 * expf(-0.08f * i) + 0.1;
        dl[i] = tl[i] + 0.05 + 0.01 * i;
        acc[i] = 0.5 + 0.3 * (1 - expf(-0.2f * i));
    }
    qkv_viz_curve curves[3] = {{"loss", "train", 20, step, tl}, {"loss", "dev", 20, step, dl},
                               {"accuracy", "dev", 20, step, acc}};
    qkv_viz_page page = {.title = "qkv viewer test", .subtitle = "transformer_classifier, 2 layers x 2 heads",
                         .n_examples = NS, .examples = ex, .n_curves = 3, .curves = curves};
    if (ok) ok = qkv_viz_write_html(path, &page) == QKV_OK;
    if (!ok) printf("  page: %s\n", qkv_last_error());
    for (int b = 0; b < NS && lp; b++) free((void *)maps[b][0].weights);
    qkv_ctx_free(ctx);
    qkv_params_free(p);
    return ok;
}

static bool have_chromium(char *bin, size_t size) {
    const char *cands[] = {getenv("QKV_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser",
                           "/usr/bin/google-chrome"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        if (cands[i] && access(cands[i], X_OK) == 0) {
            snprintf(bin, size, "%s", cands[i]);
            return true;
        }
    return false;
}

/* Runs chromium with the flags a root, offline, sandboxless CI needs; stdout into out_path. */
static int chromium(const char *bin, const char *action, const char *page, const char *out_path) {
    char profile[] = "/tmp/qkv-chromium-XXXXXX", cwd[1024], cmd[4096];
    if (!mkdtemp(profile) || !getcwd(cwd, sizeof cwd)) return -1;
    snprintf(cmd, sizeof cmd,
             "timeout 90 '%s' --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
             "--disable-background-networking --disable-component-update --disable-sync --hide-scrollbars "
             "--user-data-dir=%s %s 'file://%s/%s' > '%s' 2>/dev/null",
             bin, profile, action, cwd, page, out_path);
    int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", profile);
    if (system(cmd) != 0) printf("  could not remove %s\n", profile);
    return rc;
}

TEST(chromium_renders_page) {
    int cells, tokens;
    CHECK(write_model_page("viz_page.html", &cells, &tokens));
    char bin[512];
    if (!have_chromium(bin, sizeof bin)) {
        test_skip("chromium not installed (scripts/install-deps.sh installs it); viz_page.html was written");
        return;
    }
    int rc = chromium(bin, "--dump-dom", "viz_page.html", "viz_page.dom.html");
    char *dom = test_read_file("viz_page.dom.html");
    CHECKF(rc == 0 && dom && *dom, "chromium --dump-dom failed (status %d)", rc);
    if (dom && *dom) {
        CHECK(strstr(dom, "data-rendered=\"1\"") != NULL); /* the script ran to its end */
        int n_tok = count(dom, "class=\"tok\"");
        CHECKF(n_tok == tokens, "%d highlighted tokens in the DOM, want %d", n_tok, tokens);
        CHECK(strstr(dom, ">wonderful</span>") != NULL && strstr(dom, ">service</span>") != NULL);
        CHECK(strstr(dom, "background: rgba(255, 140, 0,") != NULL); /* highlights applied */
        CHECK(count(dom, "data-weight=\"0.0000\"") < tokens);        /* and not all zero */
        int n_cells = count(dom, "class=\"cell\"");
        CHECKF(n_cells == cells, "%d heatmap cells in the DOM, want %d", n_cells, cells);
        CHECK(count(dom, "<polyline") == 3);
        CHECK(strstr(dom, "prediction: ") != NULL && strstr(dom, "(p = 0.") != NULL);
        CHECK(count(dom, "class=\"hv-head\"") == NS && strstr(dom, ">head 2</option>") != NULL);
        int n_thumbs = count(dom, "class=\"thumb\""); /* model view: one thumbnail per layer and head */
        CHECKF(n_thumbs > 0 && count(dom, "class=\"model-view\"") == NS, "%d model-view thumbnails", n_thumbs);
        printf("  chromium DOM: %d tokens, %d heatmap cells, 3 curves\n", n_tok, n_cells);
    }
    free(dom);
    rc = chromium(bin, "--screenshot=viz_page.png --window-size=1200,1400", "viz_page.html", "/dev/null");
    struct stat st;
    CHECKF(rc == 0 && stat("viz_page.png", &st) == 0 && st.st_size > 10000, "screenshot not written (status %d)",
           rc);
    char cwd[1024];
    if (getcwd(cwd, sizeof cwd)) printf("  screenshot: %s/viz_page.png\n", cwd);
}

int main(void) {
    qkv_threads_set(1);
    RUN(page_contents_and_errors);
    RUN(svg_heatmap);
    RUN(map_from_tensor);
    RUN(chromium_renders_page);
    return test_finish();
}

#include "run_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qkv/viz.h"

int run_view_write(qkv_run *r, const char *run_dir, const char *const *texts, int n, const char *out_html,
                   const char *svg_dir) {
    qkv_run_explanation *ex = calloc((size_t)(n ? n : 1), sizeof *ex);
    qkv_viz_example *vex = calloc((size_t)(n ? n : 1), sizeof *vex);
    qkv_viz_map **maps = calloc((size_t)(n ? n : 1), sizeof *maps);
    qkv_status st = ex && vex && maps ? QKV_OK : qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
    for (int i = 0; st == QKV_OK && i < n; i++) {
        if ((st = qkv_run_explain(r, texts[i], &ex[i])) != QKV_OK) break;
        maps[i] = calloc((size_t)(ex[i].n_maps ? ex[i].n_maps : 1), sizeof **maps);
        if (!maps[i]) {
            st = qkv_error_set(QKV_ERR_NOMEM, "viewer: out of memory");
            break;
        }
        for (int m = 0; m < ex[i].n_maps; m++) {
            maps[i][m] = (qkv_viz_map){.name = ex[i].map_names[m],
                                       .kind = ex[i].map_kinds[m],
                                       .n_heads = ex[i].n_heads,
                                       .n_rows = ex[i].n_tokens,
                                       .n_cols = ex[i].n_tokens,
                                       .weights = ex[i].weights[m],
                                       .row_labels = (const char *const *)ex[i].tokens,
                                       .highlight = strcmp(ex[i].map_kinds[m], "causal") != 0};
            if (svg_dir) {
                char path[4096];
                mkdir(svg_dir, 0777);
                snprintf(path, sizeof path, "%s/text%d_layer%d.svg", svg_dir, i + 1, m + 1);
                if ((st = qkv_viz_write_svg(path, &maps[i][m], -1, texts[i])) != QKV_OK) break;
            }
        }
        vex[i] = (qkv_viz_example){.title = texts[i],
                                   .n_tokens = ex[i].n_tokens,
                                   .tokens = (const char *const *)ex[i].tokens,
                                   .highlight_row = ex[i].label ? 0 : -1,
                                   .prediction = ex[i].label,
                                   .probability = ex[i].probability,
                                   .n_maps = ex[i].n_maps,
                                   .maps = maps[i]};
    }
    qkv_run_curves c = {0};
    qkv_viz_curve curves[3];
    int n_curves = 0;
    if (st == QKV_OK && qkv_run_read_curves(run_dir, &c) == QKV_OK) {
        if (c.n_train)
            curves[n_curves++] = (qkv_viz_curve){"loss", "train", c.n_train, c.train_step, c.train_loss};
        if (c.n_dev) {
            curves[n_curves++] = (qkv_viz_curve){"loss", "dev", c.n_dev, c.dev_step, c.dev_loss};
            if (c.metric[0]) curves[n_curves++] = (qkv_viz_curve){c.metric, "dev", c.n_dev, c.dev_step, c.dev_metric};
        }
    }
    if (st == QKV_OK) {
        char subtitle[512];
        snprintf(subtitle, sizeof subtitle, "model %s, run %s, step %ld", qkv_run_model_type(r)->name, run_dir,
                 qkv_run_step(r));
        qkv_viz_page page = {.title = "qkv: what the model attends to",
                             .subtitle = subtitle,
                             .n_examples = n,
                             .examples = vex,
                             .n_curves = n_curves,
                             .curves = curves};
        st = qkv_viz_write_html(out_html, &page);
    }
    qkv_run_curves_free(&c);
    for (int i = 0; i < n; i++) {
        if (ex) qkv_run_explanation_free(&ex[i]);
        if (maps) free(maps[i]);
    }
    free(ex);
    free(vex);
    free(maps);
    return st;
}

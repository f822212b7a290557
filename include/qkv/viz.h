/* The attention viewer: a self-contained HTML page (inline CSS and JavaScript, no network, works from file://) and
 * standalone SVG heatmaps, from tokens and attention maps.
 *
 * The page shows, for each example: its prediction (label, probability, gold label), a tagger's tags on its words
 * (coloured by tag, entities by type), the input words highlighted
 * by the attention a chosen query row pays them (the classifying token's row for a classifier: per layer and
 * averaged over heads and layers), and a head view: pick a map (layer) and a head (or the average of the heads)
 * and see the [queries x keys] heatmap with token labels, values on hover. Training curves (loss, accuracy, ...)
 * are drawn above the examples when given. Maps carry their own row and column labels, so the same page shows a
 * classifier's self-attention, a causal LM's maps or a translation model's target x source alignments.
 *
 * Ownership: everything passed in is borrowed for the duration of the call. Files are written atomically (a
 * temporary file in the same directory, then rename), so a reader never sees half a page.
 */
#ifndef QKV_VIZ_H
#define QKV_VIZ_H

#include <stdbool.h>

#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One attention map: per head, weights[h][i][j] = attention of query i to key j (row-major, contiguous). */
typedef struct qkv_viz_map {
    const char *name;               /* shown in the layer chooser: "layer 1", "decoder 2 cross"; NULL = "map <k>" */
    const char *kind;               /* "self", "causal" or "cross" (informational); NULL = "self" */
    int n_heads, n_rows, n_cols;
    const float *weights;           /* n_heads * n_rows * n_cols values; non-finite ones are shown as 0 */
    const char *const *row_labels;  /* n_rows query tokens */
    const char *const *col_labels;  /* n_cols key tokens; NULL = row_labels (self-attention) */
    bool highlight;                 /* row example.highlight_row (averaged over heads) highlights the words */
} qkv_viz_map;

typedef struct qkv_viz_example {
    const char *title;              /* e.g. the input sentence; NULL for none */
    int n_tokens;
    const char *const *tokens;      /* the words to highlight (keys of the highlight maps: n_cols == n_tokens) */
    int highlight_row;              /* query row whose attention highlights the words (0 = [CLS]); -1: none */
    const char *prediction;         /* predicted label, or NULL */
    double probability;             /* of the prediction; < 0 for none */
    const char *truth;              /* gold label, or NULL */
    int n_maps;
    const qkv_viz_map *maps;
    const char *const *tags;        /* a tagger's tag per token (n_tokens), shown as coloured words, or NULL; BIO
                                     * tags colour each entity by its type and mark where it starts */
} qkv_viz_example;

/* A line of a chart: curves with the same `chart` ("loss", "accuracy") share one plot. */
typedef struct qkv_viz_curve {
    const char *chart;
    const char *name;               /* legend: "train", "dev" */
    int n;
    const double *x, *y;            /* n points (x: step or epoch); non-finite points are skipped */
} qkv_viz_curve;

typedef struct qkv_viz_page {
    const char *title;              /* NULL = "qkv attention viewer" */
    const char *subtitle;           /* one line under the title (model, run), or NULL */
    int n_examples;
    const qkv_viz_example *examples;
    int n_curves;
    const qkv_viz_curve *curves;
} qkv_viz_page;

/* Writes the page. Errors (QKV_ERR_INVALID naming the example and map, QKV_ERR_IO naming the file) leave any
 * existing file untouched. */
qkv_status qkv_viz_write_html(const char *path, const qkv_viz_page *page);

/* One heatmap as a standalone SVG with token labels and a colour scale: head h in [0, n_heads), or -1 for the
 * average over heads. title may be NULL. */
qkv_status qkv_viz_write_svg(const char *path, const qkv_viz_map *map, int head, const char *title);

/* Points map at sequence b of a model's weights: [B, H, Tq, Tk] (per-head) or [B, Tq, Tk] (one head), float32,
 * contiguous (as qkv_sdpa and the attention layers return them). Sets n_heads, n_rows, n_cols and weights only;
 * the tensor must outlive the map. */
qkv_status qkv_viz_map_from_tensor(qkv_viz_map *map, const qkv_tensor *weights, int64_t b);

#ifdef __cplusplus
}
#endif
#endif

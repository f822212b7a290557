/* Trax-style layers over a data stack: Serial, Branch, Parallel, Residual, Select (Dup, Drop, Identity), Add,
 * plain functions as layers, and leaves wrapping the nn modules. Stack arrays hold element 0 = top. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qkv/nn.h"
#include "qkv/ops.h"

void qkv_layer_free(qkv_layer *layer) {
    if (!layer) return;
    if (layer->shares > 0) { /* another reference still uses it */
        layer->shares--;
        return;
    }
    for (int i = 0; i < layer->n_children; i++) qkv_layer_free(layer->children[i]);
    free(layer->children);
    free(layer->state);
    free(layer->indices);
    free(layer);
}

static qkv_layer *new_layer(const char *name, int n_in, int n_out, qkv_layer_forward_fn forward) {
    if (n_in < 0 || n_out < 0 || n_in > QKV_LAYER_MAX_STACK || n_out > QKV_LAYER_MAX_STACK) {
        qkv_error_set(QKV_ERR_INVALID, "layer %s: %d inputs / %d outputs outside 0..%d", name, n_in, n_out,
                      QKV_LAYER_MAX_STACK);
        return NULL;
    }
    qkv_layer *l = calloc(1, sizeof *l);
    if (!l) {
        qkv_error_set(QKV_ERR_NOMEM, "layer %s: out of memory", name);
        return NULL;
    }
    snprintf(l->name, sizeof l->name, "%s", name);
    l->n_in = n_in;
    l->n_out = n_out;
    l->forward = forward;
    return l;
}

/* Every child outputs something (an op returned NULL means its error is already set). */
static qkv_status check_outputs(const qkv_layer *l, int n, qkv_tensor **out) {
    for (int i = 0; i < n; i++)
        if (!out[i])
            return qkv_last_status() ? qkv_last_status()
                                     : qkv_error_set(QKV_ERR_INVALID, "layer %s produced no output %d", l->name, i);
    return QKV_OK;
}

qkv_status qkv_layer_apply(qkv_ctx *ctx, const qkv_layer *layer, int n, qkv_tensor **in, qkv_tensor **out) {
    if (!layer) return qkv_error_set(QKV_ERR_INVALID, "layer apply: layer is NULL");
    if (n != layer->n_in)
        return qkv_error_set(QKV_ERR_INVALID, "layer %s takes %d inputs, given %d", layer->name, layer->n_in, n);
    for (int i = 0; i < n; i++)
        if (!in[i])
            return qkv_last_status() ? qkv_last_status()
                                     : qkv_error_set(QKV_ERR_INVALID, "layer %s: input %d is NULL", layer->name, i);
    qkv_status st = layer->forward(ctx, layer, in, out);
    return st ? st : check_outputs(layer, layer->n_out, out);
}

qkv_tensor *qkv_layer_call(qkv_ctx *ctx, const qkv_layer *layer, qkv_tensor *x) {
    qkv_tensor *out[QKV_LAYER_MAX_STACK] = {0};
    if (!x) return NULL;
    if (layer && layer->n_out != 1) {
        qkv_error_set(QKV_ERR_INVALID, "layer %s: qkv_layer_call needs one output, it has %d", layer->name,
                      layer->n_out);
        return NULL;
    }
    return qkv_layer_apply(ctx, layer, 1, &x, out) ? NULL : out[0];
}

static void describe(const qkv_layer *l, int depth, char *buf, size_t size, size_t *used) {
    if (*used >= size) return;
    int n = snprintf(buf + *used, size - *used, "%*s%s %d -> %d%s%s\n", 2 * depth, "", l->name, l->n_in, l->n_out,
                     l->prefix[0] ? "  " : "", l->prefix);
    *used += n > 0 ? (size_t)n : 0;
    for (int i = 0; i < l->n_children; i++) describe(l->children[i], depth + 1, buf, size, used);
}

const char *qkv_layer_describe(const qkv_layer *layer, char *buf, size_t size) {
    if (!buf || !size) return buf;
    size_t used = 0;
    buf[0] = 0;
    if (layer) describe(layer, 0, buf, size, &used);
    return buf;
}

/* ---- Combinators ------------------------------------------------------------------------------------------- */

/* Takes ownership of children: on any failure every non-NULL child is freed. */
static qkv_layer *with_children(qkv_layer *l, int n, qkv_layer *const *children) {
    if (l) l->children = malloc(sizeof(qkv_layer *) * (size_t)(n ? n : 1));
    if (!l || !l->children) {
        if (l && !l->children) qkv_error_set(QKV_ERR_NOMEM, "layer %s: out of memory", l->name);
        for (int i = 0; i < n; i++) qkv_layer_free(children[i]);
        qkv_layer_free(l);
        return NULL;
    }
    memcpy(l->children, children, sizeof(qkv_layer *) * (size_t)n);
    l->n_children = n;
    l->batchwise = true;
    for (int i = 0; i < n; i++) l->batchwise = l->batchwise && children[i]->batchwise;
    return l;
}

static bool children_ok(const char *what, int n, qkv_layer *const *children) {
    bool ok = n >= 1 && children;
    for (int i = 0; ok && i < n; i++) ok = children[i] != NULL;
    if (!ok) {
        if (n < 1 || !children) qkv_error_set(QKV_ERR_INVALID, "%s: needs at least one layer", what);
        for (int i = 0; children && i < n; i++) qkv_layer_free(children[i]);
    }
    return ok; /* a NULL child already set its error */
}

/* Run children in turn on one stack: each pops its n_in and pushes its n_out. */
static qkv_status serial_forward(qkv_ctx *ctx, const qkv_layer *self, qkv_tensor **in, qkv_tensor **out) {
    qkv_tensor *stack[QKV_LAYER_MAX_STACK], *res[QKV_LAYER_MAX_STACK];
    int depth = self->n_in;
    memcpy(stack, in, sizeof(qkv_tensor *) * (size_t)depth);
    for (int i = 0; i < self->n_children; i++) {
        const qkv_layer *c = self->children[i];
        qkv_status st = qkv_layer_apply(ctx, c, c->n_in, stack, res);
        if (st) return st;
        int rest = depth - c->n_in;
        if (c->n_out + rest > QKV_LAYER_MAX_STACK)
            return qkv_error_set(QKV_ERR_RANGE, "layer %s: data stack deeper than %d", self->name, QKV_LAYER_MAX_STACK);
        memmove(stack + c->n_out, stack + c->n_in, sizeof(qkv_tensor *) * (size_t)rest);
        memcpy(stack, res, sizeof(qkv_tensor *) * (size_t)c->n_out);
        depth = rest + c->n_out;
    }
    memcpy(out, stack, sizeof(qkv_tensor *) * (size_t)self->n_out);
    return QKV_OK;
}

qkv_layer *qkv_layer_serial(int n, qkv_layer *const *children) {
    if (!children_ok("Serial", n, children)) return NULL;
    /* Trax's arity: inputs a child needs beyond what earlier children pushed come from below. */
    int need = 0, have = 0;
    for (int i = 0; i < n; i++) {
        if (children[i]->n_in > have) {
            need += children[i]->n_in - have;
            have = children[i]->n_in;
        }
        have += children[i]->n_out - children[i]->n_in;
    }
    return with_children(new_layer("Serial", need, have, serial_forward), n, children);
}

static qkv_status branch_forward(qkv_ctx *ctx, const qkv_layer *self, qkv_tensor **in, qkv_tensor **out) {
    int k = 0;
    for (int i = 0; i < self->n_children; i++) {
        const qkv_layer *c = self->children[i];
        qkv_status st = qkv_layer_apply(ctx, c, c->n_in, in, out + k);
        if (st) return st;
        k += c->n_out;
    }
    return QKV_OK;
}

qkv_layer *qkv_layer_branch(int n, qkv_layer *const *children) {
    if (!children_ok("Branch", n, children)) return NULL;
    int n_in = 0, n_out = 0;
    for (int i = 0; i < n; i++) {
        if (children[i]->n_in > n_in) n_in = children[i]->n_in;
        n_out += children[i]->n_out;
    }
    return with_children(new_layer("Branch", n_in, n_out, branch_forward), n, children);
}

/* k copies of one batchwise layer whose inputs in[copy * n_in + j] agree in dtype and shape across copies, and
 * whose inputs of one copy share their leading (batch) size. */
static bool stackable(const qkv_layer *c, int k, qkv_tensor **in) {
    if (k < 2 || !c->batchwise || c->n_in < 1 || c->n_out < 1 || k * c->n_in > QKV_LAYER_MAX_STACK) return false;
    int64_t rows = in[0]->ndim >= 1 ? in[0]->shape[0] : -1;
    for (int j = 0; j < c->n_in; j++) {
        const qkv_tensor *x = in[j];
        if (x->ndim < 1 || x->shape[0] != rows) return false;
        for (int r = 1; r < k; r++) {
            const qkv_tensor *y = in[r * c->n_in + j];
            if (y->dtype != x->dtype || y->ndim != x->ndim) return false;
            for (int d = 0; d < x->ndim; d++)
                if (y->shape[d] != x->shape[d]) return false;
        }
    }
    return true;
}

/* The k copies as one call on inputs stacked along axis 0, outputs split back: a Siamese pair's two texts then
 * share every GEMM (an RNN step of 2B rows instead of two of B, which is what makes small recurrent batches fast). */
static qkv_status apply_stacked(qkv_ctx *ctx, const qkv_layer *c, int k, qkv_tensor **in, qkv_tensor **out) {
    qkv_tensor *joined[QKV_LAYER_MAX_STACK], *res[QKV_LAYER_MAX_STACK], *parts[QKV_LAYER_MAX_STACK], *xs[QKV_LAYER_MAX_STACK];
    int64_t rows = in[0]->shape[0], sizes[QKV_LAYER_MAX_STACK];
    for (int r = 0; r < k; r++) sizes[r] = rows;
    for (int j = 0; j < c->n_in; j++) {
        for (int r = 0; r < k; r++) xs[r] = in[r * c->n_in + j];
        if (!(joined[j] = qkv_concat(ctx, k, xs, 0))) return qkv_last_status();
    }
    qkv_status st = qkv_layer_apply(ctx, c, c->n_in, joined, res);
    for (int j = 0; st == QKV_OK && j < c->n_out; j++) {
        if (res[j]->ndim < 1 || res[j]->shape[0] != k * rows)
            return qkv_error_set(QKV_ERR_INVALID, "layer %s is marked batchwise but output %d has %lld rows for %lld "
                                 "stacked inputs", c->name, j, res[j]->ndim ? (long long)res[j]->shape[0] : 0LL,
                                 (long long)(k * rows));
        st = qkv_split(ctx, res[j], 0, k, sizes, parts);
        for (int r = 0; st == QKV_OK && r < k; r++) out[r * c->n_out + j] = parts[r];
    }
    return st;
}

static qkv_status parallel_forward(qkv_ctx *ctx, const qkv_layer *self, qkv_tensor **in, qkv_tensor **out) {
    int a = 0, b = 0;
    for (int i = 0; i < self->n_children;) {
        const qkv_layer *c = self->children[i];
        int k = 1;
        while (i + k < self->n_children && self->children[i + k] == c) k++;
        qkv_status st;
        if (stackable(c, k, in + a)) {
            st = apply_stacked(ctx, c, k, in + a, out + b);
        } else {
            k = 1;
            st = qkv_layer_apply(ctx, c, c->n_in, in + a, out + b);
        }
        if (st) return st;
        a += k * c->n_in;
        b += k * c->n_out;
        i += k;
    }
    return QKV_OK;
}

qkv_layer *qkv_layer_parallel(int n, qkv_layer *const *children) {
    if (!children_ok("Parallel", n, children)) return NULL;
    int n_in = 0, n_out = 0;
    for (int i = 0; i < n; i++) {
        n_in += children[i]->n_in;
        n_out += children[i]->n_out;
    }
    return with_children(new_layer("Parallel", n_in, n_out, parallel_forward), n, children);
}

/* out[0] = f(in)[0] + in[0]; f's other outputs pass through (e.g. a mask carried along). */
static qkv_status residual_forward(qkv_ctx *ctx, const qkv_layer *self, qkv_tensor **in, qkv_tensor **out) {
    qkv_status st = qkv_layer_apply(ctx, self->children[0], self->n_in, in, out);
    if (st) return st;
    out[0] = qkv_add(ctx, out[0], in[0]);
    return out[0] ? QKV_OK : qkv_last_status();
}

qkv_layer *qkv_layer_residual(int n, qkv_layer *const *children) {
    qkv_layer *body = n == 1 ? (children && children[0] ? children[0] : NULL) : qkv_layer_serial(n, children);
    if (!body) {
        if (n == 1) children_ok("Residual", n, children);
        return NULL;
    }
    if (body->n_in < 1 || body->n_out < 1) {
        qkv_error_set(QKV_ERR_INVALID, "Residual: its layers map %d -> %d inputs; need at least 1 -> 1", body->n_in,
                      body->n_out);
        qkv_layer_free(body);
        return NULL;
    }
    return with_children(new_layer("Residual", body->n_in, body->n_out, residual_forward), 1, &body);
}

static qkv_status select_forward(qkv_ctx *ctx, const qkv_layer *self, qkv_tensor **in, qkv_tensor **out) {
    (void)ctx;
    for (int i = 0; i < self->n_out; i++) out[i] = in[self->indices[i]];
    return QKV_OK;
}

static qkv_layer *select_named(const char *name, int n_in, int n_out, const int *indices) {
    for (int i = 0; i < n_out; i++)
        if (!indices || indices[i] < 0 || indices[i] >= n_in) {
            qkv_error_set(QKV_ERR_INVALID, "%s: index %d outside the %d inputs", name, indices ? indices[i] : -1, n_in);
            return NULL;
        }
    qkv_layer *l = new_layer(name, n_in, n_out, select_forward);
    if (!l) return NULL;
    l->batchwise = true;
    if (!(l->indices = malloc(sizeof(int) * (size_t)(n_out ? n_out : 1)))) {
        qkv_layer_free(l);
        qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", name);
        return NULL;
    }
    if (n_out) memcpy(l->indices, indices, sizeof(int) * (size_t)n_out);
    return l;
}

qkv_layer *qkv_layer_select(int n_in, int n_out, const int *indices) {
    return select_named("Select", n_in, n_out, indices);
}
qkv_layer *qkv_layer_dup(void) { return select_named("Dup", 1, 2, (const int[]){0, 0}); }
qkv_layer *qkv_layer_drop(void) { return select_named("Drop", 1, 0, (const int[]){0}); }
qkv_layer *qkv_layer_identity(void) { return select_named("Identity", 1, 1, (const int[]){0}); }

static qkv_status add_forward(qkv_ctx *ctx, const qkv_layer *self, qkv_tensor **in, qkv_tensor **out) {
    (void)self;
    out[0] = qkv_add(ctx, in[0], in[1]);
    return out[0] ? QKV_OK : qkv_last_status();
}
qkv_layer *qkv_layer_add(void) {
    qkv_layer *l = new_layer("Add", 2, 1, add_forward);
    if (l) l->batchwise = true; /* a broadcast operand has another leading size: stackable() then declines */
    return l;
}

qkv_layer *qkv_layer_share(qkv_layer *layer) {
    if (layer) layer->shares++;
    return layer;
}

static qkv_status fn_forward(qkv_ctx *ctx, const qkv_layer *self, qkv_tensor **in, qkv_tensor **out) {
    return self->fn(ctx, in, out, self->user);
}

qkv_layer *qkv_layer_fn(const char *name, int n_in, int n_out, qkv_layer_user_fn fn, void *user) {
    if (!fn) {
        qkv_error_set(QKV_ERR_INVALID, "layer fn '%s': function is NULL", name ? name : "");
        return NULL;
    }
    qkv_layer *l = new_layer(name ? name : "Fn", n_in, n_out, fn_forward);
    if (l) {
        l->fn = fn;
        l->user = user;
    }
    return l;
}

/* ---- Leaves over nn modules: the module struct lives in state. ---- */

static qkv_layer *leaf(const char *name, const char *prefix, qkv_layer_forward_fn forward, size_t state_size,
                       int n_in, int n_out) {
    qkv_layer *l = new_layer(name, n_in, n_out, forward);
    if (!l) return NULL;
    if (prefix) snprintf(l->prefix, sizeof l->prefix, "%s", prefix);
    l->batchwise = true; /* every leaf below maps each example on its own; one that mixes the batch must clear it */
    if (state_size && !(l->state = calloc(1, state_size))) {
        qkv_layer_free(l);
        qkv_error_set(QKV_ERR_NOMEM, "layer %s: out of memory", name);
        return NULL;
    }
    return l;
}

/* Frees a half-built leaf when its module's init failed. */
static qkv_layer *leaf_done(qkv_layer *l, qkv_status st) {
    if (st) {
        qkv_layer_free(l);
        return NULL;
    }
    return l;
}

#define ONE_OUT(expr)                                   \
    do {                                                \
        out[0] = (expr);                                \
        return out[0] ? QKV_OK : qkv_last_status();     \
    } while (0)

static qkv_status dense_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    ONE_OUT(qkv_nn_linear_forward(ctx, s->state, in[0]));
}
qkv_layer *qkv_layer_dense(qkv_params *params, const char *prefix, int64_t in, int64_t out, qkv_rng *rng) {
    qkv_layer *l = leaf("Dense", prefix, dense_fwd, sizeof(qkv_nn_linear), 1, 1);
    return l ? leaf_done(l, qkv_nn_linear_init(l->state, params, prefix, in, out, true, rng)) : NULL;
}

static qkv_status embedding_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    ONE_OUT(qkv_nn_embedding_forward(ctx, s->state, in[0]));
}
qkv_layer *qkv_layer_embedding(qkv_params *params, const char *prefix, int64_t num, int64_t dim,
                               int64_t padding_idx, bool scale_sqrt_dim, qkv_rng *rng) {
    qkv_layer *l = leaf("Embedding", prefix, embedding_fwd, sizeof(qkv_nn_embedding), 1, 1);
    return l ? leaf_done(l, qkv_nn_embedding_init(l->state, params, prefix, num, dim, padding_idx, scale_sqrt_dim,
                                                  rng))
             : NULL;
}

static qkv_status posenc_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    ONE_OUT(qkv_nn_posenc_forward(ctx, s->state, in[0], 0));
}
qkv_layer *qkv_layer_posenc(qkv_params *params, const char *prefix, qkv_posenc_kind kind, int64_t max_len,
                            int64_t dim, float dropout, qkv_rng *rng) {
    qkv_layer *l = leaf("PositionalEncoding", prefix, posenc_fwd, sizeof(qkv_nn_posenc), 1, 1);
    return l ? leaf_done(l, qkv_nn_posenc_init(l->state, params, prefix, kind, max_len, dim, dropout, 0.0f, rng))
             : NULL;
}

static qkv_status layer_norm_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    ONE_OUT(qkv_nn_layer_norm_forward(ctx, s->state, in[0]));
}
qkv_layer *qkv_layer_layer_norm(qkv_params *params, const char *prefix, int64_t dim) {
    qkv_layer *l = leaf("LayerNorm", prefix, layer_norm_fwd, sizeof(qkv_nn_layer_norm), 1, 1);
    return l ? leaf_done(l, qkv_nn_layer_norm_init(l->state, params, prefix, dim, 1e-5f, true)) : NULL;
}

static qkv_status dropout_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    ONE_OUT(qkv_nn_dropout_forward(ctx, s->state, in[0]));
}
qkv_layer *qkv_layer_dropout(float p) {
    qkv_layer *l = leaf("Dropout", NULL, dropout_fwd, sizeof(qkv_nn_dropout), 1, 1);
    return l ? leaf_done(l, qkv_nn_dropout_init(l->state, p)) : NULL;
}

static qkv_status activation_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    ONE_OUT(qkv_nn_activate(ctx, *(const qkv_activation *)s->state, in[0]));
}
qkv_layer *qkv_layer_activation(qkv_activation act) {
    if ((unsigned)act > QKV_ACT_TANH) {
        qkv_error_set(QKV_ERR_INVALID, "activation layer: unknown kind %d", (int)act);
        return NULL;
    }
    qkv_layer *l = leaf(qkv_activation_name(act), NULL, activation_fwd, sizeof(qkv_activation), 1, 1);
    if (l) *(qkv_activation *)l->state = act;
    return l;
}

static qkv_status log_softmax_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    (void)s;
    ONE_OUT(qkv_log_softmax(ctx, in[0], -1));
}
qkv_layer *qkv_layer_log_softmax(void) { return leaf("LogSoftmax", NULL, log_softmax_fwd, 0, 1, 1); }

static qkv_status masked_mean_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    (void)s;
    qkv_tensor *pad = qkv_nn_padding_of(ctx, in[1]);
    ONE_OUT(pad ? qkv_nn_masked_mean(ctx, in[0], pad) : NULL);
}
qkv_layer *qkv_layer_masked_mean(void) { return leaf("MaskedMean", NULL, masked_mean_fwd, 0, 2, 1); }

static qkv_status masked_max_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    (void)s;
    qkv_tensor *pad = qkv_nn_padding_of(ctx, in[1]);
    ONE_OUT(pad ? qkv_nn_masked_max(ctx, in[0], pad) : NULL);
}
qkv_layer *qkv_layer_masked_max(void) { return leaf("MaskedMax", NULL, masked_max_fwd, 0, 2, 1); }

static qkv_status conv1d_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    qkv_tensor *pad = qkv_nn_padding_of(ctx, in[1]), *out_pad = NULL;
    out[0] = pad ? qkv_nn_conv1d_forward(ctx, s->state, in[0], pad, &out_pad) : NULL;
    /* The layer's masks are token masks (1 = token), as the batch's. */
    out[1] = out_pad ? qkv_affine(ctx, out_pad, -1.0f, 1.0f) : NULL;
    return out[0] && out[1] ? QKV_OK : qkv_last_status();
}
qkv_layer *qkv_layer_conv1d(qkv_params *params, const char *prefix, int64_t in, int64_t out, int64_t width,
                            int64_t padding, qkv_rng *rng) {
    qkv_layer *l = leaf("Conv1d", prefix, conv1d_fwd, sizeof(qkv_nn_conv1d), 2, 2);
    return l ? leaf_done(l, qkv_nn_conv1d_init(l->state, params, prefix, in, out, width, padding, rng)) : NULL;
}

static qkv_status l2_normalize_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    ONE_OUT(qkv_nn_l2_normalize(ctx, in[0], *(const float *)s->state));
}
qkv_layer *qkv_layer_l2_normalize(float eps) {
    if (!(eps >= 0.0f)) {
        qkv_error_set(QKV_ERR_INVALID, "l2_normalize layer: eps %g must be >= 0", (double)eps);
        return NULL;
    }
    qkv_layer *l = leaf("L2Normalize", NULL, l2_normalize_fwd, sizeof(float), 1, 1);
    if (l) *(float *)l->state = eps;
    return l;
}

static qkv_status rnn_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    return qkv_rnn_forward(ctx, s->state, in[0], NULL, NULL, NULL, &out[0], NULL, NULL);
}
qkv_layer *qkv_layer_rnn(qkv_params *params, const char *prefix, const qkv_rnn_config *cfg, qkv_rng *rng) {
    if (!cfg) {
        qkv_error_set(QKV_ERR_INVALID, "rnn layer: config is NULL");
        return NULL;
    }
    const char *name = cfg->kind == QKV_RNN_GRU ? "GRU" : cfg->kind == QKV_RNN_LSTM ? "LSTM" : "RNN";
    qkv_layer *l = leaf(name, prefix, rnn_fwd, sizeof(qkv_rnn), 1, 1);
    return l ? leaf_done(l, qkv_rnn_init(l->state, params, prefix, cfg, rng)) : NULL;
}

static qkv_status encoder_block_fwd(qkv_ctx *ctx, const qkv_layer *s, qkv_tensor **in, qkv_tensor **out) {
    qkv_nn_attn_mask mask = {.key_padding = s->n_in == 2 ? in[1] : NULL};
    out[0] = qkv_nn_encoder_layer_forward(ctx, s->state, in[0], &mask, NULL);
    if (s->n_out == 2) out[1] = in[1];
    return out[0] ? QKV_OK : qkv_last_status();
}
qkv_layer *qkv_layer_encoder_block(qkv_params *params, const char *prefix, const qkv_nn_block_config *cfg,
                                   bool with_mask, qkv_rng *rng) {
    int n = with_mask ? 2 : 1;
    qkv_layer *l = leaf("EncoderBlock", prefix, encoder_block_fwd, sizeof(qkv_nn_encoder_layer), n, n);
    return l ? leaf_done(l, qkv_nn_encoder_layer_init(l->state, params, prefix, cfg, rng)) : NULL;
}

/* Contexts, the tape and the backward pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/internal.h"
#include "qkv/threads.h"

/* A gradient buffer whose tensor's backward has run: free for the next gradient of the same byte size. */
typedef struct {
    void *data;
    size_t bytes;
} spare_buf;

struct qkv_ctx {
    qkv_arena arena;
    qkv_node **tape;
    size_t tape_len, tape_cap;
    spare_buf *spare;
    size_t n_spare, spare_cap;
    bool grad_enabled, training;
    qkv_rng rng;
    qkv_grad_ready_fn ready;
    void *ready_user;
    struct qkv__packs *packs; /* borrowed: weights a decoder packed for small-M products (ops/gemm_packed.h) */
};

void qkv_ctx_set_grad_ready(qkv_ctx *ctx, qkv_grad_ready_fn fn, void *user) {
    ctx->ready = fn;
    ctx->ready_user = user;
}

qkv_ctx *qkv_ctx_new(void) {
    qkv_threads_init();
    qkv_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        qkv_error_set(QKV_ERR_NOMEM, "out of memory creating a context");
        return NULL;
    }
    ctx->grad_enabled = true;
    ctx->training = true;
    qkv_rng_init(&ctx->rng, 0);
    return ctx;
}

void qkv_ctx_free(qkv_ctx *ctx) {
    if (!ctx) return;
    qkv__arena_free(&ctx->arena);
    free(ctx->tape);
    free(ctx->spare);
    free(ctx);
}

void qkv_ctx_reset(qkv_ctx *ctx) {
    qkv__arena_reset(&ctx->arena);
    ctx->tape_len = 0;
    ctx->n_spare = 0;
}

bool qkv_ctx_set_grad(qkv_ctx *ctx, bool enabled) {
    bool prev = ctx->grad_enabled;
    ctx->grad_enabled = enabled;
    return prev;
}
bool qkv_ctx_grad_enabled(const qkv_ctx *ctx) { return ctx->grad_enabled; }
void qkv__ctx_set_packs(qkv_ctx *ctx, struct qkv__packs *packs) { ctx->packs = packs; }
struct qkv__packs *qkv__ctx_packs(const qkv_ctx *ctx) { return ctx ? ctx->packs : NULL; }
bool qkv_ctx_set_training(qkv_ctx *ctx, bool training) {
    bool prev = ctx->training;
    ctx->training = training;
    return prev;
}
bool qkv_ctx_training(const qkv_ctx *ctx) { return ctx->training; }
qkv_rng *qkv_ctx_rng(qkv_ctx *ctx) { return &ctx->rng; }

void *qkv_ctx_alloc(qkv_ctx *ctx, size_t bytes) { return qkv__arena_alloc(&ctx->arena, bytes); }

size_t qkv_ctx_arena_bytes(const qkv_ctx *ctx) { return qkv__arena_capacity(&ctx->arena); }
size_t qkv_ctx_tape_length(const qkv_ctx *ctx) { return ctx->tape_len; }
size_t qkv_ctx_arena_allocs(const qkv_ctx *ctx) { return ctx->arena.system_allocs; }
size_t qkv_ctx_arena_peak(const qkv_ctx *ctx) { return ctx->arena.high_water; }

qkv_tensor *qkv_ctx_tensor(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > QKV_MAX_DIMS) {
        qkv_error_set(QKV_ERR_INVALID, "tensor rank %d outside 0..%d", ndim, QKV_MAX_DIMS);
        return NULL;
    }
    int64_t n = qkv__contiguous_strides(ndim, shape, NULL);
    if (n < 0) return NULL;
    qkv_tensor *t = qkv__arena_alloc(&ctx->arena, sizeof *t);
    void *data = t ? qkv__arena_alloc(&ctx->arena, (size_t)n * qkv_dtype_size(dtype)) : NULL;
    if (!data) return NULL;
    qkv__header(t, dtype, ndim, shape);
    t->data = data;
    return t;
}

qkv_tensor *qkv_ctx_zeros(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape) {
    qkv_tensor *t = qkv_ctx_tensor(ctx, dtype, ndim, shape);
    if (t) memset(t->data, 0, (size_t)qkv_numel(t) * qkv_dtype_size(dtype));
    return t;
}

qkv_tensor *qkv__out(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape) {
    return qkv_ctx_tensor(ctx, dtype, ndim, shape);
}

qkv_tensor *qkv__out_like(qkv_ctx *ctx, const qkv_tensor *like) {
    return qkv_ctx_tensor(ctx, like->dtype, like->ndim, like->shape);
}

qkv_tensor *qkv__view(qkv_ctx *ctx, const qkv_tensor *src) {
    qkv_tensor *t = qkv__arena_alloc(&ctx->arena, sizeof *t);
    if (!t) return NULL;
    *t = *src;
    t->grad = NULL;
    t->node = NULL;
    t->flags = 0;
    t->name[0] = '\0';
    return t;
}

const float *qkv__contig_data(qkv_ctx *ctx, const qkv_tensor *x) {
    if (qkv_is_contiguous(x)) return x->data;
    qkv_tensor *c = qkv_ctx_tensor(ctx, x->dtype, x->ndim, x->shape);
    if (!c) return NULL;
    qkv__gather_strided(c->data, x); /* new arena memory: no overlap with x */
    return c->data;
}

bool qkv_needs_grad(const qkv_ctx *ctx, int n_in, qkv_tensor *const *in) {
    if (!ctx->grad_enabled) return false;
    for (int i = 0; i < n_in; i++)
        if (in[i] && (in[i]->flags & QKV_FLAG_REQUIRES_GRAD)) return true;
    return false;
}

qkv_node *qkv_record(qkv_ctx *ctx, qkv_tensor *out, const char *op, qkv_backward_fn backward, int n_in,
                     qkv_tensor *const *in) {
    if (!qkv_needs_grad(ctx, n_in, in)) return NULL;
    if (ctx->tape_len == ctx->tape_cap) {
        size_t cap = ctx->tape_cap ? ctx->tape_cap * 2 : 256;
        qkv_node **t = realloc(ctx->tape, cap * sizeof *t);
        if (!t) {
            qkv_error_set(QKV_ERR_NOMEM, "out of memory growing the tape");
            return NULL;
        }
        ctx->tape = t;
        ctx->tape_cap = cap;
    }
    qkv_node *n = qkv__arena_alloc(&ctx->arena, sizeof *n);
    qkv_tensor **ins = qkv__arena_alloc(&ctx->arena, sizeof *ins * (size_t)(n_in ? n_in : 1));
    if (!n || !ins) return NULL;
    memset(n, 0, sizeof *n);
    memcpy(ins, in, sizeof *ins * (size_t)n_in);
    n->backward = backward;
    n->op = op;
    n->out = out;
    n->in = ins;
    n->n_in = n_in;
    if (out->node) out->flags |= QKV__FLAG_SHARED_OUT;
    out->node = n;
    out->flags |= QKV_FLAG_REQUIRES_GRAD;
    ctx->tape[ctx->tape_len++] = n;
    return n;
}

static size_t grad_bytes(const qkv_tensor *t) {
    size_t n = (size_t)qkv_numel(t) * sizeof(float);
    return n ? n : sizeof(float);
}

/* An intermediate's gradient in the context: a spare buffer of the same size if backward has freed one (the most
 * recent first: its pages are warm), else fresh arena memory. Data uninitialised. */
static qkv_tensor *grad_tensor(qkv_ctx *ctx, const qkv_tensor *t) {
    size_t bytes = grad_bytes(t);
    for (size_t i = ctx->n_spare; i-- > 0;) {
        if (ctx->spare[i].bytes != bytes) continue;
        qkv_tensor *g = qkv__arena_alloc(&ctx->arena, sizeof *g);
        if (!g) return NULL;
        qkv__header(g, QKV_F32, t->ndim, t->shape);
        g->data = ctx->spare[i].data;
        ctx->spare[i] = ctx->spare[--ctx->n_spare];
        return g;
    }
    return qkv_ctx_tensor(ctx, QKV_F32, t->ndim, t->shape);
}

qkv_tensor *qkv_grad_for(qkv_ctx *ctx, qkv_tensor *t) {
    if (!t || !(t->flags & QKV_FLAG_REQUIRES_GRAD)) return NULL;
    if (!t->grad) {
        if (t->flags & QKV_FLAG_HEAP) {
            t->grad = qkv_tensor_new(QKV_F32, t->ndim, t->shape);
        } else {
            t->grad = grad_tensor(ctx, t);
            if (t->grad) qkv__zero_floats(t->grad->data, qkv_numel(t));
        }
    }
    return t->grad;
}

qkv_tensor *qkv__grad_fresh(qkv_ctx *ctx, qkv_tensor *t, bool *fresh) {
    *fresh = false;
    if (!t || !(t->flags & QKV_FLAG_REQUIRES_GRAD)) return NULL;
    if (t->grad) return t->grad;
    if (t->flags & QKV_FLAG_HEAP) return qkv_grad_for(ctx, t); /* persistent: zeroed once, then accumulated */
    /* First writer of an intermediate's gradient: hand out uninitialised memory the op overwrites (beta = 0),
     * saving a memset and a read of the whole buffer. */
    t->grad = grad_tensor(ctx, t);
    *fresh = t->grad != NULL;
    return t->grad;
}

qkv_tensor *qkv__grad_adopt(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *y) {
    /* y's buffer must be the tape's to give away: not kept for the user, not theirs, not read by an earlier node. */
    const uint32_t y_keeps = QKV_FLAG_RETAIN_GRAD | QKV_FLAG_HEAP | QKV__FLAG_BORROWED_GRAD | QKV__FLAG_SHARED_OUT;
    if (!x || !y || x == y || !(x->flags & QKV_FLAG_REQUIRES_GRAD) || x->grad || (x->flags & QKV_FLAG_HEAP) ||
        !y->grad || (y->flags & y_keeps) || qkv_numel(x) != qkv_numel(y) || qkv_numel(y->grad) != qkv_numel(y))
        return NULL;
    qkv_tensor *g = qkv__arena_alloc(&ctx->arena, sizeof *g);
    if (!g) return NULL;
    qkv__header(g, QKV_F32, x->ndim, x->shape);
    g->data = y->grad->data;
    x->grad = g;
    y->grad = NULL; /* spare_push then skips y: the buffer lives on as x's gradient */
    return g;
}

/* Before a pass: intermediate gradients from an earlier pass over the same tape are dropped (as PyTorch frees
 * them), so a second backward propagates only its own seed. Leaves keep accumulating; so do tensors marked
 * retain_grad, whose old gradient a second pass would count again: reset the context between passes instead. */
static void clear_intermediate_grads(qkv_ctx *ctx) {
    for (size_t k = 0; k < ctx->tape_len; k++) {
        qkv_tensor *t = ctx->tape[k]->out;
        if (t->grad && !(t->flags & (QKV_FLAG_RETAIN_GRAD | QKV_FLAG_HEAP))) {
            t->grad = NULL;
            t->flags &= ~(uint32_t)QKV__FLAG_BORROWED_GRAD;
        }
    }
}

/* After a node's backward its output's gradient is dead: every consumer of the output came later on the tape and
 * has already run. The buffer goes to the spare list (PyTorch frees it likewise), so a step's gradients take the
 * memory of a few layers' activations instead of all of them. Kept: leaves, retained tensors, borrowed gradients,
 * and outputs of several nodes (an earlier node still reads the gradient). */
static void spare_push(qkv_ctx *ctx, qkv_tensor *t) {
    if (!t->grad || (t->flags & (QKV_FLAG_RETAIN_GRAD | QKV_FLAG_HEAP | QKV__FLAG_BORROWED_GRAD |
                                 QKV__FLAG_SHARED_OUT)))
        return;
    if (ctx->n_spare == ctx->spare_cap) {
        size_t cap = ctx->spare_cap ? ctx->spare_cap * 2 : 64;
        spare_buf *s = realloc(ctx->spare, cap * sizeof *s);
        if (!s) return; /* the buffer just stays in use: correct, only less frugal */
        ctx->spare = s;
        ctx->spare_cap = cap;
    }
    ctx->spare[ctx->n_spare++] = (spare_buf){t->grad->data, grad_bytes(t)};
    t->grad = NULL;
}

/* A heap leaf and the tape index of its earliest consumer: once the reverse walk has passed that node, nothing adds
 * into the leaf's gradient any more. */
typedef struct {
    size_t k;
    qkv_tensor *leaf;
} leaf_use;

static int by_leaf_then_k(const void *a, const void *b) {
    const leaf_use *x = a, *y = b;
    if (x->leaf != y->leaf) return (uintptr_t)x->leaf < (uintptr_t)y->leaf ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

static int by_k_descending(const void *a, const void *b) {
    const leaf_use *x = a, *y = b;
    return (x->k < y->k) - (x->k > y->k);
}

/* The leaves the hook will be told about, latest-final first (NULL with *n 0 when none or out of memory: then every
 * leaf is reported at the end of the pass). */
static leaf_use *leaf_uses(qkv_ctx *ctx, size_t *n) {
    size_t total = 0;
    for (size_t k = 0; k < ctx->tape_len; k++) total += (size_t)ctx->tape[k]->n_in;
    *n = 0;
    leaf_use *u = total ? qkv__arena_alloc(&ctx->arena, total * sizeof *u) : NULL;
    if (!u) return NULL;
    for (size_t k = 0; k < ctx->tape_len; k++)
        for (int i = 0; i < ctx->tape[k]->n_in; i++) {
            qkv_tensor *t = ctx->tape[k]->in[i];
            if (t && !t->node && (t->flags & QKV_FLAG_HEAP) && (t->flags & QKV_FLAG_REQUIRES_GRAD))
                u[(*n)++] = (leaf_use){k, t};
        }
    qsort(u, *n, sizeof *u, by_leaf_then_k);
    size_t m = 0;
    for (size_t j = 0; j < *n; j++)
        if (!m || u[m - 1].leaf != u[j].leaf) u[m++] = u[j]; /* the smallest k of each leaf */
    qsort(u, m, sizeof *u, by_k_descending);
    *n = m;
    return u;
}

/* Runs the nodes of tape positions [first, tape_len) backwards. A node's backward may itself record and run a
 * segment past the end of the tape (qkv_backward_since) and rewind it, so the tape is read afresh each step. The
 * grad-ready hook hears of leaves in the whole pass (first 0) only: a segment's leaves are inputs of the node that
 * owns it, reported when the walk passes that node. */
static qkv_status run_backward_from(qkv_ctx *ctx, size_t first) {
    /* Nodes were appended in execution order, so reverse tape order is a topological order. Only nodes that
     * lead to the output and have a gradient run. */
    bool prev = qkv_ctx_set_grad(ctx, false);
    qkv_status st = QKV_OK;
    size_t n_uses = 0, next = 0;
    leaf_use *uses = ctx->ready && first == 0 ? leaf_uses(ctx, &n_uses) : NULL;
    for (size_t k = ctx->tape_len; k-- > first;) {
        qkv_node *n = ctx->tape[k];
        if (n->out->grad) {
            st = n->backward(ctx, n);
            if (st != QKV_OK) break;
            spare_push(ctx, n->out);
        }
        for (; next < n_uses && uses[next].k >= k; next++)
            if (uses[next].leaf->grad) ctx->ready(ctx->ready_user, uses[next].leaf);
    }
    qkv_ctx_set_grad(ctx, prev);
    return st;
}

static qkv_status run_backward(qkv_ctx *ctx, qkv_tensor *out) {
    (void)out;
    return run_backward_from(ctx, 0);
}

qkv_status qkv_backward(qkv_ctx *ctx, qkv_tensor *out) {
    if (!out) return qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_INVALID, "backward: no output");
    if (qkv_numel(out) != 1)
        return qkv_error_set(QKV_ERR_INVALID, "backward: output has %lld elements; pass a gradient with "
                                              "qkv_backward_with() for non-scalar outputs",
                             (long long)qkv_numel(out));
    clear_intermediate_grads(ctx);
    qkv_tensor *g = qkv_grad_for(ctx, out);
    if (!g) return qkv_error_set(QKV_ERR_INVALID, "backward: output does not require grad");
    qkv_f32(g)[0] += 1.0f;
    return run_backward(ctx, out);
}

qkv_status qkv_backward_with(qkv_ctx *ctx, qkv_tensor *out, const qkv_tensor *grad_out) {
    char a[96], b[96];
    if (!out) return qkv_error_set(QKV_ERR_INVALID, "backward: no output");
    if (!grad_out || grad_out->dtype != QKV_F32)
        return qkv_error_set(QKV_ERR_INVALID, "backward: the upstream gradient must be a float32 tensor");
    if (!qkv_same_shape(out, grad_out))
        return qkv_error_set(QKV_ERR_INVALID, "backward: gradient shape %s does not match output %s",
                             qkv_shape_str(grad_out, a, sizeof a), qkv_shape_str(out, b, sizeof b));
    if (!(out->flags & QKV_FLAG_REQUIRES_GRAD))
        return qkv_error_set(QKV_ERR_INVALID, "backward: output does not require grad");
    clear_intermediate_grads(ctx);
    if (!out->grad && !(out->flags & QKV_FLAG_HEAP) && qkv_is_contiguous(grad_out)) {
        /* Adopt the caller's gradient as out's: backward functions only read their output's gradient, so no copy
         * is needed (the header asks grad_out to outlive the backward pass). */
        out->grad = (qkv_tensor *)grad_out;
        out->flags |= QKV__FLAG_BORROWED_GRAD;
        return run_backward(ctx, out);
    }
    if (out->flags & QKV__FLAG_BORROWED_GRAD) { /* a second pass: never add into the caller's tensor */
        qkv_tensor *own = qkv_ctx_tensor(ctx, QKV_F32, out->ndim, out->shape);
        if (!own) return qkv_last_status();
        memcpy(own->data, out->grad->data, (size_t)qkv_numel(own) * sizeof(float));
        out->grad = own;
        out->flags &= ~(uint32_t)QKV__FLAG_BORROWED_GRAD;
    }
    bool fresh;
    qkv_tensor *g = qkv__grad_fresh(ctx, out, &fresh);
    if (!g) return qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_NOMEM, "backward: out of memory");
    if (fresh) memset(g->data, 0, (size_t)qkv_numel(g) * sizeof(float));
    qkv__strided_add(g->data, grad_out); /* g is contiguous in out's shape; grad_out may have any strides */
    return run_backward(ctx, out);
}

/* ---- sub-graphs ------------------------------------------------------------------------------------------------ */

qkv_ctx_mark qkv_ctx_mark_now(qkv_ctx *ctx) {
    /* The free gradient buffers are copied (into arena memory from before the mark): a segment takes some and
     * returns its own, all of which the rewind must undo. */
    spare_buf *copy = ctx->n_spare ? qkv__arena_alloc(&ctx->arena, sizeof *copy * ctx->n_spare) : NULL;
    if (copy) memcpy(copy, ctx->spare, sizeof *copy * ctx->n_spare);
    qkv_arena_mark am = qkv__arena_mark(&ctx->arena);
    return (qkv_ctx_mark){.tape_len = ctx->tape_len, .arena_used = am.used, .arena_in_use = am.in_use,
                          .n_spare = copy ? ctx->n_spare : 0, .arena_chunk = am.cur, .spare = copy};
}

void qkv_ctx_rewind(qkv_ctx *ctx, const qkv_ctx_mark *m) {
    if (m->tape_len < ctx->tape_len) ctx->tape_len = m->tape_len;
    /* n_spare at the mark fits the array: it held that many then and never shrinks its capacity. */
    if (m->n_spare) memcpy(ctx->spare, m->spare, sizeof(spare_buf) * m->n_spare);
    ctx->n_spare = m->n_spare;
    qkv_arena_mark am = {m->arena_chunk, m->arena_used, m->arena_in_use};
    qkv__arena_rewind(&ctx->arena, &am);
}

qkv_status qkv_backward_since(qkv_ctx *ctx, const qkv_ctx_mark *m, qkv_tensor *out, const qkv_tensor *grad_out) {
    char a[96], b[96];
    if (!out) return qkv_last_status() ? qkv_last_status() : qkv_error_set(QKV_ERR_INVALID, "backward: no output");
    if (!grad_out || grad_out->dtype != QKV_F32 || !qkv_same_shape(out, grad_out))
        return qkv_error_set(QKV_ERR_INVALID, "backward_since: gradient %s does not match output %s",
                             grad_out ? qkv_shape_str(grad_out, a, sizeof a) : "(none)",
                             qkv_shape_str(out, b, sizeof b));
    bool in_segment = false;
    for (size_t k = m->tape_len; k < ctx->tape_len && !in_segment; k++) in_segment = ctx->tape[k] == out->node;
    if (!in_segment)
        return qkv_error_set(QKV_ERR_INVALID, "backward_since: the output was not produced after the mark");
    if (out->grad) return qkv_error_set(QKV_ERR_INVALID, "backward_since: the output already has a gradient");
    if (qkv_is_contiguous(grad_out)) {
        out->grad = (qkv_tensor *)grad_out;
        out->flags |= QKV__FLAG_BORROWED_GRAD;
    } else {
        bool fresh;
        qkv_tensor *g = qkv__grad_fresh(ctx, out, &fresh);
        if (!g) return qkv_last_status();
        if (fresh) memset(g->data, 0, (size_t)qkv_numel(g) * sizeof(float));
        qkv__strided_add(g->data, grad_out);
    }
    return run_backward_from(ctx, m->tape_len);
}

/* Token embeddings (learned or pretrained, padding index), positional encodings (sinusoidal buffer or learned
 * table) and Trax's ShiftRight. */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "nn/nn_internal.h"
#include "qkv/init.h"
#include "qkv/nn_layers.h"
#include "qkv/ops.h"

/* ---- Embedding --------------------------------------------------------------------------------------------- */

static qkv_status resolve_padding(const char *prefix, int64_t num, int64_t padding_idx, int64_t *out) {
    if (padding_idx == QKV_NN_NO_PADDING) {
        *out = -1;
        return QKV_OK;
    }
    if (padding_idx < -num || padding_idx >= num)
        return qkv_error_set(QKV_ERR_INVALID, "embedding '%s': padding_idx %lld outside [-%lld, %lld)",
                             prefix ? prefix : "", (long long)padding_idx, (long long)num, (long long)num);
    *out = padding_idx < 0 ? padding_idx + num : padding_idx;
    return QKV_OK;
}

qkv_status qkv_nn_embedding_init(qkv_nn_embedding *e, qkv_params *params, const char *prefix, int64_t num,
                                 int64_t dim, int64_t padding_idx, bool scale_sqrt_dim, qkv_rng *rng) {
    if (!e || !params || !rng) return qkv_error_set(QKV_ERR_INVALID, "embedding init: layer, params or rng is NULL");
    memset(e, 0, sizeof *e);
    if (num < 1 || dim < 1)
        return qkv_error_set(QKV_ERR_INVALID, "embedding '%s': num_embeddings (%lld) and dim (%lld) must be >= 1",
                             prefix ? prefix : "", (long long)num, (long long)dim);
    int64_t pad = -1;
    qkv_status st = resolve_padding(prefix, num, padding_idx, &pad);
    if (st) return st;
    qkv_tensor *w = qkv_params_add(params, prefix, "weight", QKV_DIMS(num, dim));
    if (!w) return qkv_last_status();
    if ((st = qkv_init_normal(w, 0.0f, 1.0f, rng))) return st;
    if (pad >= 0) memset(qkv_f32(w) + pad * dim, 0, sizeof(float) * (size_t)dim);
    *e = (qkv_nn_embedding){.num_embeddings = num, .embedding_dim = dim, .padding_idx = pad,
                            .scale = scale_sqrt_dim ? sqrtf((float)dim) : 1.0f, .weight = w};
    return QKV_OK;
}

qkv_status qkv_nn_embedding_init_from(qkv_nn_embedding *e, qkv_params *params, const char *prefix,
                                      const qkv_tensor *matrix, bool frozen, int64_t padding_idx,
                                      bool scale_sqrt_dim) {
    if (!e || !params || !matrix)
        return qkv_error_set(QKV_ERR_INVALID, "embedding init_from: layer, params or matrix is NULL");
    memset(e, 0, sizeof *e);
    if (matrix->dtype != QKV_F32 || matrix->ndim != 2 || matrix->shape[0] < 1 || matrix->shape[1] < 1) {
        char s[96];
        return qkv_error_set(QKV_ERR_INVALID, "embedding '%s': pretrained matrix must be float32 [num, dim], got %s",
                             prefix ? prefix : "", qkv_shape_str(matrix, s, sizeof s));
    }
    int64_t num = matrix->shape[0], dim = matrix->shape[1], pad = -1;
    qkv_status st = resolve_padding(prefix, num, padding_idx, &pad);
    if (st) return st;
    qkv_tensor *w = qkv_params_add(params, prefix, "weight", QKV_DIMS(num, dim));
    if (!w) return qkv_last_status();
    if ((st = qkv_tensor_copy(w, matrix))) return st;
    if (frozen) qkv_tensor_set_requires_grad(w, false);
    *e = (qkv_nn_embedding){.num_embeddings = num, .embedding_dim = dim, .padding_idx = pad,
                            .scale = scale_sqrt_dim ? sqrtf((float)dim) : 1.0f, .weight = w};
    return QKV_OK;
}

/* The padding row must receive no gradient: outputs at padding ids are replaced by a detached copy of that row
 * (same values), so the embedding's scatter-add gets zeros there. Only needed when a gradient is recorded. */
static qkv_tensor *detach_padding(qkv_ctx *ctx, const qkv_nn_embedding *e, qkv_tensor *ids, qkv_tensor *out) {
    qkv_tensor *w = e->weight;
    if (!qkv_needs_grad(ctx, 1, &w)) return out;
    int64_t shape[QKV_MAX_DIMS], hits = 0;
    memcpy(shape, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    shape[ids->ndim] = 1;
    qkv_tensor *mask = qkv_ctx_tensor(ctx, QKV_I32, ids->ndim + 1, shape);
    qkv_tensor *row = qkv_ctx_tensor(ctx, QKV_F32, QKV_DIMS(e->embedding_dim));
    if (!mask || !row) return NULL;
    int32_t *m = qkv_i32(mask);
    int64_t i = 0;
    QKV_FOR_EACH_OFFSET(ids, off, {
        m[i] = qkv_i32(ids)[off] == e->padding_idx;
        hits += m[i++];
    });
    if (!hits) return out;
    memcpy(qkv_f32(row), qkv_f32(w) + e->padding_idx * e->embedding_dim, sizeof(float) * (size_t)e->embedding_dim);
    return qkv_where(ctx, mask, row, out);
}

qkv_tensor *qkv_nn_embedding_forward(qkv_ctx *ctx, const qkv_nn_embedding *e, qkv_tensor *ids) {
    if (!ids) return NULL;
    if (!e || !e->weight) {
        qkv_error_set(QKV_ERR_INVALID, "embedding forward: layer is not initialised");
        return NULL;
    }
    qkv_tensor *out = qkv_embedding(ctx, e->weight, ids);
    if (out && e->padding_idx >= 0) out = detach_padding(ctx, e, ids, out);
    if (out && e->scale != 1.0f) out = qkv_scale(ctx, out, e->scale);
    return out;
}

/* ---- Positional encodings ---------------------------------------------------------------------------------- */

/* The PyTorch tutorial's table, in float32 as torch computes it: div_i = exp(2i * -ln(10000) / dim),
 * pe[t, 2i] = sin(t * div_i), pe[t, 2i + 1] = cos(t * div_i). */
static void fill_sinusoidal(qkv_tensor *pe) {
    int64_t L = pe->shape[0], D = pe->shape[1];
    float *p = qkv_f32(pe);
    float k = (float)(-log(10000.0) / (double)D);
    for (int64_t i = 0; 2 * i < D; i++) {
        float div = expf((float)(2 * i) * k);
        for (int64_t t = 0; t < L; t++) {
            float a = (float)t * div;
            p[t * D + 2 * i] = sinf(a);
            if (2 * i + 1 < D) p[t * D + 2 * i + 1] = cosf(a);
        }
    }
}

qkv_status qkv_nn_posenc_init(qkv_nn_posenc *pe, qkv_params *params, const char *prefix, qkv_posenc_kind kind,
                              int64_t max_len, int64_t dim, float dropout, float init_std, qkv_rng *rng) {
    if (!pe || !params) return qkv_error_set(QKV_ERR_INVALID, "positional encoding init: layer or params is NULL");
    memset(pe, 0, sizeof *pe);
    if (max_len < 1 || dim < 1)
        return qkv_error_set(QKV_ERR_INVALID, "positional encoding '%s': max_len (%lld) and dim (%lld) must be >= 1",
                             prefix ? prefix : "", (long long)max_len, (long long)dim);
    if (!(dropout >= 0.0f && dropout < 1.0f))
        return qkv_error_set(QKV_ERR_INVALID, "positional encoding '%s': dropout %g outside [0, 1)",
                             prefix ? prefix : "", (double)dropout);
    qkv_tensor *table;
    if (kind == QKV_POSENC_SINUSOIDAL) {
        if (!(table = qkv_params_add_buffer(params, prefix, "pe", QKV_DIMS(max_len, dim)))) return qkv_last_status();
        fill_sinusoidal(table);
    } else if (kind == QKV_POSENC_LEARNED) {
        if (!rng) return qkv_error_set(QKV_ERR_INVALID, "positional encoding '%s': rng is NULL", prefix ? prefix : "");
        if (!(table = qkv_params_add(params, prefix, "weight", QKV_DIMS(max_len, dim)))) return qkv_last_status();
        qkv_status st = qkv_init_normal(table, 0.0f, init_std > 0.0f ? init_std : 1.0f, rng);
        if (st) return st;
    } else {
        return qkv_error_set(QKV_ERR_INVALID, "positional encoding '%s': unknown kind %d", prefix ? prefix : "",
                             (int)kind);
    }
    *pe = (qkv_nn_posenc){.kind = kind, .max_len = max_len, .dim = dim, .dropout = dropout, .table = table};
    return QKV_OK;
}

qkv_tensor *qkv_nn_posenc_forward(qkv_ctx *ctx, const qkv_nn_posenc *pe, qkv_tensor *x, int64_t offset) {
    if (!x) return NULL;
    if (!pe || !pe->table) {
        qkv_error_set(QKV_ERR_INVALID, "positional encoding forward: layer is not initialised");
        return NULL;
    }
    char s[96];
    if (x->ndim != 3 || x->shape[2] != pe->dim) {
        qkv_error_set(QKV_ERR_INVALID, "positional encoding '%s': input %s must be [B, T, %lld]", pe->table->name,
                      qkv_shape_str(x, s, sizeof s), (long long)pe->dim);
        return NULL;
    }
    int64_t T = x->shape[1];
    if (offset < 0 || offset + T > pe->max_len) {
        qkv_error_set(QKV_ERR_RANGE, "positional encoding '%s': positions [%lld, %lld) exceed max_len %lld",
                      pe->table->name, (long long)offset, (long long)(offset + T), (long long)pe->max_len);
        return NULL;
    }
    qkv_tensor *y = qkv_add(ctx, x, qkv_slice(ctx, pe->table, 0, offset, offset + T, 1));
    return pe->dropout > 0.0f ? qkv_dropout(ctx, y, pe->dropout) : y;
}

/* ---- ShiftRight -------------------------------------------------------------------------------------------- */

static qkv_tensor *shift_right_ids(qkv_ctx *ctx, qkv_tensor *x, int32_t pad) {
    qkv_tensor *out = qkv_ctx_tensor(ctx, QKV_I32, x->ndim, x->shape);
    if (!out) return NULL;
    int64_t T = x->shape[1], inner = qkv_numel(x) / (x->shape[0] * (T ? T : 1));
    int32_t *o = qkv_i32(out);
    int64_t i = 0;
    /* Row-major walk of x: element (b, t, r) moves to (b, t + 1, r); the last step falls off. */
    QKV_FOR_EACH_OFFSET(x, off, {
        int64_t t = (i / inner) % T;
        if (t + 1 < T) o[i + inner] = qkv_i32(x)[off];
        if (t == 0) o[i] = pad;
        i++;
    });
    return out;
}

qkv_tensor *qkv_nn_shift_right(qkv_ctx *ctx, qkv_tensor *x, float pad) {
    if (!x) return NULL;
    if (x->ndim < 2) {
        char s[96];
        qkv_error_set(QKV_ERR_INVALID, "shift_right: input %s must be [B, T, ...]", qkv_shape_str(x, s, sizeof s));
        return NULL;
    }
    int64_t T = x->shape[1];
    if (T == 0 || qkv_numel(x) == 0) return x;
    if (x->dtype == QKV_I32) return shift_right_ids(ctx, x, (int32_t)pad);
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[1] = 1;
    qkv_tensor *first = qkv_ctx_tensor(ctx, QKV_F32, x->ndim, shape);
    if (!first) return NULL;
    qkv_tensor_fill(first, pad);
    if (T == 1) return first;
    qkv_tensor *parts[2] = {first, qkv_slice(ctx, x, 1, 0, T - 1, 1)};
    if (!parts[1]) return NULL;
    return qkv_concat(ctx, 2, parts, 1);
}

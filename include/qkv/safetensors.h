/* safetensors files: the checkpoint format of Hugging Face and of qkv.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON header {name: {dtype, shape, data_offsets},
 * "__metadata__": {string: string}}, then the raw little-endian data. Reading maps the file and validates the
 * whole header against the file size before any data is touched (offsets in range and non-overlapping,
 * dtype x shape = byte length, no absurd sizes); every error names the file and the tensor. F32, F16, BF16, I32
 * and I64 are read (converted to float32 / int32). Writing is atomic: a temporary file beside the target is
 * written, fsync'ed and renamed over it, so a crash mid-write leaves the previous file intact.
 */
#ifndef QKV_SAFETENSORS_H
#define QKV_SAFETENSORS_H

#include <stdint.h>

#include "qkv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_st_file qkv_st_file;

/* Open and validate; NULL with an error naming the file and the problem. Free with qkv_st_close(). */
qkv_st_file *qkv_st_open(const char *path);
void qkv_st_close(qkv_st_file *f);
const char *qkv_st_path(const qkv_st_file *f);

/* Tensors in header order. */
int qkv_st_count(const qkv_st_file *f);
const char *qkv_st_name(const qkv_st_file *f, int i);
/* -1 if absent (no error set). */
int qkv_st_find(const qkv_st_file *f, const char *name);
/* dtype as in the file ("F32", "BF16", ...), and its shape; ndim <= QKV_MAX_DIMS. */
qkv_status qkv_st_info(const qkv_st_file *f, const char *name, const char **dtype, int *ndim, int64_t *shape);
/* A value of "__metadata__", or NULL if absent. Owned by f. */
const char *qkv_st_metadata(const qkv_st_file *f, const char *key);
int qkv_st_metadata_count(const qkv_st_file *f);
const char *qkv_st_metadata_key(const qkv_st_file *f, int i);

/* A new heap tensor (float32 for float dtypes, int32 for integer dtypes; I64 values must fit in int32).
 * Caller frees with qkv_tensor_free(). */
qkv_tensor *qkv_st_read(const qkv_st_file *f, const char *name);
/* Into an existing tensor of exactly the stored shape (any dtype conversion as above); dst may be a strided view.
 * On error dst is left unchanged. */
qkv_status qkv_st_read_into(const qkv_st_file *f, const char *name, qkv_tensor *dst);

typedef struct qkv_st_writer qkv_st_writer;
qkv_st_writer *qkv_st_writer_new(void);
void qkv_st_writer_free(qkv_st_writer *w);
/* Adds a tensor by reference: it must stay alive and unchanged until save. Names must be unique. */
qkv_status qkv_st_writer_add(qkv_st_writer *w, const char *name, const qkv_tensor *t);
/* Copies key and value (valid UTF-8); a key given twice keeps the later value. */
qkv_status qkv_st_writer_meta(qkv_st_writer *w, const char *key, const char *value);
/* Atomic write (temp file "<path>.tmp.<pid>", fsync, rename, fsync of the directory). Tensors are written as
 * F32 / I32 in row-major order whatever their strides; the header is padded with spaces to a multiple of 8. On
 * failure the temp file is removed and any existing file at path is untouched. The writer can be saved again. */
qkv_status qkv_st_writer_save(qkv_st_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#endif

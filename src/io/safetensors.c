/* safetensors reading (mmap + full header validation) and atomic writing. See include/qkv/safetensors.h.
 *
 * Reading never trusts the file: the header is parsed and every entry checked against the mapped size before a
 * single data byte is looked at, so a corrupted or hostile file produces an error, never a wild read. */
#include "qkv/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"

/* The format is little-endian; the loads below copy bytes as they are. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "qkv's safetensors code assumes a little-endian host"
#endif

/* Same limit as the reference implementation: a larger header is a corrupted length, not a model. */
#define ST_MAX_HEADER ((uint64_t)100000000)
/* JSON numbers are doubles; past 2^53 an integer is no longer exact, so no valid offset or dim lies beyond it. */
#define ST_MAX_JSON_INT ((uint64_t)1 << 53)

/* ---- dtypes ------------------------------------------------------------------------------------------------ */

typedef enum { ST_FLOAT, ST_INT, ST_OTHER } st_class;

typedef struct st_dtype {
    const char *name;
    uint64_t size;   /* bytes per element */
    st_class cls;    /* what it converts to, ST_OTHER when qkv cannot read it */
} st_dtype;

/* Every dtype the format defines gets a size, so a file holding (say) an F64 tensor still validates and opens;
 * only reading that one tensor fails. */
static const st_dtype st_dtypes[] = {
    {"F32", 4, ST_FLOAT},     {"F16", 2, ST_FLOAT},     {"BF16", 2, ST_FLOAT}, {"I32", 4, ST_INT},
    {"I64", 8, ST_INT},       {"F64", 8, ST_OTHER},     {"I8", 1, ST_OTHER},   {"I16", 2, ST_OTHER},
    {"U8", 1, ST_OTHER},      {"U16", 2, ST_OTHER},     {"U32", 4, ST_OTHER},  {"U64", 8, ST_OTHER},
    {"BOOL", 1, ST_OTHER},    {"F8_E4M3", 1, ST_OTHER}, {"F8_E5M2", 1, ST_OTHER},
};

static const st_dtype *st_dtype_find(const char *name) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, name) == 0) return &st_dtypes[i];
    return NULL;
}

/* ---- conversions --------------------------------------------------------------------------------------------- */

static float bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE half -> single, exactly (every half is representable as a float). */
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (mant << 13)); /* inf, nan (payload kept) */
    if (exp == 0) {
        if (mant == 0) return bits_to_f32(sign); /* signed zero */
        /* Subnormal half: mant * 2^-24. Normalise so the leading 1 moves to bit 10, lowering the exponent. */
        int e = -1;
        do {
            mant <<= 1;
            e++;
        } while (!(mant & 0x400u));
        return bits_to_f32(sign | (uint32_t)(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13);
    }
    return bits_to_f32(sign | (exp + 127 - 15) << 23 | mant << 13);
}

/* bfloat16 is the top half of a float32. */
static float bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

/* Strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += len;
    }
    return true;
}

/* ---- the open file ----------------------------------------------------------------------------------------- */

typedef struct st_entry {
    char *name;
    const st_dtype *dtype;
    int ndim;
    int64_t shape[QKV_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end; /* byte range within the data section */
} st_entry;

/* A name and the index of what it names, for sorting (duplicates, lookups) without touching the header order. */
typedef struct st_name_ix {
    const char *name;
    int index;
} st_name_ix;

struct qkv_st_file {
    char *path;
    void *map;
    size_t map_size;
    const unsigned char *data; /* start of the data section */
    uint64_t data_size;
    int n;
    st_entry *entries;    /* header order */
    st_name_ix *by_name;  /* sorted by name */
    int n_meta;
    char **meta_keys, **meta_values; /* header order */
};

static int name_ix_cmp(const void *a, const void *b) {
    return strcmp(((const st_name_ix *)a)->name, ((const st_name_ix *)b)->name);
}

/* "path: tensor 'name': <message>" (or "path: <message>" without a tensor). Returns status. */
static qkv_status st_fail(qkv_status status, const char *path, const char *tensor, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static qkv_status st_fail(qkv_status status, const char *path, const char *tensor, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (tensor) return qkv_error_set(status, "%s: tensor '%s': %s", path, tensor, msg);
    return qkv_error_set(status, "%s: %s", path, msg);
}

/* "[4, 6]" for a shape not (yet) in a tensor. */
static const char *dims_str(int ndim, const int64_t *shape, char *buf, size_t size) {
    qkv_tensor t;
    t.ndim = ndim;
    for (int d = 0; d < ndim; d++) t.shape[d] = shape[d];
    return qkv_shape_str(&t, buf, size);
}

/* A JSON number that must be a non-negative integer <= max. 0 ok, 1 not an integer, 2 negative, 3 too large. */
static int json_uint(const cJSON *j, uint64_t max, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return 1;
    double d = j->valuedouble;
    if (d < 0) return 2;
    if (d > (double)max) return 3;
    if (d != (double)(uint64_t)d) return 1;
    *out = (uint64_t)d;
    return 0;
}

/* Validates one tensor entry {dtype, shape, data_offsets} into e. */
static qkv_status parse_entry(qkv_st_file *f, const cJSON *j, st_entry *e) {
    const char *path = f->path, *name = e->name;
    if (!cJSON_IsObject(j)) return st_fail(QKV_ERR_FORMAT, path, name, "entry is not a JSON object");
    const cJSON *jdtype = NULL, *jshape = NULL, *joffsets = NULL;
    for (const cJSON *c = j->child; c; c = c->next) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0          ? &jdtype
                             : strcmp(c->string, "shape") == 0        ? &jshape
                             : strcmp(c->string, "data_offsets") == 0 ? &joffsets
                                                                      : NULL;
        if (!slot) continue; /* unknown fields are tolerated, as by the reference reader */
        if (*slot) return st_fail(QKV_ERR_FORMAT, path, name, "field \"%s\" appears twice", c->string);
        *slot = c;
    }
    if (!jdtype) return st_fail(QKV_ERR_FORMAT, path, name, "missing \"dtype\"");
    if (!jshape) return st_fail(QKV_ERR_FORMAT, path, name, "missing \"shape\"");
    if (!joffsets) return st_fail(QKV_ERR_FORMAT, path, name, "missing \"data_offsets\"");

    if (!cJSON_IsString(jdtype)) return st_fail(QKV_ERR_FORMAT, path, name, "\"dtype\" is not a string");
    e->dtype = st_dtype_find(jdtype->valuestring);
    if (!e->dtype)
        return st_fail(QKV_ERR_UNSUPPORTED, path, name, "unknown dtype \"%.32s\" (known: F32, F16, BF16, I32, I64, "
                       "F64, I8, I16, U8, U16, U32, U64, BOOL, F8_E4M3, F8_E5M2)", jdtype->valuestring);

    if (!cJSON_IsArray(jshape)) return st_fail(QKV_ERR_FORMAT, path, name, "\"shape\" is not an array");
    int rank = cJSON_GetArraySize(jshape);
    if (rank > QKV_MAX_DIMS)
        return st_fail(QKV_ERR_UNSUPPORTED, path, name, "rank %d exceeds the maximum of %d", rank, QKV_MAX_DIMS);
    e->ndim = 0;
    for (const cJSON *c = jshape->child; c; c = c->next) {
        uint64_t v = 0;
        int r = json_uint(c, (uint64_t)QKV_MAX_NUMEL, &v);
        if (r == 2) return st_fail(QKV_ERR_FORMAT, path, name, "negative dimension %g in shape", c->valuedouble);
        if (r == 1) return st_fail(QKV_ERR_FORMAT, path, name, "shape holds something other than an integer");
        if (r == 3) return st_fail(QKV_ERR_RANGE, path, name, "dimension %g exceeds 2^40", c->valuedouble);
        e->shape[e->ndim++] = (int64_t)v;
    }
    /* A zero anywhere makes the product legitimately 0, however large the other dims. */
    e->numel = 1;
    for (int d = 0; d < e->ndim; d++) {
        if (e->shape[d] == 0) {
            e->numel = 0;
            break;
        }
        if (e->numel > QKV_MAX_NUMEL / e->shape[d]) {
            char s[160];
            return st_fail(QKV_ERR_RANGE, path, name, "shape %s has more than 2^40 elements",
                           dims_str(e->ndim, e->shape, s, sizeof s));
        }
        e->numel *= e->shape[d];
    }

    if (!cJSON_IsArray(joffsets) || cJSON_GetArraySize(joffsets) != 2)
        return st_fail(QKV_ERR_FORMAT, path, name, "\"data_offsets\" is not an array [begin, end]");
    int rb = json_uint(joffsets->child, ST_MAX_JSON_INT, &e->begin);
    int re = json_uint(joffsets->child->next, ST_MAX_JSON_INT, &e->end);
    if (rb || re)
        return st_fail(QKV_ERR_FORMAT, path, name, "data_offsets must be two non-negative integers below 2^53");
    if (e->begin > e->end)
        return st_fail(QKV_ERR_FORMAT, path, name, "data_offsets [%llu, %llu] end before they begin",
                       (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > f->data_size)
        return st_fail(QKV_ERR_FORMAT, path, name,
                       "data_offsets [%llu, %llu] run past the data section of %llu bytes (file truncated?)",
                       (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)f->data_size);
    uint64_t need = (uint64_t)e->numel * e->dtype->size;
    if (e->end - e->begin != need) {
        char s[160];
        return st_fail(QKV_ERR_FORMAT, path, name, "data_offsets [%llu, %llu] hold %llu bytes but %s %s needs %llu",
                       (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)(e->end - e->begin), e->dtype->name,
                       dims_str(e->ndim, e->shape, s, sizeof s), (unsigned long long)need);
    }
    return QKV_OK;
}

static qkv_status parse_metadata(qkv_st_file *f, const cJSON *j) {
    if (!cJSON_IsObject(j)) return st_fail(QKV_ERR_FORMAT, f->path, NULL, "\"__metadata__\" is not an object");
    int n = cJSON_GetArraySize(j);
    f->meta_keys = calloc((size_t)n + 1, sizeof(char *));
    f->meta_values = calloc((size_t)n + 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_values) return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", f->path);
    for (const cJSON *c = j->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return st_fail(QKV_ERR_FORMAT, f->path, NULL, "\"__metadata__\" value of '%.200s' is not a string",
                           c->string);
        int i = f->n_meta;
        f->meta_keys[i] = strdup(c->string);
        f->meta_values[i] = strdup(c->valuestring);
        if (!f->meta_keys[i] || !f->meta_values[i]) {
            free(f->meta_keys[i]);
            free(f->meta_values[i]);
            return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", f->path);
        }
        f->n_meta++;
    }
    st_name_ix *ix = malloc(((size_t)f->n_meta + 1) * sizeof *ix);
    if (!ix) return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", f->path);
    for (int i = 0; i < f->n_meta; i++) ix[i] = (st_name_ix){f->meta_keys[i], i};
    qsort(ix, (size_t)f->n_meta, sizeof *ix, name_ix_cmp);
    for (int i = 1; i < f->n_meta; i++) {
        if (strcmp(ix[i - 1].name, ix[i].name) == 0) {
            qkv_status s =
                st_fail(QKV_ERR_FORMAT, f->path, NULL, "duplicate \"__metadata__\" key '%.200s'", ix[i].name);
            free(ix);
            return s;
        }
    }
    free(ix);
    return QKV_OK;
}

typedef struct st_range {
    uint64_t begin, end;
    int index;
} st_range;

static int range_cmp(const void *a, const void *b) {
    const st_range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Tensors must not share bytes: sort by start and compare with the furthest end seen so far. */
static qkv_status check_overlaps(qkv_st_file *f) {
    st_range *r = malloc(((size_t)f->n + 1) * sizeof *r);
    if (!r) return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", f->path);
    for (int i = 0; i < f->n; i++) r[i] = (st_range){f->entries[i].begin, f->entries[i].end, i};
    qsort(r, (size_t)f->n, sizeof *r, range_cmp);
    qkv_status s = QKV_OK;
    int last = -1; /* the non-empty range reaching furthest so far */
    for (int i = 0; i < f->n && s == QKV_OK; i++) {
        if (r[i].begin == r[i].end) continue; /* empty tensors occupy no bytes */
        if (last >= 0 && r[i].begin < r[last].end) {
            const st_entry *a = &f->entries[r[last].index], *b = &f->entries[r[i].index];
            s = st_fail(QKV_ERR_FORMAT, f->path, b->name, "data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]",
                        (unsigned long long)b->begin, (unsigned long long)b->end, a->name,
                        (unsigned long long)a->begin, (unsigned long long)a->end);
        }
        if (last < 0 || r[i].end > r[last].end) last = i;
    }
    free(r);
    return s;
}

static qkv_status parse_header(qkv_st_file *f, const char *text, size_t len) {
    if (memchr(text, 0, len)) return st_fail(QKV_ERR_FORMAT, f->path, NULL, "header contains a NUL byte");
    if (!utf8_valid((const unsigned char *)text, len))
        return st_fail(QKV_ERR_FORMAT, f->path, NULL, "header is not valid UTF-8");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        return st_fail(QKV_ERR_FORMAT, f->path, NULL, "header is not valid JSON (error near byte %zu of %zu)", at,
                       len);
    }
    qkv_status s = QKV_OK;
    for (const char *p = end; p < text + len; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            s = st_fail(QKV_ERR_FORMAT, f->path, NULL, "header has trailing bytes after the JSON value (byte %zu)",
                        (size_t)(p - text));
            break;
        }
    }
    if (s == QKV_OK && !cJSON_IsObject(root))
        s = st_fail(QKV_ERR_FORMAT, f->path, NULL, "header is JSON but not an object");

    int total = s == QKV_OK ? cJSON_GetArraySize(root) : 0;
    if (s == QKV_OK) {
        f->entries = calloc((size_t)total + 1, sizeof *f->entries);
        f->by_name = calloc((size_t)total + 1, sizeof *f->by_name);
        if (!f->entries || !f->by_name) s = qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", f->path);
    }
    bool seen_meta = false;
    for (const cJSON *c = s == QKV_OK ? root->child : NULL; c && s == QKV_OK; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0) {
            if (seen_meta) s = st_fail(QKV_ERR_FORMAT, f->path, NULL, "\"__metadata__\" appears twice");
            else s = parse_metadata(f, c);
            seen_meta = true;
            continue;
        }
        st_entry *e = &f->entries[f->n];
        e->name = strdup(c->string);
        if (!e->name) {
            s = qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", f->path);
            break;
        }
        f->n++;
        s = parse_entry(f, c, e);
    }
    cJSON_Delete(root);
    if (s != QKV_OK) return s;

    for (int i = 0; i < f->n; i++) f->by_name[i] = (st_name_ix){f->entries[i].name, i};
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, name_ix_cmp);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->by_name[i - 1].name, f->by_name[i].name) == 0)
            return st_fail(QKV_ERR_FORMAT, f->path, f->by_name[i].name, "duplicate tensor name");
    return check_overlaps(f);
}

qkv_st_file *qkv_st_open(const char *path) {
    if (!path) {
        qkv_error_set(QKV_ERR_INVALID, "safetensors open: path is NULL");
        return NULL;
    }
    qkv_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    qkv_status s = QKV_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        s = st_fail(QKV_ERR_IO, path, NULL, "cannot open: %s", strerror(errno));
    } else if (fstat(fd, &st) != 0) {
        s = st_fail(QKV_ERR_IO, path, NULL, "cannot stat: %s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        s = st_fail(QKV_ERR_IO, path, NULL, "not a regular file");
    } else if ((uint64_t)st.st_size < 8) {
        s = st_fail(QKV_ERR_FORMAT, path, NULL, "file of %lld bytes is too short for a safetensors header",
                    (long long)st.st_size);
    } else {
        f->map_size = (size_t)st.st_size;
        f->map = mmap(NULL, f->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            s = st_fail(QKV_ERR_IO, path, NULL, "cannot map %zu bytes: %s", f->map_size, strerror(errno));
        }
    }
    if (fd >= 0) close(fd); /* the mapping keeps the file alive */

    if (s == QKV_OK) {
        const unsigned char *b = f->map;
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
        uint64_t avail = (uint64_t)f->map_size - 8;
        if (n > ST_MAX_HEADER)
            s = st_fail(QKV_ERR_RANGE, path, NULL, "header length %llu is absurd (limit %llu bytes)",
                        (unsigned long long)n, (unsigned long long)ST_MAX_HEADER);
        else if (n > avail)
            s = st_fail(QKV_ERR_FORMAT, path, NULL, "header length %llu runs past the end of the %zu-byte file",
                        (unsigned long long)n, f->map_size);
        else if (n == 0)
            s = st_fail(QKV_ERR_FORMAT, path, NULL, "header length is 0 (no JSON header)");
        if (s == QKV_OK) {
            f->data = b + 8 + n;
            f->data_size = avail - n;
            s = parse_header(f, (const char *)b + 8, (size_t)n);
        }
    }
    if (s != QKV_OK) {
        qkv_st_close(f);
        return NULL;
    }
    return f;
}

void qkv_st_close(qkv_st_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->map_size);
    for (int i = 0; i < f->n; i++) free(f->entries[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->entries);
    free(f->by_name);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->path);
    free(f);
}

/* ---- queries ------------------------------------------------------------------------------------------------ */

const char *qkv_st_path(const qkv_st_file *f) { return f ? f->path : ""; }
int qkv_st_count(const qkv_st_file *f) { return f ? f->n : 0; }

const char *qkv_st_name(const qkv_st_file *f, int i) {
    return f && i >= 0 && i < f->n ? f->entries[i].name : NULL;
}

int qkv_st_find(const qkv_st_file *f, const char *name) {
    if (!f || !name) return -1;
    st_name_ix key = {name, -1};
    const st_name_ix *hit = bsearch(&key, f->by_name, (size_t)f->n, sizeof key, name_ix_cmp);
    return hit ? hit->index : -1;
}

static const st_entry *lookup(const qkv_st_file *f, const char *name) {
    if (!f || !name) {
        qkv_error_set(QKV_ERR_INVALID, "safetensors: NULL file or tensor name");
        return NULL;
    }
    int i = qkv_st_find(f, name);
    if (i < 0) {
        st_fail(QKV_ERR_INVALID, f->path, name, "no such tensor in the file");
        return NULL;
    }
    return &f->entries[i];
}

qkv_status qkv_st_info(const qkv_st_file *f, const char *name, const char **dtype, int *ndim, int64_t *shape) {
    const st_entry *e = lookup(f, name);
    if (!e) return qkv_last_status();
    if (dtype) *dtype = e->dtype->name;
    if (ndim) *ndim = e->ndim;
    if (shape)
        for (int d = 0; d < e->ndim; d++) shape[d] = e->shape[d];
    return QKV_OK;
}

const char *qkv_st_metadata(const qkv_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

int qkv_st_metadata_count(const qkv_st_file *f) { return f ? f->n_meta : 0; }

const char *qkv_st_metadata_key(const qkv_st_file *f, int i) {
    return f && i >= 0 && i < f->n_meta ? f->meta_keys[i] : NULL;
}

/* ---- reading data ---------------------------------------------------------------------------------------- */

/* Converts entry e into `out` (numel contiguous float32 or int32). Nothing is written on error. */
static qkv_status convert(const qkv_st_file *f, const st_entry *e, void *out) {
    const unsigned char *src = f->data + e->begin;
    int64_t n = e->numel;
    const char *dt = e->dtype->name;
    if (strcmp(dt, "F32") == 0 || strcmp(dt, "I32") == 0) {
        if (n) memcpy(out, src, (size_t)n * 4);
    } else if (strcmp(dt, "F16") == 0 || strcmp(dt, "BF16") == 0) {
        bool half = dt[0] == 'F';
        float *o = out;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            o[i] = half ? f16_to_f32(h) : bf16_to_f32(h);
        }
    } else if (strcmp(dt, "I64") == 0) {
        /* Check every value first so a failure leaves the destination untouched. */
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, src + 8 * i, 8);
            if (v < INT32_MIN || v > INT32_MAX)
                return st_fail(QKV_ERR_RANGE, f->path, e->name, "I64 value %lld at flat index %lld does not fit int32",
                               (long long)v, (long long)i);
        }
        int32_t *o = out;
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, src + 8 * i, 8);
            o[i] = (int32_t)v;
        }
    } else {
        return st_fail(QKV_ERR_UNSUPPORTED, f->path, e->name,
                       "dtype %s cannot be read (supported: F32, F16, BF16, I32, I64)", dt);
    }
    return QKV_OK;
}

static bool readable(const qkv_st_file *f, const st_entry *e) {
    if (e->dtype->cls != ST_OTHER) return true;
    st_fail(QKV_ERR_UNSUPPORTED, f->path, e->name, "dtype %s cannot be read (supported: F32, F16, BF16, I32, I64)",
            e->dtype->name);
    return false;
}

qkv_tensor *qkv_st_read(const qkv_st_file *f, const char *name) {
    const st_entry *e = lookup(f, name);
    if (!e || !readable(f, e)) return NULL;
    qkv_tensor *t = qkv_tensor_new(e->dtype->cls == ST_FLOAT ? QKV_F32 : QKV_I32, e->ndim, e->shape);
    if (!t) {
        char s[160];
        st_fail(qkv_last_status(), f->path, name, "cannot allocate %s: %s", dims_str(e->ndim, e->shape, s, sizeof s),
                qkv_last_error());
        return NULL;
    }
    if (convert(f, e, t->data) != QKV_OK) {
        qkv_tensor_free(t);
        return NULL;
    }
    return t;
}

qkv_status qkv_st_read_into(const qkv_st_file *f, const char *name, qkv_tensor *dst) {
    const st_entry *e = lookup(f, name);
    if (!e) return qkv_last_status();
    if (!dst) return st_fail(QKV_ERR_INVALID, f->path, name, "destination tensor is NULL");
    if (!readable(f, e)) return qkv_last_status();
    char a[160], b[160];
    bool same = dst->ndim == e->ndim;
    for (int d = 0; same && d < e->ndim; d++) same = dst->shape[d] == e->shape[d];
    if (!same)
        return st_fail(QKV_ERR_INVALID, f->path, name, "stored shape %s does not match destination shape %s",
                       dims_str(e->ndim, e->shape, a, sizeof a), qkv_shape_str(dst, b, sizeof b));
    qkv_dtype want = e->dtype->cls == ST_FLOAT ? QKV_F32 : QKV_I32;
    if (dst->dtype != want)
        return st_fail(QKV_ERR_INVALID, f->path, name, "stored dtype %s needs a %s destination, got %s",
                       e->dtype->name, want == QKV_F32 ? "float32" : "int32",
                       dst->dtype == QKV_F32 ? "float32" : "int32");
    if (qkv_is_contiguous(dst)) return convert(f, e, dst->data);
    void *tmp = malloc((size_t)(e->numel ? e->numel : 1) * 4);
    if (!tmp) return st_fail(QKV_ERR_NOMEM, f->path, name, "out of memory");
    qkv_status s = convert(f, e, tmp);
    if (s == QKV_OK) s = qkv_tensor_load(dst, tmp, (size_t)e->numel * 4);
    free(tmp);
    return s;
}

/* ---- writing ------------------------------------------------------------------------------------------------ */

typedef struct st_item {
    char *name;
    const qkv_tensor *t;
} st_item;

typedef struct st_meta {
    char *key, *value;
} st_meta;

struct qkv_st_writer {
    st_item *items;
    int n, cap;
    st_meta *meta;
    int n_meta, cap_meta;
};

qkv_st_writer *qkv_st_writer_new(void) {
    qkv_st_writer *w = calloc(1, sizeof *w);
    if (!w) qkv_error_set(QKV_ERR_NOMEM, "safetensors writer: out of memory");
    return w;
}

void qkv_st_writer_free(qkv_st_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->items[i].name);
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->items);
    free(w->meta);
    free(w);
}

/* Grows an array of `size`-byte elements to hold one more; false on overflow or out of memory. */
static bool grow(void **p, int *cap, int n, size_t size) {
    if (n < *cap) return true;
    if (*cap > INT_MAX / 2) return false;
    int nc = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, (size_t)nc * size);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

qkv_status qkv_st_writer_add(qkv_st_writer *w, const char *name, const qkv_tensor *t) {
    if (!w || !name || !t) return qkv_error_set(QKV_ERR_INVALID, "safetensors writer add: NULL writer, name or tensor");
    if (!utf8_valid((const unsigned char *)name, strlen(name)))
        return qkv_error_set(QKV_ERR_INVALID, "safetensors writer: tensor name is not valid UTF-8");
    if (strcmp(name, "__metadata__") == 0)
        return qkv_error_set(QKV_ERR_INVALID, "safetensors writer: '__metadata__' is reserved, not a tensor name");
    if (t->dtype != QKV_F32 && t->dtype != QKV_I32)
        return qkv_error_set(QKV_ERR_INVALID, "safetensors writer: tensor '%s' has an unknown dtype %d", name,
                             (int)t->dtype);
    if (t->ndim < 0 || t->ndim > QKV_MAX_DIMS || (qkv_numel(t) > 0 && !t->data))
        return qkv_error_set(QKV_ERR_INVALID, "safetensors writer: tensor '%s' is malformed (rank %d)", name, t->ndim);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->items[i].name, name) == 0)
            return qkv_error_set(QKV_ERR_INVALID, "safetensors writer: duplicate tensor name '%s'", name);
    char *copy = strdup(name);
    if (!copy || !grow((void **)&w->items, &w->cap, w->n, sizeof *w->items)) {
        free(copy);
        return qkv_error_set(QKV_ERR_NOMEM, "safetensors writer: out of memory adding '%s'", name);
    }
    w->items[w->n++] = (st_item){copy, t};
    return QKV_OK;
}

qkv_status qkv_st_writer_meta(qkv_st_writer *w, const char *key, const char *value) {
    if (!w || !key || !value) return qkv_error_set(QKV_ERR_INVALID, "safetensors writer meta: NULL argument");
    if (!utf8_valid((const unsigned char *)key, strlen(key)) ||
        !utf8_valid((const unsigned char *)value, strlen(value)))
        return qkv_error_set(QKV_ERR_INVALID, "safetensors writer: metadata key or value is not valid UTF-8");
    char *v = strdup(value);
    if (!v) return qkv_error_set(QKV_ERR_NOMEM, "safetensors writer: out of memory");
    for (int i = 0; i < w->n_meta; i++) {
        if (strcmp(w->meta[i].key, key) == 0) { /* a later value replaces the earlier one */
            free(w->meta[i].value);
            w->meta[i].value = v;
            return QKV_OK;
        }
    }
    char *k = strdup(key);
    if (!k || !grow((void **)&w->meta, &w->cap_meta, w->n_meta, sizeof *w->meta)) {
        free(k);
        free(v);
        return qkv_error_set(QKV_ERR_NOMEM, "safetensors writer: out of memory");
    }
    w->meta[w->n_meta++] = (st_meta){k, v};
    return QKV_OK;
}

/* A growable string for the JSON header. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 1024;
        while (nc < b->len + n + 1) nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string literal; the text is already known to be valid UTF-8, so only quotes, backslashes and control
 * characters need escaping. */
static void sb_json_string(sbuf *b, const char *s) {
    sb_str(b, "\"");
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') sb_str(b, "\\\"");
        else if (c == '\\') sb_str(b, "\\\\");
        else if (c == '\n') sb_str(b, "\\n");
        else if (c == '\t') sb_str(b, "\\t");
        else if (c == '\r') sb_str(b, "\\r");
        else if (c < 0x20) sb_printf(b, "\\u%04x", c);
        else sb_put(b, p, 1);
    }
    sb_str(b, "\"");
}

/* The header JSON, padded with spaces to a multiple of 8 bytes so the data section starts aligned. */
static qkv_status build_header(const qkv_st_writer *w, sbuf *b) {
    uint64_t offset = 0;
    sb_str(b, "{");
    if (w->n_meta) {
        sb_str(b, "\"__metadata__\":{");
        for (int i = 0; i < w->n_meta; i++) {
            if (i) sb_str(b, ",");
            sb_json_string(b, w->meta[i].key);
            sb_str(b, ":");
            sb_json_string(b, w->meta[i].value);
        }
        sb_str(b, "}");
    }
    for (int i = 0; i < w->n; i++) {
        const qkv_tensor *t = w->items[i].t;
        uint64_t bytes = (uint64_t)qkv_numel(t) * 4;
        if (i || w->n_meta) sb_str(b, ",");
        sb_json_string(b, w->items[i].name);
        sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", t->dtype == QKV_F32 ? "F32" : "I32");
        for (int d = 0; d < t->ndim; d++) sb_printf(b, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        sb_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                  (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    sb_str(b, "}");
    while (!b->oom && b->len % 8) sb_str(b, " ");
    if (b->oom) return qkv_error_set(QKV_ERR_NOMEM, "safetensors writer: out of memory building the header");
    return QKV_OK;
}

/* Writes t's elements in row-major order; a strided view is gathered through `buf` (cap elements). Returns false
 * with errno set on a write error. */
static bool write_tensor(FILE *fp, const qkv_tensor *t, uint32_t *buf, size_t cap) {
    int64_t n = qkv_numel(t);
    if (n == 0) return true;
    if (qkv_is_contiguous(t)) return fwrite(t->data, 4, (size_t)n, fp) == (size_t)n;
    const uint32_t *src = t->data;
    size_t k = 0;
    bool ok = true;
    QKV_FOR_EACH_OFFSET(t, off, {
        buf[k++] = src[off];
        if (k == cap) {
            ok = ok && fwrite(buf, 4, k, fp) == k;
            k = 0;
        }
    });
    return ok && (k == 0 || fwrite(buf, 4, k, fp) == k);
}

/* Makes the rename durable; a filesystem that cannot sync directories (EINVAL) is not an error. */
static qkv_status sync_parent_dir(const char *path) {
    char *dir = strdup(path);
    if (!dir) return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", path);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
    qkv_status s = QKV_OK;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL))
        s = st_fail(QKV_ERR_IO, path, NULL, "written, but syncing directory %s failed: %s", dir, strerror(errno));
    if (fd >= 0) close(fd);
    free(dir);
    return s;
}

qkv_status qkv_st_writer_save(qkv_st_writer *w, const char *path) {
    if (!w || !path) return qkv_error_set(QKV_ERR_INVALID, "safetensors save: NULL writer or path");
    sbuf hdr = {0};
    qkv_status s = build_header(w, &hdr);
    if (s != QKV_OK) {
        free(hdr.p);
        return s;
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    size_t cap = 1 << 16;
    uint32_t *buf = malloc(cap * 4);
    if (!tmp || !buf) {
        free(hdr.p);
        free(tmp);
        free(buf);
        return qkv_error_set(QKV_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());

    FILE *fp = NULL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    bool created = fd >= 0;
    if (fd < 0) {
        s = st_fail(QKV_ERR_IO, path, NULL, "cannot create temporary file %s: %s", tmp, strerror(errno));
    } else if (!(fp = fdopen(fd, "wb"))) {
        s = st_fail(QKV_ERR_IO, path, NULL, "cannot open temporary file %s: %s", tmp, strerror(errno));
        close(fd);
    }
    /* A replaced file keeps its permissions. */
    struct stat old;
    if (fp && stat(path, &old) == 0) (void)fchmod(fd, old.st_mode & 07777);

    if (fp) {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hdr.len >> (8 * i));
        bool ok = fwrite(len8, 1, 8, fp) == 8 && fwrite(hdr.p, 1, hdr.len, fp) == hdr.len;
        for (int i = 0; ok && i < w->n; i++) ok = write_tensor(fp, w->items[i].t, buf, cap);
        if (ok) ok = fflush(fp) == 0 && fsync(fd) == 0;
        int err = errno;
        if (fclose(fp) != 0 && ok) {
            ok = false;
            err = errno;
        }
        if (!ok) s = st_fail(QKV_ERR_IO, path, NULL, "writing temporary file %s failed: %s", tmp, strerror(err));
    }
    if (fp && s == QKV_OK && rename(tmp, path) != 0)
        s = st_fail(QKV_ERR_IO, path, NULL, "cannot rename %s over it: %s", tmp, strerror(errno));
    if (created && s != QKV_OK) unlink(tmp);
    if (s == QKV_OK) s = sync_parent_dir(path);
    free(hdr.p);
    free(tmp);
    free(buf);
    return s;
}

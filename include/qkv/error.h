/* Errors as return codes with a message, never an abort on user input.
 *
 * Every public function that can fail on user input reports it: functions returning qkv_status return a non-zero
 * code; functions returning a pointer return NULL. In both cases qkv_last_error() holds a message naming what was
 * wrong (the file, the key, the shape that was expected). The message is per thread and stays until the next
 * error or qkv_error_clear().
 */
#ifndef QKV_ERROR_H
#define QKV_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_status {
    QKV_OK = 0,
    QKV_ERR_INVALID = 1,     /* bad argument: wrong shape, dtype, axis, option */
    QKV_ERR_NOMEM = 2,       /* allocation failed */
    QKV_ERR_IO = 3,          /* a file could not be opened, read or written */
    QKV_ERR_FORMAT = 4,      /* a file's content is malformed */
    QKV_ERR_RANGE = 5,       /* a size or index out of range, or absurdly large */
    QKV_ERR_UNSUPPORTED = 6, /* valid but not implemented (e.g. an unknown dtype) */
    QKV_ERR_NUMERIC = 7,     /* NaN or inf where a finite number is required */
} qkv_status;

/* The message of the calling thread's most recent error ("" when none). Owned by the library. */
const char *qkv_last_error(void);
/* The status of the calling thread's most recent error (QKV_OK when none). */
qkv_status qkv_last_status(void);
void qkv_error_clear(void);
/* Record an error (printf-style message) and return `status`, for code built on the library (layers, models,
 * tools) that reports through the same channel. The message may quote the previous one: qkv_last_error() is a
 * valid argument ("%s: %s", where, qkv_last_error()). */
qkv_status qkv_error_set(qkv_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Short name of a status code ("invalid argument", ...). */
const char *qkv_status_name(qkv_status status);

#ifdef __cplusplus
}
#endif
#endif

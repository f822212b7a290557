/* Per-thread last error: a status and a message naming what was wrong. */
#include "qkv/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_msg[1024];
static _Thread_local qkv_status last_status;

const char *qkv_last_error(void) { return last_msg; }
qkv_status qkv_last_status(void) { return last_status; }

void qkv_error_clear(void) {
    last_msg[0] = '\0';
    last_status = QKV_OK;
}

qkv_status qkv_error_set(qkv_status status, const char *fmt, ...) {
    /* Formatted apart and then copied: an argument may be qkv_last_error() itself, a new message quoting the
     * previous one ("file:line: %s"), and vsnprintf must not write the buffer it is reading. */
    char msg[sizeof last_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_msg, msg, sizeof msg);
    last_status = status;
    return status;
}

const char *qkv_status_name(qkv_status s) {
    switch (s) {
    case QKV_OK: return "ok";
    case QKV_ERR_INVALID: return "invalid argument";
    case QKV_ERR_NOMEM: return "out of memory";
    case QKV_ERR_IO: return "i/o error";
    case QKV_ERR_FORMAT: return "malformed input";
    case QKV_ERR_RANGE: return "out of range";
    case QKV_ERR_UNSUPPORTED: return "unsupported";
    case QKV_ERR_NUMERIC: return "non-finite value";
    }
    return "unknown status";
}

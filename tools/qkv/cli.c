#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <limits.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "qkv/error.h"

int cli_error(const char *cmd, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "qkv %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int cli_status_exit(int status) {
    switch (status) {
    case QKV_OK: return CLI_OK;
    case QKV_ERR_INVALID:
    case QKV_ERR_FORMAT:
    case QKV_ERR_RANGE:
    case QKV_ERR_UNSUPPORTED:
    case QKV_ERR_IO: return CLI_INPUT;
    default: return CLI_RUNTIME;
    }
}

bool cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return true;
    return false;
}

bool cli_parse_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = val ? strtol(val, &end, 10) : 0;
    if (!val || errno || *end || end == val || v < lo || v > hi) {
        cli_error(cmd, CLI_USAGE, "%s expects an integer in [%ld, %ld], got '%s'", opt, lo, hi, val ? val : "");
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_double(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = val ? strtod(val, &end) : 0;
    if (!val || errno || *end || end == val || !(v >= lo && v <= hi)) {
        cli_error(cmd, CLI_USAGE, "%s expects a number in [%g, %g], got '%s'", opt, lo, hi, val ? val : "");
        return false;
    }
    *out = v;
    return true;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fmt_duration(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) {
        snprintf(buf, n, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%02ld:%02ld", t / 60, t % 60);
}

void cli_progress_start(cli_progress *p, const char *label, long total, const char *unit, bool quiet) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->total = total;
    p->unit = unit;
    p->quiet = quiet;
    p->tty = isatty(STDERR_FILENO);
    p->t0 = cli_now();
}

static void draw(cli_progress *p, const char *extra, bool final) {
    double el = cli_now() - p->t0;
    double rate = el > 0 ? p->units / el : 0;
    double eta = (p->done > 0 && p->total > 0) ? el * (double)(p->total - p->done) / (double)p->done : NAN;
    char e[32], r[32];
    fmt_duration(final ? el : eta, e, sizeof e);
    snprintf(r, sizeof r, "%.0f %s/s", rate, p->unit ? p->unit : "it");
    if (p->tty) {
        int width = 24, fill = p->total > 0 ? (int)((double)width * (double)p->done / (double)p->total) : 0;
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r%s [%s] %ld/%ld %s %s %s %s\033[K", p->label, bar, p->done, p->total, r,
                final ? "took" : "eta", e, extra ? extra : "");
        if (final) fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s %ld/%ld %s %s %s %s\n", p->label, p->done, p->total, r, final ? "took" : "eta", e,
                extra ? extra : "");
    }
    fflush(stderr);
}

void cli_progress_update(cli_progress *p, long done, double units, const char *extra) {
    p->done = done;
    p->units = units;
    if (p->quiet) return;
    double now = cli_now();
    /* Redraw at most 10 times a second on a TTY; every 5 s in logs. */
    if (now - p->last_draw < (p->tty ? 0.1 : 5.0) && done < p->total) return;
    p->last_draw = now;
    draw(p, extra, false);
}

void cli_progress_finish(cli_progress *p, const char *extra) {
    if (!p->quiet) draw(p, extra, true);
}

#include "qkv/data.h"

cli_lines *cli_read_lines(const char *cmd, const char *path) {
    qkv_data_opts o = {.format = QKV_DATA_LINES, .keep_blank = true};
    qkv_reader *r = NULL;
    char *buf = NULL;
    if (!strcmp(path, "-")) { /* slurp stdin, then read it like a file */
        size_t cap = 1 << 16, len = 0, got, line = 0;
        buf = malloc(cap);
        while (buf && (got = fread(buf + len, 1, cap - len, stdin)) > 0) {
            /* The same line limit as files (the reader's), checked while slurping: < /dev/zero fails at once. */
            for (size_t i = len; i < len + got; i++) line = buf[i] == '\n' ? 0 : line + 1;
            if (line > ((size_t)1 << 20)) {
                free(buf);
                cli_error(cmd, CLI_INPUT, "standard input: a line longer than 1048576 bytes");
                return NULL;
            }
            len += got;
            if (len == cap) {
                char *nb = realloc(buf, cap *= 2);
                if (!nb) {
                    free(buf);
                    buf = NULL;
                }
                buf = nb;
            }
        }
        if (!buf) {
            cli_error(cmd, CLI_RUNTIME, "out of memory reading standard input");
            return NULL;
        }
        r = qkv_reader_open_mem("<stdin>", buf, len, &o);
        free(buf);
    } else {
        r = qkv_reader_open(path, &o);
    }
    cli_lines *l = calloc(1, sizeof *l);
    size_t cap = 0;
    const qkv_data_record *rec;
    qkv_status st = r && l ? QKV_OK : QKV_ERR_IO;
    while (st == QKV_OK && (st = qkv_reader_next(r, &rec)) == QKV_OK && rec) {
        if (l->n == cap) {
            cap = cap ? cap * 2 : 1024;
            char **nl = realloc(l->line, sizeof *nl * cap);
            if (!nl) {
                st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
                break;
            }
            l->line = nl;
        }
        l->line[l->n] = strdup(rec->n_fields ? rec->fields[0] : "");
        if (!l->line[l->n]) {
            st = qkv_error_set(QKV_ERR_NOMEM, "out of memory");
            break;
        }
        l->n++;
    }
    qkv_reader_close(r);
    if (st != QKV_OK) {
        cli_error(cmd, cli_status_exit(st), "%s", qkv_last_error());
        cli_lines_free(l);
        return NULL;
    }
    return l;
}

void cli_lines_free(cli_lines *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) free(l->line[i]);
    free(l->line);
    free(l);
}

const char *cli_shared_path(const char *rel, char *buf, size_t n) {
    const char *env = getenv("QKV_SHARED");
    if (env && *env) {
        snprintf(buf, n, "%s/%s", env, rel);
        if (access(buf, R_OK) == 0) return buf;
    }
    const char *ups[] = {"../shared", "../../shared", "../../../shared"};
    snprintf(buf, n, "%s/%s", ups[0], rel);
    if (access(buf, R_OK) == 0) return buf;
    char exe[PATH_MAX - 128];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        for (size_t i = 0; i < sizeof ups / sizeof ups[0]; i++) {
            snprintf(buf, n, "%s/%s/%s", exe, ups[i], rel);
            if (access(buf, R_OK) == 0) return buf;
        }
    }
    snprintf(buf, n, "../shared/%s", rel);
    return NULL;
}

const char *cli_grouped(long long n, char *buf, size_t size) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%lld", n), o = 0;
    for (int i = 0; i < len && o + 2 < (int)size; i++) {
        if (i > 0 && digits[i - 1] != '-' && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    if (size) buf[o] = '\0';
    return buf;
}

void cli_print_json(const cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    printf("%s\n", s ? s : "{}");
    cJSON_free(s);
}

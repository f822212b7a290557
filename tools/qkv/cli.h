/* Shared pieces of the qkv command line: exit codes, subcommand signature, option helpers, progress. */
#ifndef QKV_CLI_H
#define QKV_CLI_H

#include <stdbool.h>
#include <stdio.h>

/* Exit codes, the same for every subcommand. */
enum {
    CLI_OK = 0,
    CLI_USAGE = 1,   /* bad command line */
    CLI_INPUT = 2,   /* bad input data, config or file */
    CLI_RUNTIME = 3, /* a failure while running (out of memory, i/o error during work) */
};

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
    void (*help)(FILE *out);
} cli_command;

/* Print "qkv <cmd>: message" to stderr and return code. */
int cli_error(const char *cmd, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Map a library status to an exit code (input problems -> CLI_INPUT, others -> CLI_RUNTIME). */
int cli_status_exit(int status);
/* True if any argument is --help or -h. */
bool cli_wants_help(int argc, char **argv);
/* Sets what the runtimes read only when loaded, unless the user set it: OMP_WAIT_POLICY=passive (idle OpenMP threads
 * wait passively) and OPENBLAS_CORETYPE when OpenBLAS took the CPU for an older one (qkv_cpu_blas_core_wanted), then
 * runs the program again with them; call first thing in main. */
void cli_runtime_env(char **argv);
/* Parse a positive integer / float option value; prints an error naming the option on failure. */
bool cli_parse_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out);
bool cli_parse_double(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out);

/* Progress for long work: a redrawn bar on a TTY, plain lines otherwise, nothing when quiet. */
typedef struct cli_progress {
    const char *label;
    long total, done;
    double t0, last_draw;
    bool tty, quiet;
    const char *unit; /* throughput unit, e.g. "tok" */
    double units;     /* units processed so far */
} cli_progress;
void cli_progress_start(cli_progress *p, const char *label, long total, const char *unit, bool quiet);
/* Advance to `done`, with optional extra text (e.g. "loss 2.31 lr 3e-4"). */
void cli_progress_update(cli_progress *p, long done, double units, const char *extra);
void cli_progress_finish(cli_progress *p, const char *extra);

double cli_now(void); /* monotonic seconds */

/* 14210 -> "14,210" into buf; returns buf. */
const char *cli_grouped(long long n, char *buf, size_t size);

/* A file of the shared folder (../shared/<rel>: data, pretrained files, benchmark configs), looked for under
 * $QKV_SHARED, then ../shared from the current directory, then ../shared, ../../shared or ../../../shared beside
 * the qkv binary. Returns buf when found; NULL otherwise, with buf set to "../shared/<rel>" for messages. */
const char *cli_shared_path(const char *rel, char *buf, size_t n);



/* Lines of a UTF-8 text file ("-" = standard input), blank lines kept. NULL (message printed, naming the file and
 * line) on a read error or invalid UTF-8. Free with cli_lines_free. */
typedef struct cli_lines {
    char **line;
    size_t n;
} cli_lines;
cli_lines *cli_read_lines(const char *cmd, const char *path);
void cli_lines_free(cli_lines *l);

/* Creates the missing parents of an output FILE (or the output directory itself and its parents, is_dir), as
 * `mkdir -p`; CLI_OK, or the exit code after printing the error. Every command that writes into a path uses it. */
int cli_prepare_out(const char *cmd, const char *path, bool is_dir);
/* An output file written whole or not at all: cli_out_open returns a stream on "PATH.tmp.PID" (tmp receives that
 * name; standard output when path is NULL), or NULL after printing the error; cli_out_close closes it and renames it
 * to path when rc is CLI_OK, else removes it, and returns rc (or the exit code of a failed write). */
FILE *cli_out_open(const char *cmd, const char *path, char *tmp, size_t tmp_size);
int cli_out_close(const char *cmd, FILE *f, const char *path, const char *tmp, int rc);

/* The last argument is a flag that, by the command's help, takes a value: a usage error saying so (exit 1), else
 * CLI_OK. argv[0] is the subcommand name. */
int cli_check_last_value(const cli_command *c, int argc, char **argv);
/* One JSON object as a single line on stdout (the --json output of the run commands). */
struct cJSON;
void cli_print_json(const struct cJSON *o);

#endif

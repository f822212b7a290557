/* Log lines for `qkv plot`: the input is a log.jsonl, plotted by the command itself (x and y fields from the first
 * byte) into a scratch SVG. */
#include "fuzz.h"
#include "commands.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
    static const char *const xs[] = {"step", "minutes", "seconds", "wall-minutes"};
    static const char *const ys[] = {"loss", "accuracy", "lr", "bits_per_char"};
    const char *log = fuzz_file(0, ".jsonl", data + 1, size - 1);
    const char *svg = fuzz_path(1, ".svg");
    if (!log) return 0;
    char a0[] = "plot", a1[] = "-o", a3[] = "--x", a5[] = "--y", a7[] = "--kind", a9[] = "--log-y";
    char x[16], y[16], kind[8], out[512], src[512];
    snprintf(x, sizeof x, "%s", xs[data[0] & 3]);
    snprintf(y, sizeof y, "%s", ys[(data[0] >> 2) & 3]);
    snprintf(kind, sizeof kind, "%s", data[0] & 16 ? "train" : "eval");
    snprintf(out, sizeof out, "%s", svg);
    snprintf(src, sizeof src, "%s", log);
    char *argv[] = {a0, a1, out, a3, x, a5, y, a7, kind, src, a9, NULL};
    int argc = (data[0] & 32) ? 11 : 10;
    (void)cmd_plot.run(argc, argv);
    unlink(svg);
    return 0;
}

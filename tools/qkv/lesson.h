/* qkv lesson's parts (cmd_lesson.c) and the layer timings they share with `qkv bench layers` (bench_layers.c). */
#ifndef QKV_LESSON_H
#define QKV_LESSON_H

#include "bench.h"

#define LESSON_PARALLEL_SUMMARY                                                                                      \
    "recurrent layers must compute position t after t - 1; convolutions and attention compute every\n"             \
    "  position at once. The time of one forward + backward of one layer of width D (default 256, batch 1) for\n" \
    "  sequence lengths 64..4096: vanilla RNN, LSTM, GRU, Conv1d (width 3) and multi-head self-attention\n"       \
    "  (D / 64 heads), each measured as `qkv bench layers --mode KIND --seq-len T` measures it (median of\n"      \
    "  steps for --seconds, default 1, per point). --run KIND=DIR adds the test accuracy of a trained classifier\n" \
    "  run of that kind (rnn, lstm, gru, cnn, attn) to its legend. Prints a markdown table (ms per step) and\n"    \
    "  draws OUT.svg (default lesson_parallel.svg). Timings are of this machine as it is now: on a loaded\n"        \
    "  machine, compare shapes, not absolute numbers."

#define LAYER_KINDS "rnn,lstm,gru,cnn,attn"

/* Median milliseconds of one forward + backward of layer `kind` at width D, batch B, length T (b's timing
 * settings); < 0 with a message on stderr when it cannot run. */
double bench_layer_ms(const bench_ctx *b, const char *kind, long D, long B, long T);
int lesson_parallel(int argc, char **argv);

#endif

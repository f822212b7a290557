#!/bin/sh
# Issue 31's end-to-end target: a whole file greedy-decoded by `qkv translate` with its default batch options.
#   bench/translate_file.sh RUN_DIR [FILE]     (QKV=path/to/qkv, default build/qkv; REPEAT=N runs, default 3;
#                                               QKV_THREADS as for any qkv command, default all cores)
# FILE: source lines, or a TSV whose first column is the source (default ../shared/data/translation/test.tsv).
# RUN_DIR: a trained seq2seq run with a byte-level BPE in it (vocab.json, merges.txt), e.g. bench/quality/
# translation.json's lstm model; it should be trained far enough to end its sentences (EOS) at realistic lengths,
# or every sentence runs to its length limit (2 x source + 10 tokens).
# Prints one JSON line: sentences, target_tokens (the translations re-encoded by the run's BPE: the tokens the
# decoder generated, EOS not counted), seconds (wall clock, the median run), cpu_seconds (user + sys of that run,
# every thread), sentences_per_s and tokens_per_s (from the wall clock). Run it on a quiet machine: under load the
# wall clock measures the other processes.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
QKV=${QKV:-$HERE/../build/qkv}
RUN=${1:?usage: bench/translate_file.sh RUN_DIR [FILE]}
FILE=${2:-$HERE/../../shared/data/translation/test.tsv}
REPEAT=${REPEAT:-3}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cut -f1 "$FILE" > "$OUT/src.txt"
i=0
: > "$OUT/runs"
while [ "$i" -lt "$REPEAT" ]; do
    # POSIX `times` prints the children's user and sys CPU time on its second line ("0m1.234s 0m0.056s"); in this
    # shell, not in a $(...) subshell, whose children are not these.
    times > "$OUT/c0"
    t0=$(date +%s.%N)
    "$QKV" translate --run "$RUN" "$OUT/src.txt" > "$OUT/hyp.txt"
    t1=$(date +%s.%N)
    times > "$OUT/c1"
    c0=$(sed -n 2p "$OUT/c0")
    c1=$(sed -n 2p "$OUT/c1")
    echo "$t0 $t1 $c0 $c1" | awk '
        function s(x) { split(x, p, "m"); sub("s", "", p[2]); return p[1] * 60 + p[2] }
        { printf "%.3f %.3f\n", $2 - $1, s($5) + s($6) - s($3) - s($4) }' >> "$OUT/runs"
    i=$((i + 1))
done
sentences=$(wc -l < "$OUT/hyp.txt")
tokens=$("$QKV" tokenize encode --bpe "$RUN" "$OUT/hyp.txt" | wc -w)
sort -n "$OUT/runs" | awk -v n="$REPEAT" -v sent="$sentences" -v tok="$tokens" -v th="${QKV_THREADS:-default}" '
    NR == int((n + 1) / 2) {
        printf "{\"bench\":\"translate_file\",\"sentences\":%d,\"target_tokens\":%d,\"seconds\":%.3f,", sent, tok, $1
        printf "\"cpu_seconds\":%.3f,\"sentences_per_s\":%.1f,\"tokens_per_s\":%.0f,", $2, sent / $1, tok / $1
        printf "\"runs\":%d,\"threads\":\"%s\"}\n", n, th
    }'

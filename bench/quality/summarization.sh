#!/bin/sh
# Summarization quality, qkv vs PyTorch (issue 24): same decoder-only model, data, BPE, optimiser and steps
# (bench/quality/summarization.json); one JSON line per engine (dev summary loss, greedy test ROUGE-1/2/L F with and
# without stemming) and a comparison line, plus the lead baseline of the test split.
#   bench/quality/summarization.sh [STEPS]             (QKV=path/to/qkv, LIMIT=N test articles, THREADS=N, OUT=DIR)
#   BUDGET=900 bench/quality/summarization.sh          equal wall-clock (seconds of training on each side; needs a
#                                                      quiet machine)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
QKV=${QKV:-$HERE/../../build/qkv}
DATA=${DATA:-$HERE/../../../shared/data/summarization}
LIMIT=${LIMIT:-500}
THREADS=${THREADS:-2}
BUDGET=${BUDGET:-0}
set -- --qkv "$QKV" --limit "$LIMIT" --threads "$THREADS" ${1:+--steps "$1"}
[ "$BUDGET" != 0 ] && set -- "$@" --seconds "$BUDGET"
[ -n "${OUT:-}" ] && set -- "$@" --out "$OUT"
lead=$(mktemp); trap 'rm -f "$lead"' EXIT
if [ "$LIMIT" != 0 ]; then head -n "$LIMIT" "$DATA/test.tsv" > "$lead"; else cp "$DATA/test.tsv" "$lead"; fi
for stem in "" --stem; do
  name=no; [ -n "$stem" ] && name=porter
  echo "{\"bench\":\"summarization_quality\",\"engine\":\"lead\",\"stem\":\"$name\",\"rouge\":$("$QKV" rouge --lead "$lead" $stem --json)}"
done
/usr/bin/python3 "$HERE/summarization.py" "$@"

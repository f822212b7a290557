#!/bin/sh
# Reformer LM (issue 27): bits/char of reformer_lm vs gpt at equal wall-clock on ../shared/data/lm, peak memory at a
# few context lengths with the longest context each fits in 24 GiB (extrapolated, and said so), and a chat model
# trained on `qkv data dialogue` output then run through `qkv chat --script`. See bench/quality/reformer.py.
#   bench/quality/reformer.sh [quality|memory|chat|throughput|all] [BUDGET_SECONDS]
#     QKV=path/to/qkv  THREADS=N (default 2; 1 with CONCURRENT=1)  TOY=1  LENGTHS=1024,2048,4096
#     CONCURRENT=1: quality trains both models at the same time, THREADS each (same load on a shared machine)
#     OUT=DIR: keep the runs under DIR          EVALS=N: dev evaluations during training (reformer.py --evals)
# TOY=1 runs tiny models to check the script (numbers meaningless). Run on a quiet machine, one part at a time.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PART=${1:-all}
BUDGET=${2:-600}
QKV=${QKV:-$ROOT/build/qkv}
if [ "${CONCURRENT:-0}" != 0 ]; then THREADS=${THREADS:-1}; else THREADS=${THREADS:-2}; fi
LENGTHS=${LENGTHS:-1024,2048,4096}
set -- --qkv "$QKV" --threads "$THREADS"
[ "${TOY:-0}" != 0 ] && set -- "$@" --toy
[ -n "${OUT:-}" ] && set -- "$@" --out "$OUT"
[ -n "${EVALS:-}" ] && set -- "$@" --evals "$EVALS"
cd "$ROOT"
for p in quality memory chat throughput; do
  [ "$PART" = all ] || [ "$PART" = "$p" ] || continue
  case $p in
    memory) /usr/bin/python3 "$HERE/reformer.py" memory --lengths "$LENGTHS" "$@" ;;
    throughput) /usr/bin/python3 "$HERE/reformer.py" throughput --lengths "$LENGTHS" "$@" ;;
    quality) if [ "${CONCURRENT:-0}" != 0 ]; then
               /usr/bin/python3 "$HERE/reformer.py" quality --seconds "$BUDGET" --concurrent "$@"
             else
               /usr/bin/python3 "$HERE/reformer.py" quality --seconds "$BUDGET" "$@"
             fi ;;
    *) /usr/bin/python3 "$HERE/reformer.py" "$p" --seconds "$BUDGET" "$@" ;;
  esac
done

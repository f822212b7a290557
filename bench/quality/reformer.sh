#!/bin/sh
# Reformer LM (issue 27): bits/char of reformer_lm vs gpt at equal wall-clock on ../shared/data/lm, peak memory at a
# few context lengths with the longest context each fits in 24 GiB (extrapolated, and said so), and a chat model
# trained on `qkv data dialogue` output then run through `qkv chat --script`. See bench/quality/reformer.py.
#   bench/quality/reformer.sh [quality|memory|chat|all] [BUDGET_SECONDS]   (QKV=path/to/qkv, THREADS=2, TOY=1,
#                                                                           LENGTHS=1024,2048,4096)
# TOY=1 runs tiny models to check the script (numbers meaningless). Run on a quiet machine, one part at a time.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PART=${1:-all}
BUDGET=${2:-600}
QKV=${QKV:-$ROOT/build/qkv}
THREADS=${THREADS:-2}
LENGTHS=${LENGTHS:-1024,2048,4096}
set -- --qkv "$QKV" --threads "$THREADS"
[ "${TOY:-0}" != 0 ] && set -- "$@" --toy
cd "$ROOT"
for p in quality memory chat; do
  [ "$PART" = all ] || [ "$PART" = "$p" ] || continue
  case $p in
    memory) /usr/bin/python3 "$HERE/reformer.py" memory --lengths "$LENGTHS" "$@" ;;
    *) /usr/bin/python3 "$HERE/reformer.py" "$p" --seconds "$BUDGET" "$@" ;;
  esac
done

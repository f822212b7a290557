#!/bin/sh
# Summarization at equal wall-clock, both engines at once (issue 24): qkv pinned to one core, PyTorch to another, one
# thread each, the same minutes of training; dev ROUGE-L of the first 200 dev articles every EVAL_MINUTES of training
# (evaluations pause each side's clock), then test ROUGE on LIMIT articles. Then the merge step draws both curves in
# OUT/curve.svg and prints, as JSON lines, each side's 15- and 60-minute points, final test ROUGE-1/2/L (with and
# without stemming) and the lead baseline. Run it on an otherwise quiet machine with two free cores.
#   bench/quality/summarization_pair.sh [OUT]     (env: MINUTES=60 EVAL_MINUTES=5 LIMIT=500 CPUS="0 1" QKV=...)
# Toy check: MINUTES=1 EVAL_MINUTES=0.5 LIMIT=20 bench/quality/summarization_pair.sh /tmp/pair
# Ctrl-C (or TERM) stops both sides and everything they started.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
QKV=${QKV:-$ROOT/build/qkv}
MINUTES=${MINUTES:-60}
EVAL_MINUTES=${EVAL_MINUTES:-5}
LIMIT=${LIMIT:-500}
CPUS=${CPUS:-0 1}
OUT=${1:-summ_pair}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
QKV=$(cd "$(dirname "$QKV")" && pwd)/$(basename "$QKV")
cpu_qkv=${CPUS%% *}
cpu_torch=${CPUS##* }
budget=$(awk -v m="$MINUTES" 'BEGIN { print m * 60 }')
cd "$ROOT"
# One BPE for both sides, trained before either clock starts.
if [ ! -f "$OUT/tok/vocab.json" ]; then
  "$QKV" train --config "$HERE/summarization.json" --run "$OUT/tok" --quiet --set train.steps=1 --set eval.every=0
fi
pids=""
stop() { # TERM each side's process group; KILL what is left after 5 s (qkv train would first finish its data
  # preparation and save a checkpoint, which nobody wants here)
  for p in $pids; do kill -TERM "-$p" 2>/dev/null || true; done
  sleep 5
  for p in $pids; do kill -KILL "-$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
}
trap 'stop; exit 130' INT TERM
side() { # engine cpu: its own session (process group), so stop() reaches the qkv children too
  setsid /usr/bin/python3 "$HERE/summarization.py" --qkv "$QKV" --only "$1" --cpu "$2" --seconds "$budget" \
    --eval-minutes "$EVAL_MINUTES" --limit "$LIMIT" --tokenizer "$OUT/tok" --out "$OUT/$1" \
    > "$OUT/$1.jsonl.out" 2> "$OUT/$1.err" &
  pids="$pids $!"
}
side qkv "$cpu_qkv"
side torch "$cpu_torch"
rc=0
for p in $pids; do wait "$p" || rc=1; done
pids=""
[ "$rc" = 0 ] || { echo "summarization_pair: a side failed, see $OUT/*.err" >&2; exit 1; }
/usr/bin/python3 "$HERE/summarization.py" --qkv "$QKV" --limit "$LIMIT" -o "$OUT/curve.svg" \
  --plot "$OUT"/qkv/summ_*_qkv.jsonl "$OUT"/torch/summ_*_torch.jsonl

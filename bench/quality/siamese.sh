#!/bin/sh
# Siamese duplicate detection quality, qkv vs PyTorch (issue 23): same data, vocabulary, model, loss, optimiser and
# steps (bench/quality/siamese.json); test accuracy, F1 and AUC at the threshold chosen on dev, one JSON line per
# engine and a comparison line.
#   bench/quality/siamese.sh [STEPS]          (QKV=path/to/qkv, THREADS=2; smoke: STEPS 20)
# Equal wall-clock instead of equal steps: BUDGET=300 (seconds of training on each side). Run it on a quiet
# machine, one side at a time as the script does.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
STEPS=${1:-0}
QKV=${QKV:-$ROOT/build/qkv}
THREADS=${THREADS:-2}
BUDGET=${BUDGET:-0}
set -- --qkv "$QKV" --threads "$THREADS"
[ "$STEPS" != 0 ] && set -- "$@" --steps "$STEPS"
[ "$BUDGET" != 0 ] && set -- "$@" --seconds "$BUDGET"
cd "$ROOT"
exec /usr/bin/python3 "$HERE/siamese.py" "$@"

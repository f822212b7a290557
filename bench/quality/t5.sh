#!/bin/sh
# T5 quality (issue 26): one multi-task t5 (text-to-text with task prefixes, examples-proportional mixing with a cap)
# against single-task t5 models of the same size and steps, per-task dev metrics (bench/quality/t5.py says how).
#   bench/quality/t5.sh [STEPS]        (QKV=path/to/qkv, LIMIT=N dev examples a task, TRAIN_LIMIT=N, CAP=K, OUT=DIR)
# Long: five trainings of STEPS steps each; run it on a quiet machine.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
QKV=${QKV:-$HERE/../../build/qkv}
set -- --qkv "$QKV" --limit "${LIMIT:-300}" --train-limit "${TRAIN_LIMIT:-0}" --cap "${CAP:-20000}" ${1:+--steps "$1"}
[ -n "${OUT:-}" ] && set -- "$@" --out "$OUT"
exec /usr/bin/python3 "$HERE/t5.py" "$@"

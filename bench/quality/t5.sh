#!/bin/sh
# T5 quality (issue 26): one multi-task t5 (span-corruption pretraining on ../shared/data, then data.tasks fine-tuning
# from it) against single-task t5 models of the same size and total steps, per-task dev metrics from qkv eval
# (bench/quality/t5.py says how).
#   bench/quality/t5.sh [STEPS [PRETRAIN]]   (QKV=path/to/qkv, LIMIT=N dev examples a task, TRAIN_LIMIT=N, CAP=K,
#                                             D_MODEL=N, OUT=DIR, TOKENIZER=bpe|word, BPE_VOCAB=N,
#                                             MIXING=proportional|temperature|equal, TEMPERATURE=T)
# Long: six trainings; run it on a quiet machine. Toy check: TRAIN_LIMIT=200 LIMIT=20 D_MODEL=32 t5.sh 40 10
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
QKV=${QKV:-$HERE/../../build/qkv}
set -- --qkv "$QKV" --limit "${LIMIT:-300}" --train-limit "${TRAIN_LIMIT:-0}" --cap "${CAP:-20000}" \
  --d-model "${D_MODEL:-128}" --tokenizer "${TOKENIZER:-bpe}" --bpe-vocab "${BPE_VOCAB:-8000}" \
  --mixing "${MIXING:-proportional}" --temperature "${TEMPERATURE:-2}" ${1:+--steps "$1"} ${2:+--pretrain "$2"}
[ -n "${OUT:-}" ] && set -- "$@" --out "$OUT"
exec /usr/bin/python3 "$HERE/t5.py" "$@"

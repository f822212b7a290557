#!/bin/sh
# Pretrained vs from-scratch fine-tuning (issue 25): sentiment, pos tagging and cloze QA from a qkv bert run, plus
# frozen / gradual / adapters for sentiment; one JSON line per pair (bench/quality/transfer.py says what is run).
#   PRETRAINED=runs/bert_small bench/quality/transfer.sh [STEPS]    (QKV=path/to/qkv, DATA=../shared/data, OUT=dir,
#   THREADS=N, LR=1e-4, BATCH=32, TASKS=sentiment,pos,cloze_qa, VARIANTS=frozen,gradual,adapters)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
: "${PRETRAINED:?set PRETRAINED to a qkv bert run directory}"
export QKV_THREADS=${THREADS:-2}
exec /usr/bin/python3 "$HERE/transfer.py" "$PRETRAINED" --steps "${1:-1000}" \
    --qkv "${QKV:-$HERE/../../build/qkv}" --data "${DATA:-$HERE/../../../shared/data}" \
    --out "${OUT:-$(mktemp -d)}" --lr "${LR:-1e-4}" --batch "${BATCH:-32}" \
    --tasks "${TASKS:-sentiment,pos,cloze_qa}" --variants "${VARIANTS-frozen,gradual,adapters}"

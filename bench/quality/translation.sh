#!/bin/sh
# Translation quality, qkv vs PyTorch (issue 10): same data, word tokenisation, hyperparameters and steps
# (bench/quality/translation.json), test BLEU with greedy, beam 4 and MBR decoding, one JSON line per engine and mode.
#   bench/quality/translation.sh [transformer|lstm] [STEPS]      (QKV=path/to/qkv, DATA=../shared/data/translation)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=${1:-transformer}
STEPS=${2:-0}
QKV=${QKV:-$HERE/../../build/qkv}
DATA=${DATA:-$HERE/../../../shared/data/translation}
OUT=${OUT:-$(mktemp -d)}
PY=/usr/bin/python3

# qkv's run config: the shared fields plus models.<MODEL> as "model", data paths made absolute.
$PY - "$HERE/translation.json" "$MODEL" "$DATA" "$STEPS" > "$OUT/qkv_$MODEL.json" <<'PYEOF'
import json, os, sys
c = json.load(open(sys.argv[1]))
model, data, steps = sys.argv[2], os.path.abspath(sys.argv[3]), int(sys.argv[4])
run = {"model": c["models"][model], "data": dict(c["data"]), "train": c["train"], "eval": c["eval"], "seed": c["seed"]}
for k in ("train", "dev", "test"):
    run["data"][k] = os.path.join(data, c["data"][k])
if steps:
    run["train"]["steps"] = steps
print(json.dumps(run, indent=1))
PYEOF

start=$(date +%s)
"$QKV" train --config "$OUT/qkv_$MODEL.json" --run "$OUT/run_$MODEL" --quiet
train_s=$(( $(date +%s) - start ))
if "$QKV" translate --help >/dev/null 2>&1; then
    for mode in greedy beam mbr; do
        cut -f1 "$DATA/test.tsv" | "$QKV" translate --run "$OUT/run_$MODEL" --decode $mode > "$OUT/hyp_$mode.txt"
        cut -f2 "$DATA/test.tsv" > "$OUT/ref.txt"
        bleu=$("$QKV" bleu -r "$OUT/ref.txt" -i "$OUT/hyp_$mode.txt" --json)
        echo "{\"bench\":\"translation_quality\",\"engine\":\"qkv\",\"model\":\"$MODEL\",\"decode\":\"$mode\",\"train_s\":$train_s,\"bleu\":$bleu}"
    done
else
    echo "{\"bench\":\"translation_quality\",\"engine\":\"qkv\",\"model\":\"$MODEL\",\"train_s\":$train_s,\"status\":\"qkv translate is missing: no test BLEU\"}"
fi
set -- --model "$MODEL" --data "$DATA" --qkv "$QKV"
[ "$STEPS" != 0 ] && set -- "$@" --steps "$STEPS"
$PY "$HERE/translation.py" "$@"

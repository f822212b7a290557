#!/bin/sh
# Tagger quality, qkv vs PyTorch (issue 23): same data, vocabulary, tag ids, model, optimiser and steps
# (bench/quality/tagger.json), test accuracy over all tokens, one JSON line per engine.
#   bench/quality/tagger.sh [bilstm|transformer] [STEPS]   (QKV=path/to/qkv, DATA=../shared/data/pos, OUT=dir)
# Same steps: qkv trains without length bucketing (data.bucket false), drawing batches as the reference does.
# Equal wall-clock instead: BUDGET=300 (seconds of training on each side; run on a quiet machine, one at a time).
# THREADS=N (default 2) threads per engine. tagger.py reads qkv's run (vocab.txt, labels.txt), so qkv trains first.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=${1:-bilstm}
STEPS=${2:-0}
QKV=${QKV:-$HERE/../../build/qkv}
DATA=${DATA:-$HERE/../../../shared/data/pos}
OUT=${OUT:-$(mktemp -d)}
BUDGET=${BUDGET:-0}
mkdir -p "$OUT"
PY=/usr/bin/python3
THREADS=${THREADS:-2}
export QKV_THREADS=$THREADS
$PY - "$HERE/tagger.json" "$MODEL" "$DATA" "$STEPS" "$BUDGET" > "$OUT/qkv_$MODEL.json" <<'PYEOF'
import json, os, sys
c = json.load(open(sys.argv[1]))
model, data, steps, budget = sys.argv[2], os.path.abspath(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
run = {"model": c["models"][model], "data": dict(c["data"]), "train": c["train"], "eval": c["eval"], "seed": c["seed"]}
for k in ("train", "dev", "test"):
    run["data"][k] = os.path.join(data, c["data"][k])
if budget:
    run["train"]["steps"] = 10 ** 9
    run["train"]["max_seconds"] = budget
else:
    run["data"]["bucket"] = False
if steps:
    run["train"]["steps"] = steps
print(json.dumps(run, indent=1))
PYEOF
rm -rf "$OUT/run_$MODEL"
"$QKV" train --config "$OUT/qkv_$MODEL.json" --run "$OUT/run_$MODEL" --quiet
end=$(grep '"kind":"end"' "$OUT/run_$MODEL/log.jsonl" | tail -1)
train_s=$(echo "$end" | sed -E 's/.*"train_seconds":([0-9.]+).*/\1/')
step=$(echo "$end" | sed -E 's/.*"step":([0-9]+).*/\1/')
ckpt=$(ls "$OUT/run_$MODEL"/ckpt-*.safetensors | sed -E 's/.*ckpt-([0-9]+)\..*/\1/' | sort -n | tail -1)
acc=$("$QKV" eval --run "$OUT/run_$MODEL" --checkpoint "$OUT/run_$MODEL/ckpt-$ckpt.safetensors" --split test --json |
      sed -E 's/.*"accuracy":([0-9.e-]+).*/\1/')
echo "{\"bench\":\"tagger_quality\",\"engine\":\"qkv\",\"model\":\"$MODEL\",\"steps\":$step,\"train_s\":$train_s,\"test_accuracy\":$acc}"
set -- --run "$OUT/run_$MODEL" --data "$DATA" --threads "$THREADS" --name "$MODEL"
[ "$STEPS" != 0 ] && set -- "$@" --steps "$STEPS"
[ "$BUDGET" != 0 ] && set -- "$@" --seconds "$BUDGET"
$PY "$HERE/tagger.py" "$@"

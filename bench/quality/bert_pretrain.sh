#!/bin/sh
# BERT pretraining quality (issue 25): trains `qkv config show bert_small` (d 256, 4 layers, 4 heads, seq 128, MLM +
# NSP on the English text of ../shared/data) for MINUTES minutes of training time and prints one JSON line with the
# held-out MLM and NSP accuracy of the last eval (30 batches of 64 held-out sequences; an eval runs every
# EVAL_EVERY steps and at the end).
#   bench/quality/bert_pretrain.sh [MINUTES]   (QKV=path/to/qkv, DATA=../shared/data, OUT=dir, THREADS=N,
#                                              EVAL_EVERY=1000; extra `--set KEY=VALUE` options as SET="...")
# The run is OUT/run: its hf/ directory is what `qkv attend --model`, bench/quality/transfer.sh and
# bench/quality/bert_attention.py read.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
MINUTES=${1:-60}
QKV=${QKV:-$HERE/../../build/qkv}
DATA=${DATA:-$HERE/../../../shared/data}
OUT=${OUT:-$(mktemp -d)}
EVAL_EVERY=${EVAL_EVERY:-1000}
export QKV_THREADS=${THREADS:-2}
mkdir -p "$OUT"
"$QKV" config show bert_small > "$OUT/bert_small.json"
rm -rf "$OUT/run"
# shellcheck disable=SC2086
"$QKV" train --config "$OUT/bert_small.json" --run "$OUT/run" --quiet \
    --set "data.train=$DATA" --set "train.max_seconds=$(awk "BEGIN { print $MINUTES * 60 }")" --set "eval.every=$EVAL_EVERY" ${SET:-}
/usr/bin/python3 - "$OUT/run/log.jsonl" "$MINUTES" <<'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ev = [r for r in recs if r.get("kind") == "eval"]
end = [r for r in recs if r.get("kind") == "end"]
if not ev:
    sys.exit("bert_pretrain: the run made no eval (raise the minutes or lower EVAL_EVERY)")
e = ev[-1]
print(json.dumps({"minutes": float(sys.argv[2]), "steps": end[-1].get("step") if end else e["step"],
                  "eval_step": e["step"], "mlm_accuracy": e.get("mlm_accuracy"), "nsp_accuracy": e.get("nsp_accuracy"),
                  "mlm_loss": e.get("mlm_loss"), "nsp_loss": e.get("nsp_loss"),
                  "train_seconds": end[-1].get("train_seconds") if end else None}))
PYEOF

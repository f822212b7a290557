#!/bin/sh
# Translation quality, qkv vs PyTorch (issue 10): same data, tokenisation, hyperparameters and steps
# (bench/quality/translation.json), test BLEU with greedy, beam and MBR decoding, one JSON line per engine and mode.
# With a bpe tokenizer, qkv's run trains the BPE first and translation.py encodes with that run's files.
#   bench/quality/translation.sh [transformer|lstm] [STEPS]      (QKV=path/to/qkv, DATA=../shared/data/translation,
#                                                                 LIMIT=N test sentences, 0 all; smoke: STEPS 20 LIMIT 5)
# Same steps: qkv trains without length bucketing (data.bucket false), sampling batches as the reference does.
# Equal wall-clock instead of equal steps: BUDGET=900 (seconds of training on each side; evaluations not counted).
# EVAL_EVERY=N overrides eval.every on both sides. THREADS=N (default 2) threads per engine: same-steps runs do not
# depend on time, so two of them may share the machine at THREADS=1 (equal wall-clock runs: one at a time). Each side's dev curve (loss and greedy BLEU of 200 dev sentences
# at every evaluation) is kept in OUT (run_<model>/log.jsonl and torch_<model>.jsonl) and drawn by `qkv plot` into
# OUT/bleu_<model>.svg (BLEU against minutes of training).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=${1:-transformer}
STEPS=${2:-0}
LIMIT=${LIMIT:-0}
QKV=${QKV:-$HERE/../../build/qkv}
DATA=${DATA:-$HERE/../../../shared/data/translation}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
PY=/usr/bin/python3
THREADS=${THREADS:-2}
export QKV_THREADS=$THREADS

# qkv's run config: the shared fields plus models.<MODEL> as "model", data paths made absolute; and the decoding
# settings as qkv translate flags.
BUDGET=${BUDGET:-0}
EVAL_EVERY=${EVAL_EVERY:-0}
$PY - "$HERE/translation.json" "$MODEL" "$DATA" "$STEPS" "$OUT" "$BUDGET" "$EVAL_EVERY" > "$OUT/qkv_$MODEL.json" <<'PYEOF'
import json, os, sys
c = json.load(open(sys.argv[1]))
model, data, steps, out = sys.argv[2], os.path.abspath(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
budget, every = float(sys.argv[6]), int(sys.argv[7])
run = {"model": c["models"][model], "data": dict(c["data"]), "train": c["train"], "eval": c["eval"], "seed": c["seed"]}
for k in ("train", "dev", "test"):
    run["data"][k] = os.path.join(data, c["data"][k])
run["eval"]["bleu"] = True  # the dev BLEU curve (greedy, eval.bleu_max_examples sentences)
run["eval"]["bleu_max_examples"] = 200
if every:
    run["eval"]["every"] = every
if budget:
    run["train"]["steps"] = 10 ** 9
    run["train"]["max_seconds"] = budget
if steps:
    run["train"]["steps"] = steps
    run["eval"]["every"] = min(run["eval"]["every"], steps)
    # Same steps: the reference's batches are random draws of whole sentences, so qkv's length bucketing (less
    # padding: faster, but batches of alike lengths learn a little less per step) is off. Equal wall-clock runs
    # keep qkv's default.
    run["data"]["bucket"] = False
print(json.dumps(run, indent=1))
d = c["decode"]
with open(os.path.join(out, "decode_flags"), "w") as f:
    f.write("greedy --max-len %d\n" % d["max_len"])
    f.write("beam --max-len %d --beam %d --alpha %g\n" % (d["max_len"], d["beam"], d["alpha"]))
    f.write("mbr --max-len %d --mbr %d --utility %s\n" % (d["max_len"], d["mbr_samples"], d["mbr_utility"]))
PYEOF

if [ "$LIMIT" != 0 ]; then head -n "$LIMIT" "$DATA/test.tsv" > "$OUT/test.tsv"; else cp "$DATA/test.tsv" "$OUT/test.tsv"; fi
cut -f1 "$OUT/test.tsv" > "$OUT/src.txt"
cut -f2 "$OUT/test.tsv" > "$OUT/ref.txt"
"$QKV" train --config "$OUT/qkv_$MODEL.json" --run "$OUT/run_$MODEL" --quiet
train_s=$(grep '"kind":"end"' "$OUT/run_$MODEL/log.jsonl" | tail -1 | sed -E 's/.*"train_seconds":([0-9.]+).*/\1/')
# MBR decodes the first MBR_LIMIT test sentences only (on both sides: PyTorch's MBR is slow).
MBR_LIMIT=${MBR_LIMIT:-200}
head -n "$MBR_LIMIT" "$OUT/src.txt" > "$OUT/src_mbr.txt"
head -n "$MBR_LIMIT" "$OUT/ref.txt" > "$OUT/ref_mbr.txt"
while read -r mode flags; do
    part=""
    [ "$mode" = mbr ] && part=_mbr
    # shellcheck disable=SC2086 # flags are words
    "$QKV" translate --run "$OUT/run_$MODEL" $flags "$OUT/src$part.txt" > "$OUT/hyp_$mode.txt"
    bleu=$("$QKV" bleu -r "$OUT/ref$part.txt" -i "$OUT/hyp_$mode.txt" --json)
    n=$(wc -l < "$OUT/hyp_$mode.txt")
    echo "{\"bench\":\"translation_quality\",\"engine\":\"qkv\",\"model\":\"$MODEL\",\"decode\":\"$mode\",\"sentences\":$n,\"train_s\":$train_s,\"bleu\":$bleu}"
done < "$OUT/decode_flags"
set -- --model "$MODEL" --data "$DATA" --qkv "$QKV" --run "$OUT/run_$MODEL" --limit "$LIMIT" --mbr-limit "$MBR_LIMIT" \
    --threads "$THREADS"
[ "$STEPS" != 0 ] && set -- "$@" --steps "$STEPS"
[ "$BUDGET" != 0 ] && set -- "$@" --seconds "$BUDGET"
[ "$EVAL_EVERY" != 0 ] && set -- "$@" --eval-every "$EVAL_EVERY"
$PY "$HERE/translation.py" "$@" --curve "$OUT/torch_$MODEL.jsonl"
"$QKV" plot -o "$OUT/bleu_$MODEL.svg" --x minutes --y bleu --title "$MODEL: dev BLEU (greedy, 200 sentences)" \
    "qkv=$OUT/run_$MODEL" "pytorch=$OUT/torch_$MODEL.jsonl"

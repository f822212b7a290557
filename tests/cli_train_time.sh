#!/usr/bin/env bash
# train.max_seconds: a time budget (for equal-wall-clock comparisons) stops training, scores dev, saves a checkpoint.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
SRC=${QKV_SOURCE_DIR:?QKV_SOURCE_DIR not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
cat > "$d/c.json" <<JSON
{"model": {"type": "embmean", "dim": 16},
 "data": {"train": "$SRC/examples/data/reviews/train.tsv", "dev": "$SRC/examples/data/reviews/dev.tsv"},
 "train": {"steps": 100000000, "max_seconds": 1.5, "checkpoint_every": 0}, "eval": {"every": 1000}}
JSON
start=$(date +%s%N)
"$QKV" train --config "$d/c.json" --run "$d/run" --quiet; rc=$?
took=$(( ($(date +%s%N) - start) / 1000000 ))
check "a time-limited run exits 0" '[ $rc = 0 ]'
check "it stops near its budget (took ${took} ms)" '[ "$took" -lt 10000 ]'
check "the end record says time_limit" 'tail -1 "$d/run/log.jsonl" | grep -q "\"outcome\":\"time_limit\""'
check "dev was scored at the last step and a checkpoint saved" 'grep -q "\"kind\":\"eval\"" "$d/run/log.jsonl" && ls "$d/run"/ckpt-*.safetensors >/dev/null 2>&1'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

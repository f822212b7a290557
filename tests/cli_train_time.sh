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
end_train=$(tail -1 "$d/run/log.jsonl" | sed -E 's/.*"train_seconds":([0-9.e+-]+).*/\1/')
check "train_seconds of the end record is the budget, evaluation not counted ($end_train s)" \
  'awk -v t="$end_train" "BEGIN{exit !(t >= 1.5 && t < 3)}"'

# eval.every_seconds: evals by training time (for curves against minutes), none by steps; the last step scored too.
sed -e 's/"max_seconds": 1.5/"max_seconds": 1.2/' -e 's/"every": 1000}/"every": 0, "every_seconds": 0.25}/' \
  "$d/c.json" > "$d/t.json"
"$QKV" train --config "$d/t.json" --run "$d/timed" --quiet; rc=$?
evals=$(grep -c '"kind":"eval"' "$d/timed/log.jsonl")
secs=$(grep '"kind":"eval"' "$d/timed/log.jsonl" | sed -E 's/.*"train_seconds":([0-9.e+-]+).*/\1/' | tr '\n' ' ')
check "eval.every_seconds 0.25 over 1.2 s: an eval at every 0.25 s of training and the last step, at 0.25 s steps ($secs)" \
  '[ $rc = 0 ] && [ "$evals" -ge 5 ] && echo "$secs" | awk "{for (i = 1; i <= 4; i++) if (\$i < 0.25 * i || \$i > 0.25 * i + 0.2) exit 1}"'

# Both cadences at once: a step scored by one is not scored again by the other or by the last-step eval.
sed -e 's/"max_seconds": 1.5/"max_seconds": 1.2/' -e 's/"every": 1000}/"every": 7, "every_seconds": 0.3}/' \
  "$d/c.json" > "$d/both.json"
"$QKV" train --config "$d/both.json" --run "$d/both" --quiet; rc=$?
steps=$(grep '"kind":"eval"' "$d/both/log.jsonl" | sed -E 's/.*"step":([0-9]+).*/\1/')
check "eval.every with eval.every_seconds: every eval at its own step ($(echo $steps | wc -w) evals)" \
  '[ $rc = 0 ] && [ -n "$steps" ] && [ -z "$(echo "$steps" | sort | uniq -d)" ]'

# qkv plot draws the run's curves; a source without the field is bad input naming it.
"$QKV" plot -o "$d/curve.svg" --x minutes --y accuracy "qkv run=$d/run" 2>"$d/err"; rc=$?
check "qkv plot writes an SVG of the dev accuracy against minutes" '[ $rc = 0 ] && grep -q "<svg" "$d/curve.svg" && grep -q "qkv run" "$d/curve.svg" && grep -q "minutes of training" "$d/curve.svg"'
printf '{"kind":"eval","step":1,"train_seconds":6,"accuracy":0.5}\n{"kind":"eval","step":2,"train_seconds":12,"accuracy":0.6}\n' > "$d/torch.jsonl"
"$QKV" plot -o "$d/two.svg" --x seconds --y accuracy "$d/run" torch="$d/torch.jsonl"; rc=$?
check "two sources in one plot" '[ $rc = 0 ] && grep -q ">torch<" "$d/two.svg"'
long="a title far longer than one panel of the plot is wide, which used to run off its right edge unseen"
"$QKV" plot -o "$d/long.svg" --title "$long" --x seconds --y accuracy "$d/run"; rc=$?
check "a long title is squeezed into the panel" '[ $rc = 0 ] && grep -q "textLength=\"632.0\"" "$d/long.svg" && ! grep -q "textLength" "$d/two.svg"'
lab="a series label longer than the legend's usual room"
"$QKV" plot -o "$d/lab.svg" --x seconds --y accuracy "$lab=$d/run"; rc=$?
lx=$(grep -o "<text x=\"[0-9.]*\" y=\"[0-9.]*\">$lab" "$d/lab.svg" | sed -E 's/<text x="([0-9.]+)".*/\1/')
check "a long legend label stays inside the panel" '[ $rc = 0 ] && [ -n "$lx" ] && awk -v x="$lx" -v n=${#lab} "BEGIN { exit !(x + n * 6.2 <= 624.5) }"'
"$QKV" plot -o "$d/utf.svg" --title "$(printf 'bad \377 title')" --x seconds --y accuracy "$d/run" 2>"$d/err"; rc=$?
check "a title that is not UTF-8 is bad input, no SVG written" '[ $rc = 2 ] && grep -q "not valid UTF-8" "$d/err" && [ ! -e "$d/utf.svg" ]'
"$QKV" plot -o "$d/bad.svg" --y bleu "$d/run" 2>"$d/err"; rc=$?
check "a field no record holds is bad input (exit 2) naming it" '[ $rc = 2 ] && grep -q bleu "$d/err" && [ ! -e "$d/bad.svg" ]'
echo "not json" > "$d/broken.jsonl"
"$QKV" plot -o "$d/bad.svg" "$d/broken.jsonl" 2>"$d/err"; rc=$?
check "a malformed log is bad input naming file:line" '[ $rc = 2 ] && grep -q "broken.jsonl:1" "$d/err"'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

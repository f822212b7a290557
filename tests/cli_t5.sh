#!/usr/bin/env bash
# T5 from the command line: span-corruption pretraining of a small t5 on plain text (the lm/ corpus) learns (dev
# loss well below the uniform level within 200 steps), the model's output shows the sentinels, config show gives
# the small default, and span corruption refuses a model that is not an encoder-decoder. Skipped without the data.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
data=${QKV_SHARED:-}/data/lm
[ -f "$data/train.txt" ] || { echo "SKIP: $data/train.txt absent"; exit 77; }
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
head -1500 "$data/train.txt" > "$d/train.txt"
head -100 "$data/dev.txt" > "$d/dev.txt"
cat > "$d/c.json" <<JSON
{"model": {"type": "t5", "d_model": 64, "n_heads": 4, "d_ff": 128, "dropout": 0.0},
 "data": {"task": "span_corruption", "train": "$d/train.txt", "dev": "$d/dev.txt", "max_len": 64, "max_vocab": 2000},
 "train": {"steps": 200, "batch_size": 16, "optimizer": {"lr": 0.003}, "log_every": 100},
 "eval": {"every": 200}, "seed": 3}
JSON
QKV_THREADS=1 "$QKV" train --config "$d/c.json" --run "$d/run" --quiet > /dev/null 2> "$d/err"; rc=$?
[ $rc = 0 ] || cat "$d/err"
loss=$("$QKV" eval --run "$d/run" --json | sed 's/.*"loss":\([0-9.]*\).*/\1/')
# 2,000 words + specials + 100 sentinels: a uniform guess costs ln(2104) = 7.65 nats a token.
check "span-corruption pretraining learns (dev loss $loss < 5.0)" '[ $rc = 0 ] && awk -v l="$loss" "BEGIN{exit !(l < 5.0)}"'
out=$(echo "the family of dashwood had long been settled in sussex" | "$QKV" translate --run "$d/run")
check "the model's output starts with the first sentinel" '[ "${out%% *}" = "<extra_id_0>" ]'
gen=$("$QKV" generate --run "$d/run" --max-tokens 30 "the family of dashwood had long been settled in sussex")
out30=$(echo "the family of dashwood had long been settled in sussex" | "$QKV" translate --run "$d/run" --max-len 30)
check "generate with a text-to-text run prints its output (as translate)" '[ -n "$gen" ] && [ "$gen" = "$out30" ]'
"$QKV" config show t5 > "$d/show"
check "config show t5: the small default with a shared vocabulary" 'grep -Eq "\"d_model\":[[:space:]]+128" "$d/show" && grep -Eq "\"shared_vocab\":[[:space:]]+true" "$d/show"'
sed 's/"type": "t5"/"type": "gpt"/' "$d/c.json" > "$d/gpt.json"
"$QKV" train --config "$d/gpt.json" --run "$d/gpt" > /dev/null 2> "$d/err"; rc=$?
check "span_corruption with a language model exits 2 naming the task" '[ $rc = 2 ] && grep -q "span_corruption" "$d/err"'
# Fresh noise every pass (data.span_redraw, T5's behaviour): the first pass is the load-time draw, later passes
# differ from a run that keeps it, and a run resumed after a redraw continues bit for bit.
head -40 "$data/train.txt" > "$d/small.txt"
cat > "$d/rd.json" <<JSON
{"model": {"type": "t5", "d_model": 32, "n_heads": 2, "d_ff": 64, "dropout": 0.0},
 "data": {"task": "span_corruption", "train": "$d/small.txt", "max_len": 32, "max_vocab": 500},
 "train": {"steps": 20, "batch_size": 8, "log_every": 1, "checkpoint_every": 10}, "eval": {"every": 0}, "seed": 3}
JSON
losses() { grep -o "\"epoch\":$2,\"loss\":[0-9.]*" "$1/log.jsonl"; }
QKV_THREADS=1 "$QKV" train --config "$d/rd.json" --run "$d/rd" --quiet > /dev/null 2>&1
QKV_THREADS=1 "$QKV" train --config "$d/rd.json" --run "$d/once" --quiet --set data.span_redraw=false > /dev/null 2>&1
check "span_redraw: the first pass is the load-time draw" '[ -n "$(losses "$d/rd" 0)" ] && [ "$(losses "$d/rd" 0)" = "$(losses "$d/once" 0)" ]'
check "span_redraw: the second pass draws new noise" '[ -n "$(losses "$d/rd" 1)" ] && [ "$(losses "$d/rd" 1)" != "$(losses "$d/once" 1)" ]'
QKV_THREADS=1 "$QKV" train --config "$d/rd.json" --run "$d/rs" --quiet --set train.steps=13 > /dev/null 2>&1
QKV_THREADS=1 "$QKV" train --config "$d/rd.json" --run "$d/rs" --quiet --resume > /dev/null 2>&1
check "span_redraw: resumed within the second pass, the same losses" '[ "$(grep -o "\"step\":20,[^}]*\"loss\":[0-9.]*" "$d/rs/log.jsonl")" = "$(grep -o "\"step\":20,[^}]*\"loss\":[0-9.]*" "$d/rd/log.jsonl")" ] && grep -q "\"step\":20," "$d/rd/log.jsonl"'
# Text-to-text with task prefixes: one model, per-task metrics in eval, generate with a prefix.
for i in $(seq 1 30); do
  printf 'sentiment: what a lovely happy day\tpositive\nsentiment: a sad and awful film\tnegative\n'
  printf 'summarize: the cat sat on the mat for the whole long day\tcat on mat\n'
  printf 'summarize: rain fell on the town and the river rose over its banks\train and flood\n'
done > "$d/mt.tsv"
head -4 "$d/mt.tsv" > "$d/mt_dev.tsv"
cat > "$d/mt.json" <<JSON
{"model": {"type": "t5", "d_model": 32, "n_heads": 2, "d_ff": 64, "dropout": 0.0},
 "data": {"train": "$d/mt.tsv", "dev": "$d/mt_dev.tsv", "max_len": 24},
 "train": {"steps": 150, "batch_size": 8, "optimizer": {"lr": 0.01}},
 "eval": {"every": 150, "tasks": "sentiment=accuracy,summarize=rouge"}, "seed": 2}
JSON
"$QKV" train --config "$d/mt.json" --run "$d/mt" --quiet > /dev/null 2>&1; rc=$?
"$QKV" eval --run "$d/mt" --json > "$d/mt_eval" 2>&1
check "eval.tasks: per-task metrics of a text-to-text run" '[ $rc = 0 ] && grep -q "\"tasks\":{\"sentiment\":{\"accuracy\":100,\"examples\":2},\"summarize\":{\"rougeL\":100,\"examples\":2}}" "$d/mt_eval"'
gen=$("$QKV" generate --run "$d/mt" "sentiment: a sad and awful film")
check "generate answers a prefixed prompt" '[ "$gen" = "negative" ]'
"$QKV" train --config "$d/mt.json" --run "$d/mt_bad" --set eval.tasks=sentiment=f1 > /dev/null 2> "$d/err"; rc=$?
check "a bad eval.tasks metric is an error naming it" '[ $rc != 0 ] && grep -q "eval.tasks" "$d/err"'
# The shared English corpus as a directory: qkv_documents_read_data_dir's training documents (Austen, KJV, Brown,
# Debian descriptions), never the Spanish side nor a dev/test split.
cat > "$d/dir.json" <<JSON
{"model": {"type": "t5", "d_model": 32, "n_heads": 2, "d_ff": 64},
 "data": {"task": "span_corruption", "train": "$data/..", "max_len": 32, "max_vocab": 8000},
 "train": {"steps": 2, "batch_size": 4}, "eval": {"every": 0}}
JSON
"$QKV" train --config "$d/dir.json" --run "$d/dir" --quiet > /dev/null 2> "$d/err"; rc=$?
[ $rc = 0 ] || cat "$d/err"
check "span corruption reads the shared corpus directory (English words of several sources, no Spanish)" \
  '[ $rc = 0 ] && grep -qx package "$d/dir/vocab.txt" && grep -qx dashwood "$d/dir/vocab.txt" && ! grep -qx jehová "$d/dir/vocab.txt"'
"$QKV" config show t5_small > "$d/small.json"; rc=$?
check "t5_small: span corruption on the shared corpus, d 128" '[ $rc = 0 ] && grep -q "\"span_corruption\"" "$d/small.json" && grep -q "\"../shared/data\"" "$d/small.json"'
echo "$pass passed, $fail failed"
[ $fail = 0 ]

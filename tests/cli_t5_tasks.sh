#!/usr/bin/env bash
# Multi-task text-to-text runs from the command line (data.tasks, docs/t5.md): the tasks' files in four formats
# become one prefixed seq2seq corpus in the run directory, training draws from them by the mixing rates (the log
# shows each task's share; equal mixing gives each about 1/4), a resumed run draws exactly what the uninterrupted
# one did, qkv eval scores each task with its metric, and a bad task exits 2 naming the index.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
words=(red green blue black white small large quick slow bright dark old new warm cold)
for i in $(seq 0 59); do
  a=${words[$((i % 15))]} b=${words[$(((i * 7 + 3) % 15))]} c=${words[$(((i * 4 + 1) % 15))]}
  printf '%s %s %s\t%s %s %s\n' "$a" "$b" "$c" "$c" "$b" "$a" >> "$d/rev.tsv"
  printf '%d\tthe %s %s thing\n' $((i % 2)) "$a" "$([ $((i % 2)) = 1 ] && echo good || echo bad)" >> "$d/sent.tsv"
  printf '%d\t%s %s\t%s %s\n' $((i % 2)) "$a" "$b" "$a" "$([ $((i % 2)) = 1 ] && echo "$b" || echo "$c")" >> "$d/para.tsv"
done
for i in $(seq 0 19); do
  a=${words[$((i % 15))]}
  printf '{"id": "q%d", "question": "which colour is XXXXX ?", "context": "the %s one", "answers": [{"text": "%s", "answer_start": 4}]}\n' \
    "$i" "$a" "$a" >> "$d/qa.jsonl"
done
head -12 "$d/rev.tsv" > "$d/rev.dev.tsv"; head -12 "$d/sent.tsv" > "$d/sent.dev.tsv"
cat > "$d/c.json" <<JSON
{"model": {"type": "t5", "d_model": 32, "n_heads": 2, "d_kv": 16, "d_ff": 64, "dropout": 0.0},
 "data": {"max_len": 32, "tasks": [
   {"name": "reverse", "train": "$d/rev.tsv", "dev": "$d/rev.dev.tsv", "test": "$d/rev.dev.tsv"},
   {"name": "sentiment", "train": "$d/sent.tsv", "dev": "$d/sent.dev.tsv", "format": "label", "labels": "negative,positive"},
   {"name": "paraphrase", "train": "$d/para.tsv", "format": "pair_label", "labels": "no,yes"},
   {"name": "cloze", "train": "$d/qa.jsonl", "dev": "$d/qa.jsonl", "format": "qa"}],
  "mixing": "equal"},
 "train": {"steps": 40, "batch_size": 8, "log_every": 40, "checkpoint_every": 20},
 "eval": {"every": 0}, "seed": 5}
JSON
QKV_THREADS=1 "$QKV" train --config "$d/c.json" --run "$d/run" --quiet > /dev/null 2> "$d/err"; rc=$?
[ $rc = 0 ] || cat "$d/err"
check "a multi-task run trains" '[ $rc = 0 ]'
check "the tasks' examples are rewritten with their prefixes" \
  'grep -q "^reverse: red " "$d/run/tasks/train.tsv" && grep -qP "^sentiment: the red bad thing\tnegative$" "$d/run/tasks/train.tsv" \
   && grep -qP "^paraphrase: sentence1: red \S+ sentence2: red \S+\t(yes|no)$" "$d/run/tasks/train.tsv" \
   && grep -qP "^question: which colour is XXXXX \? context: the red one\tred$" "$d/run/tasks/train.tsv"'
check "train has 200 examples, dev 44, test 12" \
  '[ $(wc -l < "$d/run/tasks/train.tsv") = 200 ] && [ $(wc -l < "$d/run/tasks/dev.tsv") = 44 ] && [ $(wc -l < "$d/run/tasks/test.tsv") = 12 ]'
share=$(grep '"kind":"train"' "$d/run/log.jsonl" | tail -1 | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); s=r["task_share"]; print(len(s), round(sum(s.values()), 6), min(s.values()), max(s.values()))')
read -r n_tasks total lo hi <<< "$share"
check "the log shows each task's share, equal mixing about 1/4 each ($share)" \
  '[ "$n_tasks" = 4 ] && [ "$total" = 1.0 ] && awk -v lo="$lo" -v hi="$hi" "BEGIN{exit !(lo > 0.15 && hi < 0.35)}"'
QKV_THREADS=1 "$QKV" train --config "$d/c.json" --run "$d/res" --set train.steps=20 --quiet > /dev/null 2>&1
QKV_THREADS=1 "$QKV" train --resume --run "$d/res" --set train.steps=40 --quiet > /dev/null 2>&1
check "a resumed run draws what the uninterrupted one did (same weights)" 'cmp -s "$d/run/ckpt-40.safetensors" "$d/res/ckpt-40.safetensors"'
check "and logs the same shares" '[ "$(grep -o "\"task_share[^}]*" "$d/run/log.jsonl" | tail -1)" = "$(grep -o "\"task_share[^}]*" "$d/res/log.jsonl" | tail -1)" ]'
"$QKV" eval --run "$d/run" --split dev --json > "$d/dev.json" 2> "$d/err"
check "qkv eval scores each task with its metric" \
  'python3 -c "import json,sys; t=json.load(open(sys.argv[1]))[\"tasks\"]; assert set(t)=={\"reverse\",\"sentiment\",\"cloze\"}; assert \"bleu\" in t[\"reverse\"] and \"accuracy\" in t[\"sentiment\"] and \"exact_match\" in t[\"cloze\"] and \"f1\" in t[\"cloze\"]; assert t[\"reverse\"][\"examples\"]==12 and t[\"cloze\"][\"examples\"]==20" "$d/dev.json"'
"$QKV" eval --run "$d/run" --split test > "$d/test.txt" 2> "$d/err"
check "test split: only the task with a test file" 'grep -q "^  reverse  *bleu" "$d/test.txt" && ! grep -q sentiment "$d/test.txt"'
sed 's/"format": "label"/"format": "labels"/' "$d/c.json" > "$d/bad.json"
"$QKV" train --config "$d/bad.json" --run "$d/bad" > /dev/null 2> "$d/err"; rc=$?
check "a bad task format exits 2 naming data.tasks[1].format" '[ $rc = 2 ] && grep -q "data.tasks\[1\].format" "$d/err"'
sed 's/"labels": "negative,positive"/"labels": "negative"/' "$d/c.json" > "$d/bad2.json"
"$QKV" train --config "$d/bad2.json" --run "$d/bad2" > /dev/null 2> "$d/err"; rc=$?
check "a label without a word exits 2 naming file and line" '[ $rc = 2 ] && grep -q "sent.tsv:2: label .1." "$d/err"'
check "and leaves no half-written task files" '[ ! -e "$d/bad2/tasks" ]'
# Pretrain -> fine-tune: span corruption on plain text, then the tasks from its weights (finetune.init_from) with its
# tokenizer (data.tokenizer_from) and its sentinel ids (data.keep_sentinels), so every tensor has its shape.
for i in $(seq 0 199); do echo "${words[$((i % 15))]} ${words[$(((i * 7) % 15))]} ${words[$(((i * 11 + 2) % 15))]} ${words[$(((i * 2 + 5) % 15))]} ${words[$(((i * 13 + 1) % 15))]}"; done > "$d/corpus.txt"
cat > "$d/pre.json" <<JSON
{"model": {"type": "t5", "d_model": 32, "n_heads": 2, "d_kv": 16, "d_ff": 64, "dropout": 0.0},
 "data": {"task": "span_corruption", "train": "$d/corpus.txt", "max_len": 16, "sentinels": 20},
 "train": {"steps": 10, "batch_size": 8}, "eval": {"every": 0}, "seed": 5}
JSON
QKV_THREADS=1 "$QKV" train --config "$d/pre.json" --run "$d/pre" --quiet > /dev/null 2>&1; rc=$?
check "span-corruption pretraining on plain text" '[ $rc = 0 ]'
python3 - "$d" <<'PY'
import json, sys
d = sys.argv[1]
c = json.load(open(d + "/c.json"))
c["data"].update({"tokenizer_from": d + "/pre", "keep_sentinels": True, "sentinels": 20})
c["finetune"] = {"init_from": d + "/pre"}
json.dump(c, open(d + "/ft.json", "w"))
c["data"]["keep_sentinels"] = False
json.dump(c, open(d + "/ft_bad.json", "w"))
PY
QKV_THREADS=1 "$QKV" train --config "$d/ft.json" --run "$d/ft" --set train.steps=10 --quiet > /dev/null 2> "$d/err"; rc=$?
[ $rc = 0 ] || cat "$d/err"
check "fine-tuning starts from every pretrained tensor, with the pretraining vocabulary" \
  '[ $rc = 0 ] && grep "\"kind\":\"init_from\"" "$d/ft/log.jsonl" | grep -q "\"n_new\":0" && cmp -s "$d/pre/vocab.txt" "$d/ft/vocab.txt"'
"$QKV" train --config "$d/ft_bad.json" --run "$d/ft_bad" --set train.steps=10 --quiet > /dev/null 2> "$d/err"; rc=$?
check "without the sentinels the embedding's shape differs: exit 2" '[ $rc = 2 ] && grep -qi "shape" "$d/err"'
echo "cli_t5_tasks: $pass passed, $fail failed"
[ "$fail" = 0 ]

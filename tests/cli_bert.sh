#!/usr/bin/env bash
# BERT pretraining from the command line: the bert_small ready-made config, a short pretraining run on real text
# (Austen chapters) that leaves a Hugging Face directory qkv attend --model reads, and the bad inputs the issue names:
# a corpus with no multi-sentence document (NSP impossible), a dev/test split as corpus, a checkpoint whose
# config.json disagrees with its weights' vocabulary.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
D=${QKV_SHARED:-}/data
if [ ! -f "$D/lm/train.txt" ]; then echo "SKIP cli_bert: $D (../shared/data) not found"; exit 77; fi
export QKV_THREADS=1
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

"$QKV" config show bert_small > "$T/small.json"; rc=$?
check "bert_small: d 256, 4 layers, 4 heads, seq 128" '[ $rc = 0 ] && grep -q "\"d_model\":[[:space:]]*256" "$T/small.json" && grep -q "\"n_layers\":[[:space:]]*4" "$T/small.json" && grep -q "\"n_heads\":[[:space:]]*4" "$T/small.json" && grep -q "\"max_len\":[[:space:]]*128" "$T/small.json"'
check "bert_small listed" '"$QKV" config list | grep -q "^bert_small"'
"$QKV" config check "$T/small.json" > /dev/null; check "bert_small passes config check" '[ $? = 0 ]'

head -n 800 "$D/lm/train.txt" | sed 's/^CHAPTER.*$//' > "$T/austen.txt"
cat > "$T/cfg.json" <<JSON
{"model": {"type": "bert", "d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64, "max_positions": 32},
 "data": {"train": "$T/austen.txt", "max_len": 32, "wordpiece_vocab_size": 500, "heldout": 0.2},
 "train": {"steps": 4, "batch_size": 8, "log_every": 2}, "eval": {"every": 4, "max_batches": 2}, "seed": 3}
JSON
"$QKV" train --config "$T/cfg.json" --run "$T/run" --quiet > /dev/null 2> "$T/err"; rc=$?
check "pretraining run finishes" '[ $rc = 0 ]'
check "eval reports MLM and NSP accuracy" 'grep "\"kind\":\"eval\"" "$T/run/log.jsonl" | grep -q "mlm_accuracy.*nsp_accuracy"'
check "run leaves a Hugging Face directory" '[ -f "$T/run/hf/model.safetensors" ] && [ -f "$T/run/hf/vocab.txt" ] && grep -q BertForPreTraining "$T/run/hf/config.json"'
"$QKV" attend --model "$T/run/hf" -o "$T/a.html" "Elinor was sensible. Marianne was not." > "$T/out" 2>&1; rc=$?
check "qkv attend --model reads it" '[ $rc = 0 ] && [ -s "$T/a.html" ] && grep -q "1 layers x 2 heads" "$T/out"'

# --pair: [CLS] A [SEP] B [SEP] with segment ids 0 then 1; the same ids with segment 0 throughout (a literal [SEP]
# in one sentence) must give other maps, or the segments were not passed.
"$QKV" attend --model "$T/run/hf" -o "$T/p.html" --pair "Marianne was not." "Elinor was sensible." > "$T/out" 2>&1; rc=$?
"$QKV" attend --model "$T/run/hf" -o "$T/s.html" "Elinor was sensible. [SEP] Marianne was not." > "$T/out2" 2>&1
ntok() { grep -o "([0-9]* tokens" "$1"; }
maps() { sed -n 's/.*"maps":\(.*\)/\1/p' "$1"; }
check "qkv attend --pair reads a sentence pair with its segments" \
  '[ $rc = 0 ] && [ "$(grep -o "\[SEP\]" "$T/p.html" | wc -l)" -ge 2 ] && [ -n "$(ntok "$T/out")" ] && [ "$(ntok "$T/out")" = "$(ntok "$T/out2")" ] && [ "$(maps "$T/p.html")" != "$(maps "$T/s.html")" ]'
"$QKV" attend --run "$T/run" --pair "B." -o "$T/x.html" "A." 2> "$T/err"; rc=$?
check "--pair with --run is a usage error" '[ $rc = 1 ] && grep -q "pair goes with --model" "$T/err"'

"$QKV" attend --run "$T/run" -o "$T/r.html" "Elinor was sensible." > /dev/null 2>&1; rc=$?
check "qkv attend --run shows the run's self-attention" '[ $rc = 0 ] && grep -q "self-attention, row of" "$T/r.html"'
check "qkv attend --run names the special tokens" 'grep -q "\[CLS\]" "$T/r.html" && grep -q "\[SEP\]" "$T/r.html"'
sed -E 's/"vocab_size":[[:space:]]*500/"vocab_size": 600/' "$T/run/hf/config.json" > "$T/c" && mv "$T/c" "$T/run/hf/config.json"
"$QKV" attend --model "$T/run/hf" -o "$T/b.html" "Elinor." 2> "$T/err"; rc=$?
check "config vocab_size disagreeing with the weights is bad input" '[ $rc = 2 ] && grep -q "vocab" "$T/err"'

printf 'One sentence alone.\n\nAnother one here.\n\nAnd a third.\n' > "$T/single.txt"
sed "s|$T/austen.txt|$T/single.txt|" "$T/cfg.json" > "$T/single.json"
"$QKV" train --config "$T/single.json" --run "$T/run2" --quiet 2> "$T/err"; rc=$?
check "no multi-sentence document: NSP impossible, exit 2" '[ $rc = 2 ] && grep -q "next-sentence prediction is impossible" "$T/err"'
sed "s|$T/austen.txt|$D/lm/dev.txt|" "$T/cfg.json" > "$T/dev.json"
"$QKV" train --config "$T/dev.json" --run "$T/run3" --quiet 2> "$T/err"; rc=$?
check "a dev split is never pretraining text" '[ $rc = 2 ] && grep -q "dev.txt" "$T/err"'

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

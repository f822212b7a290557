#!/usr/bin/env bash
# qkv train + qkv translate with a BPE trained on the corpus (one vocabulary for both sides): an lstm_seq2seq learns
# a copy task, translations come out as text, the run's BPE files encode with qkv tokenize, bad settings fail.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
. "${QKV_SOURCE_DIR:?QKV_SOURCE_DIR not set}/tests/harness/copy_task.sh"
copy_task "$d"
cat > "$d/lstm.json" <<JSON
{"model": {"type": "lstm_seq2seq", "embed": 32, "hidden": 64},
 "data": {"train": "$d/train.tsv", "dev": "$d/dev.tsv", "max_len": 16, "tokenizer": "bpe", "bpe_vocab_size": 300,
          "shared_vocab": true},
 "train": {"steps": 500, "batch_size": 32, "optimizer": {"lr": 0.01}, "log_every": 100, "checkpoint_every": 0},
 "eval": {"every": 500, "bleu": true}, "seed": 1}
JSON
"$QKV" train --config "$d/lstm.json" --run "$d/run" --quiet > /dev/null 2>&1
check "the run keeps its trained BPE" '[ -f "$d/run/vocab.json" ] && [ -f "$d/run/merges.txt" ] && [ ! -f "$d/run/tgt_vocab.json" ]'
"$QKV" translate --run "$d/run" "$d/src" > "$d/greedy"
b=$("$QKV" bleu -r "$d/ref" -i "$d/greedy" --json | sed -n 's/.*"score": \([0-9.]*\).*/\1/p')
check "lstm with BPE copies (BLEU $b > 80)" 'awk -v b="$b" "BEGIN{exit !(b > 80)}"'
eb=$("$QKV" eval --run "$d/run" --split dev --json | sed -n 's/.*"bleu": *\([0-9.e+-]*\).*/\1/p')
check "eval's dev BLEU ($eb) is the BLEU of qkv translate's greedy output ($b)" \
  'awk -v a="$eb" -v b="$b" "BEGIN{d = a - b; exit !(a != \"\" && d < 0.01 && d > -0.01)}"'
check "translations are text, one per line" '[ "$(wc -l < "$d/greedy")" = 40 ] && ! grep -q "<s>\|</s>\|<pad>" "$d/greedy"'
ids=$(echo "alpha beta" | "$QKV" tokenize encode --bpe "$d/run")
back=$(echo "$ids" | "$QKV" tokenize decode --bpe "$d/run")
check "qkv tokenize reads the run's BPE ($ids)" '[ "$back" = "alpha beta" ] && [ $(echo $ids | wc -w) -lt 10 ]'
sed 's/"bpe_vocab_size": 300/"bpe_vocab_size": 0/' "$d/lstm.json" > "$d/bad.json"
"$QKV" train --config "$d/bad.json" --run "$d/bad" --quiet > /dev/null 2> "$d/err"; rc=$?
check "bpe_vocab_size 0 is rejected naming the key (exit $rc)" '[ $rc != 0 ] && grep -q "data.bpe_vocab_size" "$d/err"'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

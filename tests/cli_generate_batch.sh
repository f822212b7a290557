#!/usr/bin/env bash
# qkv generate --input: many prompts generated in batches print exactly what one --prompt run per line prints, for
# a GPT and an LSTM language model, greedy and sampled (a seed), prompts of very different lengths, in input order.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
for i in $(seq 1 100); do echo "the cat sat on the mat. the dog sat on the log."; done > "$d/train.txt"
head -10 "$d/train.txt" > "$d/dev.txt"
cat > "$d/g.json" <<JSON
{"model": {"type": "gpt", "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32},
 "data": {"train": "$d/train.txt", "dev": "$d/dev.txt", "tokenizer": "char", "seq_len": 32},
 "train": {"steps": 40, "batch_size": 8, "optimizer": {"name": "adamw", "lr": 0.01}, "log_every": 50},
 "eval": {"every": 40, "max_batches": 1}}
JSON
sed 's/"type": "gpt", "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32/"type": "rnnlm", "d_model": 16, "n_layers": 1, "rnn": "lstm"/' "$d/g.json" > "$d/r.json"
"$QKV" train --config "$d/g.json" --run "$d/gpt" --quiet > /dev/null 2>&1
"$QKV" train --config "$d/r.json" --run "$d/rnn" --quiet > /dev/null 2>&1
printf '%s\n' "t" "the cat sat on the mat. the dog" "the d" "a" "the cat sat on" "og" > "$d/prompts"
for m in gpt rnn; do
  for args in "--max-tokens 12" "--max-tokens 9 --temperature 1 --top-k 4 --seed 5"; do
    : > "$d/one"
    while IFS= read -r p; do "$QKV" generate --run "$d/$m" $args --prompt "$p" >> "$d/one"; done < "$d/prompts"
    "$QKV" generate --run "$d/$m" $args --input "$d/prompts" > "$d/many"
    "$QKV" generate --run "$d/$m" $args --input "$d/prompts" --batch 4 > "$d/some"
    check "$m $args: --input equals one prompt at a time" \
      '[ -s "$d/many" ] && cmp -s "$d/one" "$d/many" && cmp -s "$d/one" "$d/some"'
  done
done
"$QKV" generate --run "$d/gpt" --input "$d/prompts" --prompt x > /dev/null 2>&1; rc=$?
check "--input with a prompt is a usage error" '[ $rc = 1 ]'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

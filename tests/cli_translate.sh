#!/usr/bin/env bash
# qkv translate: an lstm_seq2seq and a transformer_seq2seq learn a copy task; greedy, beam, n-best and MBR
# decoding through the CLI, scored with qkv bleu.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
. "${QKV_SOURCE_DIR:?QKV_SOURCE_DIR not set}/tests/harness/copy_task.sh"
copy_task "$d"
cat > "$d/lstm.json" <<JSON
{"model": {"type": "lstm_seq2seq", "embed": 32, "hidden": 64},
 "data": {"train": "$d/train.tsv", "dev": "$d/dev.tsv", "max_len": 8},
 "train": {"steps": 500, "batch_size": 32, "optimizer": {"lr": 0.01}, "log_every": 100, "checkpoint_every": 0},
 "eval": {"every": 500}, "seed": 1}
JSON
"$QKV" train --config "$d/lstm.json" --run "$d/lstm" --quiet > /dev/null 2>&1
"$QKV" translate --run "$d/lstm" "$d/src" > "$d/greedy"
b=$("$QKV" bleu -r "$d/ref" -i "$d/greedy" --json | sed -n 's/.*"score": \([0-9.]*\).*/\1/p')
check "lstm greedy translation copies (BLEU $b > 80)" 'awk -v b="$b" "BEGIN{exit !(b > 80)}"'
"$QKV" translate --run "$d/lstm" --input "$d/src" > "$d/greedy_input"
check "--input FILE reads as FILE does" 'cmp -s "$d/greedy_input" "$d/greedy"'
"$QKV" translate --run "$d/lstm" --beam 4 "$d/src" > "$d/beam"
b4=$("$QKV" bleu -r "$d/ref" -i "$d/beam" --json | sed -n 's/.*"score": \([0-9.]*\).*/\1/p')
check "lstm beam 4 (BLEU $b4 > 80)" 'awk -v b="$b4" "BEGIN{exit !(b > 80)}"'
"$QKV" translate --run "$d/lstm" --beam 1 "$d/src" > "$d/beam1"
check "beam 1 equals greedy" 'cmp -s "$d/beam1" "$d/greedy"'
n=$("$QKV" translate --run "$d/lstm" --beam 3 --n-best 3 "$d/src" | head -1 | awk -F'\t' '{print NF}')
check "n-best prints 3 hypotheses with scores" '[ "$n" = 6 ]'
# A line with a word twice (awk exit 0) among the outputs.
twice() { awk '{ delete seen; for (i = 1; i <= NF; i++) if (seen[$i]++) found = 1 } END { exit !found }' "$1"; }
"$QKV" translate --run "$d/lstm" --no-repeat-ngram 1 "$d/src" > "$d/nr1"
"$QKV" translate --run "$d/lstm" --no-repeat-ngram 1 --beam 3 "$d/src" > "$d/nr1b"
check "--no-repeat-ngram 1: greedy copies repeated words, the rule never repeats one (greedy, beam)" \
  'twice "$d/greedy" && ! twice "$d/nr1" && ! twice "$d/nr1b" && [ $(wc -l < "$d/nr1") = 40 ]'
"$QKV" translate --run "$d/lstm" --no-repeat-ngram 0 --repetition-penalty 1 "$d/src" > "$d/nr0"
check "--no-repeat-ngram 0 and --repetition-penalty 1 are off" 'cmp -s "$d/nr0" "$d/greedy"'
"$QKV" translate --run "$d/lstm" --repeat-scope everything "$d/src" 2>/dev/null; rc=$?
check "an unknown --repeat-scope is a usage error" '[ $rc = 1 ]'
"$QKV" translate --run "$d/lstm" --mbr 8 --temperature 0.5 --seed 3 "$d/src" > "$d/mbr"
bm=$("$QKV" bleu -r "$d/ref" -i "$d/mbr" --json | sed -n 's/.*"score": \([0-9.]*\).*/\1/p')
check "MBR over 8 samples (BLEU $bm > 60)" 'awk -v b="$bm" "BEGIN{exit !(b > 60)}"'
sed 's/"lstm_seq2seq", "embed": 32, "hidden": 64/"transformer_seq2seq", "d_model": 32, "n_heads": 2, "n_enc_layers": 1, "n_dec_layers": 1, "d_ff": 64, "dropout": 0/; s/"steps": 500/"steps": 1500/; s/"every": 500/"every": 1500/; s/"lr": 0.01/"lr": 0.003/' "$d/lstm.json" > "$d/tr.json"
"$QKV" train --config "$d/tr.json" --run "$d/tr" --quiet > /dev/null 2>&1
"$QKV" translate --run "$d/tr" --beam 2 "$d/src" > "$d/tr_out"
bt=$("$QKV" bleu -r "$d/ref" -i "$d/tr_out" --json | sed -n 's/.*"score": \([0-9.]*\).*/\1/p')
check "transformer (1 small layer, 1500 steps) learns to copy: beam 2 BLEU $bt > 20 (untrained: ~0)" 'awk -v b="$bt" "BEGIN{exit !(b > 20)}"'
"$QKV" translate --run "$d/tr" "$d/src" > "$d/tr_greedy"; "$QKV" translate --run "$d/tr" --beam 1 "$d/src" > "$d/tr_beam1"
check "transformer beam 1 equals greedy" 'cmp -s "$d/tr_greedy" "$d/tr_beam1"'
"$QKV" translate --run "$d/lstm" --beam 2 --n-best 3 "$d/src" 2>/dev/null; rc=$?
check "n-best larger than the beam is a usage error" '[ $rc = 1 ]'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

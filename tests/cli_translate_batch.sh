#!/usr/bin/env bash
# qkv translate --batch: greedy, beam, n-best and MBR output does not depend on how sentences are batched (one at a
# time, batches of alike lengths, a token budget), with short, long and empty lines mixed, in input order.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
. "${QKV_SOURCE_DIR:?QKV_SOURCE_DIR not set}/tests/harness/copy_task.sh"
copy_task "$d"
cat > "$d/lstm.json" <<JSON
{"model": {"type": "lstm_seq2seq", "embed": 16, "hidden": 32},
 "data": {"train": "$d/train.tsv", "dev": "$d/dev.tsv", "max_len": 8},
 "train": {"steps": 150, "batch_size": 32, "optimizer": {"lr": 0.01}, "log_every": 100, "checkpoint_every": 0},
 "eval": {"every": 150}, "seed": 1}
JSON
"$QKV" train --config "$d/lstm.json" --run "$d/lstm" --quiet > /dev/null 2>&1
sed 's/"lstm_seq2seq", "embed": 16, "hidden": 32/"transformer_seq2seq", "d_model": 16, "n_heads": 2, "n_enc_layers": 1, "n_dec_layers": 1, "d_ff": 32, "dropout": 0/' "$d/lstm.json" > "$d/tr.json"
"$QKV" train --config "$d/tr.json" --run "$d/tr" --quiet > /dev/null 2>&1
{ head -12 "$d/src"; echo; echo alpha; echo "alpha beta gamma delta eps zeta eta theta iota kappa alpha beta gamma"; tail -5 "$d/src"; } > "$d/mix"
n=$(wc -l < "$d/mix")
for m in lstm tr; do
  for args in "" "--beam 4" "--beam 3 --n-best 2" "--mbr 4 --seed 7" "--max-len 3"; do
    "$QKV" translate --run "$d/$m" $args --batch 1 "$d/mix" > "$d/one" 2>&1
    "$QKV" translate --run "$d/$m" $args "$d/mix" > "$d/many" 2>&1
    "$QKV" translate --run "$d/$m" $args --batch 4 --batch-tokens 20 "$d/mix" > "$d/some" 2>&1
    # n-best scores are printed to 4 decimals: compare the texts
    check "$m ${args:-greedy}: batched equals one at a time ($n lines)" \
      '[ "$(wc -l < "$d/one")" = "$n" ] && cmp -s <(cut -f1,3 "$d/one") <(cut -f1,3 "$d/many") && cmp -s <(cut -f1,3 "$d/one") <(cut -f1,3 "$d/some")'
  done
done
"$QKV" translate --run "$d/lstm" --batch 0 "$d/mix" > /dev/null 2>&1; rc=$?
check "--batch 0 is a usage error" '[ $rc = 1 ]'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

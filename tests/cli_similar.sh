#!/usr/bin/env bash
# qkv similar and qkv eval on a pairs run: a small siamese model trained on a slice of the paraphrase data, the
# verdict of two texts, the nearest lines of a file, eval's pairs metrics, and bad pair files (exit 2, file:line).
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
SHARED=${QKV_SHARED:-}
export QKV_THREADS=${QKV_THREADS:-1}
T=$(mktemp -d /tmp/qkv_cli_similar.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
expect_msg() { # name expected-rc regex command...
  local name=$1 want=$2 re=$3; shift 3
  "$@" >"$T/out" 2>&1; local rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$re" "$T/out"; then ok "$name"
  else bad "$name (exit $rc, wanted $want and /$re/)"; sed 's/^/    /' "$T/out" | head -5; fi
}
P=$SHARED/data/paraphrase
if [ -z "$SHARED" ] || [ ! -f "$P/train.tsv" ]; then echo "SKIP: no shared paraphrase data"; exit 77; fi

head -3000 "$P/train.tsv" >"$T/train.tsv"
head -300 "$P/dev.tsv" >"$T/dev.tsv"
cat >"$T/c.json" <<JSON
{"model": {"type": "siamese", "d_model": 32},
 "data": {"train": "$T/train.tsv", "dev": "$T/dev.tsv", "test": "$T/dev.tsv", "max_len": 24},
 "train": {"steps": 40, "batch_size": 32, "log_every": 20, "checkpoint_every": 40, "optimizer": {"lr": 0.003}},
 "eval": {"every": 40}}
JSON
expect_msg "config list names siamese with task pairs" 0 '^siamese +pairs' "$QKV" config list
expect_msg "train a small siamese run" 0 'done at step 40' "$QKV" train --config "$T/c.json" --run "$T/run"
expect_msg "eval reports AUC, F1 and the threshold" 0 'auc .*' "$QKV" eval --run "$T/run" --split test
grep -q '  f1 ' "$T/out" && grep -q '  threshold ' "$T/out" && ok "eval: f1 and threshold lines" || bad "eval: f1 and threshold lines"
[ -f "$T/run/threshold.json" ] && ok "the dev threshold is kept in the run" || bad "the dev threshold is kept in the run"
expect_msg "similar: a verse and its paraphrase are duplicates" 0 '^[0-9.]+	duplicate$' "$QKV" similar --run "$T/run" \
  "In the beginning God created the heaven and the earth." "In the beginning, God created the heavens and the earth."
expect_msg "similar --json with a threshold" 0 '"threshold":0.999900,"duplicate":false' "$QKV" similar --run "$T/run" \
  --json --threshold 0.9999 "Jesus wept." "And the LORD spake unto Moses, saying,"
cut -f3 "$T/dev.tsv" | head -50 >"$T/index.txt"
q=$(sed -n 7p "$T/index.txt")
expect_msg "similar --index: a line of the file is its own nearest" 0 "^1\\.0000	7	" "$QKV" similar --run "$T/run" \
  --index "$T/index.txt" -k 3 "$q"
n=$(grep -c '^[01]\.' "$T/out"); [ "$n" = 3 ] && ok "similar --index prints k lines" || bad "similar --index prints k lines ($n)"
expect_msg "similar --index: queries on stdin, JSON" 0 '"nearest":\[\{"line":7,' \
  sh -c "echo '$q' | '$QKV' similar --run '$T/run' --index '$T/index.txt' -k 2 --json"
expect_msg "similar --view: each pair's verdict and a page" 0 'wrote .*pairs.html' "$QKV" similar --run "$T/run" \
  --view "$T/pairs.html" "Jesus wept." "Jesus wept." "In the beginning God created the heaven and the earth." \
  "In the beginning, God created the heavens and the earth." "And the LORD spake unto Moses, saying," "Amen."
n=$(grep -c 'duplicate\|different' "$T/out"); [ "$n" = 3 ] && ok "similar --view: three verdicts" || bad "similar --view: three verdicts ($n)"
grep -q '"name":"cosine".*"rows":\["Jesus wept."' "$T/pairs.html" && ok "the page holds the cosine matrix with the texts" \
  || bad "the page holds the cosine matrix with the texts"
expect_msg "similar --view needs pairs" 1 'pairs of texts' "$QKV" similar --run "$T/run" --view "$T/p.html" a b c
expect_msg "similar: an empty text is bad input" 2 'empty' "$QKV" similar --run "$T/run" "  " "x"
expect_msg "similar: one text is a usage error" 1 'two texts' "$QKV" similar --run "$T/run" "x"
expect_msg "similar: a missing index file is bad input" 2 'nope.txt' "$QKV" similar --run "$T/run" --index "$T/nope.txt" x

printf '1\ta b\ta c\n1\tb c\n' >"$T/bad1.tsv"
printf '1\ta b\ta c\n1\t\tb\n' >"$T/bad2.tsv"
expect_msg "eval: a missing column names file:line" 2 'bad1.tsv:2' "$QKV" eval --run "$T/run" --data "$T/bad1.tsv"
expect_msg "eval: an empty text names file:line" 2 'bad2.tsv:2: text 1 is empty' "$QKV" eval --run "$T/run" --data "$T/bad2.tsv"
sed "s#$T/train.tsv#$T/bad2.tsv#" "$T/c.json" >"$T/cbad.json"
expect_msg "train: an empty text names file:line" 2 'bad2.tsv:2' "$QKV" train --config "$T/cbad.json" --run "$T/runbad"

expect_msg "bench siamese: a JSON line" 0 '"config":"siamese","mode":"train".*"status":"ok"' \
  "$QKV" bench siamese --max-steps 2 --warmup 1 --seq-len 8

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

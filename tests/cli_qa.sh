#!/usr/bin/env bash
# qkv data cloze-qa / check-qa: questions from the shared lm splits, deterministic, valid; bad answers exit 2 naming
# the file and line.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
SHARED=${QKV_SHARED:-}
T=$(mktemp -d /tmp/qkv_cli_qa.XXXXXX)
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

printf '%s\n' '{"context": "abc def", "question": "?", "answers": {"text": ["def"], "answer_start": [4]}}' \
  '{"context": "abc def", "question": "?", "answers": {"text": ["def"], "answer_start": [2]}}' >"$T/bad.jsonl"
expect_msg "check-qa: a wrong offset names file and line" 2 "bad\.jsonl:2: answer 1 'def' at character 2 does not match" \
  "$QKV" data check-qa "$T/bad.jsonl"
expect_msg "cloze-qa: missing input file" 2 "nosuch\.txt: cannot open" "$QKV" data cloze-qa "$T/nosuch.txt"
expect_msg "cloze-qa: bad option" 1 "unexpected argument" "$QKV" data cloze-qa --bogus x

D=$SHARED/data/lm
if [ -z "$SHARED" ] || [ ! -r "$D/dev.txt" ]; then
  echo "SKIP: shared lm data not found (QKV_SHARED='$SHARED')"
else
  expect_msg "cloze-qa on lm/dev.txt" 0 "^[0-9]+ questions" "$QKV" data cloze-qa -n 5 --seed 3 -o "$T/a.jsonl" "$D/dev.txt"
  "$QKV" data cloze-qa -n 5 --seed 3 -o "$T/b.jsonl" "$D/dev.txt" 2>/dev/null
  if cmp -s "$T/a.jsonl" "$T/b.jsonl"; then ok "cloze-qa is deterministic"; else bad "cloze-qa is deterministic"; fi
  n=$(wc -l <"$T/a.jsonl")
  expect_msg "check-qa accepts every cloze question" 0 "^$n examples" "$QKV" data check-qa "$T/a.jsonl"
  if grep -q XXXXX "$T/a.jsonl" && [ "$n" -gt 50 ]; then ok "questions have blanks ($n)"; else bad "questions ($n)"; fi
fi

# A qa run end to end on a tiny file: EM/F1 from qkv eval, a span from qkv answer.
printf '%s\n' '{"context": "Emma met Mr. Knightley at Hartfield.", "question": "XXXXX met Mr. Knightley.", "answers": {"text": ["Emma"], "answer_start": [0]}}' \
  '{"context": "The ball at the Crown was a success.", "question": "The XXXXX at the Crown.", "answers": {"text": ["ball"], "answer_start": [4]}}' >"$T/qa.jsonl"
cat >"$T/qa.json" <<CFG
{"model": {"type": "transformer_classifier", "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32, "max_len": 64},
 "data": {"train": "$T/qa.jsonl", "dev": "$T/qa.jsonl", "task": "qa", "max_len": 64},
 "train": {"steps": 4, "batch_size": 2}, "eval": {"every": 2}}
CFG
expect_msg "train a qa run" 0 "f1" "$QKV" train --config "$T/qa.json" --run "$T/qa"
expect_msg "qkv eval reports exact match and F1" 0 "exact_match .*" "$QKV" eval --run "$T/qa"
expect_msg "qkv eval --json has f1" 0 '"f1":' "$QKV" eval --run "$T/qa" --json
echo "Emma met Mr. Knightley at Hartfield." >"$T/ctx.txt"
expect_msg "qkv answer prints a span of the context" 0 "^(Emma|met|Mr|Knightley|at|Hartfield| |\.)+$" \
  "$QKV" answer --run "$T/qa" --context "$T/ctx.txt" "XXXXX met Mr. Knightley."
expect_msg "qkv answer without a question" 1 "needs --run DIR, --context FILE and a question" \
  "$QKV" answer --run "$T/qa" --context "$T/ctx.txt"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

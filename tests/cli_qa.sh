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
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

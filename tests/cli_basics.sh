#!/usr/bin/env bash
# The qkv binary: --help everywhere, exit codes, and the demo learning from its embedded sample.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
expect_rc() { # name expected-rc command...
  local name=$1 want=$2; shift 2
  "$@" >/tmp/qkv_cli_out.$$ 2>&1; local rc=$?
  if [ "$rc" = "$want" ]; then ok "$name"; else bad "$name (exit $rc, wanted $want)"; sed 's/^/    /' /tmp/qkv_cli_out.$$ | head -5; fi
}

expect_rc "qkv --help" 0 "$QKV" --help
expect_rc "qkv with no command is a usage error" 1 "$QKV"
expect_rc "unknown command" 1 "$QKV" frobnicate
for cmd in $("$QKV" --help | awk '/^commands:/{on=1;next} on && NF && /^  /{print $1}'); do
  expect_rc "qkv $cmd --help" 0 "$QKV" "$cmd" --help
done
expect_rc "demo rejects a bad option value" 1 "$QKV" demo --epochs zero
expect_rc "bench rejects an unknown benchmark" 1 "$QKV" bench nosuch
expect_rc "bench: unreadable configs file is bad input" 2 "$QKV" bench gemm --configs /nonexistent/configs.json

# The demo trains and reaches a sensible held-out accuracy (chance is 50%).
out=$("$QKV" demo --epochs 4 --quiet 2>&1); rc=$?
acc=$(printf '%s\n' "$out" | sed -n 's/.*dev accuracy \([0-9.]*\)%.*/\1/p')
if [ "$rc" = 0 ] && [ -n "$acc" ] && awk -v a="$acc" 'BEGIN{exit !(a > 70)}'; then ok "demo learns (dev accuracy $acc%)"
else bad "demo learns (exit $rc, accuracy '${acc}')"; printf '%s\n' "$out" | head -5; fi
# Same seed, same output, bit for bit.
out2=$("$QKV" demo --epochs 4 --quiet 2>&1)
[ "$out" = "$out2" ] && ok "demo is deterministic" || bad "demo is deterministic"

rm -f /tmp/qkv_cli_out.$$
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

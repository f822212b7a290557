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
expect_rc "demo rejects a bad option value" 1 "$QKV" demo --steps zero
expect_rc "bench rejects an unknown benchmark" 1 "$QKV" bench nosuch
expect_rc "bench: unreadable configs file is bad input" 2 "$QKV" bench gemm --configs /nonexistent/configs.json
# The kernel path: named by --version, forced by QKV_ISA; a name that is no path is bad input.
"$QKV" --version | grep -qE '^kernels: (avx512|avx2|generic) ' && ok "--version names the kernel path" || bad "--version names the kernel path"
QKV_ISA=generic "$QKV" --version | grep -q '^kernels: generic ' && ok "QKV_ISA=generic forces it" || bad "QKV_ISA=generic forces it"
"$QKV" --version | grep -q '^blas: openblas ' && ok "--version names the BLAS core" || bad "--version names the BLAS core"
QKV_ISA=sse9 expect_rc "QKV_ISA naming no path is bad input" 2 "$QKV" --version
# OpenBLAS's kernel family is never narrower than the CPU (a CPU newer than the OpenBLAS build gets OPENBLAS_CORETYPE
# from qkv), and a family the user sets stands.
v=$(env -u OPENBLAS_CORETYPE "$QKV" --version)
cpu=$(echo "$v" | sed -n 's/.*this CPU: \([a-z0-9]*\).*/\1/p'); core=$(echo "$v" | sed -n 's/^blas: openblas \([A-Za-z0-9]*\).*/\1/p')
case "$cpu:$core" in
  avx512:SkylakeX|avx512:Cooperlake|avx512:SapphireRapids|avx2:SkylakeX|avx2:Cooperlake|avx2:SapphireRapids|\
  avx2:Haswell|avx2:Zen|avx2:Skylake|avx2:Broadwell|generic:*) ok "BLAS family as wide as the CPU ($cpu: $core)" ;;
  *) bad "BLAS family as wide as the CPU ($cpu: $core)" ;;
esac
OPENBLAS_CORETYPE=Prescott "$QKV" --version | grep -qx 'blas: openblas Prescott' && ok "a user's OPENBLAS_CORETYPE stands" \
  || bad "a user's OPENBLAS_CORETYPE stands"

# The demo trains a Transformer on its embedded sample and beats chance (50%) clearly on held-out sentences.
d=$(mktemp -d)
out=$("$QKV" demo --steps 200 --quiet --out "$d/demo" 2>&1); rc=$?
acc=$(printf '%s\n' "$out" | sed -n 's/.*held-out accuracy \([0-9.]*\)%.*/\1/p')
if [ "$rc" = 0 ] && [ -n "$acc" ] && awk -v a="$acc" 'BEGIN{exit !(a > 70)}'; then ok "demo learns (held-out accuracy $acc%)"
else bad "demo learns (exit $rc, accuracy '${acc}')"; printf '%s\n' "$out" | head -5; fi
[ -s "$d/demo/viewer.html" ] && grep -q "delicious" "$d/demo/viewer.html" && ok "demo writes the viewer page" || bad "demo writes the viewer page"
# Same seed, same result, bit for bit; a second demo replaces the first in its own folder.
out2=$("$QKV" demo --steps 200 --quiet --out "$d/demo" 2>&1)
[ "$(printf '%s' "$out" | grep -v Open)" = "$(printf '%s' "$out2" | grep -v Open)" ] && ok "demo is deterministic" || bad "demo is deterministic"
mkdir "$d/mine" && touch "$d/mine/precious"
expect_rc "demo refuses a folder it did not make" 2 "$QKV" demo --steps 1 --quiet --out "$d/mine"
[ -f "$d/mine/precious" ] && ok "and leaves it untouched" || bad "and leaves it untouched"
out=$("$QKV" predict --run "$d/demo" "What a wonderful, friendly place" 2>&1)
printf '%s' "$out" | grep -qE '^(positive|negative)'$'\t''[01]\.[0-9]+' && ok "predict on the demo run" || { bad "predict on the demo run"; printf '%s\n' "$out" | head -3; }
rm -rf "$d"

rm -f /tmp/qkv_cli_out.$$
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

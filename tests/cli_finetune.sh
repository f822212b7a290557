#!/usr/bin/env bash
# The run config's finetune section from the command line: bad groups are named by config check, init_from prints
# what it loaded, a head-only run says how many parameters train, a shape mismatch names both files.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
export QKV_THREADS=${QKV_THREADS:-1}
T=$(mktemp -d /tmp/qkv_cli_finetune.XXXXXX)
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
printf 'pos\tgood film good fun\nneg\tbad movie awful dull\npos\tgood good film great\nneg\tbad bad dull movie\n' >"$T/cls.tsv"
cat >"$T/c.json" <<CFG
{"model": {"type": "transformer_classifier", "d_model": 8, "n_layers": 2, "n_heads": 2, "d_ff": 16, "max_len": 16},
 "data": {"train": "$T/cls.tsv", "max_len": 16}, "train": {"steps": 2, "batch_size": 2}, "eval": {"every": 0}}
CFG
expect_msg "config check names a bad group" 2 "finetune\.groups: 'classifier': expected SELECTOR:SETTINGS" \
  "$QKV" config check "$T/c.json" --set finetune.groups=classifier
expect_msg "config explain documents the section" 0 "finetune\.unfreeze_every" "$QKV" config explain transformer_classifier
if "$QKV" train --config "$T/c.json" --run "$T/a" --quiet; then ok "train the source run"; else bad "train the source run"; fi
expect_msg "init_from prints what it loaded" 0 \
  "init_from: .*ckpt-2\.safetensors: [0-9]+ tensors loaded; new \(0\); unused \(0\)" \
  "$QKV" train --config "$T/c.json" --run "$T/b" --set "finetune.init_from=$T/a" --set finetune.mode=head
if grep -Eq "finetune: [0-9]+ parameters train, [0-9]+ frozen \(layers 0-3\)" "$T/out"; then ok "head mode says what trains"
else bad "head mode says what trains"; fi
expect_msg "a shape mismatch names both files" 2 "ckpt-2\.safetensors: tensor .* has shape .*config\.json" \
  "$QKV" train --config "$T/c.json" --run "$T/c" --set "finetune.init_from=$T/a" --set model.d_ff=32
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

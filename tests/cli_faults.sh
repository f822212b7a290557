#!/usr/bin/env bash
# Faults during training (issue 29): kill -9 at random moments while checkpoints are written (a short version of
# scripts/kill_loop.sh, which runs 200 kills), a full disk (a file size limit) during a checkpoint write, and
# non-finite losses: skipped steps counted, a clear stop after train.max_nan_skips, no NaN in any checkpoint.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
SRC=${QKV_SOURCE_DIR:?QKV_SOURCE_DIR not set}
PY=/usr/bin/python3
export QKV_THREADS=1
T=$(mktemp -d /tmp/qkv_cli_faults.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

QKV_BIN=$QKV bash "$SRC/scripts/kill_loop.sh" 4 && ok "kill -9 loop (4 kills)" || bad "kill -9 loop"

for i in $(seq 1 100); do printf 'pos\tgood film %d\nneg\tbad plot %d\n' "$i" "$i"; done >"$T/train.tsv"
"$QKV" config show embmean | "$PY" -c '
import json, sys
c = json.load(sys.stdin)
c["data"]["train"] = sys.argv[1]
c["train"].update(steps=4, checkpoint_every=2)
c["eval"]["every"] = 0
json.dump(c, sys.stdout)' "$T/train.tsv" >"$T/cfg.json"
newest() { ls "$1" | sed -n 's/^ckpt-\([0-9]*\)\.safetensors$/\1/p' | sort -n | tail -1; }

# Disk full: a file size limit (SIGXFSZ ignored, so the write fails with EFBIG) below a checkpoint's size.
"$QKV" train --config "$T/cfg.json" --run "$T/df" --quiet >/dev/null 2>&1
before=$(newest "$T/df")
(trap '' XFSZ; ulimit -f 16; exec "$QKV" train --resume --run "$T/df" --set train.steps=8 --quiet) >"$T/out" 2>&1
rc=$?
if [ "$rc" != 0 ] && grep -q 'ckpt-6.safetensors.*File too large' "$T/out"; then
  ok "disk full: exit $rc naming the checkpoint"
else bad "disk full: exit $rc, $(head -2 "$T/out")"; fi
[ "$(newest "$T/df")" = "$before" ] && ok "disk full: the newest checkpoint is still step $before" \
  || bad "disk full: newest checkpoint changed to $(newest "$T/df")"
ls "$T/df" | grep -q '\.tmp\.' && bad "disk full: temporary left" || ok "disk full: no temporary left"
"$QKV" eval --run "$T/df" --checkpoint "$T/df/ckpt-$before.safetensors" --data "$T/train.tsv" >/dev/null 2>&1 \
  && ok "disk full: the kept checkpoint loads" || bad "disk full: the kept checkpoint does not load"
"$QKV" train --resume --run "$T/df" --set train.steps=8 --quiet >/dev/null 2>&1 \
  && ok "disk full: resume once there is room again" || bad "disk full: resume once there is room again"

# Non-finite losses: an absurd learning rate makes the loss NaN within a few steps.
"$QKV" train --config "$T/cfg.json" --run "$T/nan" --set train.optimizer.name=sgd --set train.optimizer.lr=1e15 \
  --set train.steps=40 --set train.checkpoint_every=1 --set train.max_nan_skips=3 --quiet >"$T/out" 2>&1
rc=$?
skips=$(grep -c '"kind":"nonfinite"' "$T/nan/log.jsonl")
if [ "$rc" = 3 ] && grep -q 'non-finite loss, 4 steps in a row (train.max_nan_skips = 3); stopping' "$T/out" \
  && [ "$skips" = 4 ]; then ok "NaN: 4 non-finite steps logged, stopped after max_nan_skips=3"
else bad "NaN: exit $rc, $skips non-finite records, $(head -1 "$T/out")"; fi
if "$PY" - "$T/nan"/ckpt-*.safetensors <<'PYEOF'
import json, math, struct, sys
for path in sys.argv[1:]:
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    for name, e in json.loads(raw[8:8 + n]).items():
        if name == "__metadata__" or e["dtype"] != "F32":
            continue
        a, b = e["data_offsets"]
        vals = struct.unpack("<%df" % ((b - a) // 4), raw[8 + n + a:8 + n + b])
        if not all(math.isfinite(v) for v in vals):
            sys.exit("%s: %s holds a non-finite value" % (path, name))
PYEOF
then ok "NaN: no checkpoint holds a non-finite value"; else bad "NaN: a checkpoint holds a non-finite value"; fi

echo "cli_faults: $pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# kill -9 of `qkv train` at random moments while it writes a checkpoint every step, N times (default 200) over one run
# directory, resuming each time (issue 29). After every kill the newest checkpoint must load; at the end the run
# resumed N times must equal, bit for bit, a run that was never interrupted; no temporary file may be left.
#   scripts/kill_loop.sh [N]      (QKV_BIN: the qkv binary, default build/qkv)
set -u
n_kills=${1:-200}
root=$(cd "$(dirname "$0")/.." && pwd)
QKV=${QKV_BIN:-$root/build/qkv}
PY=/usr/bin/python3
export QKV_THREADS=1
T=$(mktemp -d /tmp/qkv_kill_loop.XXXXXX)
trap 'rm -rf "$T"' EXIT
RANDOM=29 # the kill moments are random but the same on every run of the script
fail=0
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

# A small classification task of our own, so the loop needs no shared data.
for i in $(seq 1 200); do
  if [ $((i % 2)) = 0 ]; then echo -e "pos\tgood great fine film number $i"
  else echo -e "neg\tbad awful dull plot $i"; fi
done >"$T/train.tsv"
"$QKV" config show embmean | "$PY" -c '
import json, sys
c = json.load(sys.stdin)
c["data"].update(train=sys.argv[1])
c["train"].update(steps=100000, checkpoint_every=1, keep_checkpoints=2, batch_size=8)
c["eval"]["every"] = 0
json.dump(c, sys.stdout)' "$T/train.tsv" >"$T/cfg.json"

# The tensors of a checkpoint (header without metadata, then the data), as text to compare.
weights() {
  "$PY" - "$1" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
h.pop("__metadata__", None)
print(sorted(h.items()), raw[8 + n:].hex())
PYEOF
}
newest() { ls "$1" 2>/dev/null | sed -n 's/^ckpt-\([0-9]*\)\.safetensors$/\1/p' | sort -n | tail -1; }
R=$T/run
for k in $(seq 1 "$n_kills"); do
  if [ -z "$(newest "$R")" ]; then
    "$QKV" train --config "$T/cfg.json" --run "$R" --quiet >/dev/null 2>&1 &
  else
    "$QKV" train --resume --run "$R" --quiet >/dev/null 2>&1 &
  fi
  pid=$!
  # 50..550 ms: start-up, data loading and a few checkpoint writes
  sleep "0.$(printf '%03d' $((50 + RANDOM % 500)))" 2>/dev/null || sleep 0.3
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  s=$(newest "$R")
  [ -z "$s" ] && continue # killed before the first checkpoint: the next round starts afresh
  if ! "$QKV" eval --run "$R" --checkpoint "$R/ckpt-$s.safetensors" --data "$T/train.tsv" >/dev/null 2>"$T/err"; then
    bad "kill $k: the newest checkpoint (step $s) does not load: $(head -1 "$T/err")"
    break
  fi
done
s=$(newest "$R")
if [ -z "$s" ]; then
  bad "no checkpoint was ever written"
else
  m=$((s + 3))
  "$QKV" train --resume --run "$R" --set train.steps=$m --quiet >/dev/null 2>"$T/err" ||
    bad "final resume: $(head -1 "$T/err")"
  ls "$R" | grep -q '\.tmp\.' && bad "temporaries left: $(ls "$R" | grep '\.tmp\.' | head -3)"
  "$QKV" train --config "$T/cfg.json" --run "$T/full" --set train.steps=$m --quiet >/dev/null 2>&1
  if cmp -s <(weights "$R/ckpt-$m.safetensors") <(weights "$T/full/ckpt-$m.safetensors"); then
    echo "ok: $n_kills kills, newest checkpoint step $s, resumed to $m == uninterrupted"
  else
    bad "after $n_kills kills, step $m differs from the uninterrupted run"
  fi
fi
[ "$fail" = 0 ]

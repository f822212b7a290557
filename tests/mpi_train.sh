#!/usr/bin/env bash
# Data-parallel training under mpirun (docs/distributed.md), registered only when CMake found MPI and mpirun:
# 2 ranks x 4 sequences equal 1 process x 8 to 1e-5 for 50 steps of a GPT on real text; overlapped buckets give the
# bits of one bucket sent after backward; resume from a 2-rank checkpoint with 1 and with 2 ranks; a stopped rank
# ends the job within the timeout and a killed one ends it at once; mismatched configs, binaries and run
# directories are refused before anything is written.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
MPIRUN=${QKV_MPIRUN:?QKV_MPIRUN not set}
DATA=${QKV_SHARED:-}/data/lm
[ -f "$DATA/train.txt" ] || { echo "skip: no $DATA/train.txt"; exit 77; }
export QKV_THREADS=1
# mpirun refuses root unless told; tests run as whoever runs ctest.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Under ASan: Open MPI keeps memory until exit that LeakSanitizer reports; full stacks let the suppressions (MPI's own
# libraries alone) recognise it.
if [ -n "${QKV_SANITIZED:-}" ]; then
  export LSAN_OPTIONS="suppressions=$(dirname "$0")/lsan_mpi.supp:fast_unwind_on_malloc=0:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fi
T=$(mktemp -d /tmp/qkv_mpi_train.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
expect_msg() { # name expected-rc regex command...
  local name=$1 want=$2 re=$3; shift 3
  "$@" >"$T/out" 2>&1; local rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$re" "$T/out"; then ok "$name"
  else bad "$name (exit $rc, wanted $want and /$re/)"; sed 's/^/    /' "$T/out" | head -8; fi
}
expect_rc() { # name expected-rc command...
  local name=$1 want=$2; shift 2
  "$@" >"$T/out" 2>&1; local rc=$?
  if [ "$rc" = "$want" ]; then ok "$name"
  else bad "$name (exit $rc, wanted $want)"; sed 's/^/    /' "$T/out" | head -8; fi
}
mpi() { "$MPIRUN" --oversubscribe "$@"; }
# Largest |loss difference| over the train records two logs share from step $3 on (and the shared count).
maxdiff() {
  python3 - "$1" "$2" "${3:-1}" <<'PY'
import json, sys
def losses(p):
    return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if r.get("kind") == "train"}
a, b, first = losses(sys.argv[1]), losses(sys.argv[2]), int(sys.argv[3])
steps = [s for s in a if s in b and s >= first]
print(len(steps), max((abs(a[s] - b[s]) for s in steps), default=float("inf")))
PY
}
within() { # name log-a log-b first-step expected-count tolerance
  read -r n d < <(maxdiff "$2" "$3" "$4")
  if [ "$n" = "$5" ] && python3 -c "import sys; sys.exit(0 if float('$d') <= $6 else 1)"; then
    ok "$1 ($n steps, max |diff| $d)"
  else bad "$1 ($n steps, wanted $5; max |diff| $d, wanted <= $6)"; fi
}
# Train records without timings (always last in a record).
records() { grep '"kind":"train"' "$1" | sed -E 's/,"(ranks|tok_per_s|train_seconds)".*$//'; }

head -c 150000 "$DATA/train.txt" >"$T/train.txt"
head -c 20000 "$DATA/dev.txt" >"$T/dev.txt"
cat >"$T/gpt.json" <<JSON
{"model": {"type": "gpt", "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64},
 "data": {"train": "$T/train.txt", "dev": "$T/dev.txt", "tokenizer": "char", "seq_len": 32},
 "train": {"steps": 50, "batch_size": 8, "log_every": 1, "checkpoint_every": 25, "keep_checkpoints": 5,
           "optimizer": {"lr": 0.003}},
 "eval": {"every": 25, "max_batches": 2}, "seed": 3}
JSON

# ---- 2 ranks x 4 == 1 process x 8 ------------------------------------------------------------------------------
"$QKV" train --config "$T/gpt.json" --run "$T/one" --quiet >"$T/out" 2>&1 || { cat "$T/out"; bad "1 process"; }
# Small buckets: several allreduces in flight during backward.
expect_rc "2 ranks train (buckets of 20 KB)" 0 \
  mpi -np 2 -x QKV_DIST_BUCKET_MB=0.02 "$QKV" train --config "$T/gpt.json" --run "$T/two" --quiet
within "2 ranks x 4 == 1 process x 8 (50 steps)" "$T/one/log.jsonl" "$T/two/log.jsonl" 1 50 1e-5
if [ "$(ls "$T/one")" = "$(ls "$T/two")" ]; then ok "rank 0 writes the files one process writes"
else bad "run directory files differ: $(ls "$T/one" | tr '\n' ' ') vs $(ls "$T/two" | tr '\n' ' ')"; fi
grep -q '"kind":"eval"' "$T/two/log.jsonl" && ok "rank 0 evaluates" || bad "no eval record"
expect_rc "one bucket after backward" 0 \
  mpi -np 2 -x QKV_DIST_BUCKET_MB=0 "$QKV" train --config "$T/gpt.json" --run "$T/two_flat" --quiet
if cmp -s <(records "$T/two/log.jsonl") <(records "$T/two_flat/log.jsonl"); then
  ok "buckets overlapped with backward give the bits of one bucket after it"
else bad "bucketed and flat allreduce differ"; fi
expect_rc "3 ranks (a global batch of 8 does not divide)" 0 \
  mpi -np 3 "$QKV" train --config "$T/gpt.json" --run "$T/three" --quiet --set train.steps=20
within "3 ranks == 1 process (20 steps)" "$T/one/log.jsonl" "$T/three/log.jsonl" 1 20 1e-5

# Variable-length batches (an encoder-decoder on sentence pairs): the slices have other lengths and their own
# padding, the loss weights are token counts, and backward finishes parameters in another order on each rank
# (buckets must still start in the same order everywhere).
TR=${QKV_SHARED:-}/data/translation/train.tsv
if [ -f "$TR" ]; then
  head -3000 "$TR" >"$T/tr.tsv"
  cat >"$T/s2s.json" <<JSON
{"model": {"type": "transformer_seq2seq", "d_model": 32, "n_heads": 2, "d_ff": 64, "n_enc_layers": 1,
           "n_dec_layers": 1, "dropout": 0},
 "data": {"train": "$T/tr.tsv", "tokenizer": "word", "max_len": 40, "max_vocab": 2000},
 "train": {"steps": 30, "batch_size": 16, "log_every": 1, "checkpoint_every": 0}, "seed": 5}
JSON
  "$QKV" train --config "$T/s2s.json" --run "$T/s2s_one" --quiet >"$T/out" 2>&1 || { cat "$T/out"; bad "s2s 1 process"; }
  expect_rc "seq2seq on 2 ranks (buckets of 50 KB)" 0 \
    mpi -np 2 -x QKV_DIST_BUCKET_MB=0.05 "$QKV" train --config "$T/s2s.json" --run "$T/s2s_two" --quiet
  within "seq2seq: 2 ranks x 8 == 1 process x 16 (30 steps)" "$T/s2s_one/log.jsonl" "$T/s2s_two/log.jsonl" 1 30 1e-5
fi

# ---- resume a 2-rank checkpoint with 1 and with 2 ranks ------------------------------------------------------
for m in 1 2; do
  mkdir -p "$T/res$m"
  mpi -np 2 "$QKV" train --config "$T/gpt.json" --run "$T/res$m" --quiet --set train.steps=25 >"$T/out" 2>&1 \
    || { bad "first half for resume with $m"; cat "$T/out"; }
  expect_rc "resume a 2-rank checkpoint with $m rank(s)" 0 \
    mpi -np $m "$QKV" train --resume --run "$T/res$m" --set train.steps=50 --quiet
  within "resumed with $m rank(s): steps 26-50 as the uninterrupted run" "$T/two/log.jsonl" "$T/res$m/log.jsonl" 26 25 1e-5
done
if cmp -s <(records "$T/two/log.jsonl") <(records "$T/res2/log.jsonl"); then ok "2 -> 2 resume is bit-identical"
else bad "2 -> 2 resume differs from the uninterrupted run"; fi

# ---- ZeRO-1: optimiser state sharded over the ranks ---------------------------------------------------------------
# Gradient clipping on: its norm is summed over the shards.
"$QKV" train --config "$T/gpt.json" --run "$T/clip_one" --quiet --set train.clip_norm=0.5 >"$T/out" 2>&1 \
  || { cat "$T/out"; bad "1 process with clipping"; }
expect_rc "ZeRO-1 on 2 ranks" 0 \
  mpi -np 2 -x QKV_DIST_ZERO=1 "$QKV" train --config "$T/gpt.json" --run "$T/zero2" --quiet --set train.clip_norm=0.5
within "ZeRO-1, 2 ranks == 1 process (50 steps, clip_norm 0.5)" "$T/clip_one/log.jsonl" "$T/zero2/log.jsonl" 1 50 1e-5
expect_rc "ZeRO-1 on 3 ranks, 25 steps" 0 \
  mpi -np 3 -x QKV_DIST_ZERO=1 "$QKV" train --config "$T/gpt.json" --run "$T/zero3" --quiet --set train.clip_norm=0.5 \
  --set train.steps=25
expect_rc "a ZeRO-1 checkpoint of 3 ranks resumed by 1 process" 0 \
  "$QKV" train --resume --run "$T/zero3" --quiet --set train.steps=50
within "  ... continues as the uninterrupted run (steps 26-50)" "$T/clip_one/log.jsonl" "$T/zero3/log.jsonl" 26 25 1e-5
expect_msg "a bad QKV_DIST_ZERO is bad input" 2 "QKV_DIST_ZERO: 'yes' is not 0 or 1" \
  mpi -np 2 -x QKV_DIST_ZERO=yes "$QKV" train --config "$T/gpt.json" --run "$T/badzero" --quiet

# ---- a rank that dies or hangs ---------------------------------------------------------------------------------
rank_pid() { # the pid of one rank of the job whose mpirun is $1
  for _ in $(seq 600); do
    local p; p=$(pgrep -P "$1" | tail -1)
    [ -n "$p" ] && grep -qs '"loss"' "$2/log.jsonl" && { echo "$p"; return; }
    sleep 0.1
  done
}
for how in STOP KILL; do
  "$MPIRUN" --oversubscribe -np 2 -x QKV_DIST_TIMEOUT=5 "$QKV" train --config "$T/gpt.json" --run "$T/dead_$how" \
    --quiet --set train.steps=1000000 --set train.log_every=10 --set eval.every=0 --set train.checkpoint_every=0 \
    >"$T/out_$how" 2>&1 &
  job=$! # mpirun itself; the ranks are its children
  victim=$(rank_pid "$job" "$T/dead_$how")
  start=$(date +%s)
  [ -n "$victim" ] && kill -$how "$victim"
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$job" 2>/dev/null; then
    bad "SIG$how on a rank: job still running after 60 s"; kill -KILL "$job" 2>/dev/null; kill -KILL "$victim" 2>/dev/null
  else
    wait "$job"; rc=$?
    took=$(($(date +%s) - start))
    [ "$how" = STOP ] && kill -CONT "$victim" 2>/dev/null
    re='no answer from the other ranks for 5 s'
    [ "$how" = KILL ] && re='exited on signal 9|no answer from the other ranks'
    if [ "$rc" != 0 ] && grep -Eq "$re" "$T/out_$how"; then ok "SIG$how on a rank ends the job in ${took}s (exit $rc)"
    else bad "SIG$how on a rank: exit $rc"; sed 's/^/    /' "$T/out_$how" | head -8; fi
  fi
done

# ---- bad input: refused on every rank before anything is written ----------------------------------------------
expect_msg "a bad QKV_DIST_BUCKET_MB is bad input" 2 'QKV_DIST_BUCKET_MB: .4MB. is not a size' \
  mpi -np 2 -x QKV_DIST_BUCKET_MB=4MB "$QKV" train --config "$T/gpt.json" --run "$T/badenv" --quiet
[ -e "$T/badenv" ] && bad "a bad QKV_DIST_BUCKET_MB left a run directory" || ok "a bad QKV_DIST_BUCKET_MB writes nothing"
expect_msg "ranks with different configs" 2 'rank 1 has a different config than rank 0' \
  mpi -np 1 "$QKV" train --config "$T/gpt.json" --run "$T/cfg" : -np 1 "$QKV" train --config "$T/gpt.json" \
  --run "$T/cfg" --set train.optimizer.lr=0.01
[ -e "$T/cfg" ] && bad "a refused run left its directory" || ok "a refused run leaves nothing"
cp "$QKV" "$T/qkv_other" && printf 'x' >>"$T/qkv_other"
expect_msg "ranks with different binaries" 2 'rank 1 runs a different qkv binary' \
  mpi -np 1 "$QKV" train --config "$T/gpt.json" --run "$T/bin" : -np 1 "$T/qkv_other" train --config "$T/gpt.json" \
  --run "$T/bin"
[ -e "$T/bin" ] && bad "a refused run left its directory" || ok "mismatched binaries leave nothing"
# Rank 1 looks at another directory of the same name on "its machine": rank 0's files do not appear there.
mkdir -p "$T/elsewhere"
expect_msg "a run directory some rank cannot see" 2 'not visible to rank 1' \
  mpi -np 1 "$QKV" train --config "$T/gpt.json" --run "$T/vis" : -np 1 "$QKV" train --config "$T/gpt.json" \
  --run "$T/elsewhere"
[ -e "$T/vis" ] && bad "an invisible run directory was left" || ok "an invisible run directory is removed again"
[ -z "$(ls -A "$T/elsewhere")" ] && ok "nothing written where rank 1 looked" || bad "files in rank 1's directory"

echo "passed $pass, failed $fail"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# qkv train / eval / predict / config end to end: config errors, a sentiment classifier trained from a JSON config,
# determinism, resume == uninterrupted (after a clean stop, SIGINT, and kill -9), and a tiny language model.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
SHARED=${QKV_SHARED:-}
# One thread: runs are bit-identical at a fixed thread count, and tiny models only lose to threading on a busy machine.
export QKV_THREADS=${QKV_THREADS:-1}
T=$(mktemp -d /tmp/qkv_cli_train.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0 skip=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
# Waits (up to five minutes: sanitizer builds on a busy machine start slowly) until a background run has logged a
# training step, so its signal handlers are in place: a background job starts with SIGINT ignored, and a fixed sleep
# sent the signal before the handler was there on a loaded machine (the run then finished, exit 0).
started() {
  for _ in $(seq 6000); do grep -qs '"loss"' "$1/log.jsonl" && return 0; sleep 0.05; done
}
expect_rc() { # name expected-rc command...
  local name=$1 want=$2; shift 2
  "$@" >"$T/out" 2>&1; local rc=$?
  if [ "$rc" = "$want" ]; then ok "$name"
  else bad "$name (exit $rc, wanted $want)"; sed 's/^/    /' "$T/out" | head -5; fi
}
expect_msg() { # name expected-rc regex command...
  local name=$1 want=$2 re=$3; shift 3
  "$@" >"$T/out" 2>&1; local rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$re" "$T/out"; then ok "$name"
  else bad "$name (exit $rc, wanted $want and /$re/)"; sed 's/^/    /' "$T/out" | head -5; fi
}
# Log records without the timing fields (always last in a record) and without resume/end markers.
losses() { grep -Ev '"kind":"(resume|end)"' "$1" | sed -E 's/,"(tok_per_s|train_seconds)".*$//'; }
# The data region of a safetensors file: every tensor's bytes, without the header (which holds the config).
tensors() { local n; n=$(od -An -t u8 -N8 "$1" | tr -d ' '); tail -c +$((n + 9)) "$1"; }
same_tensors() { cmp -s <(tensors "$1") <(tensors "$2"); }

# ---- config ----------------------------------------------------------------------------------------------------
expect_msg "config show prints a complete default config" 0 '"keep_checkpoints"' "$QKV" config show embmean
expect_msg "config show: unknown type is a usage error" 1 "unknown model type 'nosuch'" "$QKV" config show nosuch
expect_msg "config list names embmean" 0 '^embmean +classify' "$QKV" config list
echo '{"model": {"type": "embmean"}, "data": {"train": "x.tsv"}, "train": {"optimizer": {"lr": -1}}}' >"$T/c1.json"
expect_msg "out-of-range value names the key path" 2 'train\.optimizer\.lr: expected a number > 0' \
  "$QKV" config check "$T/c1.json"
echo '{"model": {"type": "embmean"}, "data": {"train": "x.tsv", "tokenizr": "word"}}' >"$T/c2.json"
expect_msg "unknown key names the key path" 2 'data\.tokenizr: unknown key' \
  "$QKV" train --config "$T/c2.json" --run "$T/r0"
echo '{"model": {"type": "embmean", "dim": "big"}, "data": {"train": "x.tsv"}}' >"$T/c3.json"
expect_msg "wrong type names the key path" 2 'model\.dim: expected a number, got a string' \
  "$QKV" config check "$T/c3.json"
echo '{"model": {"type": "embmean"}, "data": {"train": "x.tsv"}, "train": {"steps": 2.5}}' >"$T/c4.json"
expect_msg "non-integer step count" 2 'train\.steps: expected an integer' "$QKV" config check "$T/c4.json"
expect_msg "--set overrides are checked too" 2 'eval\.mode: expected one of' \
  "$QKV" config check "$T/c4.json" --set train.steps=3 --set eval.mode=upward
echo '{"model": {"type": "embmean"}, "data": {"train": "x.tsv"},' >"$T/c5.json"
expect_msg "invalid JSON names the file" 2 'c5\.json:1: invalid JSON' "$QKV" train --config "$T/c5.json" --run "$T/r0"
echo '{"model": {"type": "nosuch"}, "data": {"train": "x.tsv"}}' >"$T/c6.json"
expect_msg "unknown model type lists the known ones" 2 "model\.type: unknown model type 'nosuch' \(known: .*embmean" \
  "$QKV" config check "$T/c6.json"
echo '{"model": {"type": "embmean"}}' >"$T/c7.json"
expect_msg "missing training file is named" 2 'data\.train: required' "$QKV" config check "$T/c7.json"
echo '{"model": {"type": "embmean"}, "data": {"train": "'"$T"'/missing.tsv"}}' >"$T/c8.json"
expect_msg "unreadable training file is bad input" 2 'missing\.tsv' "$QKV" train --config "$T/c8.json" --run "$T/r8"
expect_rc "train without --run is a usage error" 1 "$QKV" train --config "$T/c8.json"
expect_rc "eval of a missing run is bad input" 2 "$QKV" eval --run "$T/nosuch"

# ---- a sentiment classifier, end to end ------------------------------------------------------------------------
S=$SHARED/data/sentiment
if [ -z "$SHARED" ] || [ ! -r "$S/train.tsv" ]; then
  echo "SKIP: shared sentiment data not found (QKV_SHARED='$SHARED'): training tests skipped"
  skip=$((skip + 1))
else
  cat >"$T/sent.json" <<EOF
{"model": {"type": "embmean", "dim": 32},
 "data": {"train": "$S/train.tsv", "dev": "$S/dev.tsv", "test": "$S/test.tsv"},
 "train": {"steps": 200, "batch_size": 32, "optimizer": {"lr": 0.01}, "log_every": 10, "checkpoint_every": 50,
           "keep_checkpoints": 2},
 "eval": {"every": 50}, "seed": 3}
EOF
  expect_rc "train embmean on sentiment (200 steps)" 0 "$QKV" train --config "$T/sent.json" --run "$T/a" --quiet
  for f in config.json log.jsonl vocab.txt labels.txt best.safetensors ckpt-200.safetensors plot.svg; do
    [ -s "$T/a/$f" ] && ok "run dir has $f" || bad "run dir has $f"
  done
  [ ! -e "$T/a/ckpt-100.safetensors" ] && [ -e "$T/a/ckpt-150.safetensors" ] && ok "keeps the last 2 checkpoints" \
    || bad "keeps the last 2 checkpoints ($(ls "$T/a" | tr '\n' ' '))"
  grep -q '<polyline' "$T/a/plot.svg" && ok "plot.svg has curves" || bad "plot.svg has curves"
  [ "$(grep -c '"kind":"train"' "$T/a/log.jsonl")" = 20 ] && [ "$(grep -c '"kind":"eval"' "$T/a/log.jsonl")" = 4 ] \
    && ok "log has 20 train and 4 eval records" || bad "log has 20 train and 4 eval records"
  acc=$("$QKV" eval --run "$T/a" --json | sed -n 's/.*"accuracy":\([0-9.]*\).*/\1/p')
  awk -v a="$acc" 'BEGIN{exit !(a > 0.7)}' && ok "dev accuracy $acc > 0.7" || bad "dev accuracy '$acc' > 0.7"
  expect_msg "eval --split test" 0 '"split":"test"' "$QKV" eval --run "$T/a" --split test --json
  ! grep -q '"split":"test"' "$T/a/log.jsonl" && ok "training never touched the test split" \
    || bad "training never touched the test split"
  expect_msg "eval --data any file, human-readable" 0 'confusion' "$QKV" eval --run "$T/a" --data "$S/test.tsv"
  expect_msg "eval --checkpoint" 0 '"step":150' "$QKV" eval --run "$T/a" --checkpoint "$T/a/ckpt-150.safetensors" --json
  printf '1\tgood\nmaybe\tbad\n' >"$T/badlabel.tsv"
  expect_msg "eval: unknown label names file and line" 2 'badlabel\.tsv:2: label .maybe.' \
    "$QKV" eval --run "$T/a" --data "$T/badlabel.tsv"
  out=$("$QKV" predict --run "$T/a" "a wonderful, moving film" "the worst food i have ever had" 2>&1)
  [ "$(printf '%s\n' "$out" | cut -f1 | tr '\n' ' ')" = "1 0 " ] && ok "predict: positive then negative" \
    || bad "predict: positive then negative ($out)"
  expect_msg "predict from standard input, JSON" 0 '"probs":\{"0":' \
    sh -c "echo 'great' | '$QKV' predict --run '$T/a' --json"
  expect_msg "fresh train refuses a run dir with checkpoints" 2 'already has checkpoints' \
    "$QKV" train --config "$T/sent.json" --run "$T/a" --quiet

  # Determinism: same config, same seed -> the same log and the same weights, bit for bit.
  "$QKV" train --config "$T/sent.json" --run "$T/b" --quiet >/dev/null 2>&1
  cmp -s <(losses "$T/a/log.jsonl") <(losses "$T/b/log.jsonl") && ok "determinism: identical logs" \
    || bad "determinism: identical logs"
  same_tensors "$T/a/ckpt-200.safetensors" "$T/b/ckpt-200.safetensors" && ok "determinism: identical weights" \
    || bad "determinism: identical weights"

  # Resume == uninterrupted. A model with dropout when one is registered, so the dropout generator is restored too.
  model='{"type": "embmean", "dim": 16}'
  if "$QKV" config show transformer_classifier >/dev/null 2>&1; then
    model='{"type": "transformer_classifier", "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32, "dropout": 0.2}'
  fi
  cat >"$T/res.json" <<EOF
{"model": $model,
 "data": {"train": "$S/train.tsv", "dev": "$S/dev.tsv", "max_len": 32, "cls_token": true},
 "train": {"steps": 80, "batch_size": 16, "optimizer": {"name": "adamw", "lr": 0.003},
           "schedule": {"spec": "constant * linear_warmup * cosine_decay", "warmup_steps": 10, "total_steps": 80},
           "clip_norm": 1.0, "log_every": 7, "checkpoint_every": 20},
 "eval": {"every": 20, "max_batches": 2}, "seed": 11}
EOF
  "$QKV" train --config "$T/res.json" --run "$T/full" --quiet >/dev/null 2>&1
  expect_rc "resume: first half" 0 "$QKV" train --config "$T/res.json" --run "$T/half" --set train.steps=40 --quiet
  expect_rc "resume: second half" 0 "$QKV" train --resume --run "$T/half" --set train.steps=80 --quiet
  cmp -s <(losses "$T/full/log.jsonl") <(losses "$T/half/log.jsonl") && ok "resume: identical log losses" \
    || { bad "resume: identical log losses"
         diff <(losses "$T/full/log.jsonl") <(losses "$T/half/log.jsonl") | head -4; }
  same_tensors "$T/full/ckpt-80.safetensors" "$T/half/ckpt-80.safetensors" && ok "resume: identical last checkpoint" \
    || bad "resume: identical last checkpoint"
  same_tensors "$T/full/best.safetensors" "$T/half/best.safetensors" && ok "resume: identical best checkpoint" \
    || bad "resume: identical best checkpoint"

  # SIGINT mid-run: a checkpoint of the current step, exit 130; resuming ends where the uninterrupted run did.
  "$QKV" train --config "$T/res.json" --run "$T/int" --set train.steps=4000 --set train.checkpoint_every=0 \
    --set eval.every=0 --quiet >/dev/null 2>&1 &
  pid=$!
  started "$T/int"
  kill -INT $pid 2>/dev/null
  wait $pid; rc=$?
  n=$(ls "$T/int" | sed -n 's/^ckpt-\([0-9]*\)\.safetensors$/\1/p' | sort -n | tail -1)
  if [ "$rc" = 130 ] && [ -n "$n" ] && [ "$n" -lt 4000 ]; then ok "SIGINT: exit 130, checkpoint at step $n"
  else bad "SIGINT: exit 130 with a checkpoint (exit $rc, step '$n')"; fi
  m=$(( ${n:-0} + 30 ))
  expect_rc "SIGINT: resume to step $m" 0 "$QKV" train --resume --run "$T/int" --set train.steps=$m --quiet
  "$QKV" train --config "$T/res.json" --run "$T/int_full" --set train.steps=$m --set train.checkpoint_every=0 \
    --set eval.every=0 --quiet >/dev/null 2>&1
  same_tensors "$T/int/ckpt-$m.safetensors" "$T/int_full/ckpt-$m.safetensors" \
    && cmp -s <(losses "$T/int/log.jsonl") <(losses "$T/int_full/log.jsonl") \
    && ok "SIGINT + resume == uninterrupted (weights and log)" || bad "SIGINT + resume == uninterrupted"

  # SIGTERM: exit 143.
  "$QKV" train --config "$T/res.json" --run "$T/term" --set train.steps=100000 --quiet >/dev/null 2>&1 &
  pid=$!
  started "$T/term"
  kill -TERM $pid 2>/dev/null
  wait $pid; rc=$?
  [ "$rc" = 143 ] && ok "SIGTERM: exit 143" || bad "SIGTERM: exit 143 (exit $rc)"

  # kill -9 while checkpoints are written every step: the newest checkpoint loads, and resuming still matches.
  "$QKV" train --config "$T/res.json" --run "$T/k9" --set train.steps=100000 --set train.checkpoint_every=1 \
    --set train.keep_checkpoints=2 --set eval.every=0 --quiet >/dev/null 2>&1 &
  pid=$!
  started "$T/k9"
  sleep 0.2 # a few more checkpoints, so the kill can land mid-write
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  n=$(ls "$T/k9" | sed -n 's/^ckpt-\([0-9]*\)\.safetensors$/\1/p' | sort -n | tail -1)
  if [ -n "$n" ]; then
    m=$((n + 10))
    expect_rc "kill -9: newest checkpoint (step $n) loads" 0 "$QKV" eval --run "$T/k9" \
      --checkpoint "$T/k9/ckpt-$n.safetensors"
    expect_rc "kill -9: resume to step $m" 0 "$QKV" train --resume --run "$T/k9" --set train.steps=$m --quiet
    "$QKV" train --config "$T/res.json" --run "$T/k9_full" --set train.steps=$m --set train.checkpoint_every=1 \
      --set train.keep_checkpoints=2 --set eval.every=0 --quiet >/dev/null 2>&1
    same_tensors "$T/k9/ckpt-$m.safetensors" "$T/k9_full/ckpt-$m.safetensors" \
      && cmp -s <(losses "$T/k9/log.jsonl") <(losses "$T/k9_full/log.jsonl") \
      && ok "kill -9 + resume == uninterrupted" || bad "kill -9 + resume == uninterrupted"
  else
    bad "kill -9: no checkpoint was written"
  fi

  # Early stopping: eval.patience evals without a better dev accuracy end the run, with a checkpoint there.
  expect_rc "early stopping run" 0 "$QKV" train --config "$T/sent.json" --run "$T/es" --set train.steps=5000 \
    --set eval.every=10 --set eval.patience=2 --set train.checkpoint_every=0 --quiet
  end=$(grep '"kind":"end"' "$T/es/log.jsonl")
  n=$(printf '%s' "$end" | sed -n 's/.*"step":\([0-9]*\).*/\1/p')
  if printf '%s' "$end" | grep -q '"outcome":"early_stop"' && [ -n "$n" ] && [ "$n" -lt 5000 ] \
    && [ -e "$T/es/ckpt-$n.safetensors" ] && [ "$(grep -c '"early_stop":true' "$T/es/log.jsonl")" = 1 ]; then
    ok "early stopping at step $n"
  else bad "early stopping ($end)"; fi

  # Non-finite losses: reported with the step, not trained on, and the run stops after max_nan_skips in a row.
  expect_msg "non-finite loss stops the run with exit 3" 3 'step [0-9]+: non-finite loss' \
    "$QKV" train --config "$T/sent.json" --run "$T/nan" --quiet --set 'train.optimizer={"name":"sgd","lr":1e14}' \
    --set train.max_nan_skips=2
  grep -q '"kind":"nonfinite"' "$T/nan/log.jsonl" && ok "non-finite steps are logged" \
    || bad "non-finite steps are logged"
fi

# ---- a tiny language model, if one is registered ------------------------------------------------------------------
L=$SHARED/data/lm
if [ -z "$SHARED" ] || [ ! -r "$L/train.txt" ]; then
  echo "SKIP: shared lm data not found: LM test skipped"; skip=$((skip + 1))
elif ! "$QKV" config show gpt >/dev/null 2>&1; then
  echo "SKIP: no gpt model registered: LM test skipped"; skip=$((skip + 1))
else
  head -n 200 "$L/train.txt" >"$T/lm_train.txt"
  head -n 30 "$L/dev.txt" >"$T/lm_dev.txt"
  cat >"$T/lm.json" <<EOF
{"model": {"type": "gpt", "d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64},
 "data": {"train": "$T/lm_train.txt", "dev": "$T/lm_dev.txt", "tokenizer": "char", "seq_len": 32},
 "train": {"steps": 40, "batch_size": 8, "optimizer": {"lr": 0.003}, "log_every": 10, "checkpoint_every": 20},
 "eval": {"every": 20, "max_batches": 4}, "seed": 5}
EOF
  expect_rc "train a tiny character-level gpt" 0 "$QKV" train --config "$T/lm.json" --run "$T/lm" --quiet
  first=$(grep '"kind":"eval"' "$T/lm/log.jsonl" | head -1 | sed -n 's/.*"loss":\([0-9.]*\).*/\1/p')
  last=$(grep '"kind":"train"' "$T/lm/log.jsonl" | tail -1 | sed -n 's/.*"loss":\([0-9.]*\).*/\1/p')
  awk -v l="$last" 'BEGIN{exit !(l < log(60))}' && ok "lm: train loss $last fell below uniform" \
    || bad "lm: train loss '$last' fell below uniform"
  expect_msg "lm eval reports perplexity and bits per char" 0 '"bits_per_char"' "$QKV" eval --run "$T/lm" --json
  expect_msg "lm predict scores a text" 0 '^[0-9.]+	[0-9.]+$' "$QKV" predict --run "$T/lm" "It is a truth."
fi

# ---- seq2seq with BLEU from greedy decodes, on a copy task, if an encoder-decoder is registered -----------------
if ! "$QKV" config show lstm_seq2seq >/dev/null 2>&1; then
  echo "SKIP: no lstm_seq2seq model registered: seq2seq test skipped"; skip=$((skip + 1))
else
  . "${QKV_SOURCE_DIR:?QKV_SOURCE_DIR not set}/tests/harness/copy_task.sh"
  mkdir -p "$T/copy" && copy_task "$T/copy"
  cat >"$T/copy.json" <<EOF
{"model": {"type": "lstm_seq2seq", "embed": 32, "hidden": 64},
 "data": {"train": "$T/copy/train.tsv", "dev": "$T/copy/dev.tsv", "max_len": 8},
 "train": {"steps": 500, "batch_size": 32, "optimizer": {"lr": 0.01}, "log_every": 50, "checkpoint_every": 0},
 "eval": {"every": 250, "bleu": true, "metric": "bleu"}, "seed": 1}
EOF
  expect_rc "train an lstm_seq2seq to copy" 0 "$QKV" train --config "$T/copy.json" --run "$T/copy" --quiet
  bleu=$("$QKV" eval --run "$T/copy" --json | sed -n 's/.*"bleu":\([0-9.]*\).*/\1/p')
  awk -v b="$bleu" 'BEGIN{exit !(b > 80)}' && ok "seq2seq: greedy-decode BLEU $bleu > 80 on the copy task" \
    || bad "seq2seq: greedy-decode BLEU '$bleu' > 80 on the copy task"
  expect_msg "seq2seq predict is not supported" 2 'not supported for model type' "$QKV" predict --run "$T/copy" "alpha"
fi

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]

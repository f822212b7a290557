#!/usr/bin/env bash
# Bad input a new (or unlucky) user gives qkv (issue 22): missing parent directories, a failed resume that must leave
# the run as it was, temporary files of killed writers, readers pointed at directories and devices, absurd sizes in
# configs and checkpoint metadata, conflicting flags. Every refusal is an exit code and a message naming the culprit.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
SHARED=${QKV_SHARED:-}
export QKV_THREADS=${QKV_THREADS:-1}
T=$(mktemp -d /tmp/qkv_cli_probe.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0 skip=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
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
# Every file of a directory (names and contents), for "left exactly as it was".
dirsum() { (cd "$1" && find . -type f | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done) | md5sum; }
# Copy of a safetensors file with one metadata entry (KEY=VALUE) or one header entry (JSON path a.b=VALUE) replaced.
PY=/usr/bin/python3
st_edit() { # in out key value [header]
  "$PY" - "$@" <<'PYEOF'
import json, struct, sys
src, dst, key, val = sys.argv[1:5]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
if len(sys.argv) > 5:
    obj = h
    parts = key.split(".")
    for p in parts[:-1]:
        obj = obj[p]
    obj[parts[-1]] = json.loads(val)
else:
    h["__metadata__"][key] = val
hb = json.dumps(h).encode()
hb += b" " * (-len(hb) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
PYEOF
}
# Copy of a safetensors file with element 0 of one tensor set to NaN (F32, F16 or BF16).
st_nan() { # in out tensor
  "$PY" - "$@" <<'PYEOF'
import json, struct, sys
src, dst, name = sys.argv[1:4]
raw = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
e = json.loads(raw[8:8 + n])[name]
at = 8 + n + e["data_offsets"][0]
nan = {"F32": b"\x00\x00\xc0\x7f", "F16": b"\x00\x7e", "BF16": b"\xc0\x7f"}[e["dtype"]]
raw[at:at + len(nan)] = nan
open(dst, "wb").write(raw)
PYEOF
}
# A command under a virtual memory limit in KB (not under ASan, which reserves terabytes of address space).
vm_limit() { local kb=$1; shift; if [ -n "${QKV_SANITIZED:-}" ]; then "$@"; else (ulimit -v "$kb"; exec "$@"); fi; }
# A PID that no process has: a child that has already been waited for.
dead_pid() { sh -c 'exit 0' & local p=$!; wait "$p"; echo "$p"; }

DATA=""
if [ -n "$SHARED" ] && [ -f "$SHARED/data/sentiment/train.tsv" ]; then DATA=$SHARED/data/sentiment; fi
# A small classifier config: 40 steps, checkpoints at 20 and 40.
if [ -n "$DATA" ]; then
  "$QKV" config show embmean | sed -e "s|\"train\":\t\"\"|\"train\": \"$DATA/train.tsv\"|" \
    -e "s|\"dev\":\t\"\"|\"dev\": \"$DATA/dev.tsv\"|" -e 's|"steps":\t1000|"steps": 40|' \
    -e 's|"checkpoint_every":\t100|"checkpoint_every": 20|' -e 's|"every":\t100|"every": 20|' >"$T/emb.json"
fi

# ---- 0: parent directories are created as mkdir -p does ------------------------------------------------------
if [ -n "$DATA" ]; then
  expect_rc "train --run creates missing parents" 0 "$QKV" train --config "$T/emb.json" --run "$T/runs/a/cls" --quiet
  [ -f "$T/runs/a/cls/ckpt-40.safetensors" ] && ok "the nested run has its checkpoint" || bad "nested run checkpoint"
  R=$T/runs/a/cls
  expect_rc "viz -o creates missing parents" 0 "$QKV" viz --run "$R" -o "$T/out1/deep/v.html" "a good movie"
  [ -s "$T/out1/deep/v.html" ] && ok "viz page written" || bad "viz page written"
  expect_rc "plot -o creates missing parents" 0 "$QKV" plot "$R/log.jsonl" -o "$T/out2/deep/p.svg"
  [ -s "$T/out2/deep/p.svg" ] && ok "plot written" || bad "plot written"
fi
printf 'hello world\nthe cat sat on the mat\n' >"$T/small.txt"
for i in $(seq 1 40); do echo "the quick brown fox jumps over the lazy dog number $i and again"; done >"$T/corpus.txt"
expect_rc "tokenize train --out creates missing parents" 0 \
  "$QKV" tokenize train --vocab-size 300 --min-freq 1 --out "$T/tok/deep" "$T/corpus.txt"
[ -s "$T/tok/deep/vocab.json" ] && ok "vocab.json written" || bad "vocab.json written"
expect_rc "tokenize shard -o creates missing parents" 0 "$QKV" tokenize shard --bpe "$T/tok/deep" \
  -o "$T/shards/deep/a.tok" "$T/corpus.txt"
[ -s "$T/shards/deep/a.tok" ] && ok "shard written" || bad "shard written"
touch "$T/afile"
expect_msg "a file in the way of a directory is named" 2 'afile: exists and is not a directory' \
  "$QKV" tokenize train --vocab-size 300 --min-freq 1 --out "$T/afile/sub" "$T/corpus.txt"

# ---- 1: a failed resume leaves the run directory exactly as it was --------------------------------------------
if [ -n "$DATA" ]; then
  R=$T/r1
  expect_rc "train a run to resume" 0 "$QKV" train --config "$T/emb.json" --run "$R" --quiet
  before=$(dirsum "$R")
  expect_msg "resume with another model size is refused" 2 'shape' \
    "$QKV" train --resume --run "$R" --set model.dim=128 --quiet
  [ "$(dirsum "$R")" = "$before" ] && ok "the refused resume left the run as it was" || bad "refused resume changed the run"
  expect_rc "resume with a missing training file is refused" 2 \
    "$QKV" train --resume --run "$R" --set data.train="$T/nonexistent.tsv" --quiet
  [ "$(dirsum "$R")" = "$before" ] && ok "...and left the run as it was" || bad "missing-file resume changed the run"
  sed 's|"dim":\t64|"dim": 32|' "$T/emb.json" >"$T/other.json"
  expect_rc "resume with another config is refused" 2 "$QKV" train --resume --run "$R" --config "$T/other.json" --quiet
  [ "$(dirsum "$R")" = "$before" ] && ok "...and left the run as it was" || bad "other-config resume changed the run"
  expect_msg "eval still works after the refused resumes" 0 'accuracy' "$QKV" eval --run "$R"
  expect_rc "a plain resume still works" 0 "$QKV" train --resume --run "$R" --set train.steps=60 --quiet
  grep -Eq '"steps":[[:space:]]*60' "$R/config.json" && ok "a successful resume records its config" || bad "resume config not written"
  ls "$R" | grep -q '\.tmp\.' && bad "config write left a temporary" || ok "no temporary left by the config write"
fi

# ---- 1b: a new run refused before its first step leaves nothing it created -------------------------------------
printf 'pos\tgood film good fun\nneg\tbad movie awful dull\npos\tgood good film great\nneg\tbad bad dull movie\n' \
  >"$T/tiny.tsv"
tiny() { # dev-file [more top-level JSON members]
  printf '{"model": {"type": "embmean", "dim": 8}, "data": {"train": "%s", "dev": "%s"}, "train": {"steps": 2, "batch_size": 2}%s}\n' \
    "$T/tiny.tsv" "$1" "${2:-}"
}
tiny "$T/tiny.tsv" >"$T/tiny_ok.json"
tiny "$T/nonexistent.tsv" >"$T/tiny_nodev.json"
tiny "$T/tiny.tsv" ', "eval": {"metric": "bleu"}' >"$T/tiny_metric.json"
expect_msg "a new run with an unreadable dev file is refused" 2 'nonexistent\.tsv' \
  "$QKV" train --config "$T/tiny_nodev.json" --run "$T/new1/a/run" --quiet
[ ! -e "$T/new1" ] && ok "...and leaves none of the directories it made" ||
  bad "the refused run left $(cd "$T" && find new1 | tr '\n' ' ')"
mkdir -p "$T/mine/sub"
echo keep >"$T/mine/notes.txt"
before=$(dirsum "$T/mine")
expect_msg "a new run into an existing directory, refused" 2 'nonexistent\.tsv' \
  "$QKV" train --config "$T/tiny_nodev.json" --run "$T/mine" --quiet
[ "$(dirsum "$T/mine")" = "$before" ] && [ "$(ls -A "$T/mine" | tr '\n' ' ')" = "notes.txt sub " ] &&
  ok "...leaves the directory as it was" || bad "the refused run changed $(ls -A "$T/mine" | tr '\n' ' ')"
expect_msg "a new run whose task has no such eval.metric is refused" 2 "eval\.metric: 'bleu'" \
  "$QKV" train --config "$T/tiny_metric.json" --run "$T/new2" --quiet
[ ! -e "$T/new2" ] && ok "...at its start, and leaves no run directory" ||
  bad "the refused run left $(ls -A "$T/new2" | tr '\n' ' ')"
expect_rc "the same run with a readable dev file trains" 0 "$QKV" train --config "$T/tiny_ok.json" --run "$T/new3" --quiet
[ -f "$T/new3/config.json" ] && ok "...and keeps its run directory" || bad "the trained run has no config.json"

# ---- 2: temporary files of writers that died are removed by the next writer ----------------------------------
dead=$(dead_pid)
echo x >"$T/shards/deep/a.tok.tmp.$dead"
echo x >"$T/shards/deep/notours.tmp.$dead"
expect_rc "shard next to a stale temporary of its output" 0 "$QKV" tokenize shard --bpe "$T/tok/deep" \
  -o "$T/shards/deep/a.tok" "$T/corpus.txt"
[ ! -e "$T/shards/deep/a.tok.tmp.$dead" ] && ok "the output's stale temporary removed" || bad "output's temporary left"
[ -e "$T/shards/deep/notours.tmp.$dead" ] && ok "another file's temporary is not touched" || bad "other temporary removed"
if [ -n "$DATA" ]; then
  R=$T/r1
  dead=$(dead_pid)
  head -c 100000 /dev/urandom >"$R/ckpt-80.safetensors.tmp.$dead"
  echo x >"$R/config.json.tmp.$dead"
  sleep 60 & live=$!
  echo x >"$R/ckpt-99.safetensors.tmp.$live"
  before=$(dirsum "$R")
  expect_rc "a failing resume next to stale temporaries" 2 "$QKV" train --resume --run "$R" --set model.dim=8 --quiet
  [ "$(dirsum "$R")" = "$before" ] && ok "...leaves them (and everything else) as they were" ||
    bad "a failing resume changed the run"
  expect_rc "resume next to stale temporaries" 0 "$QKV" train --resume --run "$R" --set train.steps=80 --quiet
  [ ! -e "$R/ckpt-80.safetensors.tmp.$dead" ] && [ ! -e "$R/config.json.tmp.$dead" ] &&
    ok "stale temporaries of a dead writer removed" || bad "stale temporaries left: $(ls "$R" | grep tmp)"
  [ -e "$R/ckpt-99.safetensors.tmp.$live" ] && ok "a live writer's temporary is kept" || bad "live writer's file removed"
  kill "$live" 2>/dev/null; wait "$live" 2>/dev/null
  # A real writer killed with -9 while it writes its checkpoints.
  cp "$T/emb.json" "$T/kill.json"
  sed -i 's|"steps": 40|"steps": 100000|; s|"checkpoint_every": 20|"checkpoint_every": 1|' "$T/kill.json"
  "$QKV" train --config "$T/kill.json" --run "$T/rk" --quiet >/dev/null 2>&1 & w=$!
  for _ in $(seq 1 600); do ls "$T/rk" 2>/dev/null | grep -q 'ckpt-[0-9]*\.safetensors$' && break; sleep 0.1; done
  sleep 0.5; kill -9 "$w"; wait "$w" 2>/dev/null
  echo x >"$T/rk/ckpt-1.safetensors.tmp.$w" # in case the kill did not land inside a write
  expect_rc "resume after kill -9" 0 "$QKV" train --resume --run "$T/rk" --set train.checkpoint_every=1000000 \
    --set train.steps=1 --quiet
  ls "$T/rk" | grep -q '\.tmp\.' && bad "kill -9 temporaries left: $(ls "$T/rk" | grep tmp)" ||
    ok "temporaries of the killed writer removed"
fi

# ---- 3: a directory or an endless device given as a file is bad input, refused before gigabytes are read -------
mkdir -p "$T/adir"
expect_msg "vectors: a directory" 2 'adir: is a directory' "$QKV" embed similar king --vectors "$T/adir"
expect_msg "wordpiece vocabulary: a directory" 2 'adir: is a directory' \
  "$QKV" tokenize encode --wordpiece "$T/adir" hello
expect_msg "config: a directory" 2 'adir: is a directory' "$QKV" config check "$T/adir"
expect_msg "bleu reference: a directory" 2 'adir: is a directory' "$QKV" bleu -r "$T/adir" -i "$T/small.txt"
mkdir -p "$T/hf/config.json"
expect_msg "hf config.json: a directory" 2 'config\.json: is a directory' "$QKV" attend --model "$T/hf" "a b"
if [ -c /dev/zero ]; then
  # timeout: before the caps these read /dev/zero for half a minute (4 GB) or until memory ran out.
  expect_msg "vectors: /dev/zero fails fast" 2 'dev/zero: a line longer than a vectors file may have' \
    timeout 20 "$QKV" embed similar king --vectors /dev/zero
  expect_msg "wordpiece vocabulary: /dev/zero fails fast" 2 'dev/zero: more than a tokenizer file may have' \
    timeout 20 "$QKV" tokenize encode --wordpiece /dev/zero hello
  expect_msg "config: /dev/zero fails fast" 2 'dev/zero: too large' timeout 20 "$QKV" config check /dev/zero
  expect_msg "standard input from /dev/zero fails fast" 2 'standard input: a line longer' \
    sh -c 'timeout 20 "$1" bleu -r "$2" </dev/zero' _ "$QKV" "$T/small.txt"
fi
if [ -n "$DATA" ]; then
  expect_msg "embeddings.pretrained: a directory" 2 'embeddings\.pretrained: .*adir: is a directory' \
    "$QKV" train --config "$T/emb.json" --run "$T/r3a" --set embeddings.pretrained="$T/adir" --quiet
  expect_msg "data.train: a directory" 2 'adir: is a directory' \
    "$QKV" train --config "$T/emb.json" --run "$T/r3b" --set data.train="$T/adir" --quiet
  [ -c /dev/zero ] && expect_msg "embeddings.pretrained: /dev/zero fails fast" 2 'dev/zero: a line longer' \
    timeout 20 "$QKV" train --config "$T/emb.json" --run "$T/r3c" --set embeddings.pretrained=/dev/zero --quiet
fi

# ---- 4: declared sizes are compared with the checkpoint's header before anything is allocated -----------------
PRE=$SHARED/pretrained
if [ -n "$SHARED" ] && [ -f "$PRE/tiny-random-bert/model.safetensors" ] && [ -x "$PY" ]; then
  hf_set() { # src-dir key value: a copy of the model with one config.json field changed, in $T/hf4
    rm -rf "$T/hf4"; mkdir -p "$T/hf4"; cp "$PRE/$1/model.safetensors" "$T/hf4/"
    "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c[sys.argv[2]]=int(float(sys.argv[3])); json.dump(c,open(sys.argv[4],"w"))' \
      "$PRE/$1/config.json" "$2" "$3" "$T/hf4/config.json"
  }
  for kv in vocab_size=1e9 hidden_size=1e6 max_position_embeddings=1e9 intermediate_size=1e8; do
    hf_set tiny-random-bert "${kv%%=*}" "${kv#*=}"
    # ulimit: a model of that size would be allocated (and fail as out of memory, exit 3) without the check.
    expect_msg "hf config.json ${kv} names config.json and the key" 2 "config\.json: ${kv%%=*} is [0-9]+, but" \
      vm_limit 4000000 "$QKV" attend --model "$T/hf4" -o "$T/a.html" "hello world"
  done
  hf_set tiny-random-gpt2 n_positions 1e9
  expect_msg "gpt2 config.json n_positions=1e9 is named" 2 'config\.json: n_positions is 1000000000, but' \
    vm_limit 4000000 "$QKV" attend --model "$T/hf4" -o "$T/a.html" "hello world"
fi
if [ -n "$DATA" ]; then
  "$QKV" train --config "$T/emb.json" --run "$T/r4" --quiet >/dev/null 2>&1
  sed -i 's|"dim":	64|"dim": 65536|' "$T/r4/config.json"
  # [4207, 65536] floats are 1.1 GB: refused from the checkpoint's header, before the model is built.
  expect_msg "eval of a run whose config does not match its checkpoint" 2 \
    'has shape \[[0-9, ]+64\] but the model needs \[[0-9, ]+65536\] \(the model of .*r4/config\.json' \
    vm_limit 600000 "$QKV" eval --run "$T/r4"
fi

# ---- 6: runs trained from token shards keep the tokenizer the shards were made with --------------------------
for i in $(seq 1 30); do cat "$T/corpus.txt"; done >"$T/corpus30.txt"
"$QKV" tokenize shard --bpe "$T/tok/deep" -o "$T/s6/noted.tok" "$T/corpus30.txt" >/dev/null 2>&1
[ -s "$T/s6/noted.tok.tokenizer.json" ] && ok "tokenize shard notes its tokenizer" || bad "no OUT.tokenizer.json"
cp "$T/s6/noted.tok" "$T/s6/bare.tok"
"$QKV" config show gpt | sed -e 's|"d_model":\t384|"d_model": 16|' -e 's|"n_layers":\t6|"n_layers": 1|' \
  -e 's|"n_heads":\t6|"n_heads": 2|' -e 's|"d_ff":\t1536|"d_ff": 32|' -e 's|"steps":\t1000|"steps": 2|' \
  -e 's|"seq_len":\t64|"seq_len": 16|' -e 's|"every":\t100|"every": 0|' >"$T/gpt.json"
gpt_run() { # run shard [--set ...]
  local run=$1 shard=$2; shift 2
  "$QKV" train --config "$T/gpt.json" --run "$run" --set data.train="$shard" "$@" --quiet
}
expect_rc "train from a noted shard" 0 gpt_run "$T/r6a" "$T/s6/noted.tok"
expect_rc "its run generates from text" 0 "$QKV" generate --run "$T/r6a" --max-tokens 3 "the quick"
expect_rc "its run shows attention for text" 0 "$QKV" attend --run "$T/r6a" -o "$T/r6a.html" "the quick"
expect_rc "generate --view creates missing parents" 0 \
  "$QKV" generate --run "$T/r6a" --max-tokens 2 --view "$T/views/deep/g.html" "the quick"
[ -s "$T/views/deep/g.html" ] && ok "generate's view written" || bad "generate's view written"
expect_rc "train from a bare shard" 0 gpt_run "$T/r6b" "$T/s6/bare.tok"
for c in generate attend viz; do
  expect_msg "$c on an ids-only run says so and names the flags" 2 \
    'trained on token ids .* --set data\.vocab_file=' "$QKV" "$c" --run "$T/r6b" "the quick"
done
grep -q "NULL argument" "$T/out" && bad "a NULL-argument message reached the user" || ok "no NULL-argument message"
expect_msg "predict on an ids-only run says so" 2 'trained on token ids' "$QKV" predict --run "$T/r6b" "the quick"
expect_rc "a bare shard with data.vocab_file + merges_file" 0 gpt_run "$T/r6c" "$T/s6/bare.tok" \
  --set data.vocab_file="$T/tok/deep/vocab.json" --set data.merges_file="$T/tok/deep/merges.txt"
expect_rc "...generates from text" 0 "$QKV" generate --run "$T/r6c" --max-tokens 3 "the quick"
expect_msg "a missing data.vocab_file with a shard is named" 2 'data\.vocab_file: .*nosuch\.json' gpt_run \
  "$T/r6d" "$T/s6/bare.tok" --set data.vocab_file="$T/nosuch.json" --set data.merges_file="$T/tok/deep/merges.txt"

# ---- 7: checkpoint metadata is range-checked on resume ---------------------------------------------------------
if [ -n "$DATA" ] && [ -x "$PY" ]; then
  "$QKV" train --config "$T/emb.json" --run "$T/r7" --quiet >/dev/null 2>&1
  newest() { ls "$T/r7" | grep -E '^ckpt-[0-9]+\.safetensors$' | sed -E 's/ckpt-([0-9]+).*/\1/' | sort -n | tail -1; }
  CK=$T/r7/ckpt-$(newest).safetensors
  cp "$CK" "$T/ck.orig"
  for kv in qkv.step=-5 qkv.data_epoch=-3 qkv.data_pos=-1 qkv.optim_steps=-1 qkv.step=1e3 qkv.data_pos=99999999999999999999; do
    st_edit "$T/ck.orig" "$CK" "${kv%%=*}" "${kv#*=}"
    before=$(dirsum "$T/r7")
    expect_msg "resume refuses ${kv}" 2 "'${kv%%=*}' = '${kv#*=}' is not an integer" \
      "$QKV" train --resume --run "$T/r7" --set train.steps=60 --quiet
    [ "$(dirsum "$T/r7")" = "$before" ] && ok "...and leaves the run as it was" || bad "refused ${kv} changed the run"
  done
  loop=$("$PY" -c 'import json,struct,sys; r=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",r[:8])[0]; print(json.loads(r[8:8+n])["__metadata__"]["qkv.loop"])' "$T/ck.orig")
  st_edit "$T/ck.orig" "$CK" qkv.loop "$(echo "$loop" | sed -E 's/"bad_evals":[^,}]*/"bad_evals":-7/')"
  expect_msg "resume refuses a negative loop counter" 2 "'qkv.loop' key 'bad_evals'" \
    "$QKV" train --resume --run "$T/r7" --set train.steps=60 --quiet
  cp "$T/ck.orig" "$CK"
  expect_rc "the untouched checkpoint resumes" 0 "$QKV" train --resume --run "$T/r7" --set train.steps=60 --quiet
fi

# ---- 8: the smaller ones -------------------------------------------------------------------------------------
if [ -n "$DATA" ]; then
  printf '1\tgood movie\n\tbad movie\n0\tawful\n' >"$T/empty_label.tsv"
  expect_msg "an empty label names file and line" 2 'empty_label\.tsv:2: empty label' \
    "$QKV" train --config "$T/emb.json" --run "$T/r8a" --set data.train="$T/empty_label.tsv" --quiet
  cp -r "$T/r1" "$T/r8b"
  : >"$T/r8b/labels.txt"
  expect_msg "an empty labels.txt is named" 2 'r8b/labels\.txt: no labels' "$QKV" eval --run "$T/r8b"
  expect_msg "a missing data.vocab_file is not ignored by the word tokenizer" 2 'data\.vocab_file: the word tokenizer' \
    "$QKV" train --config "$T/emb.json" --run "$T/r8c" --set data.vocab_file="$T/nosuch.txt" --quiet
  if [ -x "$PY" ]; then
    cp -r "$T/r1" "$T/r8d"
    for f in "$T"/r8d/*.safetensors; do st_nan "$f" "$f" embedding.weight; done
    expect_msg "NaN in a checkpoint names the tensor" 2 "tensor 'embedding\.weight' holds NaN" "$QKV" eval --run "$T/r8d"
  fi
fi
if [ -n "$SHARED" ] && [ -f "$PRE/tiny-random-bert/model.safetensors" ] && [ -x "$PY" ]; then
  rm -rf "$T/hf8"; mkdir -p "$T/hf8"; cp "$PRE/tiny-random-bert/config.json" "$T/hf8/"
  st_nan "$PRE/tiny-random-bert/model.safetensors" "$T/hf8/model.safetensors" encoder.layer.1.attention.self.key.weight
  expect_msg "NaN in HF weights names the tensor" 2 "'encoder\.layer\.1\.attention\.self\.key\.weight' holds NaN" \
    "$QKV" attend --model "$T/hf8" -o "$T/a8.html" "hello world"
fi
GPT2=$SHARED/pretrained/gpt2-tokenizer
if [ -f "$GPT2/vocab.json" ]; then
  expect_msg "decode of an id beyond int32 is named as written" 2 'token id 99999999999999999999 is outside' \
    sh -c 'echo 99999999999999999999 | "$1" tokenize decode --bpe "$2"' _ "$QKV" "$GPT2"
  expect_msg "decode of a negative id" 2 'token id -5 is outside' \
    sh -c 'echo "15496 -5" | "$1" tokenize decode --bpe "$2"' _ "$QKV" "$GPT2"
fi
expect_msg "a flag missing its value says so" 1 'train: --run needs a value' "$QKV" train --config "$T/x.json" --run
expect_msg "...for every command (eval --split)" 1 'eval: --split needs a value' "$QKV" eval --run "$T/r1" --split
expect_msg "...(translate --beam)" 1 'translate: --beam needs a value' "$QKV" translate --run "$T/r1" --beam
expect_msg "...a quoted text (attend --pair)" 1 'attend: --pair needs a value' "$QKV" attend --model "$T/hf" "a b" --pair
expect_msg "...a list (data cloze-qa --kinds)" 1 'data: --kinds needs a value' "$QKV" data cloze-qa "$T/x.txt" --kinds
expect_msg "...a list of numbers (lesson parallel --lengths)" 1 'lesson: --lengths needs a value' \
  "$QKV" lesson parallel --lengths
expect_msg "a boolean flag of prose help is no value flag (embed attend --all)" 2 'nosuch' \
  "$QKV" embed attend --vectors "$T/nosuch.txt" "a b" --all
expect_msg "a boolean flag last is not taken for one with a value" 2 'nosuch.json' \
  "$QKV" train --config "$T/nosuch.json" --run "$T/r8e" --quiet
expect_msg "a flag that is a switch under one subcommand (tokenize train --wordpiece) is not refused there" 2 \
  'tokenize: .*nosuch.txt' "$QKV" tokenize train --vocab-size 300 --out "$T/wp" "$T/nosuch.txt" --wordpiece
expect_msg "...and still needs its value where it takes one (tokenize encode --wordpiece)" 1 \
  'tokenize: --wordpiece needs a value' "$QKV" tokenize encode --wordpiece
expect_msg "...(tokenize shard --bpe)" 1 'tokenize: --bpe needs a value' "$QKV" tokenize shard -o "$T/x.tok" "$T/x.txt" --bpe
: >"$T/empty1"; : >"$T/empty2"
expect_msg "rouge of two empty files" 2 'rouge: nothing to score' "$QKV" rouge -r "$T/empty1" -i "$T/empty2"
grep -q 'qkv_rouge' "$T/out" && bad "rouge printed an internal function name" || ok "no internal name from rouge"
expect_msg "bleu of two empty files" 2 'bleu: nothing to score' "$QKV" bleu -r "$T/empty1" -i "$T/empty2"
expect_msg "--mbr with --beam is refused, naming both" 1 '\-\-mbr and \-\-beam exclude each other' \
  "$QKV" translate --run "$T/r1" --mbr 4 --beam 3
expect_msg "--utility without --mbr is refused" 1 '\-\-utility goes with \-\-mbr' \
  "$QKV" translate --run "$T/r1" --utility rougeL
expect_msg "tokenize train on an empty file warns" 0 'warning: the input files hold no text' \
  "$QKV" tokenize train --vocab-size 300 --out "$T/tok8" "$T/empty1"

echo "cli_probe: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]

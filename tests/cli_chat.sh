#!/usr/bin/env bash
# qkv data dialogue and qkv chat: conversations built from a made-up novel, a tiny Reformer LM trained on them, and a
# scripted chat session (streamed replies that stop at the next "Person 1:", /reset, /save).
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
for i in $(seq 1 150); do
  printf '%s\n' 'CHAPTER' '"how are you?" said she.' '"very well, thank you."' '"and the weather?"' '"fine." He smiled.' \
    'They walked on.'
done > "$d/novel.txt"
"$QKV" data dialogue -o "$d/dialogue.txt" "$d/novel.txt" 2> "$d/summary.txt"
check "data dialogue finds every conversation" '[ "$(wc -l < "$d/dialogue.txt")" = 150 ] && grep -q "150 conversations, 600 turns" "$d/summary.txt"'
check "turns alternate, narration dropped" '[ "$(head -1 "$d/dialogue.txt")" = "Person 1: how are you? Person 2: very well, thank you. Person 1: and the weather? Person 2: fine." ]'
"$QKV" data dialogue --min-turns 5 "$d/novel.txt" > "$d/none.txt" 2>/dev/null
check "min-turns drops short conversations" '[ ! -s "$d/none.txt" ]'
"$QKV" data dialogue --max-turns 1 --min-turns 2 "$d/novel.txt" >/dev/null 2>&1; rc=$?
check "max-turns below min-turns is a usage error" '[ $rc = 1 ]'
head -10 "$d/dialogue.txt" > "$d/dev.txt"
cat > "$d/c.json" <<JSON
{"model": {"type": "reformer_lm", "d_model": 32, "n_layers": 2, "n_heads": 2, "d_head": 16, "d_ff": 64,
           "chunk_len": 16, "attention": "lsh,full"},
 "data": {"train": "$d/dialogue.txt", "dev": "$d/dev.txt", "tokenizer": "char", "lowercase": false,
          "strip_punct": false, "seq_len": 96},
 "train": {"steps": 150, "batch_size": 8, "optimizer": {"name": "adamw", "lr": 0.01}, "log_every": 50},
 "eval": {"every": 150, "max_batches": 2}}
JSON
"$QKV" train --config "$d/c.json" --run "$d/run" --quiet > /dev/null 2>&1
check "a tiny char Reformer trains on the conversations" '[ -f "$d/run/best.safetensors" ]'
printf '%s\n' 'how are you?' 'and the weather?' "/save $d/saved.txt" '/reset' 'how are you?' > "$d/script.txt"
"$QKV" chat --run "$d/run" --script "$d/script.txt" --max-tokens 40 > "$d/chat.txt" 2> "$d/chat.err"; rc=$?
check "chat runs the script" '[ $rc = 0 ]'
check "one reply a user turn" '[ "$(grep -c "^Person 2:" "$d/chat.txt")" = 3 ] && [ "$(grep -c "^Person 1:" "$d/chat.txt")" = 3 ]'
check "a reply stops before the next user turn" '! grep "^Person 2:" "$d/chat.txt" | grep -q "Person 1"'
check "replies are the corpus's lines" '! grep "^Person 2:" "$d/chat.txt" | grep -vqE "^Person 2: (very well, thank you\.|fine\.)\$"'
check "/save writes the conversation so far" 'grep -q "^Person 1: how are you? Person 2: .* Person 1: and the weather? Person 2:" "$d/saved.txt"'
check "/reset starts over" 'grep -q "^(a new conversation)" "$d/chat.txt"'
# A conversation longer than stdio's buffer makes the write itself fail on a full device (fclose alone is not the
# only failure); under the sanitizers a stream left open there is a leak and fails the run.
if [ -w /dev/full ]; then
  { head -c 6000 /dev/zero | tr '\0' a; echo; printf '%s\n' '/save /dev/full' 'how are you?'; } > "$d/full.txt"
  "$QKV" chat --run "$d/run" --script "$d/full.txt" --max-tokens 5 > "$d/full.out" 2> "$d/full.err"; rc=$?
  check "/save to a full device says so, closes the file, goes on" '[ $rc = 0 ] && grep -q "/save /dev/full: cannot write" "$d/full.err" && [ "$(grep -c "^Person 2:" "$d/full.out")" = 2 ]'
fi
"$QKV" chat --run "$d/nonexistent" --script "$d/script.txt" >/dev/null 2>&1; rc=$?
check "missing run is bad input" '[ $rc = 2 ]'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

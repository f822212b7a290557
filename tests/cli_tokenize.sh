#!/usr/bin/env bash
# qkv tokenize: GPT-2 BPE and BERT WordPiece on the staged files, round trips, shards, BPE training, bad input.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
P=${QKV_SHARED:-}/pretrained
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
if [ ! -f "$P/gpt2-tokenizer/vocab.json" ]; then
  echo "SKIP cli_tokenize: ${P} (../shared/pretrained) not found"; exit 77
fi
# Ids from Hugging Face's tokenizers for GPT-2 ("Hello world, it's qkv!").
out=$(echo "Hello world, it's qkv!" | "$QKV" tokenize encode --bpe "$P/gpt2-tokenizer")
check "gpt2 encode" '[ "$out" = "15496 995 11 340 338 10662 74 85 0" ]'
back=$(echo "$out" | "$QKV" tokenize decode --bpe "$P/gpt2-tokenizer")
check "gpt2 decode round trip" '[ "$back" = "Hello world, it'"'"'s qkv!" ]'
out=$(echo "Hello world, it's qkv!" | "$QKV" tokenize encode --wordpiece "$P/bert-base-uncased-tokenizer/vocab.txt" --tokens)
check "wordpiece tokens" '[ "$out" = "[CLS] hello world , it '"'"' s q ##k ##v ! [SEP]" ]'
printf 'It was the best of times.\nIt was the worst of times.\n' > "$d/text"
"$QKV" tokenize shard --bpe "$P/gpt2-tokenizer" -o "$d/t.bin" "$d/text" > "$d/log"
check "shard written with a 64-byte header" '[ -f "$d/t.bin" ] && [ $(( $(stat -c %s "$d/t.bin") % 2 )) = 0 ] && grep -q tokens "$d/log"'
for i in $(seq 1 50); do echo "the cat sat on the mat and the dog sat on the log $i"; done > "$d/corpus"
"$QKV" tokenize train --vocab-size 300 --min-freq 2 --out "$d" "$d/corpus" > /dev/null
out=$(echo "the cat sat" | "$QKV" tokenize encode --bpe "$d" --tokens)
check "trained BPE merges frequent words" 'printf "%s" "$out" | grep -q "Ġcat"'
"$QKV" tokenize train --wordpiece --vocab-size 80 --min-freq 2 --out "$d/wp" "$d/corpus" > /dev/null
out=$(echo "The cat sat on the LOG" | "$QKV" tokenize encode --wordpiece "$d/wp/vocab.txt" --tokens)
check "trained WordPiece keeps frequent words whole" '[ "$out" = "[CLS] the cat sat on the log [SEP]" ]'
"$QKV" tokenize train --vocab-size 100 --out "$d/bad" "$d/corpus" 2> "$d/err"; rc=$?
check "BPE below 257 tokens refused" '[ $rc = 1 ] && grep -q 257 "$d/err"'
echo "1 2 99999999" | "$QKV" tokenize decode --bpe "$P/gpt2-tokenizer" 2> "$d/err"; rc=$?
check "unknown id on decode is bad input" '[ $rc = 2 ] && grep -q 99999999 "$d/err"'
printf 'a b\nthis line is bad\n' > "$d/merges.txt"; echo '{"a":0,"b":1,"ab":2}' > "$d/vocab.json"
echo ab | "$QKV" tokenize encode --bpe "$d" 2> "$d/err"; rc=$?
check "bad merges line named" '[ $rc = 2 ] && grep -q "merges.txt:2" "$d/err"'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

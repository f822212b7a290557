#!/usr/bin/env bash
# qkv embed: nearest neighbours, analogies and comparisons on the staged GloVe subset (values from its
# reference.json), word2vec text with a header, bad input. Also qkv attend (the same issue's viewer command) on the
# staged tiny Hugging Face checkpoints.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
G=${QKV_SHARED:-}/pretrained/glove-6B-100d-top20k/glove.6B.100d.top20k.txt
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
if [ ! -f "$G" ]; then
  echo "SKIP cli_embed: $G (../shared/pretrained) not found"; exit 77
fi
out=$("$QKV" embed similar king -k 3 --vectors "$G")
check "similar king" '[ "$out" = "$(printf "prince\t0.7682\nqueen\t0.7508\nson\t0.7021")" ]'
out=$("$QKV" embed similar frog)   # default vectors, found through QKV_SHARED
check "similar with the default vectors, 10 answers" '[ $(echo "$out" | wc -l) = 10 ] && [ "$(echo "$out" | head -1)" = "$(printf "snake\t0.6571")" ]'
out=$("$QKV" embed analogy king man woman -k 2 --vectors "$G")
check "analogy king - man + woman" '[ "$out" = "$(printf "queen\t0.7834\nmonarch\t0.6934")" ]'
out=$("$QKV" embed analogy king man woman -k 1 --unit --vectors "$G")
check "gensim-style analogy" 'printf "%s" "$out" | grep -q "^queen"'
out=$("$QKV" embed compare cat dog --vectors "$G")
check "compare cat dog" '[ "$out" = "0.8798" ]'
printf '3 2\nred 1 0\nblue 0.9 0.1\ngreen 0 1\n' > "$d/v.txt"
out=$("$QKV" embed similar red -k 1 --vectors "$d/v.txt")
check "word2vec text with a header" '[ "$out" = "$(printf "blue\t0.9939")" ]'
"$QKV" embed similar qwertyzzz --vectors "$G" 2> "$d/err"; rc=$?
check "unknown word is bad input, named" '[ $rc = 2 ] && grep -q "qwertyzzz" "$d/err"'
# Pretrained vectors as a run's embeddings: qkv train shows the coverage the run logged (not the library itself).
for i in 1 2 3 4 5; do printf 'a\tred blue\nb\tgreen zzz\n'; done > "$d/e.tsv"
cat > "$d/e.json" <<JSON
{"model": {"type": "embmean", "dim": 2}, "data": {"train": "$d/e.tsv", "dev": "$d/e.tsv"},
 "embeddings": {"pretrained": "$d/v.txt"}, "train": {"steps": 2, "batch_size": 4, "checkpoint_every": 0}}
JSON
"$QKV" train --config "$d/e.json" --run "$d/e1" 2> "$d/err" > /dev/null
check "train: coverage line (<pad> <unk> red blue green zzz: 3 of 6)" \
  'grep -q "^embeddings: embedding.weight <- .*v.txt: 3 of 6 tokens (50.0%)$" "$d/err"'
"$QKV" train --config "$d/e.json" --run "$d/e2" --quiet > "$d/out" 2> "$d/err"
check "train --quiet: silent" '[ ! -s "$d/err" ] && [ ! -s "$d/out" ]'
"$QKV" train --config "$d/e.json" --run "$d/e3" --json 2> /dev/null | head -1 > "$d/out"
check "train --json: the pretrained record first" 'grep -q "\"kind\":\"pretrained\".*\"found\":3,\"tokens\":6" "$d/out"'
printf 'red 1 0\nblue 0.9\n' > "$d/bad.txt"
"$QKV" embed similar red --vectors "$d/bad.txt" 2> "$d/err"; rc=$?
check "dimension mismatch names file:line" '[ $rc = 2 ] && grep -q "bad.txt:2: .blue. has 1 values, expected 2" "$d/err"'
printf 'red 1 0\nblue 0.9 x\n' > "$d/bad.txt"
"$QKV" embed similar red --vectors "$d/bad.txt" 2> "$d/err"; rc=$?
check "malformed number names file:line" '[ $rc = 2 ] && grep -q "bad.txt:2:" "$d/err"'
"$QKV" embed analogy king man --vectors "$G" 2> "$d/err"; rc=$?
check "analogy needs three words" '[ $rc = 1 ] && grep -q "takes 3 words" "$d/err"'
"$QKV" embed similar king --vectors "$d/none.txt" 2> "$d/err"; rc=$?
check "missing file" '[ $rc = 2 ] && grep -q "none.txt" "$d/err"'
P=${QKV_SHARED}/pretrained
out=$("$QKV" attend --model "$P/tiny-random-bert" --tokenizer "$P/bert-base-uncased-tokenizer" --word old \
      -o "$d/bert.html" "How old are you?")
check "attend bert writes the page for 'old'" '[ -s "$d/bert.html" ] && printf "%s" "$out" | grep -q "7 tokens, 2 layers x 4 heads; row 2 .old." && grep -q "layer 2" "$d/bert.html"'
out=$("$QKV" attend --model "$P/tiny-random-gpt2" --tokenizer "$P/gpt2-tokenizer" -o "$d/gpt2.html" "Hello, world!")
check "attend gpt2 (causal maps)" '[ -s "$d/gpt2.html" ] && grep -q causal "$d/gpt2.html"'
"$QKV" attend --model "$P/tiny-random-bert" --tokenizer "$P/gpt2-tokenizer" -o "$d/x.html" "hi" 2> "$d/err"; rc=$?
check "attend: tokenizer larger than the embedding table" '[ $rc = 2 ] && grep -q "50257 tokens" "$d/err" && [ ! -e "$d/x.html" ]'
"$QKV" attend --model "$P/tiny-random-bert" --tokenizer "$P/bert-base-uncased-tokenizer" --word zebra "hi" 2> "$d/err"; rc=$?
check "attend: unknown target word" '[ $rc = 2 ] && grep -q zebra "$d/err"'
"$QKV" attend --model "$d" "hi" 2> "$d/err"; rc=$?
check "attend: not a checkpoint directory" '[ $rc = 2 ] && grep -q config.json "$d/err"'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# One subword tokenizer for a T5 pretraining corpus and its tasks (docs/t5.md): `qkv tokenize train --corpus DIR`
# learns a byte-level BPE from the English training documents of a ../shared/data-style directory plus task files
# (here the Spanish side of a translation task, which the corpus never reads), span-corruption pretraining takes it
# through data.tokenizer_from, and a multi-task run fine-tuned from that run keeps it: the Spanish words stay whole
# tokens and `qkv generate` emits no <unk>. A corpus directory missing a file exits 2 naming it.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
en=(red green blue black white small large old new warm)
es=(roja verde azul negra blanca pequeña grande vieja nueva cálida)
mkdir -p "$d/data/lm" "$d/data/translation" "$d/data/paraphrase" "$d/data/pos" "$d/data/summarization"
for i in $(seq 0 79); do
  a=$((i % 10)) b=$(((i * 3 + 1) % 10))
  echo "The ${en[$a]} house stood by the ${en[$b]} river. Mr. Dashwood walked there." >> "$d/data/lm/train.txt"
  printf 'the %s house\tla casa %s\n' "${en[$a]}" "${es[$a]}" >> "$d/data/translation/train.tsv"
  printf '%d\tthe %s house\tthe %s home\n' $((i % 2)) "${en[$a]}" "${en[$b]}" >> "$d/data/paraphrase/train.tsv"
  printf 'The\tDET\tat\n%s\tADJ\tjj\nriver\tNOUN\tnn\n.\tPUNCT\t.\n\n' "${en[$b]}" >> "$d/data/pos/train.tsv"
  printf 'a %s package for parsing files\tparse files\n' "${en[$a]}" >> "$d/data/summarization/train.tsv"
done
"$QKV" tokenize train --vocab-size 400 --corpus "$d/data" --out "$d/tok_en" > /dev/null 2> "$d/err"; rc=$?
[ $rc = 0 ] || cat "$d/err"
check "--corpus alone: the English documents, not the Spanish side" \
  '[ $rc = 0 ] && grep -q "\"ĠDashwood\"" "$d/tok_en/vocab.json" && grep -q "\"Ġriver\"" "$d/tok_en/vocab.json" && ! grep -q "\"Ġcasa\"" "$d/tok_en/vocab.json"'
"$QKV" tokenize train --vocab-size 400 --corpus "$d/data" --out "$d/tok" "$d/data/translation/train.tsv" > /dev/null 2> "$d/err"; rc=$?
check "--corpus plus a task file: its Spanish words get merges too" \
  '[ $rc = 0 ] && grep -q "\"Ġcasa\"" "$d/tok/vocab.json" && grep -q "\"ĠDashwood\"" "$d/tok/vocab.json"'
mkdir -p "$d/bad/lm"; cp "$d/data/lm/train.txt" "$d/bad/lm/"
"$QKV" tokenize train --vocab-size 400 --corpus "$d/bad" --out "$d/tok_bad" > /dev/null 2> "$d/err"; rc=$?
check "a corpus directory missing a file exits 2 naming it, writing nothing" \
  '[ $rc = 2 ] && grep -q "translation/train.tsv" "$d/err" && [ ! -e "$d/tok_bad" ]'
cat > "$d/pre.json" <<JSON
{"model": {"type": "t5", "d_model": 32, "n_heads": 2, "d_kv": 16, "d_ff": 64, "dropout": 0.0},
 "data": {"task": "span_corruption", "train": "$d/data", "max_len": 16, "sentinels": 10,
          "tokenizer": "bpe", "tokenizer_from": "$d/tok"},
 "train": {"steps": 10, "batch_size": 8}, "eval": {"every": 0}, "seed": 3}
JSON
QKV_THREADS=1 "$QKV" train --config "$d/pre.json" --run "$d/pre" --quiet > /dev/null 2> "$d/err"; rc=$?
[ $rc = 0 ] || cat "$d/err"
check "span-corruption pretraining with the learned BPE" '[ $rc = 0 ] && cmp -s "$d/tok/merges.txt" "$d/pre/merges.txt"'
cat > "$d/ft.json" <<JSON
{"model": {"type": "t5", "d_model": 32, "n_heads": 2, "d_kv": 16, "d_ff": 64, "dropout": 0.0},
 "data": {"max_len": 16, "sentinels": 10, "tokenizer": "bpe", "tokenizer_from": "$d/pre", "keep_sentinels": true,
          "tasks": [{"name": "translate", "prefix": "translate English to Spanish:", "train": "$d/data/translation/train.tsv"}]},
 "finetune": {"init_from": "$d/pre"},
 "train": {"steps": 60, "batch_size": 8, "optimizer": {"lr": 0.01}}, "eval": {"every": 0}, "seed": 3}
JSON
QKV_THREADS=1 "$QKV" train --config "$d/ft.json" --run "$d/ft" --quiet > /dev/null 2> "$d/err"; rc=$?
[ $rc = 0 ] || cat "$d/err"
check "the task run starts from every pretrained tensor, with the same BPE" \
  '[ $rc = 0 ] && grep "\"kind\":\"init_from\"" "$d/ft/log.jsonl" | grep -q "\"n_new\":0" && cmp -s "$d/tok/vocab.json" "$d/ft/vocab.json"'
toks=$(echo "la casa verde" | "$QKV" tokenize encode --bpe "$d/ft" --tokens)
check "its tokenizer keeps a Spanish word whole ($toks)" 'printf "%s" "$toks" | grep -qw "Ġcasa"'
gen=$("$QKV" generate --run "$d/ft" "translate English to Spanish: the green house" 2> "$d/err"); rc=$?
check "generate translates without <unk> ($gen)" '[ $rc = 0 ] && printf "%s" "$gen" | grep -q "^la casa " && ! printf "%s" "$gen" | grep -q "<unk>"'
echo "cli_t5_bpe: $pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# qkv summarize and the summarize task from the command line: a tiny GPT trained on article<TAB>summary lines
# summarizes text, files and standard input (greedy, sampling, beam, MBR; batched output equals one article at a time);
# eval reports loss and ROUGE; qkv rouge --lead scores the lead baseline; bad data and bad articles exit 2 naming
# file:line; a model that is not a language model is refused; training shows a warning counting cut articles.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
for i in $(seq 1 40); do
  printf 'the cat sat on the mat. it was a very happy cat all day long.\tcat on a mat\n'
  printf 'a dog barked at the postman. the dog was loud and the man ran away.\tloud dog\n'
  printf 'rain fell on the town for many days. the river rose over its banks.\train and flood\n'
done > "$d/train.tsv"
head -6 "$d/train.tsv" > "$d/dev.tsv"
cat > "$d/s.json" <<JSON
{"model": {"type": "gpt", "d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64},
 "data": {"task": "summarize", "train": "$d/train.tsv", "dev": "$d/dev.tsv", "bpe_vocab_size": 300,
          "max_len": 48, "summary_max_len": 8},
 "train": {"steps": 120, "batch_size": 8, "optimizer": {"lr": 0.01}, "log_every": 50},
 "eval": {"every": 120, "rouge_max_examples": 6, "metric": "rougeL"}}
JSON
"$QKV" train --config "$d/s.json" --run "$d/run" --quiet > /dev/null 2>&1; rc=$?
check "train a summarize run, best checkpoint by ROUGE-L" '[ $rc = 0 ] && [ -f "$d/run/vocab.json" ] && grep -q "\"metric\":\"rougeL\",\"best\":true" "$d/run/log.jsonl"'
out=$("$QKV" summarize --run "$d/run" "the cat sat on the mat. it was a very happy cat all day long.")
check "greedy summary of a learnt article" '[ "$out" = "cat on a mat" ]'
cut -f1 "$d/dev.tsv" > "$d/articles.txt"
"$QKV" summarize --run "$d/run" --input "$d/articles.txt" > "$d/many"
"$QKV" summarize --run "$d/run" --batch 2 < "$d/dev.tsv" > "$d/some"
: > "$d/one"
while IFS= read -r a; do "$QKV" summarize --run "$d/run" "$a" >> "$d/one"; done < "$d/articles.txt"
check "batched = one at a time; TSV on stdin" '[ $(wc -l < "$d/many") = 6 ] && cmp -s "$d/one" "$d/many" && cmp -s "$d/one" "$d/some"'
check "the learnt summaries" '[ "$(cut -f2 "$d/dev.tsv")" = "$(cat "$d/many")" ]'
"$QKV" summarize --run "$d/run" --search sample --temperature 1.5 --top-k 20 --seed 3 --input "$d/articles.txt" > "$d/s1"
"$QKV" summarize --run "$d/run" --search sample --temperature 1.5 --top-k 20 --seed 3 --batch 1 --input "$d/articles.txt" > "$d/s2"
check "sampling with a seed is reproducible" '[ $(wc -l < "$d/s1") = 6 ] && cmp -s "$d/s1" "$d/s2"'
"$QKV" summarize --run "$d/run" --search beam --beam 1 --input "$d/articles.txt" > "$d/b1"
"$QKV" summarize --run "$d/run" --search beam --beam 3 --alpha 1 --input "$d/articles.txt" > "$d/b3"
check "beam 1 = greedy; beam 3 finds the learnt summaries" 'cmp -s "$d/b1" "$d/many" && cmp -s "$d/b3" "$d/many"'
"$QKV" summarize --run "$d/run" --no-repeat-ngram 2 --input "$d/articles.txt" > "$d/nr"
"$QKV" summarize --run "$d/run" --search beam --beam 3 --no-repeat-ngram 2 --input "$d/articles.txt" > "$d/nrb"
check "--no-repeat-ngram 2 keeps summaries that repeat nothing (greedy, beam)" 'cmp -s "$d/nr" "$d/many" && cmp -s "$d/nrb" "$d/many"'
"$QKV" summarize --run "$d/run" --no-repeat-ngram 1 --repeat-scope all --input "$d/articles.txt" > "$d/nra"
"$QKV" summarize --run "$d/run" --search beam --no-repeat-ngram 1 --repeat-scope all --input "$d/articles.txt" > "$d/nrab"
check "--repeat-scope all forbids copying the article's tokens (greedy, beam)" \
  '[ $(wc -l < "$d/nra") = 6 ] && ! cmp -s "$d/nra" "$d/many" && [ $(wc -l < "$d/nrab") = 6 ] && ! cmp -s "$d/nrab" "$d/many"'
"$QKV" summarize --run "$d/run" --repeat-scope prompt "a dog" 2>/dev/null; rc1=$?
"$QKV" summarize --run "$d/run" "a dog" --no-repeat-ngram 2>/dev/null; rc2=$?
check "a bad or missing repetition option value is a usage error" '[ $rc1 = 1 ] && [ $rc2 = 1 ]'
"$QKV" train --config "$d/s.json" --run "$d/nrun" --set train.steps=2 --set eval.every=2 --set eval.no_repeat_ngram=2 \
  --set eval.repetition_penalty=1.2 --set eval.repeat_scope=all > /dev/null 2>&1; rc=$?
check "eval.no_repeat_ngram, eval.repetition_penalty, eval.repeat_scope configure the ROUGE decodes" \
  '[ $rc = 0 ] && grep -q "\"rougeL\"" "$d/nrun/log.jsonl"'
"$QKV" train --config "$d/s.json" --run "$d/nbad" --set eval.repeat_scope=prompt > /dev/null 2>&1; rc=$?
check "a bad eval.repeat_scope is bad input" '[ $rc = 2 ]'
"$QKV" summarize --run "$d/run" --search mbr --samples 4 --input "$d/articles.txt" > "$d/mbr"
check "mbr prints one summary an article" '[ $(wc -l < "$d/mbr") = 6 ]'
"$QKV" summarize --run "$d/run" "a dog barked at the postman." --view "$d/view/page.html" > /dev/null 2> "$d/err"; rc=$?
check "--view writes the attention page of article and summary, with the layer's map" \
  '[ $rc = 0 ] && grep -q "summary tokens" "$d/err" && [ -s "$d/view/page.html" ] && grep -q "layer 1" "$d/view/page.html"'
"$QKV" summarize --run "$d/run" --input "$d/articles.txt" --view "$d/v2.html" > /dev/null 2>&1; rc=$?
check "--view with --input is a usage error" '[ $rc = 1 ]'
long=$(for i in $(seq 1 30); do printf 'the cat sat on the mat. '; done)
"$QKV" summarize --run "$d/run" "$long" > /dev/null 2> "$d/err"; rc=$?
check "a long article is cut with a warning" '[ $rc = 0 ] && grep -q "1 of 1 articles" "$d/err"'
sed 's/"max_len": 48/"max_len": 20/' "$d/s.json" > "$d/short.json"
"$QKV" train --config "$d/short.json" --run "$d/short" --set train.steps=1 > /dev/null 2> "$d/err"; rc=$?
check "training warns of the articles it cut" '[ $rc = 0 ] && grep -q "warning: [0-9]* of 126 articles are longer" "$d/err"'
check "the warning and its count are in the run's log" \
  'grep -q "\"kind\":\"warning\",\"step\":0,\"truncated\":[1-9][0-9]*,\"examples\":126" "$d/short/log.jsonl"'
"$QKV" eval --run "$d/run" --json > "$d/eval" 2>&1
check "eval reports loss and ROUGE with and without stemming" 'grep -q "\"rougeL\"" "$d/eval" && grep -q "\"rouge2_stem\"" "$d/eval" && grep -q "\"loss\"" "$d/eval"'
"$QKV" rouge --lead "$d/dev.tsv" --json > "$d/lead"
check "rouge --lead" 'grep -q "\"lead_words\": 3" "$d/lead"'
printf 'x\ty\nno tab\n' > "$d/notab.tsv"
"$QKV" rouge --lead "$d/notab.tsv" > /dev/null 2> "$d/err"; rc=$?
check "rouge --lead: a line without a tab exits 2 naming file:line" '[ $rc = 2 ] && grep -q "notab.tsv:2" "$d/err"'
# bad input
printf 'the cat\n\nthe dog\n' > "$d/blank.txt"
"$QKV" summarize --run "$d/run" --input "$d/blank.txt" > /dev/null 2> "$d/err"; rc=$?
check "an empty article exits 2 naming file:line" '[ $rc = 2 ] && grep -q "blank.txt:2: empty article" "$d/err"'
printf 'the cat\nbad \377 byte\n' > "$d/bad.txt"
"$QKV" summarize --run "$d/run" --input "$d/bad.txt" > /dev/null 2> "$d/err"; rc=$?
check "invalid UTF-8 exits 2 naming file:line" '[ $rc = 2 ] && grep -q "bad.txt:2" "$d/err"'
try_data() { # name, content, expected message
  printf "$2" > "$d/$1.tsv"
  sed "s|$d/train.tsv|$d/$1.tsv|" "$d/s.json" > "$d/$1.json"
  "$QKV" train --config "$d/$1.json" --run "$d/run_$1" --quiet > /dev/null 2> "$d/err"; rc=$?
  want=$3
  check "training data: $1 exits 2 naming file:line" '[ $rc = 2 ] && grep -q "$want" "$d/err"'
}
try_data empty_summary 'an article\ta summary\nan article\t\n' "empty_summary.tsv:2: empty summary"
try_data empty_article 'an article\ta summary\n\ta summary\n' "empty_article.tsv:2: empty article"
try_data no_tab 'an article\ta summary\nno tab at all\n' "no_tab.tsv:2"
try_data bad_utf8 'an article\ta summary\nbad \377\tx\n' "bad_utf8.tsv:2"
sed 's/"type": "gpt", "d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64/"type": "embmean", "dim": 8/' "$d/s.json" > "$d/cls.json"
"$QKV" train --config "$d/cls.json" --run "$d/cls" --quiet > /dev/null 2> "$d/err"; rc=$?
check "summarize with a classifier exits 2" '[ $rc = 2 ] && grep -q "data.task" "$d/err"'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

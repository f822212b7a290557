#!/usr/bin/env bash
# qkv bleu / qkv rouge from the command line: scores, JSON, and bad input.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
printf 'the cat sat on the mat\nhello there general kenobi\n' > "$d/hyp"
printf 'the cat is on the mat\nhello there general kenobi\n' > "$d/ref"
printf 'a cat sat on a mat\nhello there general kenobi\n' > "$d/ref2"
# Hand count: 1-grams 9/10, 2-grams 6/8, 3-grams 3/6, 4-grams 1/4, BP 1 -> 100 * (0.9*0.75*0.5*0.25)^(1/4) = 53.90
out=$("$QKV" bleu -r "$d/ref" < "$d/hyp")
check "bleu score line" '[ "$(printf "%s\n" "$out" | head -1)" = "BLEU = 53.90 90.0/75.0/50.0/25.0 (BP = 1.000 ratio = 1.000 hyp_len = 10 ref_len = 10)" ]'
check "bleu signature" 'printf "%s\n" "$out" | grep -q "^signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp"'
out=$("$QKV" bleu -r "$d/ref" -r "$d/ref2" -i "$d/hyp" --json)
check "bleu two references, json" 'printf "%s" "$out" | /usr/bin/python3 -c "import json,sys; o=json.load(sys.stdin); assert o[\"score\"] > 53.9 and \"nrefs:2\" in o[\"signature\"]"'
out=$("$QKV" rouge -r "$d/ref" -i "$d/hyp" --json)
check "rouge json" 'printf "%s" "$out" | /usr/bin/python3 -c "import json,sys; o=json.load(sys.stdin); assert abs(o[\"rouge1\"][\"f1\"] - 91.6667) < 1e-3 and abs(o[\"rouge2\"][\"f1\"] - 80) < 1e-6"'
printf 'one line\n' > "$d/short"
"$QKV" bleu -r "$d/short" < "$d/hyp" 2> "$d/err"; rc=$?
check "bleu line-count mismatch is bad input naming the file" '[ $rc = 2 ] && grep -q short "$d/err"'
printf 'bad \xff byte\nx\n' > "$d/bad"
"$QKV" rouge -r "$d/ref" -i "$d/bad" 2> "$d/err"; rc=$?
check "rouge invalid UTF-8 is bad input naming file and line" '[ $rc = 2 ] && grep -q "bad:1" "$d/err"'
"$QKV" bleu < "$d/hyp" 2>/dev/null; rc=$?
check "bleu without references is a usage error" '[ $rc = 1 ]'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

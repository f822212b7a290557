#!/usr/bin/env bash
# The lessons of issue 32 as commands: `qkv embed attend` (basic attention over word vectors: the weights equal a
# hand computation on a tiny vector file, the page's heatmap holds every word as query), `qkv lesson gradients` and
# `qkv lesson parallel` on tiny runs (their shape and errors), and every page and picture in headless Chromium when
# installed.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
PY=/usr/bin/python3
export QKV_THREADS=${QKV_THREADS:-1}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }

# ---- qkv embed attend on a tiny vector file, against the formula computed here by awk ----
printf 'cat 1 0\nsat 0 1\nmat 1 1\nthe 0.5 -0.5\n' > "$d/v.txt"
# weights of query q over keys ks: softmax(score), score = dot (/ sqrt 2 when scaled) or cosine
want() { # $1 = dot|cos|scaled, $2 = query, then the keys
  awk -v mode="$1" -v q="$2" -v keys="${*:3}" 'BEGIN {
    V["cat"] = "1 0"; V["sat"] = "0 1"; V["mat"] = "1 1"; V["the"] = "0.5 -0.5"
    split(V[q], a, " "); n = split(keys, k, " "); z = 0
    for (i = 1; i <= n; i++) {
      split(V[k[i]], b, " "); dot = a[1] * b[1] + a[2] * b[2]
      s = mode == "cos" ? dot / sqrt((a[1]^2 + a[2]^2) * (b[1]^2 + b[2]^2)) : mode == "scaled" ? dot / sqrt(2) : dot
      e[i] = exp(s); z += e[i]
    }
    for (i = 1; i <= n; i++) printf "%s\t%.4f\n", k[i], e[i] / z
  }'
}
got() { sed -n '/^# query/,/^# nearest/p' | grep -v '^#'; }
out=$("$QKV" embed attend "The cat sat on the mat." --word cat --vectors "$d/v.txt" 2> "$d/err")
check "dot-product weights = softmax of the dot products (by hand); 'on' skipped, named" \
  '[ "$(printf "%s\n" "$out" | got)" = "$(want dot cat the cat sat the mat)" ] && grep -q "skipped .on." "$d/err"'
out=$("$QKV" embed attend "The cat sat on the mat." --word mat --score cosine --vectors "$d/v.txt" 2> /dev/null)
check "cosine weights by hand" '[ "$(printf "%s\n" "$out" | got)" = "$(want cos mat the cat sat the mat)" ]'
out=$("$QKV" embed attend "the cat sat on the mat" --word sat --scale --stopwords --vectors "$d/v.txt" 2> /dev/null)
check "scaled dot product, stop words dropped" '[ "$(printf "%s\n" "$out" | got)" = "$(want scaled sat cat sat mat)" ]'
# The weighted sum for 'cat' over (cat, sat, mat) is w1 (1,0) + w2 (0,1) + w3 (1,1): its nearest word by cosine.
out=$("$QKV" embed attend "cat sat mat" --word cat -k 4 --vectors "$d/v.txt")
near=$(printf "%s\n" "$out" | sed -n '/^# nearest/,$p' | sed -n 2p | cut -f1)
want_near=$(want dot cat cat sat mat | awk -F'\t' '{ w[NR] = $2 } END {
  x = w[1] + w[3]; y = w[2] + w[3]; n = sqrt(x * x + y * y)
  split("cat sat mat the", names, " "); split("1 0 0 1 1 1 0.5 -0.5", c, " "); best = -2
  for (i = 1; i <= 4; i++) { cx = c[2*i-1]; cy = c[2*i]; s = (x * cx + y * cy) / (n * sqrt(cx * cx + cy * cy)); if (s > best) { best = s; b = names[i] } }
  print b }')
check "nearest word to the weighted sum ($near, by hand $want_near)" '[ -n "$near" ] && [ "$near" = "$want_near" ]'
out=$("$QKV" embed attend "cat sat mat" --all --vectors "$d/v.txt")
check "--all: one block per word" '[ "$(printf "%s\n" "$out" | grep -c "^# query")" = 3 ]'
"$QKV" embed attend "The cat sat on the mat." --word sat --vectors "$d/v.txt" -o "$d/page/att.html" > /dev/null 2>&1
check "page: every word a query row, rows sum to 1, row of 'sat' highlighted" '"$PY" - "$d/page/att.html" <<PYEOF
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
D = json.loads(re.search(r"<script type=\"application/json\" id=\"qkv-data\">(.*?)</script>", html, re.S).group(1))
ex = D["examples"][0]; m = ex["maps"][0]; n = len(m["rows"])
ok = m["rows"] == ["the", "cat", "sat", "the", "mat"] and len(m["w"]) == n * n and ex["highlight_row"] == 2
ok = ok and all(abs(sum(m["w"][i * n:(i + 1) * n]) - 1) < 2e-3 for i in range(n))
sys.exit(0 if ok else 1)
PYEOF'
"$QKV" embed attend "cat sat" --word dog --vectors "$d/v.txt" 2> "$d/err"; rc=$?
check "a query word not in the sentence: exit 2, named" '[ $rc = 2 ] && grep -q "dog" "$d/err"'
"$QKV" embed attend "zzz qqq" --word zzz --vectors "$d/v.txt" 2> "$d/err"; rc=$?
check "no word in the vectors: exit 2" '[ $rc = 2 ] && grep -q "no word" "$d/err"'
"$QKV" embed attend "cat sat" --vectors "$d/v.txt" 2> "$d/err"; rc=$?
check "neither --word nor --all: usage" '[ $rc = 1 ] && grep -q -- "--word" "$d/err"'
"$QKV" embed attend "cat sat" --all --score l2 --vectors "$d/v.txt" 2> "$d/err"; rc=$?
check "bad --score: usage" '[ $rc = 1 ] && grep -q "dot or cosine" "$d/err"'

# ---- qkv lesson gradients / parallel on tiny runs (the numbers' correctness: tests/test_lessons.c) ----
for i in $(seq 1 40); do
  printf '%d\tthe film was %s and the story %s\n' $((i % 2)) "$([ $((i % 2)) = 1 ] && echo good || echo bad)" \
    "$([ $((i % 3)) = 0 ] && echo dragged || echo moved)"
done > "$d/s.tsv"
for m in rnn cnn; do
  if [ $m = rnn ]; then model='{"type": "rnn_classifier", "cell": "rnn", "d_model": 8, "hidden": 8}'
  else model='{"type": "cnn_classifier", "d_model": 8, "n_filters": 4}'; fi
  cat > "$d/$m.json" <<JSON
{"model": $model, "data": {"train": "$d/s.tsv", "dev": "$d/s.tsv", "tokenizer": "word", "max_len": 16},
 "train": {"steps": 5, "batch_size": 8, "checkpoint_every": 0}, "eval": {"every": 5}}
JSON
  "$QKV" train --config "$d/$m.json" --run "$d/$m" --quiet > /dev/null 2>&1
done
"$QKV" lesson gradients --run "$d/rnn" --run conv="$d/cnn" --length 30 --inputs 3 -o "$d/page/grad.svg" > "$d/out" 2> "$d/err"; rc=$?
check "lesson gradients: a table row and a line per run, inputs longer than training's max_len" \
  '[ $rc = 0 ] && grep -q "^rnn  *3 " "$d/out" && grep -q "^conv  *3 " "$d/out" && [ "$(grep -c "<polyline" "$d/page/grad.svg")" -ge 2 ]'
"$QKV" lesson gradients --run "$d/rnn" --length 5000 --inputs 1 -o "$d/x.svg" 2> "$d/err"; rc=$?
check "lesson gradients: a file too short for --length is bad input" '[ $rc = 2 ] && grep -q "5000" "$d/err"'
"$QKV" lesson gradients --run "$d/nope" -o "$d/x.svg" 2> "$d/err"; rc=$?
check "lesson gradients: a missing run is bad input, named" '[ $rc = 2 ] && grep -q "nope" "$d/err"'
"$QKV" lesson gradients -o "$d/x.svg" 2> /dev/null; rc=$?
check "lesson gradients without --run: usage" '[ $rc = 1 ]'
"$QKV" lesson parallel --lengths 8,32 --width 16 --seconds 0 --threads 1 --run cnn="$d/cnn" -o "$d/page/par.svg" > "$d/out" 2> "$d/err"; rc=$?
check "lesson parallel: five layer rows with a time per length, accuracy beside the CNN, SVG" \
  '[ $rc = 0 ] && [ "$(grep -cE "^[|] [A-Za-z].*[|] [0-9]+[.][0-9]+ [|] [0-9]+[.][0-9]+ [|]$" "$d/out")" = 5 ] && grep -q "^| Conv1d (width 3) | [0-9.]*% (dev) |" "$d/out" && [ "$(grep -c "<polyline" "$d/page/par.svg")" -ge 5 ]'
"$QKV" lesson parallel --run tcn="$d/cnn" 2> "$d/err"; rc=$?
check "lesson parallel: an unknown kind is a usage error" '[ $rc = 1 ] && grep -q "rnn,lstm,gru,cnn,attn" "$d/err"'
"$QKV" lesson nothing 2> /dev/null; rc=$?
check "lesson: unknown lesson is a usage error" '[ $rc = 1 ]'

# ---- pages in a browser (headless Chromium, when installed) ----
CHROMIUM=${QKV_CHROMIUM:-}
for c in /usr/bin/chromium /usr/bin/chromium-browser; do [ -z "$CHROMIUM" ] && [ -x "$c" ] && CHROMIUM=$c; done
render() { # $1 page -> $1.dom
  mkdir -p "$d/profile"
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$d/profile" \
    --dump-dom "file://$1" > "$1.dom" 2> /dev/null
}
if [ -n "$CHROMIUM" ]; then
  render "$d/page/att.html"
  cells=$(grep -o 'class="cell"' "$d/page/att.html.dom" | wc -l)
  check "chromium draws the attend page: $cells heatmap cells (want 25) and the words" \
    'grep -q "data-rendered=\"1\"" "$d/page/att.html.dom" && [ "$cells" = 25 ] && grep -q ">mat<" "$d/page/att.html.dom"'
  for f in grad par; do
    render "$d/page/$f.svg"
    check "chromium loads the $f picture: an SVG document with its lines and legend" \
      'grep -q "<svg" "$d/page/$f.svg.dom" && [ "$(grep -c "<polyline" "$d/page/$f.svg.dom")" -ge 2 ] && grep -q "conv\|Conv1d" "$d/page/$f.svg.dom"'
  done
else
  echo "SKIP chromium pages (chromium not installed)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

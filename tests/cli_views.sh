#!/usr/bin/env bash
# Attention views of qkv-trained runs: `qkv generate --view` (causal maps of a generated text), `qkv translate --view`
# and `qkv viz` on a seq2seq run (target x source alignments), `qkv attend --run` (self-attention of a classifier, a
# GPT and a Transformer seq2seq encoder), and the errors for models without attention. Runs train for a few steps
# only: the pages' structure and the maps' invariants are checked, not what the models learned.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
PY=/usr/bin/python3
export QKV_THREADS=${QKV_THREADS:-1}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }

# page.py PAGE EXPR: loads the JSON the page embeds (id="qkv-data") as D and exits 0 iff EXPR holds. Helpers: maps(ex)
# by name, w(m, h, i, j), causal_ok(m) (every head's upper triangle is exactly 0), rows_ok(m) (rows sum to 1).
cat > "$d/page.py" <<'PY'
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'<script type="application/json" id="qkv-data">(.*?)</script>', html, re.S)
D = json.loads(m.group(1))
def maps(ex): return {mp["name"]: mp for mp in ex["maps"]}
def w(mp, h, i, j): return mp["w"][(h * len(mp["rows"]) + i) * len(mp["cols"]) + j]
def causal_ok(mp):
    n = len(mp["rows"])
    return len(mp["cols"]) == n and all(w(mp, h, i, j) == 0 for h in range(mp["heads"]) for i in range(n)
                                        for j in range(i + 1, n))
def rows_ok(mp):
    return all(abs(sum(w(mp, h, i, j) for j in range(len(mp["cols"]))) - 1) < 2e-3
               for h in range(mp["heads"]) for i in range(len(mp["rows"])))
self_contained = not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', html) and "<link" not in html
ok = eval(sys.argv[2])
if not ok: print("   page check failed: " + sys.argv[2][:200], file=sys.stderr)
sys.exit(0 if ok else 1)
PY
page() { "$PY" "$d/page.py" "$@"; }

# ---- a character GPT: generate --view ----
for i in $(seq 1 60); do echo "the cat sat on the mat. the dog sat on the log."; done > "$d/lm.txt"
cat > "$d/gpt.json" <<JSON
{"model": {"type": "gpt", "d_model": 16, "n_layers": 2, "n_heads": 2, "d_ff": 32},
 "data": {"train": "$d/lm.txt", "dev": "$d/lm.txt", "tokenizer": "char", "seq_len": 32},
 "train": {"steps": 4, "batch_size": 4, "log_every": 2, "checkpoint_every": 0}, "eval": {"every": 4, "max_batches": 1}}
JSON
"$QKV" train --config "$d/gpt.json" --run "$d/gpt" --quiet > /dev/null 2>&1
check "a tiny char GPT trains" '[ -f "$d/gpt/best.safetensors" ]'
out=$("$QKV" generate --run "$d/gpt" "the c" --max-tokens 12 --view "$d/gen.html" 2> "$d/err"); rc=$?
check "generate --view writes the page (exit $rc)" '[ $rc = 0 ] && [ -s "$d/gen.html" ] && grep -q "wrote .*gen.html (17 tokens)" "$d/err"'
check "generate --view still prints the text" '[ "${out:0:5}" = "the c" ] && [ ${#out} -ge 6 ]'
check "generate page: self-contained, one causal map per layer, all heads" \
  'page "$d/gen.html" "self_contained and [(m[\"name\"], m[\"kind\"], m[\"heads\"]) for m in D[\"examples\"][0][\"maps\"]] == [(\"layer 1\", \"causal\", 2), (\"layer 2\", \"causal\", 2)]"'
check "generate page: labels are prompt + generated tokens, a space shown as ␣" \
  'page "$d/gen.html" "D[\"examples\"][0][\"tokens\"][:5] == [\"t\", \"h\", \"e\", \"␣\", \"c\"] and len(D[\"examples\"][0][\"tokens\"]) == 17"'
check "generate page: nothing looks ahead (upper triangle exactly 0) and rows sum to 1" \
  'page "$d/gen.html" "all(causal_ok(m) and rows_ok(m) for m in D[\"examples\"][0][\"maps\"])"'
"$QKV" attend --run "$d/gpt" --word cat -o "$d/gpt_attend.html" "the cat sat" > /dev/null; rc=$?
check "attend --run on a GPT: causal maps, row of the word 'cat'" \
  '[ $rc = 0 ] && page "$d/gpt_attend.html" "D[\"examples\"][0][\"highlight_row\"] == 4 and all(causal_ok(m) for m in D[\"examples\"][0][\"maps\"]) and len(D[\"examples\"][0][\"maps\"]) == 2"'

"$QKV" viz --run "$d/gpt" -o "$d/gpt_viz.html" "the cat" "a dog sat" > /dev/null; rc=$?
check "viz --run on a GPT: every token of each text (none held back as a target), last row highlighted" \
  '[ $rc = 0 ] && page "$d/gpt_viz.html" "[len(e[\"tokens\"]) for e in D[\"examples\"]] == [7, 9] and D[\"examples\"][1][\"highlight_row\"] == 8 and all(causal_ok(m) and rows_ok(m) for e in D[\"examples\"] for m in e[\"maps\"])"'

# ---- models without attention: clear errors, no page ----
sed 's/"gpt", "d_model": 16, "n_layers": 2, "n_heads": 2, "d_ff": 32/"rnnlm", "d_model": 8, "n_layers": 1/' \
  "$d/gpt.json" > "$d/rnn.json"
"$QKV" train --config "$d/rnn.json" --run "$d/rnn" --quiet > /dev/null 2>&1
"$QKV" generate --run "$d/rnn" "the" --max-tokens 3 --view "$d/rnn.html" > /dev/null 2> "$d/err"; rc=$?
check "generate --view on an rnnlm: 'rnnlm has no attention to show' (exit $rc)" \
  '[ $rc = 2 ] && grep -q "rnnlm has no attention to show" "$d/err" && [ ! -e "$d/rnn.html" ]'
"$QKV" attend --run "$d/rnn" -o "$d/rnn.html" "the cat" 2> "$d/err"; rc=$?
check "attend --run on an rnnlm is an error" '[ $rc = 2 ] && grep -q "rnnlm has no attention" "$d/err" && [ ! -e "$d/rnn.html" ]'
"$QKV" viz --run "$d/rnn" -o "$d/rnn.html" "the cat" 2> "$d/err"; rc=$?
check "viz --run on an rnnlm is an error" '[ $rc = 2 ] && grep -q "rnnlm has no attention" "$d/err" && [ ! -e "$d/rnn.html" ]'

# ---- a classifier: attend --run ----
for i in $(seq 1 20); do printf 'pos\tthe food was good\nneg\tthe food was bad\n'; done > "$d/cls.tsv"
cat > "$d/cls.json" <<JSON
{"model": {"type": "transformer_classifier", "d_model": 8, "n_layers": 2, "n_heads": 2, "d_ff": 16},
 "data": {"train": "$d/cls.tsv", "dev": "$d/cls.tsv", "max_len": 16, "cls_token": true},
 "train": {"steps": 3, "batch_size": 8, "log_every": 3, "checkpoint_every": 0}, "eval": {"every": 3, "max_batches": 1}}
JSON
"$QKV" train --config "$d/cls.json" --run "$d/cls" --quiet > /dev/null 2>&1
"$QKV" attend --run "$d/cls" --word food -o "$d/cls.html" "the food was good" > /dev/null; rc=$?
check "attend --run on a classifier: [CLS] + words, row of 'food', prediction shown" \
  '[ $rc = 0 ] && page "$d/cls.html" "self_contained and D[\"examples\"][0][\"tokens\"] == [\"[CLS]\", \"the\", \"food\", \"was\", \"good\"] and D[\"examples\"][0][\"highlight_row\"] == 2 and D[\"examples\"][0][\"prediction\"] in (\"pos\", \"neg\") and all(rows_ok(m) for m in D[\"examples\"][0][\"maps\"])"'
"$QKV" attend --run "$d/cls" --word zebra -o "$d/z.html" "the food" 2> "$d/err"; rc=$?
check "attend --run: an unknown word is bad input" '[ $rc = 2 ] && grep -q zebra "$d/err" && [ ! -e "$d/z.html" ]'
sed 's/"transformer_classifier", "d_model": 8, "n_layers": 2, "n_heads": 2, "d_ff": 16/"embmean", "dim": 8/' \
  "$d/cls.json" > "$d/emb.json"
"$QKV" train --config "$d/emb.json" --run "$d/emb" --quiet > /dev/null 2>&1
"$QKV" attend --run "$d/emb" -o "$d/emb.html" "the food" 2> "$d/err"; rc=$?
check "attend --run on embmean: no attention to show" '[ $rc = 2 ] && grep -q "embmean has no attention" "$d/err"'

# ---- translation: alignments ----
for i in $(seq 1 30); do printf 'alpha beta gamma\talpha beta gamma\ndelta eps\tdelta eps\n'; done > "$d/pairs.tsv"
printf 'alpha beta gamma\ndelta eps\n' > "$d/src"
cat > "$d/lstm.json" <<JSON
{"model": {"type": "lstm_seq2seq", "embed": 8, "hidden": 8},
 "data": {"train": "$d/pairs.tsv", "dev": "$d/pairs.tsv", "max_len": 8},
 "train": {"steps": 3, "batch_size": 8, "log_every": 3, "checkpoint_every": 0}, "eval": {"every": 3, "max_batches": 1}}
JSON
sed 's/"lstm_seq2seq", "embed": 8, "hidden": 8/"transformer_seq2seq", "d_model": 8, "n_heads": 2, "n_enc_layers": 1, "n_dec_layers": 2, "d_ff": 16, "dropout": 0/' \
  "$d/lstm.json" > "$d/tf.json"
"$QKV" train --config "$d/lstm.json" --run "$d/lstm" --quiet > /dev/null 2>&1
"$QKV" train --config "$d/tf.json" --run "$d/tf" --quiet > /dev/null 2>&1
"$QKV" translate --run "$d/lstm" --view "$d/lstm.html" "$d/src" > "$d/lstm.out" 2> /dev/null; rc=$?
check "translate --view (lstm) writes the page and still translates" '[ $rc = 0 ] && [ $(wc -l < "$d/lstm.out") = 2 ] && [ -s "$d/lstm.html" ]'
# Rows are the produced target tokens (what translate printed, then </s> when it ended), columns the source words.
first=$(head -1 "$d/lstm.out")
check "lstm alignment: one map 'attention', one head, target x source, rows sum to 1" \
  'page "$d/lstm.html" "self_contained and len(D[\"examples\"]) == 2 and [m[\"name\"] for m in D[\"examples\"][0][\"maps\"]] == [\"attention\"] and D[\"examples\"][0][\"maps\"][0][\"heads\"] == 1 and D[\"examples\"][0][\"maps\"][0][\"kind\"] == \"cross\" and D[\"examples\"][0][\"maps\"][0][\"cols\"] == [\"alpha\", \"beta\", \"gamma\"] and \" \".join(t for t in D[\"examples\"][0][\"maps\"][0][\"rows\"] if t != \"</s>\") == \"$first\" and D[\"examples\"][0][\"prediction\"] == \"$first\" and all(rows_ok(m) for ex in D[\"examples\"] for m in ex[\"maps\"])"'
"$QKV" translate --run "$d/tf" --beam 2 --view "$d/tf.html" "$d/src" > /dev/null 2>&1; rc=$?
check "translate --view (transformer, beam 2): cross maps per decoder layer, then encoder and decoder self-attention" \
  '[ $rc = 0 ] && page "$d/tf.html" "[(m[\"name\"], m[\"kind\"], m[\"heads\"]) for m in D[\"examples\"][1][\"maps\"]] == [(\"decoder 1 cross\", \"cross\", 2), (\"decoder 2 cross\", \"cross\", 2), (\"encoder 1 self\", \"self\", 2), (\"decoder 1 self\", \"causal\", 2), (\"decoder 2 self\", \"causal\", 2)]"'
check "transformer alignment: cross maps are target x source; decoder self-attention is causal from <s>" \
  'page "$d/tf.html" "all(m[\"cols\"] == ex[\"tokens\"] and len(m[\"rows\"]) == len(ex[\"maps\"][-1][\"rows\"]) for ex in D[\"examples\"] for m in ex[\"maps\"][:2]) and D[\"examples\"][1][\"tokens\"] == [\"delta\", \"eps\"] and all(causal_ok(m) and m[\"rows\"][0] == \"<s>\" for ex in D[\"examples\"] for m in ex[\"maps\"][3:]) and all(rows_ok(m) for ex in D[\"examples\"] for m in ex[\"maps\"])"'
"$QKV" viz --run "$d/tf" -o "$d/viz.html" "alpha delta" > /dev/null; rc=$?
check "viz --run on a seq2seq run: the alignment page of the source sentence" \
  '[ $rc = 0 ] && page "$d/viz.html" "D[\"examples\"][0][\"title\"] == \"alpha delta\" and D[\"examples\"][0][\"maps\"][0][\"name\"] == \"decoder 1 cross\" and D[\"examples\"][0][\"maps\"][0][\"cols\"] == [\"alpha\", \"delta\"]"'
"$QKV" attend --run "$d/tf" --word beta -o "$d/tf_attend.html" "alpha beta gamma" > /dev/null; rc=$?
check "attend --run on a transformer_seq2seq: the encoder's self-attention, row of 'beta'" \
  '[ $rc = 0 ] && page "$d/tf_attend.html" "[m[\"name\"] for m in D[\"examples\"][0][\"maps\"]] == [\"encoder 1\"] and D[\"examples\"][0][\"highlight_row\"] == 1 and rows_ok(D[\"examples\"][0][\"maps\"][0])"'
"$QKV" attend --run "$d/lstm" -o "$d/la.html" "alpha" 2> "$d/err"; rc=$?
check "attend --run on an lstm_seq2seq: no self-attention, points to translate --view" \
  '[ $rc = 2 ] && grep -q "no self-attention" "$d/err" && grep -q "translate" "$d/err"'
"$QKV" attend --run "$d/lstm" --model "$d" "alpha" 2> /dev/null; rc=$?
check "attend: --run and --model together is a usage error" '[ $rc = 1 ]'

# ---- the alignment page in a browser (headless Chromium, when installed): it renders every cell of the first map ----
CHROMIUM=${QKV_CHROMIUM:-}
for c in /usr/bin/chromium /usr/bin/chromium-browser; do [ -z "$CHROMIUM" ] && [ -x "$c" ] && CHROMIUM=$c; done
if [ -n "$CHROMIUM" ] && [ -s "$d/tf.html" ]; then
  mkdir -p "$d/profile"
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$d/profile" \
    --dump-dom "file://$d/tf.html" > "$d/tf.dom" 2> /dev/null
  cells=$(grep -o 'class="cell"' "$d/tf.dom" | wc -l)
  want=$(page "$d/tf.html" "print(sum(len(ex['maps'][0]['rows']) * len(ex['maps'][0]['cols']) for ex in D['examples'])) or True")
  check "chromium draws the alignment page: $cells heatmap cells (want $want), map names and source tokens" \
    'grep -q "data-rendered=\"1\"" "$d/tf.dom" && [ "$cells" = "$want" ] && grep -q ">decoder 2 cross<" "$d/tf.dom" && grep -q ">eps<" "$d/tf.dom"'
else
  echo "SKIP chromium alignment page (chromium not installed)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

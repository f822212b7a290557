#!/usr/bin/env bash
# qkv train / eval / tag for the tagger on Brown sentences (../shared/data/pos): the names tag set end to end,
# entity scores in qkv eval, tokens with tags and entities from qkv tag, and bad tag files (exit 2, file:line).
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
SHARED=${QKV_SHARED:-}
export QKV_THREADS=${QKV_THREADS:-1}
T=$(mktemp -d /tmp/qkv_cli_tag.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
expect_msg() { # name expected-rc regex command...
  local name=$1 want=$2 re=$3; shift 3
  "$@" >"$T/out" 2>&1; local rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$re" "$T/out"; then ok "$name"
  else bad "$name (exit $rc, wanted $want and /$re/)"; sed 's/^/    /' "$T/out" | head -5; fi
}
POS=$SHARED/data/pos
if [ ! -f "$POS/train.tsv" ]; then echo "SKIP: $POS is not there"; exit 77; fi
# the first N sentences of a file
sentences() { awk -v n="$2" 'BEGIN { RS = ""; ORS = "\n\n" } NR <= n' "$1"; }
sentences "$POS/train.tsv" 600 >"$T/train.tsv"
sentences "$POS/dev.tsv" 100 >"$T/dev.tsv"
cat >"$T/cfg.json" <<JSON
{"model": {"type": "tagger", "d_model": 32}, "data": {"train": "$T/train.tsv", "dev": "$T/dev.tsv", "tagset": "names"},
 "train": {"steps": 60, "batch_size": 16, "optimizer": {"lr": 0.01}, "log_every": 30}, "eval": {"every": 30}}
JSON
expect_msg "train a names tagger" 0 'accuracy' "$QKV" train --config "$T/cfg.json" --run "$T/run"
expect_msg "labels are the BIO names layer" 0 '^B-NAME$' cat "$T/run/labels.txt"
expect_msg "eval reports entity F1" 0 'entity_f1' "$QKV" eval --run "$T/run" --split dev
expect_msg "eval --json has token accuracy" 0 '"accuracy":' "$QKV" eval --run "$T/run" --split dev --json
expect_msg "tag prints token/TAG pairs and entities" 0 '^entities:' "$QKV" tag --run "$T/run" "The Fulton County jury met."
expect_msg "tag splits punctuation off words" 0 'met/[A-Z-]+ \./' "$QKV" tag --run "$T/run" "The Fulton County jury met."
expect_msg "tag keeps words of the vocabulary whole (Mr.)" 0 '^Mr\./' "$QKV" tag --run "$T/run" "Mr. Smith met."
echo "John Smith went to Atlanta." | "$QKV" tag --run "$T/run" --json >"$T/stdin.out" 2>&1
if grep -q '"tokens":\["John","Smith","went","to","Atlanta","."\]' "$T/stdin.out"; then ok "tag reads lines from stdin"
else bad "tag reads lines from stdin"; head -3 "$T/stdin.out"; fi
expect_msg "tag --view writes the tagged-words page" 0 '"tags":\["(O|B-NAME|I-NAME)"' \
  sh -c "\"$QKV\" tag --run \"$T/run\" --view \"$T/tags.html\" 'The Fulton County jury met.' >/dev/null && cat \"$T/tags.html\""
expect_msg "qkv viz on a tagger run draws the tags" 0 'data-tag' \
  sh -c "\"$QKV\" viz --run \"$T/run\" -o \"$T/viz.html\" 'John went home.' >/dev/null && cat \"$T/viz.html\""
expect_msg "predict refers taggers elsewhere" 2 "not supported for model type 'tagger'" \
  "$QKV" predict --run "$T/run" "some text"

# ---- bad tag files -----------------------------------------------------------------------------------------------
printf 'The\tDET\tat\njury\tNOUN\n\n' >"$T/cols.tsv"
expect_msg "missing column: file:line, exit 2" 2 'cols\.tsv:2: expected 3 tab-separated columns' \
  "$QKV" eval --run "$T/run" --data "$T/cols.tsv"
printf 'The\tDET\tat\n\n\njury\tNOUN\tnn\n\n' >"$T/empty.tsv"
expect_msg "empty sentence: file:line, exit 2" 2 'empty\.tsv:3: empty sentence' \
  "$QKV" eval --run "$T/run" --data "$T/empty.tsv"
sed 's/"tagset": "names"/"tagset": "universal"/; s#"dev": "[^"]*", ##' "$T/cfg.json" >"$T/cfg_u.json"
sed -i 's/"steps": 60/"steps": 2/' "$T/cfg_u.json"
expect_msg "train a universal tagger" 0 '' "$QKV" train --config "$T/cfg_u.json" --run "$T/run_u"
printf 'The\tDET\tat\njury\tNOUNS\tnn\n\n' >"$T/unknown.tsv"
expect_msg "unknown tag at eval: file:line, exit 2" 2 "unknown\.tsv:2: tag 'NOUNS' is not one of the 12 tags" \
  "$QKV" eval --run "$T/run_u" --data "$T/unknown.tsv"
echo '{"model": {"type": "tagger"}, "data": {"train": "x.tsv", "tagset": "ner"}}' >"$T/bad.json"
expect_msg "data.tagset names its choices" 2 'data\.tagset.*universal\|brown\|names' "$QKV" config check "$T/bad.json"

expect_msg "eval.metric entity_f1 follows dev entity F1" 0 '"metric":"entity_f1"' \
  "$QKV" train --config "$T/cfg.json" --run "$T/run_f1" --set eval.metric=entity_f1 --set train.steps=30 --json
expect_msg "eval.metric entity_f1 needs BIO tags" 2 "entity_f1' needs a tagging task with BIO tags" \
  "$QKV" train --config "$T/cfg.json" --run "$T/run_f1u" --set eval.metric=entity_f1 --set data.tagset=universal

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# Every subcommand against bad input (issue 29): missing files, directories instead of files, empty files, binary
# garbage, invalid UTF-8, numbers out of range, unknown flags, --set on unknown keys and wrong types. Each must exit
# 1 (usage) or 2 (bad input) with a message that names the culprit, within a time limit, without a sanitizer report,
# and leave no output file behind.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
SHARED=${QKV_SHARED:-}
export QKV_THREADS=${QKV_THREADS:-1}
T=$(mktemp -d /tmp/qkv_cli_sweep.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
# refuse NAME CULPRIT-REGEX OUTPUT|- COMMAND...: exit 1 or 2, CULPRIT on stderr, OUTPUT (a path, - for none) absent.
refuse() {
  local name=$1 re=$2 out=$3; shift 3
  timeout 120 "$@" >"$T/stdout" 2>"$T/stderr" </dev/null; local rc=$?
  local why=""
  if [ "$rc" != 1 ] && [ "$rc" != 2 ]; then why="exit $rc"; fi
  if ! grep -Eq -- "$re" "$T/stderr"; then why="$why; stderr does not name /$re/"; fi
  if grep -Eq 'Sanitizer|runtime error:|Segmentation|Aborted' "$T/stderr"; then why="$why; sanitizer report"; fi
  if [ "$out" != - ] && [ -e "$out" ]; then why="$why; left $out"; rm -rf "$out"; fi
  if [ -z "$why" ]; then
    pass=$((pass + 1))
  else
    echo "FAIL $name: ${why#; }"
    sed 's/^/    /' "$T/stderr" | head -4
    fail=$((fail + 1))
  fi
}

# The bad files, each under a name that the culprit regex can match.
mkdir "$T/adir"
: >"$T/empty"
/usr/bin/python3 -c 'import random, sys; r = random.Random(29)
sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(4096)))' >"$T/garbage"
printf 'caf\xe9 \xff\xfe ok\n\xc3\x28 bad\n' >"$T/badutf8"
BAD="missing adir empty garbage badutf8"
bad() { echo "$T/$1"; } # path of a bad file ("missing" does not exist)

# Good inputs to combine with the bad ones.
printf 'pos\tgood film\nneg\tbad plot\npos\tgreat acting\nneg\tawful\n' >"$T/train.tsv"
"$QKV" config show embmean | /usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)
c["data"].update(train=sys.argv[1], dev=sys.argv[1])
c["train"].update(steps=4, checkpoint_every=2, log_every=2)
c["eval"]["every"] = 2
json.dump(c, sys.stdout)' "$T/train.tsv" >"$T/cls.json"
"$QKV" train --config "$T/cls.json" --run "$T/run" --quiet >/dev/null 2>&1 ||
  { echo "FAIL: the good run did not train"; exit 1; }
printf 'the cat\n' >"$T/hyp.txt"
# A tiny character language model for the decoding commands.
for i in $(seq 1 20); do echo "the cat sat on the mat $i"; done >"$T/lm.txt"
"$QKV" config show gpt | /usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)
c["model"].update(d_model=16, n_layers=1, n_heads=2, d_ff=32)
c["data"].update(train=sys.argv[1], dev=sys.argv[1], tokenizer="char", seq_len=8)
c["train"].update(steps=2, checkpoint_every=2, log_every=1)
c["eval"]["every"] = 2
json.dump(c, sys.stdout)' "$T/lm.txt" >"$T/lm.json"
"$QKV" train --config "$T/lm.json" --run "$T/lm" --quiet >/dev/null 2>&1 ||
  { echo "FAIL: the lm run did not train"; exit 1; }

for b in $BAD; do
  f=$(bad "$b")
  # files read by each command
  refuse "train --config $b" "$b" "$T/r_$b/config.json" "$QKV" train --config "$f" --run "$T/r_$b" --quiet
  refuse "train data.train=$b" "$b" "$T/r2_$b/config.json" \
    "$QKV" train --config "$T/cls.json" --set "data.train=$f" --run "$T/r2_$b" --quiet
  refuse "train --resume --run $b" "$b" - "$QKV" train --resume --run "$f" --quiet
  refuse "config check $b" "$b" - "$QKV" config check "$f"
  refuse "eval --run $b" "$b" - "$QKV" eval --run "$f"
  refuse "eval --data $b" "$b" - "$QKV" eval --run "$T/run" --data "$f"
  refuse "eval --checkpoint $b" "$b" - "$QKV" eval --run "$T/run" --checkpoint "$f"
  refuse "predict --run $b" "$b" - "$QKV" predict --run "$f" "text"
  refuse "predict --checkpoint $b" "$b" - "$QKV" predict --run "$T/run" --checkpoint "$f" "text"
  refuse "generate --run $b" "$b" - "$QKV" generate --run "$f" --max-tokens 2 "the"
  refuse "translate --run $b" "$b" - "$QKV" translate --run "$f" "$T/hyp.txt"
  refuse "tag --run $b" "$b" - "$QKV" tag --run "$f" "text"
  refuse "similar --run $b" "$b" - "$QKV" similar --run "$f" "a" "b"
  refuse "viz --run $b" "$b" "$T/v_$b.html" "$QKV" viz --run "$f" -o "$T/v_$b.html" "text"
  refuse "viz --checkpoint $b" "$b" "$T/v2_$b.html" "$QKV" viz --run "$T/run" --checkpoint "$f" -o "$T/v2_$b.html" "x"
  refuse "plot $b" "$b" "$T/p_$b.svg" "$QKV" plot -o "$T/p_$b.svg" "$f"
  refuse "tokenize encode --wordpiece $b" "$b" - "$QKV" tokenize encode --wordpiece "$f" "$T/hyp.txt"
  refuse "tokenize encode --bpe $b" "$b" - "$QKV" tokenize encode --bpe "$f" "$T/hyp.txt"
  refuse "tokenize shard --bpe $b" "$b" "$T/s_$b.tok" "$QKV" tokenize shard --bpe "$f" -o "$T/s_$b.tok" "$T/hyp.txt"
  refuse "bleu -r $b" "$b" - "$QKV" bleu -r "$f" -i "$T/hyp.txt"
  refuse "rouge -r $b" "$b" - "$QKV" rouge -r "$f" -i "$T/hyp.txt"
  refuse "embed --vectors $b" "$b" - "$QKV" embed similar cat --vectors "$f"
  refuse "attend --model $b" "$b" "$T/a_$b.html" "$QKV" attend --model "$f" -o "$T/a_$b.html" "the cat"
  refuse "attend --run $b" "$b" "$T/a2_$b.html" "$QKV" attend --run "$f" -o "$T/a2_$b.html" "the cat"
  # bad files where data is expected (the empty file is valid input there: no lines)
  [ "$b" = empty ] && continue
  refuse "bleu -i $b" "$b" - "$QKV" bleu -r "$T/hyp.txt" -i "$f"
  refuse "rouge -i $b" "$b" - "$QKV" rouge -r "$T/hyp.txt" -i "$f"
  refuse "translate FILE $b (classify run)" "$b|seq2seq|translat" - "$QKV" translate --run "$T/run" "$f"
  refuse "tokenize train $b" "$b" "$T/t_$b" "$QKV" tokenize train --vocab-size 300 --out "$T/t_$b" "$f"
done

# numbers out of range and not numbers
for v in -1 0 abc 1e99 99999999999999999999 nan; do
  [ "$v" = 0 ] || refuse "generate --max-tokens $v" "max-tokens" - "$QKV" generate --run "$T/lm" --max-tokens "$v" "the"
  refuse "bleu --max-order $v" "max-order" - "$QKV" bleu -r "$T/hyp.txt" -i "$T/hyp.txt" --max-order "$v"
  refuse "embed -k $v" "-k" - "$QKV" embed similar cat -k "$v"
  refuse "tokenize train --vocab-size $v" "vocab-size" "$T/tv" \
    "$QKV" tokenize train --vocab-size "$v" --out "$T/tv" "$T/hyp.txt"
  refuse "demo --steps $v" "steps" "$T/demo" "$QKV" demo --steps "$v" --out "$T/demo" --quiet
  refuse "train --set train.steps=$v" "train.steps" "$T/rs/config.json" \
    "$QKV" train --config "$T/cls.json" --set "train.steps=$v" --run "$T/rs" --quiet
done
for v in -0.5 abc 1e99 nan; do
  refuse "generate --temperature $v" "temperature" - "$QKV" generate --run "$T/lm" --temperature "$v" "the"
  refuse "generate --top-p $v" "top-p" - "$QKV" generate --run "$T/lm" --top-p "$v" "the"
  refuse "generate --top-k $v" "top-k" "$T/g.html" "$QKV" generate --run "$T/lm" --view "$T/g.html" --top-k "$v" "the"
done

# unknown flags, a flag without its value, --set on unknown keys and with wrong types
for c in train eval predict generate translate tag similar viz plot bleu rouge embed attend demo bench; do
  refuse "$c --no-such-flag" "no-such-flag" - "$QKV" "$c" --no-such-flag
done
refuse "tokenize encode --no-such-flag" "no-such-flag" - "$QKV" tokenize encode --no-such-flag
refuse "config check --no-such-flag" "no-such-flag" - "$QKV" config check "$T/cls.json" --no-such-flag
refuse "unknown command" "no-such-command" - "$QKV" no-such-command
refuse "--run without its value" "--run" - "$QKV" eval --run
for kv in no.such.key=1 train.no_such=1 model.no_such=1 "train.steps=\"ten\"" train.steps=true \
  "data.lowercase=\"yes\"" "train.optimizer.name=sgdx" "model.dim=[1]" model=3 "=1" "train.steps"; do
  k=${kv%%=*} k=${k%%.*}
  refuse "train --set $kv" "${k:-set}" "$T/rk/config.json" \
    "$QKV" train --config "$T/cls.json" --set "$kv" --run "$T/rk" --quiet
  refuse "config check --set $kv" "${k:-set}" - "$QKV" config check "$T/cls.json" --set "$kv"
done
# invalid UTF-8 and bad values on the command line and in piped data
U=$(printf 'caf\xe9 \xff')
refuse "predict invalid UTF-8 text" "UTF-8" - "$QKV" predict --run "$T/run" "$U"
refuse "generate invalid UTF-8 prompt" "UTF-8" - "$QKV" generate --run "$T/lm" --max-tokens 1 "$U"
refuse "viz invalid UTF-8 text" "UTF-8" "$T/vu.html" "$QKV" viz --run "$T/run" -o "$T/vu.html" "$U"
printf 'pos\tgood\n' >"$T/v.txt"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\n' >"$T/vocab.txt"
printf '4 5\n99999999999999999999\n' >"$T/ids.txt"
refuse "tokenize decode of an id out of range" "99999999999999999999" - \
  "$QKV" tokenize decode --wordpiece "$T/vocab.txt" "$T/ids.txt"
printf '4 x5\n' >"$T/ids2.txt"
refuse "tokenize decode of a word" "x5" - "$QKV" tokenize decode --wordpiece "$T/vocab.txt" "$T/ids2.txt"
refuse "tokenize decode of garbage" "garbage" - "$QKV" tokenize decode --wordpiece "$T/vocab.txt" "$T/garbage"
refuse "eval --split bogus" "bogus" - "$QKV" eval --run "$T/run" --split bogus
refuse "bleu --smooth bogus" "bogus" - "$QKV" bleu -r "$T/hyp.txt" -i "$T/hyp.txt" --smooth bogus
refuse "bleu --tokenize bogus" "bogus" - "$QKV" bleu -r "$T/hyp.txt" -i "$T/hyp.txt" --tokenize bogus
refuse "bleu with unequal line counts" "line" - "$QKV" bleu -r "$T/lm.txt" -i "$T/hyp.txt"
refuse "embed --format bogus" "bogus" - "$QKV" embed similar cat --format bogus
refuse "plot --x bogus" "bogus" "$T/px.svg" "$QKV" plot -o "$T/px.svg" --x bogus "$T/run"
refuse "plot --size 5x5" "5x5" "$T/ps.svg" "$QKV" plot -o "$T/ps.svg" --size 5x5 "$T/run"
refuse "plot --y no_such_field" "no_such_field" "$T/py.svg" "$QKV" plot -o "$T/py.svg" --y no_such_field "$T/run"
refuse "translate --beam 0" "beam" - "$QKV" translate --run "$T/run" --beam 0 "$T/hyp.txt"
refuse "predict of a run without a config" "adir/config.json" - "$QKV" predict --run "$T/adir" "x"
refuse "train into a file" "empty" - "$QKV" train --config "$T/cls.json" --run "$T/empty" --quiet
refuse "config show unknown type" "no_such_type" - "$QKV" config show no_such_type
refuse "bench unknown name" "no_such_bench" - "$QKV" bench no_such_bench

echo "cli_sweep: $pass passed, $fail failed"
[ "$fail" = 0 ]

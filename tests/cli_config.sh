#!/usr/bin/env bash
# qkv config: every field of every model type is declared once (a field table), so `config check` refuses what
# `qkv train` refuses, with the same message; `config explain` documents every field; `config show` prints the
# table's defaults.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
SHARED=${QKV_SHARED:-}
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# name, expected exit, regex the output must match, command...
expect_msg() {
  local name=$1 want=$2 re=$3; shift 3
  "$@" > "$T/out" 2>&1; local rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$re" "$T/out"; then ok "$name"
  else bad "$name (exit $rc, wanted $want; /$re/)"; sed 's/^/    /' "$T/out" | head -5; fi
}

printf 'pos\tgood film\nneg\tbad film\npos\tnice one\nneg\tawful one\n' > "$T/train.tsv"
cat > "$T/c.json" <<JSON
{"model": {"type": "transformer_classifier", "d_model": 8, "n_heads": 2, "d_ff": 16, "n_layers": 1},
 "data": {"train": "$T/train.tsv"}, "train": {"steps": 2, "batch_size": 2, "checkpoint_every": 0},
 "eval": {"every": 0}}
JSON
expect_msg "a valid config checks" 0 '"d_model":[[:space:]]+8' "$QKV" config check "$T/c.json"

# The four configs of issue 22 that `config check` used to pass and `qkv train` refused: now both refuse, naming
# the key, the value and what is allowed (exit 2).
for c in 'model.d_model=1000000000|model\.d_model: expected an integer in \[1, 65536\], got 1000000000' \
         'model.n_heads=0|model\.n_heads: expected an integer in \[1, 4096\], got 0' \
         'model.dropout=2|model\.dropout: expected a number in \[0, 1\), got 2' \
         'model.activation=swishy|model\.activation: expected one of relu\|gelu.*got .swishy.' \
         'model.d_model=9|model\.d_model 9 must be a multiple of model\.n_heads 2' \
         'model.n_layers="two"|model\.n_layers: expected a number, got a string' \
         'model.dims=3|model\.dims: unknown key \(known: type, d_model'; do
  set_arg=${c%%|*} re=${c#*|}
  expect_msg "config check --set $set_arg" 2 "$re" "$QKV" config check "$T/c.json" --set "$set_arg"
  expect_msg "train --set $set_arg (same rule)" 2 "$re" "$QKV" train --config "$T/c.json" --run "$T/r" --set "$set_arg" --quiet
  [ ! -e "$T/r/config.json" ] && ok "  and no run was started" || bad "  and no run was started"
  rm -rf "$T/r"
done
# Every model type: a bad value of one of its own fields is refused by check.
for c in 'embmean|model.dim=0|model\.dim' 'gpt|model.n_heads=5|model\.n_heads' 'rnnlm|model.rnn=transformer|model\.rnn' \
         'lstm_seq2seq|model.attention=cosine|model\.attention' 'transformer_seq2seq|model.norm=middle|model\.norm'; do
  type=${c%%|*} rest=${c#*|}; set_arg=${rest%%|*} re=${rest#*|}
  printf '{"model": {"type": "%s"}, "data": {"train": "x.tsv"}}\n' "$type" > "$T/m.json"
  expect_msg "$type: check refuses $set_arg" 2 "$re" "$QKV" config check "$T/m.json" --set "$set_arg"
done
# Run sections: the same tables.
expect_msg "run field out of range" 2 'train\.optimizer\.beta2: expected a number in \[0, 1\], got 1\.5' \
  "$QKV" config check "$T/c.json" --set train.optimizer.beta2=1.5
expect_msg "run field not a choice" 2 'eval\.metric: expected one of auto\|loss' \
  "$QKV" config check "$T/c.json" --set eval.metric=speed
expect_msg "vector file path of the wrong type" 2 'embeddings\.pretrained: expected a file path or null, got a number' \
  "$QKV" config check "$T/c.json" --set embeddings.pretrained=3

# explain: every field of the type's table and of the run sections, with type, default, range and doc.
expect_msg "explain gpt lists its fields" 0 '^model\.n_heads +int +default 6 +an integer in \[1, 1024\]\. attention heads' \
  "$QKV" config explain gpt
expect_msg "explain lists the run sections" 0 '^train\.optimizer\.lr +number +default 0\.001 +a number > 0\.' \
  "$QKV" config explain gpt
expect_msg "explain: choices" 0 '^model\.rnn +choice +default "gru" +one of gru\|lstm' "$QKV" config explain rnnlm
expect_msg "explain: list elements' keys" 0 '^data\.tasks\[\]\.format +choice +default "tsv" +one of tsv' "$QKV" config explain t5
expect_msg "explain: unknown type is a usage error" 1 "unknown model type 'nosuch'" "$QKV" config explain nosuch
for type in $("$QKV" config list | awk '{print $1}'); do
  # Every key `show` prints is documented by `explain`, and the other way round.
  "$QKV" config show "$type" | python3 -c '
import json, sys
def walk(o, p=""):
    for k, v in o.items():
        if isinstance(v, dict) and v: yield from walk(v, p + k + ".")
        else: yield p + k
print("\n".join(sorted(walk(json.load(sys.stdin)))))' > "$T/show_keys"
  # (explain also documents the keys of each list element, "data.tasks[].name": not keys of the defaults)
  "$QKV" config explain "$type" | awk '/^[a-z]/ && $1 !~ /\[\]/ {print $1}' | sort > "$T/explain_keys"
  cmp -s "$T/show_keys" "$T/explain_keys" && ok "$type: show and explain have the same keys" \
    || { bad "$type: show and explain have the same keys"; diff "$T/show_keys" "$T/explain_keys" | head -5; }
done
# The defaults `show` prints are the ones the model trains with: default gpt config resolves to itself.
"$QKV" config show gpt | sed 's/"train":\([[:space:]]*\)""/"train":\1"x.txt"/' > "$T/g.json"
"$QKV" config check "$T/g.json" > "$T/g2.json" 2>&1 && cmp -s "$T/g.json" "$T/g2.json" \
  && ok "show's defaults check and resolve to themselves" || bad "show's defaults check and resolve to themselves"

echo "cli_config: $pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# qkv generate: a tiny character GPT trained from scratch continues a prompt; seeds reproduce samples.
set -u
QKV=${QKV_BIN:?QKV_BIN not set}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
pass=0 fail=0
check() { if eval "$2"; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi; }
for i in $(seq 1 200); do echo "the cat sat on the mat. the dog sat on the log."; done > "$d/train.txt"
head -20 "$d/train.txt" > "$d/dev.txt"
cat > "$d/g.json" <<JSON
{"model": {"type": "gpt", "d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64},
 "data": {"train": "$d/train.txt", "dev": "$d/dev.txt", "tokenizer": "char", "seq_len": 32},
 "train": {"steps": 150, "batch_size": 8, "optimizer": {"name": "adamw", "lr": 0.01}, "log_every": 50},
 "eval": {"every": 150, "max_batches": 2}}
JSON
"$QKV" train --config "$d/g.json" --run "$d/run" --quiet > /dev/null 2>&1
check "a tiny char GPT trains" '[ -f "$d/run/best.safetensors" ]'
g1=$("$QKV" generate --run "$d/run" --prompt "the c" --max-tokens 20)
check "greedy continuation has learned the text" 'printf "%s" "$g1" | grep -q "the cat sat"'
s1=$("$QKV" generate --run "$d/run" --prompt "the" --max-tokens 20 --temperature 1 --top-k 5 --seed 7)
s2=$("$QKV" generate --run "$d/run" --prompt "the" --max-tokens 20 --temperature 1 --top-k 5 --seed 7)
check "a seed reproduces a sample" '[ "$s1" = "$s2" ] && [ ${#s1} -gt 3 ]'
# A 4-character sequence twice in the continuation (the char tokenizer: one token a character), awk exit 0.
twice4() { printf '%s' "$1" | awk '{ for (i = 1; i + 3 <= length($0); i++) if (seen[substr($0, i, 4)]++) f = 1 } END { exit !f }'; }
p1=$("$QKV" generate --run "$d/run" --prompt "the c" --max-tokens 40); p1=${p1#the c}
n1=$("$QKV" generate --run "$d/run" --prompt "the c" --max-tokens 40 --no-repeat-ngram 4); n1=${n1#the c}
check "--no-repeat-ngram 4: no 4 characters twice (greedy alone repeats them)" 'twice4 "$p1" && ! twice4 "$n1" && [ ${#n1} -gt 10 ]'
"$QKV" generate --run "$d/run" --prompt "the c" --max-tokens 40 --no-repeat-ngram 4 --repeat-scope all > /dev/null; rc=$?
check "--repeat-scope all is accepted" '[ $rc = 0 ]'
"$QKV" generate --run "$d/run" --no-repeat-ngram -1 2>/dev/null; rc=$?
check "a negative --no-repeat-ngram is a usage error" '[ $rc = 1 ]'
"$QKV" generate --run "$d/run" --top-p 0 2>/dev/null; rc=$?
check "bad sampling option is a usage error" '[ $rc = 1 ]'
"$QKV" generate --run "$d/nonexistent" 2>/dev/null; rc=$?
check "missing run is bad input" '[ $rc = 2 ]'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

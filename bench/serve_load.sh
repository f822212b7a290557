#!/usr/bin/env bash
# Load test of qkv serve on loopback, batched against unbatched (issue 30):
#   classify: N requests (default 2,000) from C concurrent clients (default 16), one short review each
#   streams:  S concurrent streamed generations (default 50) of T tokens (default 64) from a char GPT
# Reports throughput, p50/p99 latency (streams: also time to the first event) and failed requests, for the server
# with dynamic batching (--max-batch 16, --batch-wait-ms MS: the server's default unless given) and without
# (--max-batch 1). Clients are `curl --parallel` (no other load tool).
#
#   bench/serve_load.sh [--qkv build/qkv] [--cls RUN] [--lm RUN] [--requests N] [--clients C] [--streams S]
#                       [--tokens T] [--threads K] [--batch-wait MS]
#
# Without --cls / --lm it trains runs first (a 4-layer d=256 Transformer classifier on the demo reviews, a 2-layer
# d=64 char GPT), for a few steps: their quality is irrelevant here, only their size. Run it on a quiet machine: the numbers
# move with every other process on the cores.
set -u
QKV=build/qkv CLS= LM= N=2000 C=16 S=50 TOK=64 THREADS= WAIT=
while [ $# -gt 0 ]; do
  case $1 in
    --qkv) QKV=$2; shift 2 ;;
    --cls) CLS=$2; shift 2 ;;
    --lm) LM=$2; shift 2 ;;
    --requests) N=$2; shift 2 ;;
    --clients) C=$2; shift 2 ;;
    --streams) S=$2; shift 2 ;;
    --tokens) TOK=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --batch-wait) WAIT=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "serve_load: unknown argument $1" >&2; exit 1 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
command -v curl >/dev/null || { echo "serve_load: needs curl" >&2; exit 1; }
"$QKV" serve --help >/dev/null 2>&1 || { echo "serve_load: $QKV has no serve command (libmicrohttpd)" >&2; exit 1; }
[ -n "$THREADS" ] && export QKV_THREADS=$THREADS
d=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$d"' EXIT

if [ -z "$CLS" ]; then
  R=$root/examples/data/reviews
  cat > "$d/cls.json" <<JSON
{"model": {"type": "transformer_classifier", "d_model": 256, "n_heads": 4, "d_ff": 1024, "n_layers": 4},
 "data": {"train": "$R/train.tsv", "dev": "$R/dev.tsv"},
 "train": {"steps": 10, "batch_size": 32, "log_every": 10}, "eval": {"every": 10}}
JSON
  "$QKV" train --config "$d/cls.json" --run "$d/cls" --quiet >/dev/null 2>&1 || { echo "serve_load: training cls failed" >&2; exit 1; }
  CLS=$d/cls
fi
if [ -z "$LM" ]; then
  for i in $(seq 1 300); do echo "the cat sat on the mat. the dog sat on the log. a bird sang in the tree."; done > "$d/lm.txt"
  cat > "$d/lm.json" <<JSON
{"model": {"type": "gpt", "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 256},
 "data": {"train": "$d/lm.txt", "dev": "$d/lm.txt", "tokenizer": "char", "seq_len": 128},
 "train": {"steps": 50, "batch_size": 8, "log_every": 50}, "eval": {"every": 50, "max_batches": 2}}
JSON
  "$QKV" train --config "$d/lm.json" --run "$d/lm" --quiet >/dev/null 2>&1 || { echo "serve_load: training lm failed" >&2; exit 1; }
  LM=$d/lm
fi

start() {
  "$QKV" serve --run "cls=$CLS" --run "lm=$LM" --port 0 --queue 4096 "$@" > "$d/out" 2> "$d/err" &
  PID=$!
  PORT=
  for _ in $(seq 1 300); do
    PORT=$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\)/$|\1|p' "$d/out" 2>/dev/null)
    [ -n "$PORT" ] && return
    sleep 0.1
  done
  echo "serve_load: the server did not start" >&2; cat "$d/err" >&2; exit 1
}
stop() { kill -INT "$PID"; wait "$PID" 2>/dev/null; PID=; }
# CPU milliseconds (user + system) the server has used so far: unlike wall time, barely moved by other load.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$PID/stat"; }

# stats FILE T0 T1 UNIT: "code seconds ..." lines -> UNIT/s, p50, p99 (ms), failures (plain awk: no gawk needed)
stats() {
  sort -k2,2g "$1" | awk -v unit="$4" -v wall="$(awk -v a="$2" -v b="$3" 'BEGIN { print b - a }')" '{ n++; if ($1 != 200) f++; t[n] = $2 }
    END { i50 = int(n * 0.50 + 0.5); i99 = int(n * 0.99 + 0.5); if (i50 < 1) i50 = 1; if (i99 < 1) i99 = 1;
          printf "%8.1f %s/s  p50 %7.1f ms  p99 %7.1f ms  failed %d/%d", n / wall, unit, t[i50] * 1000, t[i99] * 1000, f, n }'
}

# Review sentences as request texts, cycled.
cut -f2 "$root/examples/data/reviews/dev.tsv" | sed 's/["\\]//g' | head -200 > "$d/texts"
nt=$(wc -l < "$d/texts")
awk -v n="$N" -v u="URL" '{ t[NR] = $0 } END {
  for (i = 0; i < n; i++) { print "url = \"" u "/v1/classify\""; print "request = \"POST\"";
    print "header = \"Content-Type: application/json\"";
    print "data = \"{\\\"text\\\": \\\"" t[i % NR + 1] "\\\"}\""; print "output = \"/dev/null\"";
    print "write-out = \"%{http_code} %{time_total}\\n\""; if (i < n - 1) print "next" } }' "$d/texts" > "$d/cls.tmpl"
awk -v n="$S" -v tok="$TOK" -v u="URL" 'BEGIN {
  for (i = 0; i < n; i++) { print "url = \"" u "/v1/generate\""; print "request = \"POST\"";
    print "data = \"{\\\"prompt\\\": \\\"the \\\", \\\"max_tokens\\\": " tok ", \\\"temperature\\\": 0.8, \\\"seed\\\": " i ", \\\"stream\\\": true}\"";
    print "output = \"/dev/null\""; print "write-out = \"%{http_code} %{time_total} %{time_starttransfer}\\n\"";
    if (i < n - 1) print "next" } }' > "$d/gen.tmpl"

echo "qkv serve load test: $N classify requests from $C clients; $S concurrent streams of $TOK tokens"
echo "qkv: $("$QKV" --version 2>&1 | head -1); threads: ${QKV_THREADS:-all cores ($(nproc))}; $(date -u +%Y-%m-%dT%H:%MZ)"
for mode in batched unbatched; do
  [ $mode = batched ] && start --max-batch 16 ${WAIT:+--batch-wait-ms "$WAIT"} || start --max-batch 1
  sed "s|URL|http://127.0.0.1:$PORT|" "$d/cls.tmpl" > "$d/cls.cfg"
  sed "s|URL|http://127.0.0.1:$PORT|" "$d/gen.tmpl" > "$d/gen.cfg"
  curl -s "http://127.0.0.1:$PORT/v1/classify" -d '{"text": "warm up"}' > /dev/null
  c0=$(cpu_ms) t0=$(date +%s.%N)
  curl -s --parallel --parallel-max "$C" -K "$d/cls.cfg" > "$d/cls.res" 2>/dev/null
  t1=$(date +%s.%N) c1=$(cpu_ms)
  h=$(curl -s "http://127.0.0.1:$PORT/health")
  printf '%-9s classify  %s  server CPU %.2f ms/req  (%s)\n' "$mode" "$(stats "$d/cls.res" "$t0" "$t1" req)" \
    "$(awk -v a="$c0" -v b="$c1" -v n="$N" 'BEGIN { print (b - a) / n }')" \
    "$(echo "$h" | sed 's/.*"batches":\([0-9]*\),"requests":\([0-9]*\),"largest_batch":\([0-9]*\).*/\1 batches, largest \3/')"
  c0=$(cpu_ms) t0=$(date +%s.%N)
  curl -s --parallel --parallel-max "$S" -K "$d/gen.cfg" > "$d/gen.res" 2>/dev/null
  t1=$(date +%s.%N) c1=$(cpu_ms)
  first=$(awk '{ print $3 }' "$d/gen.res" | sort -n | awk '{ t[NR] = $1 } END { printf "first event p50 %.1f ms p99 %.1f ms", t[int(NR * 0.5 + 0.5)] * 1000, t[int(NR * 0.99 + 0.5)] * 1000 }')
  printf '%-9s streams   %s  %s  server CPU %.1f ms/stream\n' "$mode" "$(stats "$d/gen.res" "$t0" "$t1" stream)" "$first" \
    "$(awk -v a="$c0" -v b="$c1" -v n="$S" 'BEGIN { print (b - a) / n }')"
  stop
done

#!/usr/bin/env bash
# Runs qkv and PyTorch benchmarks back to back and prints a ratio table (median step time, peak RSS).
# Usage: bash bench/side_by_side.sh [models] [attn] [rnn] [gemm] [tok]   (default: all)   from the repository root.
# models: every training / inference / generation mode of configs.json's cls, lm, nmt and lstm (the table in
# docs/benchmarks.md), 15 s of timed steps per side.
set -u
Q=${QKV:-./build/qkv}
SHARED=${SHARED:-../shared}
REF=$SHARED/bench/torch_ref.py
PY=/usr/bin/python3
out=$(mktemp)
want=${*:-models attn rnn gemm tok}
for what in $want; do
  case $what in
    models)
      for cm in cls:train cls:infer lm:train lm:gen nmt:train lstm:train; do
        c=${cm%%:*} m=${cm#*:}
        $PY "$REF" $c --mode $m --max-seconds 15 2>/dev/null; $Q bench $c --mode $m --max-seconds 15
      done ;;
    attn)
      for T in 1024 2048 4096; do
        $PY "$REF" attn --seq-len $T --max-seconds 15 2>/dev/null; $Q bench attn --seq-len $T --max-seconds 15
      done
      $PY "$REF" attn --seq-len 8192 --max-steps 3 --max-seconds 5 2>/dev/null
      $Q bench attn --seq-len 8192 --max-steps 3 --max-seconds 5
      $Q bench attn --seq-len 16384 --max-steps 2 --max-seconds 5 --warmup 0
      $PY "$REF" attn --seq-len 16384 --max-steps 2 --max-seconds 5 2>/dev/null ;;
    rnn)
      for c in lstm2 gru2; do $PY bench/rnn_ref.py $c --max-seconds 20; $Q bench $c --max-seconds 20; done ;;
    gemm) $Q bench gemm ;;
    tok)
      $Q bench bpe; $Q bench wordpiece
      if [ -d /tmp/tokref/node_modules/tokenizers ]; then node bench/tokenizers_ref.js /tmp/tokref/node_modules "$SHARED"; fi ;;
  esac
done > "$out"
$PY - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ref = {}
for r in rows:
    if r["bench"] != "qkv":
        ref[(r["config"], r.get("mode"), r.get("seq_len"))] = r
for r in rows:
    if r["bench"] != "qkv" or "ms_step_median" not in r:
        continue
    t = ref.get((r["config"], r.get("mode"), r.get("seq_len")))
    if t and t.get("status", "ok") == "ok" and "ms_step_median" in t:
        print(f'{r["config"]:6} {r.get("mode",""):7} T={r.get("seq_len","")!s:6} torch {t["ms_step_median"]:9.1f} ms'
              f'  qkv {r["ms_step_median"]:9.1f} ms  speed-up {t["ms_step_median"]/r["ms_step_median"]:5.2f}x'
              f'  rss {t.get("peak_rss_mib",0):7.0f} / {r["peak_rss_mib"]:6.0f} MiB')
    else:
        print(f'{r["config"]:6} {r.get("mode",""):7} T={r.get("seq_len","")!s:6} torch {"n/a (" + t.get("status","?") + ")" if t else "n/a":>12}'
              f'  qkv {r["ms_step_median"]:9.1f} ms  rss {r["peak_rss_mib"]:.0f} MiB')
for r in rows:
    if r.get("shape") == "summary":
        print(f'gemm: tensor API vs raw cblas: geomean {r["api_vs_cblas_geomean"]}, worst {r["api_vs_cblas_min"]}')
    if "mb_per_s" in r:
        print(f'{r["bench"]:14} {r["config"]:9} {r["mb_per_s"]:7.1f} MB/s')
PY
echo "raw JSON lines: $out"

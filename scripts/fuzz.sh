#!/usr/bin/env bash
# Fuzz every harness of tests/fuzz in turn with libFuzzer (clang, ASan + UBSan), SECONDS each (default 600).
#   scripts/fuzz.sh [SECONDS] [HARNESS...]
# Builds build-fuzz/ (CC=clang, QKV_SANITIZE=ON, QKV_FUZZ=ON; warnings not errors: coverage instrumentation makes
# clang drop the kernels' vectorize pragmas with a warning). Each harness's working corpus is build-fuzz/corpus/NAME,
# started from tests/fuzz/corpus/NAME plus small slices of ../shared (tests/fuzz/seeds.py) and kept between runs;
# crashes, leaks and timeouts land in build-fuzz/crashes/NAME/ (copy each to tests/fuzz/regress/NAME/ once fixed).
# One fuzzer at a time, on one core.
set -euo pipefail
secs=${1:-600}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${QKV_SHARED:-$root/../shared}
build=${FUZZ_BUILD:-$root/build-fuzz}
CC=${CC:-clang} cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQKV_SANITIZE=ON -DQKV_FUZZ=ON \
  -DQKV_WERROR=OFF \
  >/dev/null
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$root"/tests/fuzz/fuzz_*.c; do n=$(basename "$f" .c); names+=("${n#fuzz_}"); done
fi
cmake --build "$build" -j2 --target $(printf 'qkvfuzz_%s ' "${names[@]}") >/dev/null
seeds="$build/seeds"
rm -rf "$seeds" && python3 "$root/tests/fuzz/seeds.py" "$root" "$shared" "$seeds"
export QKV_SHARED="$shared" OMP_NUM_THREADS=1 QKV_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for n in "${names[@]}"; do
  corpus="$build/corpus/$n" crashes="$build/crashes/$n"
  mkdir -p "$corpus" "$crashes" "$seeds/$n"
  dict=() quiet=()
  [ "$n" = plot_log ] && quiet=(-close_fd_mask=2) # the command's own error messages
  case $n in
    safetensors|checkpoint) dict=(-dict="$root/tests/fuzz/safetensors.dict") ;;
    hf_config|run_config|bpe_vocab|plot_log|data_reader|serve_request) dict=(-dict="$root/tests/fuzz/json.dict") ;;
  esac
  echo "== $n ($secs s)"
  start=$(date +%s)
  touch "$build/start-$n"
  # The fuzzer's own summary line (stat::number_of_executed_units) goes to the log.
  "$build/tests/fuzz/qkvfuzz_$n" "$corpus" "$root/tests/fuzz/corpus/$n" "$seeds/$n" "${dict[@]}" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$crashes/" ${quiet[@]+"${quiet[@]}"} \
    >"$build/fuzz-$n.log" 2>&1 || true
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz-$n.log" | grep -o '[0-9]*$' | tail -1 || true)
  found=$(find "$crashes" -type f -newer "$build/start-$n" | wc -l)
  echo "   $((($(date +%s) - start))) s, ${execs:-?} executions, $found new artifacts in $crashes"
done

#!/usr/bin/env bash
# Builds qkv for 64-bit ARM (aarch64) with Debian's cross compiler and runs the test suite under qemu-user: the
# check that the generic kernel path (what an ARM server runs: no x86 paths, auto-vectorised loops) builds and is
# correct. Not part of CI (the emulated suite is slow); run it by hand after touching a kernel.
#
#   bash scripts/cross-aarch64.sh [--install] [--tests REGEX] [--timeout SECONDS] [--jobs N] [ctest args...]
#   e.g.  bash scripts/cross-aarch64.sh --tests 'test_ops|test_attention' --timeout 600
#
# --install adds the arm64 architecture and installs crossbuild-essential-arm64, qemu-user and the arm64 -dev
# packages of qkv's libraries (root or sudo). --tests runs only the tests whose names match REGEX (ctest -R; the
# names are those of `ctest --test-dir build -N`). --timeout stops any one test after SECONDS and counts it failed
# (the tests' limit, QKV_TEST_TIMEOUT in tests/CMakeLists.txt; default 600, set for native speed). --jobs N runs N tests at
# once (default: the machine's cores; emulation is CPU-bound, so more does not help). Anything after these goes
# to ctest as it is. Build directory: build-aarch64/. RelWithDebInfo (-O2): Debian 12's
# aarch64 gcc 12 crashes vectorising a reduction in one test file at -O3.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: bash scripts/cross-aarch64.sh [--install] [--tests REGEX] [--timeout SECONDS] [--jobs N] [ctest args...]" >&2; exit 2; }
install=0 tests="" timeout="" jobs=$(nproc)
while [ $# -gt 0 ]; do
  case $1 in
    --install) install=1; shift ;;
    --tests) [ $# -ge 2 ] && [ -n "$2" ] || usage; tests=$2; shift 2 ;;
    --tests=*) tests=${1#--tests=}; [ -n "$tests" ] || usage; shift ;;
    --timeout) [ $# -ge 2 ] || usage; timeout=$2; shift 2 ;;
    --timeout=*) timeout=${1#--timeout=}; shift ;;
    --jobs) [ $# -ge 2 ] || usage; jobs=$2; shift 2 ;;
    --jobs=*) jobs=${1#--jobs=}; shift ;;
    --help|-h) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) break ;;
  esac
done
if [ -n "$timeout" ] && ! [[ $timeout =~ ^[1-9][0-9]*$ ]]; then
  echo "cross-aarch64: --timeout '$timeout': expected a whole number of seconds >= 1" >&2; exit 2
fi
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "cross-aarch64: --jobs '$jobs': expected a whole number >= 1" >&2; exit 2
fi
if [ "$install" = 1 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends crossbuild-essential-arm64 \
    qemu-user libopenblas-dev:arm64 libcjson-dev:arm64 libutf8proc-dev:arm64 libpcre2-dev:arm64
fi
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  command -v "$tool" >/dev/null || { echo "cross-aarch64: $tool not found (run with --install)" >&2; exit 2; }
done
[ -f /usr/lib/aarch64-linux-gnu/pkgconfig/openblas.pc ] ||
  { echo "cross-aarch64: arm64 libraries missing (run with --install)" >&2; exit 2; }
# The timeout is configured on every run, so a run without --timeout is back to the default.
cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DQKV_TEST_TIMEOUT="${timeout:-600}" >/dev/null
cmake --build build-aarch64 -j"$(nproc)"
echo "cross-aarch64: $(file -b build-aarch64/qkv | cut -d, -f1-2)"
# One thread: under qemu-user, OpenBLAS's (pthread build, arm64) worker threads hang at start-up; the kernels' code
# paths are the same at any thread count.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 QKV_THREADS=1
qemu-aarch64 -L /usr/aarch64-linux-gnu build-aarch64/qkv --version
ctest_args=(--test-dir build-aarch64 -j"$jobs" --output-on-failure)
[ -n "$tests" ] && ctest_args+=(-R "$tests")
ctest "${ctest_args[@]}" "$@"

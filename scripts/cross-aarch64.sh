#!/usr/bin/env bash
# Builds qkv for 64-bit ARM (aarch64) with Debian's cross compiler and runs the test suite under qemu-user: the
# check that the generic kernel path (what an ARM server runs: no x86 paths, auto-vectorised loops) builds and is
# correct. Not part of CI (the emulated suite is slow); run it by hand after touching a kernel.
#
#   bash scripts/cross-aarch64.sh [--install] [ctest args...]     e.g.  bash scripts/cross-aarch64.sh -R test_ops
#
# --install adds the arm64 architecture and installs crossbuild-essential-arm64, qemu-user and the arm64 -dev
# packages of qkv's libraries (root or sudo). Build directory: build-aarch64/. RelWithDebInfo (-O2): Debian 12's
# aarch64 gcc 12 crashes vectorising a reduction in one test file at -O3.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--install" ]; then
  shift
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
cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  >/dev/null
cmake --build build-aarch64 -j"$(nproc)"
echo "cross-aarch64: $(file -b build-aarch64/qkv | cut -d, -f1-2)"
# One thread: under qemu-user, OpenBLAS's (pthread build, arm64) worker threads hang at start-up; the kernels' code
# paths are the same at any thread count.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 QKV_THREADS=1
qemu-aarch64 -L /usr/aarch64-linux-gnu build-aarch64/qkv --version
ctest --test-dir build-aarch64 -j"$(nproc)" --output-on-failure "$@"

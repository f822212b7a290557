#!/usr/bin/env bash
# Installs every Debian 12 package qkv needs to build, test and compare against PyTorch.
# Idempotent; runs as root or through sudo.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  clang libomp-dev         # CI's second compiler (make clang): clang and LLVM's OpenMP runtime
  libopenblas-dev          # cblas headers (and the default pthread build)
  libopenblas0-openmp      # the OpenMP build qkv links: one thread pool for BLAS and qkv's kernels
  libcjson-dev             # JSON configs, safetensors headers
  libutf8proc-dev          # Unicode normalisation for WordPiece
  libpcre2-dev             # GPT-2 pre-tokenisation regex
  libopenmpi-dev openmpi-bin    # optional: data-parallel training with mpirun (docs/distributed.md)
  python3-torch python3-numpy   # PyTorch reference scripts (tests/ref, bench/quality)
  chromium                 # headless browser for the attention viewer test (tests/test_viz.c)
  libmicrohttpd-dev        # HTTP server library of qkv serve (optional: without it qkv serve is not built)
  curl                     # the qkv serve tests and bench/serve_load.sh drive the server with it
)

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo" >&2; exit 1; }
  SUDO=sudo
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then what a user does with the installed tree: build examples/xor.c with
# `pkg-config --cflags --libs qkv` (shared) and `--static`, and a two-line CMake project with find_package(qkv);
# each program must run and learn XOR. Also checks the installed binary, headers and man pages.
# Usage: install.sh BUILD_DIR SOURCE_DIR CC CMAKE
set -u
build=${1:?usage: install.sh BUILD_DIR SOURCE_DIR CC CMAKE} src=${2:?} cc=${3:?} cmake=${4:?}
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
prefix=$tmp/prefix
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
libdir=$(ls -d "$prefix"/lib*/pkgconfig 2>/dev/null | head -1)
[ -n "$libdir" ] || fail "no lib*/pkgconfig under the prefix"
libdir=${libdir%/pkgconfig}
for f in "$libdir/libqkv.a" "$libdir/libqkv.so" "$prefix/include/qkv/qkv.h" "$prefix/bin/qkv" \
         "$libdir/cmake/qkv/qkvConfig.cmake" "$prefix/share/man/man1/qkv.1" "$prefix/share/man/man1/qkv-train.1"; do
  [ -e "$f" ] || fail "not installed: ${f#$tmp/}"
done
grep -q '^\.TH QKV-TRAIN 1' "$prefix/share/man/man1/qkv-train.1" || fail "qkv-train.1 has no .TH line"
grep -q -- '--config FILE' "$prefix/share/man/man1/qkv-train.1" || fail "qkv-train.1 lacks the --help text"
"$prefix/bin/qkv" --version >/dev/null || fail "installed qkv --version"
bash "$src/tests/symbols.sh" nm "$libdir/libqkv.so" || fail "installed libqkv.so exports other names"

# The prefix moves with the tree: use the installed .pc where it is.
export PKG_CONFIG_PATH=$libdir/pkgconfig
# A sanitizer build's library needs its runtime first: programs using it are built with the same flags.
san=
ldd "$libdir/libqkv.so" | grep -q libasan && san="-fsanitize=address,undefined"
flags=$(pkg-config --cflags --libs qkv) || fail "pkg-config --cflags --libs qkv"
"$cc" -std=c11 $san -o "$tmp/xor" "$src/examples/xor.c" $flags -Wl,-rpath,"$libdir" || fail "compile xor.c with: $flags"
ldd "$tmp/xor" | grep -q "$libdir/libqkv.so" || fail "xor does not link the installed libqkv.so"
"$tmp/xor" >"$tmp/xor.out" || fail "xor (shared) exited $?"
sflags=$(pkg-config --static --cflags --libs qkv) || fail "pkg-config --static"
"$cc" -std=c11 $san -o "$tmp/xor_static" "$src/examples/xor.c" -Wl,-Bstatic $(pkg-config --cflags --libs-only-L qkv) -lqkv \
  -Wl,-Bdynamic $(pkg-config --static --libs qkv | sed 's/-lqkv//') || fail "static compile with: $sflags"
ldd "$tmp/xor_static" | grep -q libqkv && fail "xor_static links libqkv dynamically"
"$tmp/xor_static" >"$tmp/xor_static.out" || fail "xor (static) exited $?"
cmp -s "$tmp/xor.out" "$tmp/xor_static.out" || fail "shared and static xor print different results"

# find_package(qkv) -> qkv::qkv
mkdir -p "$tmp/proj"
cat >"$tmp/proj/CMakeLists.txt" <<CMK
cmake_minimum_required(VERSION 3.18)
project(uses_qkv C)
find_package(qkv 0.1 REQUIRED)
add_executable(xor $src/examples/xor.c)
target_link_libraries(xor PRIVATE qkv::qkv)
CMK
CC=$cc "$cmake" -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="$san" >"$tmp/cm.log" 2>&1 \
  || { cat "$tmp/cm.log"; fail "configure a project with find_package(qkv)"; }
"$cmake" --build "$tmp/proj/build" >"$tmp/cb.log" 2>&1 || { cat "$tmp/cb.log"; fail "build it"; }
"$tmp/proj/build/xor" >"$tmp/xor_cmake.out" || fail "xor (find_package) exited $?"
cmp -s "$tmp/xor.out" "$tmp/xor_cmake.out" || fail "find_package xor prints another result"
# xor exits 0 only when it learned XOR; show its last lines.
tail -2 "$tmp/xor.out"
echo "ok   installed into a temporary prefix; xor built with pkg-config (shared, static) and find_package(qkv)"

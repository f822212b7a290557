#!/usr/bin/env bash
# No OpenMP parallel directive in the sources gives both num_threads and if: LLVM's OpenMP runtime (clang 14's,
# llvm/llvm-project#63197) then carries the num_threads of a region the if clause ran serially over to the thread's
# next region, and an OpenBLAS GEMM in that region waits forever for a thread its team lacks (src/core/par.h).
# Usage: omp_pragmas.sh SOURCE_DIR
set -u
src=${1:?usage: omp_pragmas.sh SOURCE_DIR}
files=$(find "$src/src" "$src/tools" "$src/examples" "$src/bench" -name '*.[ch]' 2>/dev/null | sort)
[ -n "$files" ] || { echo "FAIL: no C sources under $src"; exit 1; }
# One directive a line, continuation lines joined; "file:line: directive" for each parallel directive.
dirs=$(printf '%s\n' "$files" | xargs awk '
  FNR == 1 { cont = "" }
  cont != "" { cont = cont " " $0; if ($0 !~ /\\$/) { print at ": " cont; cont = "" }; next }
  /^[ \t]*#[ \t]*pragma[ \t]+omp[ \t]+parallel/ {
    at = FILENAME ":" FNR
    if ($0 ~ /\\$/) cont = $0; else print at ": " $0
  }')
n=$(printf '%s\n' "$dirs" | grep -c .)
[ "$n" -ge 20 ] || { echo "FAIL: only $n OpenMP parallel directives found under $src"; exit 1; }
bad=$(printf '%s\n' "$dirs" | grep -E 'num_threads[ \t]*\(' | grep -E '(^|[ \t)])if[ \t]*\(')
if [ -n "$bad" ]; then
  echo "FAIL: parallel directives with both num_threads and if (pass num_threads(1) instead of the if):"
  printf '%s\n' "$bad" | sed 's/^/  /'
  exit 1
fi
echo "ok   $n OpenMP parallel directives, none with both num_threads and if"

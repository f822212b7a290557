#!/usr/bin/env bash
# Every global symbol libqkv defines starts with qkv_ (public qkv_<module>_<verb>, internal qkv__<module>_<verb>),
# so none can clash with a user's own names at link time. Usage: symbols.sh NM LIBRARY
# A static library (.a) is read for the global symbols of its objects; a shared one (.so) for its dynamic symbols,
# what a program linking it can see (internal qkv__ functions are hidden there, so only the public API remains).
set -u
nm=${1:?usage: symbols.sh NM LIBRARY} lib=${2:?usage: symbols.sh NM LIBRARY}
case $lib in
  *.so | *.so.*) out=$("$nm" -D --defined-only "$lib") ;;
  *) out=$("$nm" -g --defined-only "$lib") ;;
esac || { echo "FAIL: $nm could not list $lib"; exit 1; }
# "name: file" lines: nm prints "file.o:" before each object's symbols, "addr type name" for each symbol.
syms=$(printf '%s\n' "$out" | awk '/:$/ {obj = substr($1, 1, length($1) - 1); next} NF == 3 {print $3 "  (" obj ")"}' | sort -u)
n=$(printf '%s\n' "$syms" | grep -c .)
[ "$n" -ge 100 ] || { echo "FAIL: only $n global symbols read from $lib"; exit 1; }
# Names starting with "__" are reserved to the implementation: a sanitizer's or compiler's own (__odr_asan.*).
bad=$(printf '%s\n' "$syms" | grep -v '^qkv_' | grep -v '^__')
if [ -n "$bad" ]; then
  echo "FAIL: $(printf '%s\n' "$bad" | grep -c .) global symbols without the qkv_ prefix:"
  printf '%s\n' "$bad" | sed 's/^/  /'
  exit 1
fi
echo "ok   $n global symbols, all qkv_-prefixed"

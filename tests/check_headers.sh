#!/bin/bash
# Every header in include/, src/*/ and src/*/*/ compiles alone as C11 (strict prototypes)
# and as C++.
set -u
src=${1:?source dir}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
shopt -s nullglob
for h in "$src"/include/*.h "$src"/src/*/*.h "$src"/src/*/*/*.h; do
  case "$h" in *_int.h) ;; esac
  printf '#include "%s"\n#include "%s"\n' "$h" "$h" > "$tmp/t.c"
  if ! gcc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Werror=strict-prototypes \
       -I"$src/include" -I"$src/src" -I"$src/src/core" -fsyntax-only "$tmp/t.c" 2> "$tmp/err"; then
    echo "not ok: $h does not compile alone as C11"; cat "$tmp/err"; fail=1
  fi
  cp "$tmp/t.c" "$tmp/t.cpp"
  if ! g++ -std=c++17 -D_GNU_SOURCE -Wall -Werror -I"$src/include" -I"$src/src" \
       -I"$src/src/core" -fsyntax-only "$tmp/t.cpp" 2> "$tmp/err"; then
    echo "not ok: $h does not compile alone as C++"; cat "$tmp/err"; fail=1
  fi
done
[ $fail = 0 ] && echo "ok: all headers self-contained"
exit $fail

#!/bin/bash
# Repository rules checked by CTest (STYLE.md 4, 7, 3):
#  1. docs/ENV.md is what `meshccl-env --markdown` prints (generated from params.def);
#  2. includes go down the layers only: core <- socket <- bootstrap <- topo <- init,
#     and no module includes another module's _int.h;
#  3. every C file is clang-format clean (when clang-format is installed).
set -u
src=${1:?source dir}
build=${2:?build dir}
fail=0

if ! diff -u "$src/docs/ENV.md" <("$build/bin/meshccl-env" --markdown) > /tmp/mc_envdiff.$$; then
  echo "not ok - docs/ENV.md is stale: run 'make envdoc'"; cat /tmp/mc_envdiff.$$; fail=1
else
  echo "ok - docs/ENV.md matches params.def"
fi
rm -f /tmp/mc_envdiff.$$

level() {
  case "$1" in core) echo 0 ;; socket) echo 1 ;; bootstrap | net) echo 2 ;; topo | transport) echo 3 ;; init) echo 4 ;; coll) echo 5 ;; *) echo 9 ;; esac
}
bad=0
for f in "$src"/src/*/*.c "$src"/src/*/*.h; do
  mod=$(basename "$(dirname "$f")")
  ml=$(level "$mod")
  while IFS= read -r inc; do
    if [[ "$inc" == */* ]]; then
      dep=${inc%%/*}
    elif [ -f "$src/src/$mod/$inc" ]; then
      dep=$mod
    elif [ -f "$src/src/core/$inc" ]; then
      dep=core
    else
      continue # public header (include/) or system
    fi
    if [ "$(level "$dep")" -gt "$ml" ]; then
      echo "not ok - $f includes $inc: $mod may not depend on $dep"; bad=1
    fi
    if [[ "$inc" == *_int.h ]] && [ "$dep" != "$mod" ]; then
      echo "not ok - $f includes $inc: another module's private header"; bad=1
    fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done
[ $bad = 0 ] && echo "ok - includes respect core <- socket <- bootstrap <- topo <- init"
fail=$((fail | bad))

if command -v clang-format > /dev/null; then
  files=$(cd "$src" && git ls-files '*.c' '*.h' 2>/dev/null || find src include tools tests -name '*.[ch]')
  if (cd "$src" && clang-format --dry-run -Werror $files > /tmp/mc_fmt.$$ 2>&1); then
    echo "ok - clang-format clean"
  else
    echo "not ok - clang-format: run 'make format'"; head -30 /tmp/mc_fmt.$$; fail=1
  fi
  rm -f /tmp/mc_fmt.$$
else
  echo "ok - clang-format not installed # SKIP"
fi
exit $fail

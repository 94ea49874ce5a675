#!/bin/bash
# Repository rules checked by CTest:
#  1. docs/ENV.md is what `meshccl-env --markdown` prints (generated from params.def);
#  2. includes go down the layers only: core <- socket <- bootstrap <- topo <- init,
#     and no module includes another module's _int.h;
#  3. every C file (.c, .h, .inc) is clang-format clean (when clang-format is installed);
#  4. comments and docs cite NCCL's sources or the repository's own docs, never
#     documents outside the repository (design notes, issue texts, the folder
#     the project was planned in);
#  5. no code outside the file that defines an ops table compares a pointer
#     with it (`== &mc_net_socket_ops`): components are told apart by the
#     properties their tables declare;
#  6. docs/ARCHITECTURE.md's Layout section lists every source file (.c, .h,
#     .inc) under src/, tools/ and nccl_plugin/ exactly once, and every file it
#     names exists;
#  7. no algorithm table (mc_coll_*_ops) is named in src/ outside the files
#     that define an algorithm table and the table list (MC_ALGO_LIST in
#     src/topo/topo_algo.h): the executor asks the tables, never names one.
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
for f in "$src"/src/*/*.[ch] "$src"/src/*/*/*.[ch] "$src"/src/*/*.inc "$src"/src/*/*/*.inc; do
  [ -f "$f" ] || continue
  rel=${f#"$src"/src/}
  mod=${rel%%/*} # a module's subfolders (src/net/mesh/) belong to it
  dir=$(dirname "$f")
  ml=$(level "$mod")
  while IFS= read -r inc; do
    if [[ "$inc" == */* ]]; then
      dep=${inc%%/*}
    elif [ -f "$dir/$inc" ] || [ -f "$src/src/$mod/$inc" ]; then
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

# 4. References to documents outside the repository. Test data READMEs may
# name where their files come from, but not send the reader outside either.
# One letter of each word is a bracket class, so that this line does not
# match itself (nor other tools' scans for the same references).
outside='not[e]s/|not[e]s §|se[e]d 0[0-9]|iss[u]e [0-9]+ §|\(iss[u]e [0-9]|\.\./sh[a]red|sh[a]red/(gold[e]n|not[e]s|se[e]ds|topolog[i]es)|gold[e]n README|READM[E] §|DESIG[N]\.md|STYL[E]\.md'
bad=0
while IFS= read -r f; do
  rel=${f#"$src"/}
  [ "$rel" = tests/check_repo.sh ] && continue
  case "$rel" in tests/data/*) [[ "$(basename "$rel")" == README* ]] || continue ;; esac
  if grep -nE "$outside" "$f" > /tmp/mc_outside.$$; then
    sed "s|^|not ok - $rel:|; s|\$| (cite NCCL's source file and function, or docs/)|" /tmp/mc_outside.$$
    bad=1
  fi
done < <(find "$src/src" "$src/nccl_plugin" "$src/tools" "$src/tests" "$src/include" "$src/docs" -type f \
  \( -name '*.[ch]' -o -name '*.inc' -o -name '*.sh' -o -name '*.md' -o -name '*.txt' -o -name '*.def' \
  -o -name CMakeLists.txt -o -name Makefile \) | sort)
rm -f /tmp/mc_outside.$$
[ $bad = 0 ] && echo "ok - no references to documents outside the repository"
fail=$((fail | bad))

# 5. Pointer comparisons with an ops table outside its defining file: the
# nets' (mc_net_*_ops) and the collective algorithms' (mc_coll_*_ops) tables
# are the whole contract, so code asks a table, never which table it holds.
ops_kinds="net coll"
bad=0
for kind in $ops_kinds; do
  while IFS= read -r hit; do
    f=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    for name in $(grep -oE "[=!]= *&mc_${kind}_[a-z0-9_]+_ops\b" <<< "${rest#*:}" | grep -oE "mc_[a-z0-9_]+"); do
      def=$(grep -rlE "^(static )?const struct [a-z0-9_]+ ${name} *=" "$src/src" | head -1)
      if [ "$def" != "$f" ]; then
        echo "not ok - ${f#"$src"/}:$line compares a pointer with $name (defined in ${def#"$src"/}): test a property the table declares instead"
        bad=1
      fi
    done
  done < <(grep -rnE "[=!]= *&mc_${kind}_[a-z0-9_]+_ops\b" "$src/src" --include='*.c' --include='*.h' --include='*.inc')
done
[ $bad = 0 ] && echo "ok - no pointer comparison with an ops table outside its file ($ops_kinds)"
fail=$((fail | bad))

# 7. The executor names no algorithm: a file of src/ that names an algorithm
# table (mc_coll_<name>_ops) defines one itself (an algorithm, which may name
# the one whose connections it shares) or is the table list.
bad=0
while IFS= read -r f; do
  rel=${f#"$src"/}
  [ "$rel" = src/topo/topo_algo.h ] && continue
  grep -qE "^(static )?const struct mc_coll_algo_ops mc_coll_[a-z0-9_]+_ops *=" "$f" && continue
  while IFS= read -r hit; do
    for name in $(grep -oE "\bmc_coll_[a-z0-9_]+_ops\b" <<< "${hit#*:}" | grep -vx mc_coll_algo_ops); do
      echo "not ok - $rel:${hit%%:*} names an algorithm table ($name): ask the tables (mc_coll_algos, their slots) instead"
      bad=1
    done
  done < <(grep -nE "\bmc_coll_[a-z0-9_]+_ops\b" "$f")
done < <(grep -rlE "\bmc_coll_[a-z0-9_]+_ops\b" "$src/src" --include='*.c' --include='*.h' --include='*.inc' | sort)
[ $bad = 0 ] && echo "ok - no algorithm table named outside the algorithms' files and the table list"
fail=$((fail | bad))

# 6. The Layout section and the tree. A file is listed by a line of the
# section's code block that starts with its name (after six spaces); any
# other mention of a .c/.h/.inc file there must name a file that exists (by
# path when it has a folder, else by name anywhere in the repository).
bad=0
layout=$(awk '/^## Layout/ { on = 1; next } on && /^## / { exit } on' "$src/docs/ARCHITECTURE.md")
listed=$(sed -nE 's/^      ([A-Za-z0-9_.+-]+\.(c|h|inc))( .*)?$/\1/p' <<< "$layout" | sort)
for name in $(uniq -d <<< "$listed"); do
  echo "not ok - docs/ARCHITECTURE.md's Layout lists $name more than once"; bad=1
done
while IFS= read -r f; do
  if ! grep -qxF "$(basename "$f")" <<< "$listed"; then
    echo "not ok - ${f#"$src"/} is not listed in docs/ARCHITECTURE.md's Layout (add a line with its role)"
    bad=1
  fi
done < <(find "$src/src" "$src/tools" "$src/nccl_plugin" -type f \( -name '*.[ch]' -o -name '*.inc' \) | sort)
all_names=$(find "$src" \( -path "$src/build*" -o -path "$src/.git" \) -prune -o -type f -printf '%f\n' | sort -u)
for tok in $(grep -oE "[A-Za-z0-9_./+-]*[A-Za-z0-9_]\.(c|h|inc)\b" <<< "$layout" | sort -u); do
  if [[ "$tok" == */* ]]; then
    [ -f "$src/$tok" ] && continue
  elif grep -qxF "$tok" <<< "$all_names"; then
    continue
  fi
  echo "not ok - docs/ARCHITECTURE.md's Layout names $tok, which does not exist"; bad=1
done
[ $bad = 0 ] && echo "ok - docs/ARCHITECTURE.md's Layout lists every file of src/, tools/, nccl_plugin/"
fail=$((fail | bad))

# 7. Length: a source file of src/, tools/ or nccl_plugin/ over 1000 lines
# says why in its header comment (a " * Length: <reason>" line; ports of an
# NCCL file keep that file's shape). Split it by job otherwise.
bad=0
while IFS= read -r f; do
  n=$(wc -l < "$f")
  if [ "$n" -gt 1000 ] && ! head -n 60 "$f" | grep -qE '^ \* Length: .{10,}'; then
    echo "not ok - ${f#"$src"/} has $n lines: split it by job, or say why in a ' * Length: ' header line"
    bad=1
  fi
done < <(find "$src/src" "$src/tools" "$src/nccl_plugin" -type f \( -name '*.[ch]' -o -name '*.inc' \) | sort)
[ $bad = 0 ] && echo "ok - every source file over 1000 lines says why"
fail=$((fail | bad))

if command -v clang-format > /dev/null; then
  files=$(cd "$src" && git ls-files '*.c' '*.h' '*.inc' 2>/dev/null ||
    find src include tools tests -name '*.[ch]' -o -name '*.inc')
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

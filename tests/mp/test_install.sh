#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installing and consuming meshccl as users do:
#  - `make install`'s step (cmake --install, DESTDIR staging, a prefix) with the
#    NCCL compatibility component;
#  - a consumer built with find_package(meshccl), one with pkg-config, one
#    through add_subdirectory of the source tree;
#  - a program built as against NVIDIA's NCCL (own declarations, -lnccl,
#    NEEDED libnccl.so.2) that runs on meshccl's libnccl.so.2, found with
#    pkg-config's nccl.pc and with find_package(NCCL);
#  - the installed meshccl-perf, linked to the installed libmeshccl.so.2
#    through its $ORIGIN RUNPATH, running as one rank;
#  - `make install` then `make uninstall` (with and without NCCL_COMPAT=1)
#    into a prefix that holds another package's files: exactly meshccl's
#    files and its own directories go, the others stay.
# The Debian packages are tests/mp/test_deb.sh's.
# Needs cmake, pkg-config and a C compiler (make test installs them).
set -u
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
SRC="${MC_SRC:?MC_SRC must name the source directory}"
APP="$SRC/tests/mp/install"
CC=${CC:-cc}
for tool in cmake pkg-config "$CC"; do
  if ! command -v "$tool" >/dev/null; then
    if [ "${CI:-}" = true ]; then
      not_ok "$tool is installed"
      exit 1
    fi
    echo "# SKIP: $tool not found (Debian: apt-get install cmake pkg-config gcc)"
    exit 77
  fi
done
STAGE="$TMP/stage"
PFX=/opt/meshccl-test
ROOT="$STAGE$PFX"

# --- install -----------------------------------------------------------------
DESTDIR="$STAGE" cmake --install "$MC_BUILD" --prefix "$PFX" >"$TMP/install.log" 2>&1
expect_success "cmake --install into a staged prefix" "$?" "$TMP/install.log"
for c in nccl_compat nccl_compat_dev; do
  DESTDIR="$STAGE" cmake --install "$MC_BUILD" --prefix "$PFX" --component $c \
    >>"$TMP/install.log" 2>&1
  expect_success "the $c component installs" "$?" "$TMP/install.log"
done
for f in include/meshccl/nccl.h include/meshccl/meshccl.h include/nccl.h lib/libmeshccl.so lib/libmeshccl.so.2 lib/libmeshccl.a \
  bin/meshccl-run bin/meshccl-perf bin/meshccl-topo lib/pkgconfig/meshccl.pc \
  lib/cmake/meshccl/meshcclConfig.cmake lib/libnccl.so lib/libnccl.so.2 lib/pkgconfig/nccl.pc \
  lib/cmake/NCCL/NCCLConfig.cmake lib/libnccl-net-mesh.so; do
  [ -e "$ROOT/$f" ]
  check "installed $f"
done
soname=$(readelf -d "$ROOT/lib/libnccl.so.2" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
expect_eq "libnccl.so.2 carries NCCL's SONAME" "$soname" "libnccl.so.2"
exports=$(nm -D --defined-only "$ROOT/lib/libmeshccl.so" | awk '{print $3}' | grep -cvE '^(nccl|pnccl|meshccl)')
expect_eq "libmeshccl.so exports only nccl*, pnccl*, meshccl*" "$exports" 0

# --- meshccl-perf runs on the installed shared library -------------------------------------
expect_eq "installed meshccl-perf needs libmeshccl.so.2" \
  "$(readelf -d "$ROOT/bin/meshccl-perf" | grep -c 'NEEDED.*\[libmeshccl.so.2\]')" 1
# shellcheck disable=SC2016 # the literal $ORIGIN
expect_eq "its RUNPATH is relative to the install (\$ORIGIN/../lib)" \
  "$(readelf -d "$ROOT/bin/meshccl-perf" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')" '$ORIGIN/../lib'
expect_grep "ldd finds the installed library, not the build tree's" \
  <(env -u LD_LIBRARY_PATH ldd "$ROOT/bin/meshccl-perf") "libmeshccl.so.2 => $ROOT/(bin/\.\./)?lib/libmeshccl.so.2"
env -u LD_LIBRARY_PATH -u RANK -u WORLD_SIZE timeout 30 "$ROOT/bin/meshccl-perf" all_reduce -b 8 \
  -e 64 -n 1 >"$TMP/perf.out" 2>&1
expect_success "installed meshccl-perf runs as one rank without a launcher" "$?" "$TMP/perf.out"
expect_grep "and checks its results" "$TMP/perf.out" "^# Out of bounds values : 0 OK$"

# run NAME BINARY LIBDIR: the binary runs and prints its "ok" line.
run_ok() {
  LD_LIBRARY_PATH="$3" "$2" >"$TMP/run.out" 2>&1
  expect_success "$1" "$?" "$TMP/run.out"
}

# --- find_package(meshccl) ------------------------------------------------------
mkdir -p "$TMP/cm"
cat >"$TMP/cm/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(meshccl 2 REQUIRED)
add_executable(consumer $APP/consumer.c)
target_link_libraries(consumer PRIVATE meshccl::meshccl)
add_executable(consumer_static $APP/consumer.c)
target_link_libraries(consumer_static PRIVATE meshccl::meshccl_static)
CM
(cmake -S "$TMP/cm" -B "$TMP/cm/b" -DCMAKE_PREFIX_PATH="$ROOT" && cmake --build "$TMP/cm/b") \
  >"$TMP/cm.log" 2>&1
expect_success "find_package(meshccl) consumer builds" "$?" "$TMP/cm.log"
run_ok "find_package(meshccl) consumer runs" "$TMP/cm/b/consumer" "$ROOT/lib"
run_ok "the static library links alone" "$TMP/cm/b/consumer_static" ""

# --- pkg-config -------------------------------------------------------------------
export PKG_CONFIG_PATH="$ROOT/lib/pkgconfig"
# shellcheck disable=SC2046 # word splitting of pkg-config's flags is intended
"$CC" -o "$TMP/pc_consumer" "$APP/consumer.c" $(pkg-config --cflags --libs meshccl) >"$TMP/pc.log" 2>&1
expect_success "pkg-config meshccl consumer builds" "$?" "$TMP/pc.log"
run_ok "pkg-config meshccl consumer runs" "$TMP/pc_consumer" "$ROOT/lib"

# --- a binary built as against NCCL ---------------------------------------------------
# shellcheck disable=SC2046
"$CC" -o "$TMP/nccl_binary" "$APP/nccl_binary.c" $(pkg-config --libs nccl) >"$TMP/nb.log" 2>&1
expect_success "-lnccl program builds with nccl.pc" "$?" "$TMP/nb.log"
needed=$(readelf -d "$TMP/nccl_binary" | grep -c 'NEEDED.*\[libnccl.so.2\]')
expect_eq "it needs libnccl.so.2" "$needed" 1
run_ok "it runs on meshccl's libnccl.so.2" "$TMP/nccl_binary" "$ROOT/lib"
mkdir -p "$TMP/cn"
cat >"$TMP/cn/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.20)
project(nccl_consumer C)
find_package(NCCL REQUIRED)
add_executable(nccl_binary $APP/nccl_binary.c)
target_link_libraries(nccl_binary PRIVATE NCCL::nccl)
CM
(cmake -S "$TMP/cn" -B "$TMP/cn/b" -DCMAKE_PREFIX_PATH="$ROOT" && cmake --build "$TMP/cn/b") \
  >"$TMP/cn.log" 2>&1
expect_success "find_package(NCCL) gives NCCL::nccl" "$?" "$TMP/cn.log"
run_ok "the NCCL::nccl binary runs" "$TMP/cn/b/nccl_binary" "$ROOT/lib"
run_ok "the build tree's compat folder serves -lnccl binaries" "$TMP/nccl_binary" "$MC_BUILD/compat/lib"

# --- add_subdirectory ---------------------------------------------------------------
mkdir -p "$TMP/sub"
cat >"$TMP/sub/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.20)
project(parent C)
add_subdirectory($SRC meshccl)
add_executable(consumer $APP/consumer.c)
target_link_libraries(consumer PRIVATE meshccl::meshccl)
CM
(cmake -S "$TMP/sub" -B "$TMP/sub/b" && cmake --build "$TMP/sub/b" -j 2 --target consumer) \
  >"$TMP/sub.log" 2>&1
expect_success "add_subdirectory(meshccl) builds a consumer" "$?" "$TMP/sub.log"
[ ! -e "$TMP/sub/b/meshccl/tests" ]
check "add_subdirectory does not build meshccl's tests"
run_ok "the add_subdirectory consumer runs" "$TMP/sub/b/consumer" ""

# --- make install, make uninstall ---------------------------------------------------
# make FILE ARGS...: make in the source tree with this build, output in FILE.
mk() {
  local log=$1
  shift
  timeout 600 make -s -C "$SRC" BUILD="$MC_BUILD" "$@" >"$log" 2>&1
}
# left DIR: the files and links under DIR, then its directories, one line.
left() {
  (cd "$1" && find . ! -type d | LC_ALL=C sort | tr '\n' ' ' && printf '| ' && find . -type d | LC_ALL=C sort | tr '\n' ' ')
}
# lines FILE...: the lines of the manifests (each ends without a newline).
lines() { awk 'NF { n++ } END { print n + 0 }' "$@"; }
U="$TMP/u"
UP="$U/opt/mc"
mkdir -p "$UP/lib" "$UP/include"
echo other >"$UP/lib/libother.so.1"
echo other >"$UP/include/other.h"
OTHERS="./include/other.h ./lib/libother.so.1 | . ./bin ./include ./lib ./lib/cmake ./lib/pkgconfig "
mk "$TMP/mi.log" install DESTDIR="$U" PREFIX=/opt/mc NCCL_COMPAT=1
expect_success "make install DESTDIR=... PREFIX=/opt/mc NCCL_COMPAT=1" "$?" "$TMP/mi.log"
n=$(find "$UP" ! -type d | wc -l)
expect_eq "it installed the files of the manifests (besides the 2 that were there)" "$n" \
  "$(($(lines "$MC_BUILD"/install_manifest.txt "$MC_BUILD"/install_manifest_nccl_compat*.txt) + 2))"
mk "$TMP/mu.log" uninstall DESTDIR="$U" PREFIX=/opt/mc
expect_success "make uninstall (without NCCL_COMPAT)" "$?" "$TMP/mu.log"
compat_left=$( (sed 's|^/opt/mc/|./|' "$MC_BUILD"/install_manifest_nccl_compat*.txt && echo &&
  echo ./include/other.h && echo ./lib/libother.so.1) | grep . | LC_ALL=C sort | tr '\n' ' ')
expect_eq "it leaves NCCL's names (the nccl_compat manifests), the other files, the directories" \
  "$(left "$UP")" "$compat_left| . ./bin ./include ./lib ./lib/cmake ./lib/cmake/NCCL ./lib/pkgconfig "
mk "$TMP/mu2.log" uninstall DESTDIR="$U" PREFIX=/opt/mc NCCL_COMPAT=1
expect_success "make uninstall NCCL_COMPAT=1" "$?" "$TMP/mu2.log"
expect_eq "only the other package's files and the shared directories are left" "$(left "$UP")" "$OTHERS"
mk "$TMP/mi2.log" install DESTDIR="$U" PREFIX=/opt/mc
expect_success "make install again" "$?" "$TMP/mi2.log"
mk "$TMP/mu3.log" uninstall DESTDIR="$U" PREFIX=/opt/elsewhere
expect_eq "make uninstall with another PREFIX fails" "$?" 2
expect_grep "naming the manifest and the prefix" "$TMP/mu3.log" \
  "uninstall: .*/install_manifest.txt records /opt/mc/.*, outside PREFIX /opt/elsewhere"
expect_eq "and removes nothing" "$(find "$UP" ! -type d | wc -l)" \
  "$(($(lines "$MC_BUILD/install_manifest.txt") + 2))"
mk "$TMP/mu4.log" uninstall DESTDIR="$U" PREFIX=/opt/mc
expect_success "make uninstall" "$?" "$TMP/mu4.log"
expect_eq "leaves the other package's files and the shared directories" "$(left "$UP")" "$OTHERS"
exit "$FAILED"

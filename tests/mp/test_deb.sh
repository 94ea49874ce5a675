#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages (docs/INSTALL.md), as `make deb` builds them, here in
# BUILD/deb (kept, so that a second run only rebuilds what changed):
#  - exactly the packages docs/INSTALL.md names, each with its -dbgsym where
#    it has programs or libraries; version from packaging/debian/changelog;
#  - control fields: Depends computed (a versioned libc6) and between the
#    packages (= this version); NCCL's names conflict with, replace and
#    provide libnccl2 and libnccl-dev; a long description;
#  - libraries in the multiarch directory, headers in /usr/include/meshccl,
#    nccl.h only in meshccl-nccl-compat-dev, a DEP 5 copyright and the
#    changelog in each package's doc directory, shlibs, symbols and the
#    ldconfig trigger instead of maintainer scripts;
#  - unpacked (dpkg -x) into a scratch root: programs and libraries stripped,
#    their debug information in the -dbgsym package under their build id;
#    meshccl-perf runs on the unpacked library (no RUNPATH: LD_LIBRARY_PATH);
#    a pkg-config consumer and an NCCL (-lnccl) program build and run
#    against the unpacked tree;
#  - dpkg --root into scratch databases: the six install together, a package
#    that depends on libnccl2 (>= 2.18) installs on meshccl-nccl-compat, all
#    purge without a file left; beside stand-ins for NVIDIA's libnccl2 and
#    libnccl-dev, meshccl's own packages install, and meshccl-nccl-compat(-dev)
#    take their place (Conflicts + Replaces + Provides);
#  - lintian (pedantic, info tags shown): nothing but the tags that
#    docs/INSTALL.md explains;
#  - cpack in a build not configured for /usr refuses, saying why.
# Needs dpkg-dev, cmake, pkg-config, a C compiler and lintian (make test
# installs them); without lintian the lintian check is skipped, unless CI=true.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
SRC=$(cd "${MC_SRC:?MC_SRC must name the source directory}" && pwd)
MC_BUILD=$(cd "$MC_BUILD" && pwd)
APP="$SRC/tests/mp/install"
CC=${CC:-cc}
for tool in dpkg-deb dpkg-shlibdeps dpkg-architecture cmake cpack pkg-config readelf "$CC"; do
  command -v "$tool" >/dev/null ||
    skip_or_fail "$tool not found (Debian: apt-get install dpkg-dev cmake pkg-config gcc binutils)"
done

# --- make deb ----------------------------------------------------------------------
D="$MC_BUILD/deb"
timeout 900 make -s -C "$SRC" deb DEB_BUILD="$D" JOBS=2 >"$TMP/deb.log" 2>&1
expect_success "make deb DEB_BUILD=$D" "$?" "$TMP/deb.log"
V=$(sed -n '1s/^meshccl (\([^)]*\)).*/\1/p' "$SRC/packaging/debian/changelog")
UV=${V%-*}
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
LIBS="libmeshccl2 libnccl-net-mesh meshccl-nccl-compat meshccl-tools" # with ELF files
PKGS="libmeshccl-dev libmeshccl2 libnccl-net-mesh meshccl-nccl-compat meshccl-nccl-compat-dev meshccl-tools"
deb() { echo "$D/${1}_${V}_$ARCH.deb"; }
ddeb() { echo "$D/${1}-dbgsym_${V}_$ARCH.ddeb"; }
names() { for f in "$@"; do [ -f "$f" ] && dpkg-deb -f "$f" Package; done | LC_ALL=C sort | tr '\n' ' '; }
# shellcheck disable=SC2046
expect_eq "the packages, version $V" "$(names $(ls "$D"/*_"${V}"_"$ARCH".deb))" "$PKGS "
# shellcheck disable=SC2046
expect_eq "the -dbgsym packages" "$(names $(ls "$D"/*.ddeb))" \
  "$(for p in $LIBS; do echo "$p-dbgsym"; done | tr '\n' ' ')"
for p in $PKGS; do
  [ -f "$(deb "$p")" ] || {
    not_ok "$(deb "$p") was written"
    show "$TMP/deb.log"
    exit 1
  }
done

# --- control fields ---------------------------------------------------------------
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
for p in $LIBS; do
  expect_grep "$p: Depends has a versioned libc6" <(field "$p" Depends) '(^|, )libc6 \(>= [0-9.]+\)'
  expect_eq "$p-dbgsym depends on $p (= $V)" "$(dpkg-deb -f "$(ddeb "$p")" Depends)" "$p (= $V)"
done
expect_eq "libmeshccl-dev depends on libmeshccl2 (= $V)" "$(field libmeshccl-dev Depends)" "libmeshccl2 (= $V)"
expect_grep "meshccl-tools depends on libmeshccl2 (= $V) (meshccl-perf)" <(field meshccl-tools Depends) \
  "^libmeshccl2 \(= $V\), libc6"
expect_eq "meshccl-nccl-compat: Conflicts, Replaces, Provides" \
  "$(field meshccl-nccl-compat Conflicts) / $(field meshccl-nccl-compat Replaces) / $(field meshccl-nccl-compat Provides)" \
  "libnccl2 / libnccl2 / libnccl2 (= $UV)"
expect_eq "meshccl-nccl-compat-dev: Conflicts, Replaces, Provides, Depends" \
  "$(field meshccl-nccl-compat-dev Conflicts) / $(field meshccl-nccl-compat-dev Replaces) / $(field meshccl-nccl-compat-dev Provides) / $(field meshccl-nccl-compat-dev Depends)" \
  "libnccl-dev / libnccl-dev / libnccl-dev (= $UV) / meshccl-nccl-compat (= $V)"
for p in libmeshccl-dev libmeshccl2 libnccl-net-mesh meshccl-tools; do
  expect_eq "$p conflicts with nothing" "$(field "$p" Conflicts)$(field "$p" Replaces)" ""
done
for p in $PKGS; do
  expect_eq "$p: version, architecture, maintainer with an address" \
    "$(field "$p" Version) $(field "$p" Architecture) $(field "$p" Maintainer | grep -c '<.*@.*>')" "$V $ARCH 1"
  desc=$(field "$p" Description)
  expect_eq "$p: a long description (6+ lines, the meshccl paragraph)" \
    "$(($(wc -l <<<"$desc") >= 7))/$(grep -c '^ meshccl is a collective communication library' <<<"$desc")" "1/1"
done
# ctrl PKG FILE: a control file of PKG's .deb.
ctrl() { dpkg-deb --ctrl-tarfile "$(deb "$1")" | tar -xOf - "./$2" 2>/dev/null; }
ctrls() { dpkg-deb --ctrl-tarfile "$(deb "$1")" | tar -tf - | sed 's|^\./||' | grep . | LC_ALL=C sort | tr '\n' ' '; }
expect_eq "libmeshccl2's control files" "$(ctrls libmeshccl2)" "control md5sums shlibs symbols triggers "
expect_eq "meshccl-nccl-compat's control files" "$(ctrls meshccl-nccl-compat)" \
  "control md5sums shlibs symbols triggers "
expect_eq "libnccl-net-mesh's control files (no shlibs: nothing links a plugin)" "$(ctrls libnccl-net-mesh)" \
  "control md5sums triggers "
expect_eq "the ldconfig trigger" "$(ctrl libmeshccl2 triggers)" "activate-noawait ldconfig"
expect_eq "the shlibs" "$(ctrl libmeshccl2 shlibs)/$(ctrl meshccl-nccl-compat shlibs)" \
  "libmeshccl 2 libmeshccl2 (>= $V)/libnccl 2 meshccl-nccl-compat (>= $V)"
expect_eq "the symbols: libmeshccl.so.2's, with its -dev package" "$(ctrl libmeshccl2 symbols | head -2 | tr '\n' '|')" \
  "libmeshccl.so.2 libmeshccl2 #MINVER#|* Build-Depends-Package: libmeshccl-dev|"
expect_grep "ncclAllReduce is in it since $UV" <(ctrl libmeshccl2 symbols) "^ ncclAllReduce@Base $UV$"

# --- contents ---------------------------------------------------------------------
# files PKG: PKG's paths (links as "path -> target"), one line.
files() {
  dpkg-deb -c "$1" | awk '{ $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print }' | sed 's|^\./|/|' |
    grep -v '/$' | LC_ALL=C sort | tr '\n' ' '
}
doc() { echo "/usr/share/doc/$1/changelog.Debian.gz /usr/share/doc/$1/copyright"; }
ovr() { echo "/usr/share/lintian/overrides/$1"; }
L=/usr/lib/$MA
expect_eq "libmeshccl2's files" "$(files "$(deb libmeshccl2)")" \
  "$L/libmeshccl.so.2 -> libmeshccl.so.$UV $L/libmeshccl.so.$UV $(doc libmeshccl2) $(ovr libmeshccl2) "
expect_eq "libmeshccl-dev's files" "$(files "$(deb libmeshccl-dev)")" \
  "/usr/include/meshccl/meshccl.h /usr/include/meshccl/nccl.h $L/cmake/meshccl/meshcclConfig.cmake $L/cmake/meshccl/meshcclConfigVersion.cmake $L/cmake/meshccl/meshcclTargets-none.cmake $L/cmake/meshccl/meshcclTargets.cmake $L/libmeshccl.a $L/libmeshccl.so -> libmeshccl.so.2 $L/pkgconfig/meshccl.pc $(doc libmeshccl-dev) $(ovr libmeshccl-dev) "
expect_eq "meshccl-tools' files" "$(files "$(deb meshccl-tools)")" \
  "/usr/bin/meshccl-env /usr/bin/meshccl-hello /usr/bin/meshccl-perf /usr/bin/meshccl-run /usr/bin/meshccl-topo $(doc meshccl-tools) $(ovr meshccl-tools) "
expect_eq "libnccl-net-mesh's files" "$(files "$(deb libnccl-net-mesh)")" \
  "$L/libnccl-net-mesh.so $(doc libnccl-net-mesh) $(ovr libnccl-net-mesh) "
expect_eq "meshccl-nccl-compat's files" "$(files "$(deb meshccl-nccl-compat)")" \
  "$L/libnccl.so.2 -> libnccl.so.$UV $L/libnccl.so.$UV $(doc meshccl-nccl-compat) $(ovr meshccl-nccl-compat) "
expect_eq "meshccl-nccl-compat-dev's files" "$(files "$(deb meshccl-nccl-compat-dev)")" \
  "/usr/include/nccl.h $L/cmake/NCCL/NCCLConfig.cmake $L/cmake/NCCL/NCCLConfigVersion.cmake $L/cmake/NCCL/ncclTargets-none.cmake $L/cmake/NCCL/ncclTargets.cmake $L/libnccl.so -> libnccl.so.2 $L/pkgconfig/nccl.pc $(doc meshccl-nccl-compat-dev) $(ovr meshccl-nccl-compat-dev) "

R="$TMP/root"
for f in "$D"/*_"${V}"_"$ARCH".deb "$D"/*.ddeb; do
  dpkg -x "$f" "$R" || not_ok "dpkg -x $f"
done
expect_eq "the copyright is machine-readable (DEP 5), Apache-2.0" \
  "$(head -1 "$R/usr/share/doc/libmeshccl2/copyright")/$(grep -c '^License: Apache-2.0$' "$R/usr/share/doc/libmeshccl2/copyright")" \
  "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0//2"
expect_eq "the changelog's first entry is this version" \
  "$(gzip -dc "$R/usr/share/doc/meshccl-tools/changelog.Debian.gz" | head -1 | cut -d' ' -f1-2)" "meshccl ($V)"
for p in $LIBS; do
  expect_eq "$p-dbgsym's doc directory is $p's" "$(readlink "$R/usr/share/doc/$p-dbgsym")" "$p"
done

# --- stripped, debug information in -dbgsym -------------------------------------------
for f in usr/bin/meshccl-perf usr/bin/meshccl-run "usr/lib/$MA/libmeshccl.so.$UV" "usr/lib/$MA/libnccl.so.$UV" \
  "usr/lib/$MA/libnccl-net-mesh.so"; do
  id=$(readelf -n "$R/$f" | sed -n 's/.*Build ID: \([0-9a-f]*\)/\1/p')
  dbg="$R/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
  expect_eq "/$f: stripped (no .debug_info, no symtab), with a debug link" \
    "$(readelf -S "$R/$f" | grep -cE '\.debug_info|\.symtab|\.comment')/$(readelf -S "$R/$f" | grep -c '\.gnu_debuglink')" "0/1"
  expect_eq "its debug information is in -dbgsym under its build id ${id:0:8}..." \
    "$(readelf -S "$dbg" 2>/dev/null | grep -c '\.debug_info')" 1
done
expect_eq "libmeshccl.a has no debug information" \
  "$(readelf -S "$R/usr/lib/$MA/libmeshccl.a" | grep -c '\.debug_info')" 0

# --- the unpacked tree works ------------------------------------------------------------
expect_eq "meshccl-perf: NEEDED libmeshccl.so.2, no RUNPATH (a /usr/bin program)" \
  "$(readelf -d "$R/usr/bin/meshccl-perf" | grep -c 'NEEDED.*\[libmeshccl.so.2\]')/$(readelf -d "$R/usr/bin/meshccl-perf" | grep -cE 'R(UN)?PATH')" "1/0"
expect_grep "with LD_LIBRARY_PATH, ldd finds the unpacked library" \
  <(LD_LIBRARY_PATH="$R$L" ldd "$R/usr/bin/meshccl-perf") "libmeshccl.so.2 => $R$L/libmeshccl.so.2"
LD_LIBRARY_PATH="$R$L" timeout 30 env -u RANK -u WORLD_SIZE "$R/usr/bin/meshccl-perf" all_reduce -b 8 -e 64 -n 1 \
  >"$TMP/perf.out" 2>&1
expect_success "the unpacked meshccl-perf runs on the unpacked library" "$?" "$TMP/perf.out"
expect_grep "and checks its results" "$TMP/perf.out" "^# Out of bounds values : 0 OK$"
export PKG_CONFIG_PATH="$R$L/pkgconfig"
inc=$(pkg-config --cflags meshccl | sed 's/^-I//; s/ *$//')
expect_eq "meshccl.pc: -I<root>/usr/include/meshccl" "$(cd "$inc" 2>/dev/null && pwd -P)" \
  "$(cd "$R/usr/include/meshccl" && pwd -P)"
# shellcheck disable=SC2046 # word splitting of pkg-config's flags is intended
"$CC" -o "$TMP/consumer" "$APP/consumer.c" $(pkg-config --cflags --libs meshccl) >"$TMP/cc.log" 2>&1
expect_success "a pkg-config consumer builds against the unpacked -dev package" "$?" "$TMP/cc.log"
LD_LIBRARY_PATH="$R$L" "$TMP/consumer" >"$TMP/run.out" 2>&1
expect_success "and runs" "$?" "$TMP/run.out"
# shellcheck disable=SC2046
"$CC" -o "$TMP/nccl_binary" "$APP/nccl_binary.c" $(pkg-config --cflags --libs nccl) >"$TMP/nb.log" 2>&1
expect_success "an -lnccl program builds with meshccl-nccl-compat-dev's nccl.pc" "$?" "$TMP/nb.log"
LD_LIBRARY_PATH="$R$L" "$TMP/nccl_binary" >"$TMP/nb.out" 2>&1
expect_success "and runs on meshccl-nccl-compat's libnccl.so.2" "$?" "$TMP/nb.out"
unset PKG_CONFIG_PATH

# --- dpkg --root: the packages' relations ---------------------------------------------
# A scratch dpkg database (no maintainer scripts run: the packages have none;
# libc6 is not in it, hence --force-depends for meshccl's own packages).
newroot() {
  rm -rf "$1"
  mkdir -p "$1/var/lib/dpkg/info" "$1/var/lib/dpkg/updates"
  touch "$1/var/lib/dpkg/status" "$1/var/lib/dpkg/available"
}
# fake NAME VERSION FIELDS FILE...: a package with FILEs (paths under /) as NVIDIA's would have.
fake() {
  local d="$TMP/fake/$1" f
  rm -rf "$d" && mkdir -p "$d/DEBIAN"
  printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: test <test@example.org>\nDescription: %s\n%b' \
    "$1" "$2" "$ARCH" "stand-in for tests" "$3" >"$d/DEBIAN/control"
  shift 3
  for f in "$@"; do mkdir -p "$d$(dirname "$f")" && echo fake >"$d$f"; done
  dpkg-deb --root-owner-group -b "$d" "$TMP/fake/$(basename "$d").deb" >/dev/null
}
# dpkg sets files' owners: as root only (make test runs as root).
if [ "$(id -u)" != 0 ]; then
  ok "dpkg --root # SKIP not root"
else
  DR="$TMP/dpkgroot"
  newroot "$DR"
  dpkg --root="$DR" --force-depends -i "$D"/*_"${V}"_"$ARCH".deb >"$TMP/dpkg.log" 2>&1
  expect_success "dpkg --root installs all six packages together (no file in two of them)" "$?" "$TMP/dpkg.log"
  expect_eq "all installed" "$(dpkg-query --admindir="$DR/var/lib/dpkg" -W -f='${db:Status-Abbrev}${Package} ' | tr -s ' ')" \
    "$(for p in $PKGS; do printf 'ii %s ' "$p"; done | tr -s ' ')"
  fake nccl-user 1.0 'Depends: libnccl2 (>= 2.18)\n'
  dpkg --root="$DR" -i "$TMP/fake/nccl-user.deb" >"$TMP/dpkg_user.log" 2>&1
  expect_success "a package depending on libnccl2 (>= 2.18) installs on meshccl-nccl-compat (Provides)" "$?" \
    "$TMP/dpkg_user.log"
  dpkg --root="$DR" --force-depends -P nccl-user $PKGS >"$TMP/dpkg_rm.log" 2>&1
  expect_success "dpkg --root -P purges them all" "$?" "$TMP/dpkg_rm.log"
  expect_eq "and no file is left under /usr" "$(find "$DR/usr" ! -type d 2>/dev/null | wc -l)" 0
  fake libnccl2 2.30.7-1+cuda13.0 '' "$L/libnccl.so.2"
  fake libnccl-dev 2.30.7-1+cuda13.0 'Depends: libnccl2\n' /usr/include/nccl.h "$L/libnccl.so"
  newroot "$DR"
  dpkg --root="$DR" -i "$TMP/fake/libnccl2.deb" "$TMP/fake/libnccl-dev.deb" >"$TMP/dpkg_nv.log" 2>&1
  expect_success "NVIDIA's libnccl2 and libnccl-dev (stand-ins) install" "$?" "$TMP/dpkg_nv.log"
  dpkg --root="$DR" --force-depends -i "$(deb libmeshccl2)" "$(deb libmeshccl-dev)" "$(deb meshccl-tools)" \
    "$(deb libnccl-net-mesh)" >"$TMP/dpkg_beside.log" 2>&1
  expect_success "libmeshccl2, libmeshccl-dev, meshccl-tools and the plugin install beside them" "$?" \
    "$TMP/dpkg_beside.log"
  # Conflicts + Replaces + Provides: dpkg takes NVIDIA's package out in favour
  # of meshccl's (Debian policy 7.6.2), and what depended on it stays satisfied.
  dpkg --root="$DR" --force-depends -i "$(deb meshccl-nccl-compat)" >"$TMP/dpkg_compat.log" 2>&1
  expect_success "meshccl-nccl-compat installs over libnccl2" "$?" "$TMP/dpkg_compat.log"
  expect_grep "dpkg removes libnccl2 in its favour" "$TMP/dpkg_compat.log" \
    "will remove libnccl2 in favour of meshccl-nccl-compat"
  dpkg --root="$DR" --force-depends -i "$(deb meshccl-nccl-compat-dev)" >"$TMP/dpkg_compat_dev.log" 2>&1
  expect_success "meshccl-nccl-compat-dev installs over libnccl-dev" "$?" "$TMP/dpkg_compat_dev.log"
  expect_eq "installed: meshccl's six, not NVIDIA's" \
    "$(dpkg-query --admindir="$DR/var/lib/dpkg" -W -f='${db:Status-Abbrev}${Package} ' | tr -s ' ')" \
    "$(for p in $PKGS; do printf 'ii %s ' "$p"; done | tr -s ' ')"
  expect_eq "libnccl.so.2 and nccl.h are meshccl's" \
    "$(readlink "$DR$L/libnccl.so.2")/$(grep -c "meshccl's public API" "$DR/usr/include/nccl.h")" "libnccl.so.$UV/1"
  expect_eq "meshccl's own nccl.h is beside it, in /usr/include/meshccl" \
    "$(cmp -s "$DR/usr/include/nccl.h" "$DR/usr/include/meshccl/nccl.h" && echo same)" same
fi

# --- lintian ----------------------------------------------------------------------
if command -v lintian >/dev/null; then
  # Left, as docs/INSTALL.md explains: each -dbgsym's doc link is checked
  # without the other packages (lintian sees one package at a time).
  want=$(for p in $LIBS; do
    echo "I: $p-dbgsym: cannot-check-whether-usr-share-doc-symlink-points-to-foreign-package"
  done | LC_ALL=C sort)
  timeout 300 lintian --no-cfg --pedantic -I -E --fail-on error,warning \
    "$D"/*_"${V}"_"$ARCH".deb "$D"/*.ddeb >"$TMP/lintian.out" 2>&1
  expect_success "lintian --pedantic: no error or warning" "$?" "$TMP/lintian.out"
  expect_eq "and only the hints docs/INSTALL.md explains" \
    "$(grep -v '^running with root privileges' "$TMP/lintian.out" | LC_ALL=C sort)" "$want"
elif [ "${CI:-}" = true ]; then
  not_ok "lintian is installed (CI=true; it is in the Makefile's DEB_PKGS)"
else
  ok "lintian # SKIP not installed (apt-get install lintian)"
fi

# --- cpack refuses a build not configured for /usr -----------------------------------
(cd "$TMP" && cpack -G DEB --config "$MC_BUILD/CPackConfig.cmake" -B "$TMP/cpack") >"$TMP/cpack.log" 2>&1
expect_eq "cpack in $MC_BUILD (not for /usr) fails" "$?" 1
expect_grep "saying that make deb builds the packages" <(tr -s '\n ' '  ' <"$TMP/cpack.log") \
  "$MC_BUILD is configured for /[^ ]*: the Debian packages need a build for /usr \(make deb builds one"
expect_eq "and writes no package" "$(find "$TMP/cpack" -name '*.deb' 2>/dev/null | wc -l)" 0
mp_finish

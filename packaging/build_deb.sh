#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds meshccl's Debian packages (`make deb`): configures BUILD_DIR for
# /usr with Debian's compiler and linker flags (dpkg-buildflags, all hardening
# on), builds, runs cpack -G DEB there, then finishes each package as
# debhelper would have: out go the ldconfig calls that CPack writes into
# postinst/postrm (the packages' `triggers` file has dpkg run ldconfig), the
# .comment sections of the programs and libraries (dh_strip), and the debug
# information of the static library (dh_strip --strip-debug); a symbols file
# is added beside the shlibs (dh_makeshlibs); md5sums are written again. The
# -dbgsym .ddeb packages are finished likewise (see below). The packages are
# left in BUILD_DIR; each path is printed. docs/INSTALL.md lists them.
#   packaging/build_deb.sh BUILD_DIR [JOBS]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=${1:?usage: packaging/build_deb.sh BUILD_DIR [JOBS]}
JOBS=${2:-$(nproc)}
for tool in dpkg-buildflags dpkg-shlibdeps dpkg-deb cpack; do
  command -v "$tool" >/dev/null || {
    echo "build_deb.sh: $tool not found (Debian: apt-get install dpkg-dev cmake)" >&2
    exit 1
  }
done
if [ ! -f "$B/CMakeCache.txt" ]; then
  export DEB_BUILD_MAINT_OPTIONS=hardening=+all
  # CMake reads CFLAGS, CXXFLAGS and LDFLAGS; CPPFLAGS go with the compiler flags.
  CFLAGS="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)" \
    CXXFLAGS="$(dpkg-buildflags --get CXXFLAGS) $(dpkg-buildflags --get CPPFLAGS)" \
    LDFLAGS="$(dpkg-buildflags --get LDFLAGS)" \
    cmake -S "$SRC" -B "$B" -DCMAKE_BUILD_TYPE=None -DCMAKE_INSTALL_PREFIX=/usr -DMESHCCL_TESTS=OFF
fi
cmake --build "$B" -j "$JOBS"
rm -f "$B"/*.deb "$B"/*.ddeb
(cd "$B" && cpack -G DEB)

# CPack's postinst/postrm are exactly `if [ "$1" = configure|remove ]; then
# ldconfig; fi`: when a script holds nothing else, it goes.
only_ldconfig() {
  [ -z "$(grep -vE '^(#!/bin/sh|set -e|if \[ "\$1" = "(configure|remove)" \]; then|[[:space:]]*ldconfig|fi|)$' "$1")" ]
}
is_elf() { [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for deb in "$B"/*.deb "$B"/*.ddeb; do
  rm -rf "$tmp/pkg"
  dpkg-deb -R "$deb" "$tmp/pkg"
  if [[ "$deb" == *.ddeb ]]; then
    # The -dbgsym package as debhelper makes it: its doc directory is a link
    # to its package's (which it depends on, with the copyright), its .debug
    # files are not executable; CPack's md5sums name the files by their
    # staging path, so they are written again below.
    pkg=$(dpkg-deb -f "$deb" Package)
    mkdir -p "$tmp/pkg/usr/share/doc"
    ln -s "${pkg%-dbgsym}" "$tmp/pkg/usr/share/doc/$pkg"
    find "$tmp/pkg/usr/lib/debug" -type f -exec chmod 0644 {} +
  fi
  for s in postinst postrm; do
    if [ -f "$tmp/pkg/DEBIAN/$s" ] && only_ldconfig "$tmp/pkg/DEBIAN/$s"; then
      rm "$tmp/pkg/DEBIAN/$s"
    fi
  done
  while IFS= read -r f; do
    case "$f" in
    *.a) objcopy -D --strip-debug --remove-section=.comment --remove-section=.note "$f" ;;
    *) if is_elf "$f"; then objcopy --remove-section=.comment --remove-section=.note "$f"; fi ;;
    esac
  done < <(find "$tmp/pkg/usr" -type f)
  # A symbols file beside CPack's shlibs (a library's package has a shlibs):
  # every exported symbol since this version.
  if [ -f "$tmp/pkg/DEBIAN/shlibs" ]; then
    pkg=$(dpkg-deb -f "$deb" Package)
    dpkg-gensymbols -q -c0 -v"$(dpkg-deb -f "$deb" Version | sed 's/-[^-]*$//')" -p"$pkg" -P"$tmp/pkg" \
      -O"$tmp/pkg/DEBIAN/symbols"
    # The -dev package whose version a build against the library names.
    case "$pkg" in
    libmeshccl2) dev=libmeshccl-dev ;;
    *) dev=$pkg-dev ;;
    esac
    sed -i "1a* Build-Depends-Package: $dev" "$tmp/pkg/DEBIAN/symbols"
  fi
  (cd "$tmp/pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort |
    xargs -r -d '\n' md5sum >DEBIAN/md5sums)
  dpkg-deb --root-owner-group -b "$tmp/pkg" "$deb" >/dev/null
  echo "$deb"
done

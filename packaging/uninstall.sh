#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make uninstall`: removes what `make install` put under DESTDIR+PREFIX, as
# cmake --install recorded it in BUILD/install_manifest.txt (and, with
# NCCL_COMPAT=1, install_manifest_nccl_compat.txt and
# install_manifest_nccl_compat_dev.txt): each recorded path is PREFIX/...,
# without DESTDIR. A manifest that names a file outside PREFIX records another
# install: nothing is removed then. Of the
# directories, only meshccl's own (include/meshccl, <libdir>/cmake/meshccl,
# <libdir>/cmake/NCCL) go, once empty; the prefix's shared ones (bin, lib,
# include, lib/pkgconfig...) stay, as GNU's uninstall targets leave them.
#   packaging/uninstall.sh BUILD DESTDIR PREFIX NCCL_COMPAT
set -euo pipefail
B=${1:?usage: packaging/uninstall.sh BUILD DESTDIR PREFIX NCCL_COMPAT}
destdir=${2:-}
prefix=${3:?PREFIX is empty}
prefix=${prefix%/}
manifests=("$B/install_manifest.txt")
if [ "${4:-}" = 1 ]; then
  manifests+=("$B/install_manifest_nccl_compat.txt" "$B/install_manifest_nccl_compat_dev.txt")
fi
for m in "${manifests[@]}"; do
  if [ ! -f "$m" ]; then
    echo "uninstall: $m is missing: no install recorded there (make install [NCCL_COMPAT=1] writes it)" >&2
    exit 1
  fi
  outside=$(awk -v r="$prefix/" 'index($0, r) != 1 { print; exit }' "$m")
  if [ -n "$outside" ]; then
    echo "uninstall: $m records $outside, outside PREFIX $prefix: it is another install's" \
      "(run make uninstall with its PREFIX); nothing removed" >&2
    exit 1
  fi
done
declare -A dirs=()
for m in "${manifests[@]}"; do
  while IFS= read -r f || [ -n "$f" ]; do # the manifest ends without a newline
    [ -n "$f" ] || continue
    f=$destdir$f
    if [ -L "$f" ] || [ -e "$f" ]; then
      echo "-- Removing: $f"
      rm -f -- "$f"
    else
      echo "-- Already gone: $f"
    fi
    dirs[$(dirname "$f")]=1
  done <"$m"
done
for d in "${!dirs[@]}"; do
  case "$(basename "$d")" in
  meshccl | NCCL)
    if rmdir -- "$d" 2>/dev/null; then echo "-- Removing empty directory: $d"; fi
    ;;
  esac
done
exit 0

#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Records the sysfs/procfs files topology detection (src/topo/topo_detect.c)
# reads, from ROOT (default /) into OUT, as a tree replayable with
# MESHCCL_SYSFS_ROOT=OUT. Symlinks are copied as the (relative) links sysfs
# has; file contents are copied as read (unreadable files are left out, as
# detection then uses its defaults). /proc/cpuinfo is cut to the fields read
# (vendor_id, cpu family, model, model name) of the first processor.
# Usage: record.sh OUT [ROOT]
set -euo pipefail
out=${1:?usage: record.sh OUT [ROOT]}
root=${2:-/}
root=${root%/}

copy_file() { # copy_file /abs/path
  local f=$1
  [ -f "$root$f" ] || return 0
  mkdir -p "$out$(dirname "$f")"
  cat "$root$f" >"$out$f" 2>/dev/null || rm -f "$out$f"
}
copy_link() { # copy_link /abs/path (a symlink)
  local l=$1
  [ -L "$root$l" ] || return 0
  mkdir -p "$out$(dirname "$l")"
  ln -sfn "$(readlink "$root$l")" "$out$l"
}
real() { # path relative to root of the resolved link
  local r
  r=$(readlink -f "$root$1")
  echo "${r#$root}"
}

rm -rf "$out"
mkdir -p "$out/proc"
awk '/^$/ {exit} /^(vendor_id|cpu family|model|model name)[[:space:]]*:/ {print}' \
  "$root/proc/cpuinfo" >"$out/proc/cpuinfo"

for n in "$root"/sys/devices/system/node/node[0-9]*; do
  [ -d "$n" ] || continue
  n=${n#$root}
  copy_file "$n/cpumap"
  copy_file "$n/cpulist"
done

for l in "$root"/sys/class/net/*; do
  l=${l#$root}
  copy_link "$l"
  d=$(real "$l")
  mkdir -p "$out$d"
  for f in flags operstate ifindex speed; do copy_file "$d/$f"; done
  [ -L "$root$d/device" ] || continue
  copy_link "$d/device"
  p=$(real "$d/device")
  while [ "$p" != "/sys/devices" ] && [ "$p" != "/" ]; do
    for f in class vendor device subsystem_vendor subsystem_device numa_node max_link_speed \
      max_link_width; do
      copy_file "$p/$f"
    done
    # the bus a device is on (pci, virtio, ...): NCCL's test of a PCI function
    if [ -L "$root$p/subsystem" ]; then
      copy_link "$p/subsystem"
      mkdir -p "$out$(real "$p/subsystem")"
    fi
    b=$(basename "$p")
    if [[ $b =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$ ]]; then
      copy_link "/sys/bus/pci/devices/$b"
    fi
    p=$(dirname "$p")
  done
done
echo "recorded $(find "$out" -type f -o -type l | wc -l) files and links under $out"

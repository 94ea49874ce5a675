#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Writes the tree tests/data/sysfs/h200-vm-virtio (committed output): the
# facts topology detection reads on a cloud GPU VM (Firecracker) where
# NCCL 2.28.9 wrote h200-vm-virtio.nccl-2.28.9.xml (its NCCL_TOPO_DUMP_FILE, one
# rank, NCCL's default socket net; the same rules as 2.30 here): one
# NVIDIA H200 (0000:00:06.0, 3D controller, numa_node -1, no link files on
# its parent), one virtio-net device (0000:00:03.0, interface eth0 under
# .../0000:00:03.0/virtio2, whose subsystem is the virtio bus, speed -1),
# 16 Intel cores (family 6, model 207), one NUMA node (node0, CPUs 0-15),
# and lo. NVML (the tests' fake) names the GPU.
# Usage: make-h200-vm.sh [OUT]
set -euo pipefail
out=${1:-$(dirname "$0")/h200-vm-virtio}
rm -rf "$out"
mkdir -p "$out/proc" "$out/sys/bus/pci/devices" "$out/sys/bus/virtio" "$out/sys/class/net"
touch "$out/sys/bus/virtio/.keep" # git keeps no empty folder: the virtio links resolve
printf 'vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) Platinum 8580\n' \
  >"$out/proc/cpuinfo"
mkdir -p "$out/sys/devices/system/node/node0"
echo ffff >"$out/sys/devices/system/node/node0/cpumap"
echo 0-15 >"$out/sys/devices/system/node/node0/cpulist"

pci() { # pci BUSID class vendor device subsystem_vendor subsystem_device [speed width]
  local d="$out/sys/devices/pci0000:00/$1"
  mkdir -p "$d"
  echo "$2" >"$d/class"
  echo "$3" >"$d/vendor"
  echo "$4" >"$d/device"
  echo "$5" >"$d/subsystem_vendor"
  echo "$6" >"$d/subsystem_device"
  echo -1 >"$d/numa_node"
  if [ $# -ge 8 ]; then
    echo "$7" >"$d/max_link_speed"
    echo "$8" >"$d/max_link_width"
  fi
  ln -sfn ../../../bus/pci "$d/subsystem"
  ln -sfn "../../../devices/pci0000:00/$1" "$out/sys/bus/pci/devices/$1"
}
pci 0000:00:03.0 0x020000 0x1af4 0x1041 0x1af4 0x1041
pci 0000:00:06.0 0x030200 0x10de 0x2335 0x10de 0x18bf "32.0 GT/s PCIe" 0

v="$out/sys/devices/pci0000:00/0000:00:03.0/virtio2"
mkdir -p "$v/net/eth0"
echo 0x0001 >"$v/device"
echo 0x1af4 >"$v/vendor"
ln -sfn ../../../../bus/virtio "$v/subsystem"
e="$v/net/eth0"
echo 0x1003 >"$e/flags"
echo up >"$e/operstate"
echo 2 >"$e/ifindex"
echo -1 >"$e/speed"
ln -sfn ../../../virtio2 "$e/device"
ln -sfn ../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0 "$out/sys/class/net/eth0"

l="$out/sys/devices/virtual/net/lo"
mkdir -p "$l"
echo 0x9 >"$l/flags"
echo unknown >"$l/operstate"
echo 1 >"$l/ifindex"
ln -sfn ../../devices/virtual/net/lo "$out/sys/class/net/lo"
echo "wrote $out"

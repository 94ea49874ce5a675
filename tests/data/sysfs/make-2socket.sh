#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Writes the hand-built tree tests/data/sysfs/2socket-switch (committed output):
# a 2-socket Intel host (Sapphire Rapids ids), NUMA nodes 0 (CPUs 0-15) and 1
# (CPUs 16-31);
#   node 0: root port 0000:00:01.0 -> PCIe switch (upstream 0000:01:00.0,
#           downstream 0000:02:01.0 and 0000:02:02.0) holding a dual-port NIC
#           (0000:03:00.0 eth2, 0000:03:00.1 eth3; Gen4 x16 behind a Gen3 x8
#           port) and a NIC 0000:04:00.0 (eth4, no speed file);
#   node 1: root port 0000:80:01.0 -> NIC 0000:81:00.0 (eth5, 25 Gb/s);
#   plus lo, a down interface (eth9) and a virtual bridge br0 (no device).
# GPUs, which detection finds only through NVML (the fake NVML of the tests
# names them; sysfs alone never makes a GPU, as in NCCL):
#   node 0: a 3D controller 0000:05:00.0 behind the switch's third downstream
#           port 0000:02:03.0 (Gen5 x16 device, Gen4 x16 switch);
#   node 1: a VGA GPU 0000:82:00.0 under root port 0000:80:02.0, and an
#           NVSwitch-class bridge (0x068000) 0000:83:00.0 under 0000:80:03.0.
# Usage: make-2socket.sh [OUT]
set -euo pipefail
out=${1:-$(dirname "$0")/2socket-switch}
rm -rf "$out"
mkdir -p "$out/proc" "$out/sys/bus/pci/devices" "$out/sys/class/net"
printf 'processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n' \
  >"$out/proc/cpuinfo"
node() { # node N cpumap cpulist
  mkdir -p "$out/sys/devices/system/node/node$1"
  echo "$2" >"$out/sys/devices/system/node/node$1/cpumap"
  echo "$3" >"$out/sys/devices/system/node/node$1/cpulist"
}
node 0 00000000,0000ffff 0-15
node 1 00000000,ffff0000 16-31

pci() { # pci RELDIR class vendor device numa speed width
  local d="$out/sys/devices/$1" b
  b=$(basename "$1")
  mkdir -p "$d"
  echo "$2" >"$d/class"
  echo "$3" >"$d/vendor"
  echo "$4" >"$d/device"
  echo "$3" >"$d/subsystem_vendor"
  echo 0x0001 >"$d/subsystem_device"
  echo "$5" >"$d/numa_node"
  echo "$6" >"$d/max_link_speed"
  echo "$7" >"$d/max_link_width"


  ln -sfn "$(printf '../%.0s' $(seq 1 $((3))))devices/$1" "$out/sys/bus/pci/devices/$b"
}
# sys/bus/pci/devices/X -> ../../../devices/<path>
sw0=pci0000:00/0000:00:01.0
pci $sw0 0x060400 0x8086 0x352a 0 "16.0 GT/s PCIe" 16
pci $sw0/0000:01:00.0 0x060400 0x11f8 0x4052 0 "16.0 GT/s PCIe" 16
pci $sw0/0000:01:00.0/0000:02:01.0 0x060400 0x11f8 0x4052 0 "8.0 GT/s PCIe" 8
pci $sw0/0000:01:00.0/0000:02:02.0 0x060400 0x11f8 0x4052 0 "16.0 GT/s PCIe" 16
pci $sw0/0000:01:00.0/0000:02:01.0/0000:03:00.0 0x020000 0x8086 0x1593 0 "16.0 GT/s PCIe" 16
pci $sw0/0000:01:00.0/0000:02:01.0/0000:03:00.1 0x020000 0x8086 0x1593 0 "16.0 GT/s PCIe" 16
pci $sw0/0000:01:00.0/0000:02:02.0/0000:04:00.0 0x020000 0x15b3 0x101d 0 "16.0 GT/s PCIe" 16
pci pci0000:80/0000:80:01.0 0x060400 0x8086 0x352a 1 "16.0 GT/s PCIe" 16
pci pci0000:80/0000:80:01.0/0000:81:00.0 0x020000 0x14e4 0x16d7 1 "8.0 GT/s PCIe" 8
pci $sw0/0000:01:00.0/0000:02:03.0 0x060400 0x11f8 0x4052 0 "16.0 GT/s PCIe" 16
pci $sw0/0000:01:00.0/0000:02:03.0/0000:05:00.0 0x030200 0x10de 0x2330 0 "32.0 GT/s PCIe" 16
pci pci0000:80/0000:80:02.0 0x060400 0x8086 0x352b 1 "32.0 GT/s PCIe" 16
pci pci0000:80/0000:80:02.0/0000:82:00.0 0x030000 0x10de 0x2330 1 "32.0 GT/s PCIe" 16
pci pci0000:80/0000:80:03.0 0x060400 0x8086 0x352c 1 "16.0 GT/s PCIe" 4
pci pci0000:80/0000:80:03.0/0000:83:00.0 0x068000 0x10de 0x22a3 1 "16.0 GT/s PCIe" 4

netif() { # netif NAME DEVRELDIR|- ifindex flags operstate speed|-
  local d
  if [ "$2" = - ]; then d="virtual/net/$1"; else d="$2/net/$1"; fi
  mkdir -p "$out/sys/devices/$d"
  ln -sfn "../../devices/$d" "$out/sys/class/net/$1"
  echo "$3" >"$out/sys/devices/$d/ifindex"
  echo "$4" >"$out/sys/devices/$d/flags"
  echo "$5" >"$out/sys/devices/$d/operstate"
  if [ "$6" != - ]; then echo "$6" >"$out/sys/devices/$d/speed"; fi
  if [ "$2" != - ]; then ln -sfn ../../../$(basename "$2") "$out/sys/devices/$d/device"; fi
}
netif lo - 1 0x9 unknown -
netif eth2 $sw0/0000:01:00.0/0000:02:01.0/0000:03:00.0 2 0x1003 up 100000
netif eth3 $sw0/0000:01:00.0/0000:02:01.0/0000:03:00.1 3 0x1003 up 100000
netif eth4 $sw0/0000:01:00.0/0000:02:02.0/0000:04:00.0 4 0x1003 up -
netif eth5 pci0000:80/0000:80:01.0/0000:81:00.0 5 0x1003 up 25000
netif eth9 pci0000:80/0000:80:01.0/0000:81:00.0 9 0x1002 down -
netif br0 - 6 0x1003 up -1

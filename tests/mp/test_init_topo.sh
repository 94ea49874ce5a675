#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The topology stage of init: with NCCL_TOPO_FILE every local rank takes one
# GPU of a real server's file; each rank logs the transport it really uses
# for its peers with the topology's reason (MESHCCL_P2P_CMA=1, so that P2P
# between processes is taken where the topology allows it; golden decisions:
# P2P over NVLink on p4d; P2P inside a switch and SHM across domains on the
# synthetic 2-socket file; the full matrix is meshccl-topo's); the fused
# XML is dumped with NCCL_TOPO_DUMP_FILE; a file whose GPUs have no gdr and
# no rank is completed; too many ranks for the file fail
# with a message naming it; a partial file without GPUs is completed by
# detection; on this host (detection) compute devices of one
# NUMA node use P2P, and SHM when NCCL_P2P_DISABLE=1; with an NVML that
# reports fewer GPUs than ranks, ranks whose devices were not named are
# compute devices.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs
HELLO="$MC_BUILD/bin/meshccl-hello"
GOLD="$MC_SRC/tests/data/topo/golden"
P4D="$GOLD/aws-p4d.24xlarge/topo.xml"
SYN="$GOLD/synthetic-2s-intel-4gpu-2sw-2nic/topo.xml"
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH MESHCCL_P2P_CMA=1

NCCL_TOPO_FILE="$P4D" NCCL_TOPO_DUMP_FILE="$TMP/dump.xml" timeout 60 "$RUN" -n 8 "$HELLO" \
  >"$TMP/p4d.out" 2>&1
expect_success "p4d file, 8 ranks: exit 0" "$?" "$TMP/p4d.out"
expect_grep "p4d: rank 0 receives from its ring peer by P2P over NVLink" "$TMP/p4d.out" \
  '^\[0\] .*Transport: rank 7 -> rank 0 uses P2P \(rank 0 decides: path NVL within NCCL_P2P_LEVEL PXB\)$'
expect_eq "p4d: every connection of rank 0 is P2P" \
  "$(grep '^\[0\] .*NCCL INFO Channel .* -> ' "$TMP/p4d.out" | grep -vc 'via P2P/CMA$')" 0
# The graph stage on every rank: NCCL 2.30's ring for p4d on one node (12 x 20 GB/s
# over NVLink, doubled to 24 channels by Postset), logged as NCCL logs it.
expect_grep "p4d: the ring search's result, as NCCL's" "$TMP/p4d.out" \
  '^\[0\] .*NCCL INFO Pattern 4, crossNic 0, nChannels 12, bw 20.000000/20.000000, type NVL/PIX, sameChannels 1$'
expect_grep "p4d: rank 0's channel 0 ring" "$TMP/p4d.out" \
  '^\[0\] .*NCCL INFO Channel 00/24 : 0 1 2 3 4 5 6 7$'
expect_grep "p4d: rank 3's rings and trees" "$TMP/p4d.out" \
  '^\[3\] .*NCCL INFO Trees \[0\] 4/-1/-1->3->2 \[1\] 4/-1/-1->3->2'
expect_grep "p4d: channel counts" "$TMP/p4d.out" \
  '^\[0\] .*NCCL INFO 24 coll channels, 0 collnet channels, 0 nvls channels'
timeout 20 "$MC_BUILD/bin/meshccl-topo" --xml "$TMP/dump.xml" >"$TMP/dump.out" 2>&1
expect_success "NCCL_TOPO_DUMP_FILE: the fused XML loads in meshccl-topo" "$?" "$TMP/dump.out"
expect_eq "NCCL_TOPO_DUMP_FILE: 8 GPUs with ranks" "$(grep -c '<gpu .*rank=' "$TMP/dump.xml")" 8

# The file NCCL was given for p4d: <gpu dev sm> without rank and gdr, completed
# as NCCL completes it (rank of the local rank, gdr from its gdrSupport).
P4DC="$GOLD/aws-p4d.24xlarge/input.xml"
NCCL_TOPO_FILE="$P4DC" timeout 60 "$RUN" -n 2 "$HELLO" >"$TMP/p4dc.out" 2>&1
expect_success "p4d file without gdr/rank, 2 ranks: exit 0" "$?" "$TMP/p4dc.out"
expect_grep "p4d file without gdr/rank: P2P over NVLink" "$TMP/p4dc.out" \
  "^\[1\] .*Transport: rank 0 -> rank 1 uses P2P \(rank 1 decides: path NVL"

NCCL_TOPO_FILE="$SYN" timeout 60 "$RUN" -n 4 "$HELLO" >"$TMP/syn.out" 2>&1
expect_success "synthetic 2-socket file, 4 ranks: exit 0" "$?" "$TMP/syn.out"
expect_grep "synthetic: 0 -> 1 P2P inside a switch (golden)" "$TMP/syn.out" \
  "^\[1\] .*Transport: rank 0 -> rank 1 uses P2P \(rank 1 decides: path PIX"
expect_grep "synthetic: 1 -> 2 SHM across domains (golden)" "$TMP/syn.out" \
  "^\[2\] .*Transport: rank 1 -> rank 2 uses SHM"

NCCL_TOPO_FILE="$P4D" timeout 60 "$RUN" -n 9 "$HELLO" >"$TMP/nine.out" 2>&1
expect_eq "p4d file, 9 ranks: the job fails" "$?" 1
expect_grep "p4d file, 9 ranks: the message names the file and its GPUs" "$TMP/nine.out" \
  "NCCL_TOPO_FILE=$P4D has 8 GPU\(s\); rank 8 uses device 8"

P5P="$MC_SRC/tests/data/topo/aws-p5.48xlarge-2023-partial.xml"
NCCL_TOPO_FILE="$P5P" timeout 60 "$RUN" -n 2 "$HELLO" >"$TMP/p5p.out" 2>&1
expect_success "p5 partial file (no GPU), 2 ranks: exit 0" "$?" "$TMP/p5p.out"
expect_grep "p5 partial file: rank 1's device completed by detection" "$TMP/p5p.out" \
  "^\[1\] .*NCCL_TOPO_FILE=$P5P has no GPU: rank 1's device 1 completed by detection"
expect_grep "p5 partial file: the detected devices use P2P" "$TMP/p5p.out" \
  "^\[0\] .*Transport: rank 1 -> rank 0 uses P2P \(rank 0 decides: path PIX"

timeout 60 "$RUN" -n 2 "$HELLO" >"$TMP/host.out" 2>&1
expect_success "this host, 2 ranks: exit 0" "$?" "$TMP/host.out"
expect_grep "this host: P2P between compute devices of one NUMA node" "$TMP/host.out" \
  "^\[0\] .*Transport: rank 1 -> rank 0 uses P2P \(rank 0 decides: path PIX"
MESHCCL_P2P_CMA=0 timeout 60 "$RUN" -n 2 "$HELLO" >"$TMP/nocma.out" 2>&1
expect_success "this host, MESHCCL_P2P_CMA=0: exit 0" "$?" "$TMP/nocma.out"
expect_grep "this host, MESHCCL_P2P_CMA=0: SHM, and the line says why not P2P" "$TMP/nocma.out" \
  "^\[0\] .*Transport: rank 1 -> rank 0 uses SHM \(rank 0 decides: the topology allows P2P, path PIX .*; P2P between processes needs MESHCCL_P2P_CMA=1\)"
NCCL_P2P_DISABLE=1 timeout 60 "$RUN" -n 2 "$HELLO" >"$TMP/nop2p.out" 2>&1
expect_success "this host, NCCL_P2P_DISABLE=1: exit 0" "$?" "$TMP/nop2p.out"
expect_grep "this host, NCCL_P2P_DISABLE=1: SHM" "$TMP/nop2p.out" \
  "^\[0\] .*Transport: rank 1 -> rank 0 uses SHM \(rank 0 decides: P2P disabled by NCCL_P2P_DISABLE"
# A CPU job on a GPU server: NVML (the tests' fake, 1 GPU) reports fewer GPUs
# than local ranks. Ranks whose devices the job did not name are compute
# devices (one INFO line each says why); a rank that names a device beyond
# NVML's still fails, naming it.
NVML="$T/libfake-nvml.so"
MESHCCL_NVML_LIBRARY="$NVML" FAKE_NVML_GPUS="00000000:05:00.0,90" timeout 60 "$RUN" -n 4 \
  "$HELLO" >"$TMP/nvml1.out" 2>&1
expect_success "NVML with 1 GPU, 4 ranks, devices not named: exit 0" "$?" "$TMP/nvml1.out"
expect_grep "NVML with 1 GPU: rank 3 is a compute device, and says why" "$TMP/nvml1.out" \
  "^\[3\] .*Topo: .*libfake-nvml.so reports 1 GPU\(s\), but the job did not name rank 3's device .*: dev 3 is a compute device"
MESHCCL_NVML_LIBRARY="$NVML" FAKE_NVML_GPUS="00000000:05:00.0,90" MESHCCL_DEVICE=2 \
  timeout 60 "$RUN" -n 1 "$HELLO" >"$TMP/nvml2.out" 2>&1
expect_eq "NVML with 1 GPU, MESHCCL_DEVICE=2: the job fails (exit 1)" "$?" 1
expect_grep "NVML with 1 GPU, MESHCCL_DEVICE=2: invalid usage naming the device and the count" \
  "$TMP/nvml2.out" 'rank 0 uses device 2 but .*libfake-nvml.so reports 1 GPU\(s\)'

mp_finish

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The nccl* / pnccl* functions libmeshccl.so exports are exactly NCCL 2.30's:
# every function of NCCL 2.30's nccl.h and the host functions of its device
# API (nccl_device/*.h), each with its p-prefixed alias; then the same list
# as NVIDIA's own libnccl.so.2 2.30.7 (the nvidia-nccl-cu13 wheel, where pip
# can take it). Prints every missing or extra symbol.
# Usage: test_api_symbols.sh BUILD_DIR
set -u
build=${1:?build directory}
lib="$build/lib/libmeshccl.so"
[ -f "$lib" ] || { echo "not ok - $lib not built"; exit 1; }
command -v nm >/dev/null || { echo "ok - SKIP: no nm"; exit 77; }

NCCL_230="
ncclMemAlloc ncclMemFree ncclGetVersion ncclGetUniqueId
ncclCommInitRankConfig ncclCommInitRank ncclCommInitAll ncclCommInitRankScalable
ncclCommFinalize ncclCommDestroy ncclCommAbort ncclCommRevoke
ncclCommSplit ncclCommShrink ncclCommGetUniqueId ncclCommGrow
ncclGetErrorString ncclGetLastError ncclResetDebugInit ncclCommGetAsyncError
ncclCommCount ncclCommCuDevice ncclCommUserRank
ncclCommRegister ncclCommDeregister ncclCommSuspend ncclCommResume ncclCommMemStats
ncclCommWindowRegister ncclCommWindowDeregister ncclWinGetUserPtr
ncclRedOpCreatePreMulSum ncclRedOpDestroy
ncclReduce ncclBcast ncclBroadcast ncclAllReduce ncclReduceScatter ncclAllGather
ncclAlltoAll ncclGather ncclScatter ncclSend ncclRecv
ncclPutSignal ncclSignal ncclWaitSignal
ncclGroupStart ncclGroupEnd ncclGroupSimulateEnd
ncclParamBind ncclParamGetI8 ncclParamGetI16 ncclParamGetI32 ncclParamGetI64
ncclParamGetU8 ncclParamGetU16 ncclParamGetU32 ncclParamGetU64 ncclParamGetStr
ncclParamGet ncclParamGetParameter ncclParamGetAllParameterKeys ncclParamDumpAll
ncclCommQueryProperties ncclDevCommCreate ncclDevCommDestroy
ncclGetLsaMultimemDevicePointer ncclGetMultimemDevicePointer ncclGetLsaDevicePointer
ncclGetPeerDevicePointer
ncclTeamWorld ncclTeamLsa ncclTeamRail ncclTeamRankToWorld ncclTeamRankToLsa
ncclLsaBarrierCreateRequirement ncclGinBarrierCreateRequirement
ncclLLA2ACalcSlots ncclLLA2ACreateRequirement
ncclGinOutboxCreateRequirement ncclGinInboxA2ACreateRequirement
"
# Exported by NCCL's library without a header or a pnccl alias.
NCCL_230_PLAIN="ncclResetDebugInitInternal"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  for f in $NCCL_230; do
    echo "$f"
    echo "p$f"
  done
  for f in $NCCL_230_PLAIN; do echo "$f"; done
} | sort -u >"$tmp/want"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWi]$/ {print $3}' | sed 's/@.*//' |
  grep -E '^p?nccl' | sort -u >"$tmp/have"

fail=0
missing=$(comm -23 "$tmp/want" "$tmp/have")
extra=$(comm -13 "$tmp/want" "$tmp/have")
for s in $missing; do
  echo "# missing: $s"
  fail=1
done
for s in $extra; do
  echo "# extra: $s (not in NCCL 2.30's API)"
  fail=1
done
echo "# $(wc -l <"$tmp/have") nccl*/pnccl* symbols exported, $(wc -l <"$tmp/want") expected"
if [ $fail = 0 ]; then
  echo "ok - libmeshccl.so exports NCCL 2.30's functions and their pnccl aliases, nothing else"
else
  echo "not ok - exported nccl*/pnccl* symbols differ from NCCL 2.30's"
fi

# And against NVIDIA's own library: the nvidia-nccl-cu13 2.30.7 wheel, where
# pip can take it from the machine's package store (nothing is built or run).
if timeout 120 pip download --no-deps -q -d "$tmp/wheel" nvidia-nccl-cu13==2.30.7 \
  >"$tmp/pip.out" 2>&1 &&
  python3 -c 'import sys, zipfile, glob
z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0])
open(sys.argv[2], "wb").write(z.read("nvidia/nccl/lib/libnccl.so.2"))' "$tmp/wheel" "$tmp/libnccl.so.2"; then
  nm -D --defined-only "$tmp/libnccl.so.2" | awk '$2 ~ /^[TtWi]$/ {print $3}' | sed 's/@.*//' |
    grep -E '^p?nccl' | sort -u >"$tmp/nvidia"
  if cmp -s "$tmp/nvidia" "$tmp/have"; then
    echo "ok - the same $(wc -l <"$tmp/have") nccl*/pnccl* functions as NVIDIA's libnccl.so.2 2.30.7"
  else
    comm -3 "$tmp/nvidia" "$tmp/have" | sed 's/^\t/# only in libmeshccl.so: /; /^#/!s/^/# only in NVIDIA'"'"'s: /'
    echo "not ok - exported functions differ from NVIDIA's libnccl.so.2 2.30.7"
    fail=1
  fi
else
  echo "ok - # SKIP NVIDIA's libnccl.so.2 2.30.7 not available ($(tail -n 1 "$tmp/pip.out"))"
fi
exit $fail

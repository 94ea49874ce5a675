#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Drop-in for NVIDIA NCCL 2.30: a program compiled against NVIDIA's own
# nccl.h (the nvidia-nccl-cu13 2.30.7 wheel, which pip takes from the
# machine's package store; CUDA's headers replaced by declarations of the
# two types nccl.h uses, buffers being host memory) links libmeshccl.so
# under NCCL's name (build/compat/lib/libnccl.so.2) and runs on 3 ranks:
# all-reduce, all-gather and broadcast exact, ncclGetVersion equal to the
# header's NCCL_VERSION_CODE. Skips (fails under CI=true) where pip cannot
# take the wheel.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs
SRC=${MC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
COMPAT="$MC_BUILD/compat/lib"
[ -e "$COMPAT/libnccl.so.2" ] || skip_or_fail "$COMPAT/libnccl.so.2 not built"
command -v cc >/dev/null || skip_or_fail "no C compiler"

if ! timeout 120 pip download --no-deps -q -d "$TMP/wheel" nvidia-nccl-cu13==2.30.7 >"$TMP/pip.out" 2>&1; then
  skip_or_fail "pip cannot take nvidia-nccl-cu13==2.30.7: $(tail -n 1 "$TMP/pip.out")"
fi
python3 -c 'import sys, zipfile, glob
z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0])
open(sys.argv[2], "wb").write(z.read("nvidia/nccl/include/nccl.h"))' "$TMP/wheel" "$TMP/nccl.h"
expect_eq "NVIDIA's nccl.h is 2.30.7" "$(grep -c '^#define NCCL_VERSION_CODE 23007$' "$TMP/nccl.h")" 1

# What nccl.h takes from CUDA: cudaStream_t, CUDART_VERSION, size_t (which
# cuda_runtime.h brings), and the half and bfloat16 headers it includes
# (their types are not used in C).
mkdir -p "$TMP/cuda" "$TMP/inc"
cp "$TMP/nccl.h" "$TMP/inc/nccl.h"
cat >"$TMP/cuda/cuda_runtime.h" <<'H'
#include <stddef.h>
#define CUDART_VERSION 13000
typedef struct CUstream_st *cudaStream_t;
H
: >"$TMP/cuda/cuda_fp16.h"
: >"$TMP/cuda/cuda_bf16.h"
cc -std=c11 -Wall -Wextra -Werror -I"$TMP/inc" -I"$TMP/cuda" -o "$TMP/app" \
  "$SRC/tests/mp/dropin/dropin_app.c" -L"$COMPAT" -l:libnccl.so.2 >"$TMP/cc.out" 2>&1
expect_success "a program compiles against NVIDIA's nccl.h and links libnccl.so.2" "$?" "$TMP/cc.out"
LD_LIBRARY_PATH="$COMPAT:$MC_BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 60 \
  "$RUN" -n 3 "$TMP/app" >"$TMP/run.out" 2>&1
expect_success "3 ranks: all-reduce, all-gather and broadcast exact, ncclGetVersion 23007" "$?" \
  "$TMP/run.out"
expect_eq "every rank says ok" "$(grep -c 'rank [0-2]: ok (NCCL_VERSION_CODE 23007)' "$TMP/run.out")" 3
expect_eq "the program runs on meshccl's libnccl.so.2" \
  "$(LD_LIBRARY_PATH="$COMPAT" ldd "$TMP/app" | grep -c "libnccl.so.2 => $COMPAT/libnccl.so.2")" 1
mp_finish

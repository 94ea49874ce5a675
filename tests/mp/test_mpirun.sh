#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Other launchers: Open MPI's mpirun (an all-local job: meshcclCommInitFromEnv
# derives a loopback root address from the job id) and a torchrun-style
# environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; no
# NCCL_COMM_ID, no MESHCCL_RUN) started by a bash loop. Skips (exit 77) when
# mpirun is missing, unless CI=true.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_init

# --- torchrun-style ----------------------------------------------------------
port=$(free_port)
T0_MS=$(now_ms)
for r in 0 1 2 3; do
  bg "t$r" env RANK="$r" WORLD_SIZE=4 LOCAL_RANK="$r" LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$port" "$T/mp_init" env --launcher torchrun --root-prefix "127.0.0.1:$port"
done
for r in 0 1 2 3; do wait_bg "t$r" 30; done
for r in 0 1 2 3; do
  rcv="RC_t$r"
  expect_success "torchrun-style env, rank $r: exit 0 (launcher torchrun, root MASTER_ADDR:MASTER_PORT)" \
    "${!rcv}" "$TMP/t$r.out"
done

# --- derived root ports -----------------------------------------------------
# For all-local Open MPI and Slurm jobs the root port is derived from the job
# id. It must lie outside the kernel's ephemeral range: there, a client socket
# of any program (or one in TIME_WAIT, for 60 s) can hold the port, and rank 0
# then waits for it (seen: mpirun -np 4 taking 22 s instead of 40 ms).
read -r eph_lo eph_hi </proc/sys/net/ipv4/ip_local_port_range
inside=""
for job in $(seq 1 50); do
  addr=$(env SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_NUM_NODES=1 SLURM_JOB_ID="$job" \
    SLURM_STEP_ID=0 "$T/mp_init" rootaddr 2>&1)
  port=${addr##*:}
  case "$addr" in 127.0.0.1:[0-9]*) ;; *) inside="$inside job$job=$addr" ;; esac
  if [ "${port:-0}" -ge "$eph_lo" ] 2>/dev/null && [ "$port" -le "$eph_hi" ]; then
    inside="$inside job$job:$port"
  fi
done
expect_eq "derived root ports of 50 Slurm job ids avoid the ephemeral range $eph_lo-$eph_hi" \
  "${inside:-none inside}" "none inside"

# --- mpirun ------------------------------------------------------------------
if ! command -v mpirun >/dev/null 2>&1; then
  [ "$FAILED" -ne 0 ] && mp_finish
  skip_or_fail "mpirun not found (Debian: apt-get install openmpi-bin)"
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
# A busy derived port (see above) makes rank 0 wait for it: fail with the
# library's "port stayed in use" message after 20 s rather than hit the guard.
export MESHCCL_INIT_TIMEOUT=20
for n in 4 1; do
  t0=$(now_ms)
  timeout 40 mpirun --allow-run-as-root --oversubscribe -np "$n" \
    "$T/mp_init" env --launcher openmpi --root-prefix 127.0.0.1: >"$TMP/out" 2>&1
  rc=$?
  expect_success "mpirun -np $n: exit 0 ($(($(now_ms) - t0)) ms)" "$rc" "$TMP/out"
  expect_eq "mpirun -np $n: every rank ok (launcher openmpi, loopback root)" \
    "$(grep -c '^rank [0-9]* of '"$n"': ok (openmpi)$' "$TMP/out")" "$n"
done

mp_finish

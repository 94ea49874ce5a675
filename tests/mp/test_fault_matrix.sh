#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A few rows of the fault matrix (tests/faults/fault_matrix.py --quick; the
# whole matrix is `make faults`), each with its exact outcome: every survivor
# reports within its bound, names the cause, nothing hangs and nothing is
# left in /dev/shm:
#   - a rank SIGKILLed mid-collective over P2P (cross-memory attach), 4 ranks;
#   - a rank SIGKILLed in transport set-up (MESHCCL_FAULT_INIT=connect:kill,
#     after its round-1 messages) over SHM, 4 ranks: the segments it created
#     for its peers are removed by them;
#   - a rank SIGSTOPped mid-collective over SHM and over NET (loopback), 2
#     ranks: its peer fails after MESHCCL_NET_TIMEOUT (3 s) naming it (on SHM
#     because its process is stopped, on NET because nothing moved);
#   - a rank SIGSTOPped after the bootstrap (peers:stop), 2 ranks: its peer
#     fails at the bootstrap's init deadline (MESHCCL_INIT_TIMEOUT + 3 s).
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_net_timeout
SRC=${MC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}

timeout 300 python3 "$SRC/tests/faults/fault_matrix.py" "$MC_BUILD" --quick >"$TMP/m.out" 2>&1
rc=$?
sed 's/^/# /' "$TMP/m.out"
expect_eq "fault matrix (--quick): exit 0 (no hang, nothing left in /dev/shm)" "$rc" 0

# row FAULT STAGE RANKS TRANSPORT MAX_S ERE: the row's survivors took at most
# MAX_S seconds and the first one said ERE; no hang, no /dev/shm leftover.
row() {
  local line t
  line=$(grep -E "^\| $1 \| $2 \| $3 \| $4 \| " "$TMP/m.out")
  t=$(sed -E 's/^([^|]*\|){5} ([0-9.]+) s \|.*/\2/' <<<"$line")
  if [[ "$line" =~ \|\ no\ \|\ 0\ \|$ ]] && grep -Eq -- "$6" <<<"$line" &&
    [ -n "$t" ] && awk -v t="$t" -v m="$5" 'BEGIN { exit !(t <= m) }'; then
    ok "$1 $2, $3 ranks, $4: every survivor reported within $5 s ($t s), no hang, /dev/shm clean"
  else
    not_ok "$1 $2, $3 ranks, $4 (within $5 s: $6)"
    echo "#   got: ${line:-no row}"
  fi
}
row kill mid-coll 4 P2P 5 "AllReduce: rank 0: (peer rank 3 \(pid [0-9]+ on [^)]+\) exited|the P2P connection (to|from) rank [13] )"
row kill connect 4 SHM 5 "init failed: remote process exited or there was a network error: Bootstrap: rank 0: rank 3 \(pid\) left before i"
row stop mid-coll 2 SHM 8 "AllReduce: rank 0: peer rank 1 \(pid [0-9]+ on [^)]+\) is stopped \(SIGSTOP, or a debugger\) and this rank waited [3-9]\.[0-9]"
row stop mid-coll 2 NET 8 "AllReduce: rank 0: the NET connection (to|from) rank 1 \([^)]*\) failed: NET/Socket: nothing moved (to|from) rank"
row stop post-boot 2 P2P 13 "init failed: timeout: Bootstrap: rank 0: in a bootstrap allgather with rank 1 \(pid\): timed out after 8000 ms"
mp_finish

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The log lines an operator compares with NCCL's, on a 2-rank job (mp_logs.c):
# * NCCL_DEBUG_SUBSYS=COLL: one line per call in NCCL 2.30's shape
#   ("host:pid:tid [dev] NCCL INFO AllReduce: opCount 0 sendbuff ... stream
#   (nil)"), byte for byte what mp_logs expects from its own arguments: the
#   broadcast's root, send/recv with the peer as root, opCount advancing per
#   call and once for a group; with COLL off no such line.
# * Transports forced each way (default, MESHCCL_P2P_CMA=1, NCCL_P2P_DISABLE=1,
#   NCCL_SHM_DISABLE=1, both): every "Channel" line names the transport the
#   process really uses (its /dev/shm mappings: P2P's counters or SHM's FIFO
#   for exactly that sender, receiver, channel and connection; none for NET),
#   one line per channel, peer and direction; the per-peer "Transport:" line
#   says the same; "Loading ... topology" once per process; "Using network".
#   Two ranks as threads of one process: "via P2P/direct pointer".
# * "NCCL version" from rank 0 only.
# * "Init START" and "Init COMPLETE" name the same cudaDev for every rank,
#   with devices chosen automatically and explicitly (MESHCCL_DEVICE).
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_logs mp_coll
export NCCL_DEBUG=INFO
unset NCCL_DEBUG_SUBSYS NCCL_P2P_DISABLE NCCL_SHM_DISABLE MESHCCL_P2P_CMA NCCL_P2P_LEVEL

PREFIX_RE='^[^ :]+:[0-9]+:[0-9]+ \[[0-9]+\] NCCL INFO '

# job DIR ENV...: a 2-rank mp_logs job logging to DIR/log.<pid>.
job() {
  local dir=$1
  shift
  mkdir -p "$dir"
  env "$@" NCCL_DEBUG_FILE="$dir/log.%p" timeout 120 "$RUN" -n 2 "$T/mp_logs" "$dir" \
    >"$dir/job.out" 2>&1
}

# ------------------------------------------------------------ COLL lines
D="$TMP/coll"
job "$D" NCCL_DEBUG_SUBSYS=COLL
expect_success "COLL: the job succeeds" "$?" "$D/job.out"
n_logs=0
for e in "$D"/expect.*; do
  pid=${e##*.}
  log="$D/log.$pid"
  n_logs=$((n_logs + 1))
  grep -E 'NCCL INFO [A-Za-z]+: opCount ' "$log" >"$D/coll.$pid"
  expect_eq "COLL pid $pid: every line has NCCL's prefix with this pid" \
    "$(grep -cvE "^[^ :]+:$pid:[0-9]+ \[[0-9]+\] NCCL INFO " "$D/coll.$pid")" 0
  sed -E "s/$PREFIX_RE//" "$D/coll.$pid" >"$D/got.$pid"
  if diff "$e" "$D/got.$pid" >"$D/diff.$pid"; then
    ok "COLL pid $pid: the lines are NCCL's, argument for argument ($(wc -l <"$e") calls)"
  else
    not_ok "COLL pid $pid: the lines are NCCL's, argument for argument"
    show "$D/diff.$pid"
  fi
done
expect_eq "COLL: both ranks wrote their expectations" "$n_logs" 2
expect_grep "COLL: a broadcast from root 1" "$D/got.$pid" '^Broadcast: opCount 1 .* root 1 comm '
expect_grep "COLL: the grouped send shares its opCount" "$D/got.$pid" '^Send: opCount 2 sendbuff \(nil\) '
expect_grep "COLL: opCount goes on after the group" "$D/got.$pid" '^AllReduce: opCount 3 '

D="$TMP/nocoll"
job "$D" NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET
expect_success "COLL off: the job succeeds" "$?" "$D/job.out"
expect_eq "COLL off: no collective is logged" "$(cat "$D"/log.* | grep -c ': opCount ')" 0

# ------------------------------------------------------- transport lines
# check_transport NAME VIA KIND ENV...: every Channel line says "via VIA"
# and the mappings show KIND (p2p, shm, or none for NET) for each of them.
check_transport() {
  local name=$1 via=$2 kind=$3
  shift 3
  local dir="$TMP/tp-${name//[^A-Za-z0-9]/_}" e pid log bad=0 want_uses
  job "$dir" NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET,GRAPH "$@"
  expect_success "$name: the job succeeds" "$?" "$dir/job.out"
  if grep -q 'refuses cross-memory attach' "$dir"/log.* && [ "$kind" = p2p ]; then
    echo "# $name: the kernel refuses cross-memory attach here: SHM expected instead"
    via=SHM/direct/direct kind=shm
  fi
  want_uses=${via%%/*}
  for e in "$dir"/expect.*; do
    pid=${e##*.}
    log="$dir/log.$pid"
    sed -nE "s/${PREFIX_RE}(Channel [0-9]+\/[0-9]+ : .* -> .*)$/\1/p" "$log" >"$dir/ch.$pid"
    [ -s "$dir/ch.$pid" ] || {
      echo "#   pid $pid: no Channel line"
      bad=1
    }
    if [ -n "$(sort "$dir/ch.$pid" | uniq -d)" ]; then
      echo "#   pid $pid: a Channel line is repeated:"
      sort "$dir/ch.$pid" | uniq -d | sed 's/^/#     /'
      bad=1
    fi
    while IFS= read -r line; do
      if ! [[ "$line" =~ ^Channel\ ([0-9]+)/([0-9]+)\ :\ ([0-9]+)\[[0-9]+\]\ -\>\ ([0-9]+)\[[0-9]+\]\ (\[send\]\ |\[receive\]\ )?via\ (.*)$ ]]; then
        echo "#   pid $pid: not NCCL's shape: $line"
        bad=1
        continue
      fi
      local ch=$((10#${BASH_REMATCH[1]})) conn=${BASH_REMATCH[2]} src=${BASH_REMATCH[3]}
      local dst=${BASH_REMATCH[4]} side=${BASH_REMATCH[5]} got=${BASH_REMATCH[6]}
      if [ "$got" != "$via" ]; then
        echo "#   pid $pid: '$line' is not via $via"
        bad=1
      fi
      if [ "$kind" = none ]; then
        [ -n "$side" ] || {
          echo "#   pid $pid: a NET line without [send]/[receive]: $line"
          bad=1
        }
        if grep -q " $src $dst $ch $conn\$" "$dir/maps.$pid"; then
          echo "#   pid $pid: '$line' but the process maps a segment for it"
          bad=1
        fi
      elif ! grep -qx "$kind $src $dst $ch $conn" "$dir/maps.$pid"; then
        echo "#   pid $pid: '$line' but no $kind segment $src->$dst channel $ch conn $conn is mapped"
        bad=1
      fi
    done <"$dir/ch.$pid"
    if [ "$kind" = none ] && [ -s "$dir/maps.$pid" ]; then
      echo "#   pid $pid: NET only, yet it maps: $(tr '\n' ';' <"$dir/maps.$pid")"
      bad=1
    fi
    if [ "$(grep -cE "${PREFIX_RE}Transport: rank [0-9]+ -> rank [0-9]+ uses $want_uses " "$log")" != 1 ] ||
      [ "$(grep -c 'Transport: rank' "$log")" != 1 ]; then
      echo "#   pid $pid: expected one 'Transport: ... uses $want_uses' line for its one peer:"
      grep 'Transport: rank' "$log" | sed 's/^/#     /'
      bad=1
    fi
    if [ "$(grep -cE "${PREFIX_RE}Loading (unnamed )?topology" "$log")" != 1 ]; then
      echo "#   pid $pid: 'Loading ... topology' not printed exactly once"
      bad=1
    fi
    grep -qE "${PREFIX_RE}Using network " "$log" || {
      echo "#   pid $pid: no 'Using network' line"
      bad=1
    }
  done
  if [ "$bad" = 0 ]; then
    ok "$name: every Channel line says via $via, as the process maps it ($kind)"
  else
    not_ok "$name: every Channel line says via $via, as the process maps it ($kind)"
  fi
}

check_transport "default (P2P between processes off)" SHM/direct/direct shm
check_transport "MESHCCL_P2P_CMA=1" P2P/CMA p2p MESHCCL_P2P_CMA=1
check_transport "NCCL_P2P_DISABLE=1" SHM/direct/direct shm NCCL_P2P_DISABLE=1
check_transport "NCCL_SHM_DISABLE=1" NET/Socket/0 none NCCL_SHM_DISABLE=1
check_transport "NCCL_SHM_DISABLE=1 MESHCCL_P2P_CMA=1" P2P/CMA p2p NCCL_SHM_DISABLE=1 \
  MESHCCL_P2P_CMA=1
check_transport "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1" NET/Socket/0 none NCCL_P2P_DISABLE=1 \
  NCCL_SHM_DISABLE=1

# Two ranks as threads of one process: P2P by plain pointers, said the same way.
NCCL_DEBUG_SUBSYS=INIT,P2P timeout 60 "$T/mp_coll" --threads 2 --colls allreduce --types int32 \
  --sizes 7 >"$TMP/threads.out" 2>&1
expect_success "threads: the job succeeds" "$?" "$TMP/threads.out"
grep -E 'NCCL INFO Channel [0-9]+/[0-9]+ : [0-9]+\[[0-9]+\] -> ' "$TMP/threads.out" >"$TMP/threads.ch"
expect_eq "threads: Channel lines, every one via P2P/direct pointer" \
  "$([ -s "$TMP/threads.ch" ] && echo some)/$(grep -vc ' via P2P/direct pointer$' "$TMP/threads.ch")" \
  "some/0"
expect_eq "threads: no Channel line is repeated" "$(sort "$TMP/threads.ch" | sed -E 's/^[^ ]+ //' | uniq -d)" ""
expect_eq "threads: each rank's reason line says P2P" \
  "$(grep -cE 'Transport: rank [01] -> rank [01] uses P2P \(rank [01] decides: path ' "$TMP/threads.out")" 2
# "NCCL version" is rank 0's line, as NCCL's ncclCommInitRankFunc prints it
# (3 ranks, at VERSION and at INFO).
for lvl in VERSION INFO; do
  NCCL_DEBUG=$lvl timeout 60 "$RUN" -n 3 "$MC_BUILD/bin/meshccl-hello" -q >"$TMP/version" 2>&1
  expect_eq "NCCL_DEBUG=$lvl: one \"NCCL version\" line, from rank 0" \
    "$(grep 'NCCL version 2\.' "$TMP/version" | sed -E 's/^\[([0-9]+)\].*/\1/' | tr '\n' ' ')" "0 "
done

# Init START / Init COMPLETE: one of each per rank, naming the same device
# (automatic devices are resolved during init: rank r of 3 on one host gets r).
init_devs() { # FILE WHAT -> "rank:dev " per line of WHAT, in rank order
  grep -E "NCCL INFO .* rank [0-9]+ nranks 3 cudaDev [0-9]+ .* - $2\$" "$1" |
    sed -E 's/.* rank ([0-9]+) nranks 3 cudaDev ([0-9]+) .*/\1:\2/' | sort | tr '\n' ' '
}
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 60 "$RUN" -n 3 "$MC_BUILD/bin/meshccl-hello" -q \
  >"$TMP/initdev" 2>&1
expect_eq "automatic devices: Init START names each rank's device" \
  "$(init_devs "$TMP/initdev" 'Init START')" "0:0 1:1 2:2 "
expect_eq "... and Init COMPLETE the same" "$(init_devs "$TMP/initdev" 'Init COMPLETE')" "0:0 1:1 2:2 "
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 60 "$RUN" -n 3 bash -c \
  'MESHCCL_DEVICE=$((2 - RANK)) exec "$0" "$@"' "$MC_BUILD/bin/meshccl-hello" -q >"$TMP/initdev2" 2>&1
expect_eq "explicit devices: Init START names each rank's" \
  "$(init_devs "$TMP/initdev2" 'Init START')" "0:2 1:1 2:0 "
expect_eq "... and Init COMPLETE the same" "$(init_devs "$TMP/initdev2" 'Init COMPLETE')" "0:2 1:1 2:0 "

mp_finish

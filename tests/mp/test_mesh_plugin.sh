#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libnccl-net-mesh.so as NCCL would use it, on a triangle of hosts cabled
# directly to each other (three network namespaces, one /24 per link:
# A-B .12, A-C .13, B-C .23, IP forwarding off) plus a management bridge
# that the mesh must leave alone (NCCL_SOCKET_IFNAME=mcm0, as NCCL's
# bootstrap would use it). For every exported version, v8 to v12, one
# mesh_plugin_driver per host (it stands for NCCL: dlopen, the version's
# table, a logger) connects to both others and accepts from both, and
# exchanges 0 B .. 8 MiB bit-exact both ways; then from the logger's lines:
#   - every line of the plugin reached NCCL's logger with the NET flag, and
#     the init lines (the mesh NIC choice) with INIT too;
#   - the mesh NICs are the two link veths, never the management one, and
#     each connection left from the local NIC on the subnet it shares with
#     the peer, each accepted connection arrived on a link NIC.
# Secrets: v8 runs without MESHCCL_SECRET (unauthenticated, said once by a
# WARN), v11 keys its connections with NCCL's commId, the others with
# MESHCCL_SECRET; a driver started with another MESHCCL_SECRET is refused
# (v10, v12). Needs root and iproute2: skipped otherwise, failed under CI.
# Only addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"

PLUGIN="$MC_BUILD/lib/libnccl-net-mesh.so"
DRIVER="$T/mesh_plugin_driver"
for p in "$PLUGIN" "$DRIVER"; do
  [ -e "$p" ] || {
    not_ok "built: $p"
    exit 1
  }
done
ns_require "the mesh plugin netns test needs root and ip"
ns_init mp 100 100

# drive NAME VERSION SECRET: one driver per host, all ranks; SECRET "" leaves
# MESHCCL_SECRET unset. Logs in $TMP/NAME.<rank>.out.
drive() {
  local name=$1 v=$2 secret=$3
  mkdir -p "$TMP/$name"
  NS_T0=$(now_ms)
  NS_PIDS=()
  for i in 1 2 3; do
    ns_exec "$i" env -u MESHCCL_SECRET ${secret:+MESHCCL_SECRET=$secret} \
      NCCL_SOCKET_IFNAME=mcm0 timeout 150 "$DRIVER" "$PLUGIN" "$v" $((i - 1)) 3 "$TMP/$name" \
      >"$TMP/$name.$((i - 1)).out" 2>&1 &
    NS_PIDS+=($!)
  done
  ns_wait
}

show_run() {
  local f
  for f in "$TMP/$1".*.out; do
    grep -E '^not ok' "$f" | head -5 | sed 's/^/#   /'
    show "$f"
  done
}

# check_flags NAME: every logger line has the NET bit; the NIC choice (an
# init line) has INIT and NET.
check_flags() {
  local name=$1 r f bad=0 n_lines no_net init_line flags
  for r in 0 1 2; do
    f="$TMP/$name.$r.out"
    n_lines=$(grep -c '^LOG ' "$f")
    no_net=$(grep -E '^LOG ' "$f" | while read -r _ _ fl _; do
      flags=$((${fl#flags=}))
      [ $((flags & 0x10)) != 0 ] || echo x
    done | wc -l)
    init_line=$(grep -E '^LOG INFO flags=0x[0-9a-f]+ [a-z_]+\.c:[0-9]+ NET/Mesh : Using' "$f" | head -1)
    flags=$(sed -n 's/^LOG INFO flags=\(0x[0-9a-f]*\) .*/\1/p' <<<"$init_line")
    if [ "$n_lines" -lt 5 ] || [ "$no_net" != 0 ] || [ -z "$flags" ] ||
      [ $((flags & 0x11)) != $((0x11)) ]; then
      echo "#   rank $r: $n_lines logger lines, $no_net without NET, NIC line flags ${flags:-none}"
      bad=1
    fi
  done
  return $bad
}

# check_links NAME: the mesh NICs are the two link veths (never mcm0); each
# connection left from the local NIC on the peer's subnet; as many accepted:
# 6 of each (the logger's INFO lines).
check_links() { ns_check_links "$1" "1 2 3" -6 '^LOG INFO .*'; }

if ! ns_make_hosts 3 "1-2 1-3 2-3"; then
  not_ok "creating the triangle: 3 namespaces, 3 link veth pairs, a management bridge"
  mp_finish
fi
ok "triangle: 10.$X.{12,13,23}.0/24 links, management $MGMT.0/24, ip_forward off"

for v in 8 9 10 11 12; do
  case $v in
  8 | 11) secret="" ;;
  *) secret="job-secret-$$" ;;
  esac
  name="v$v"
  if drive "$name" "$v" "$secret"; then
    ok "v$v: 3 hosts, every pair both ways, 0 B .. 8 MiB bit-exact ($JOB_MS ms)"
  else
    not_ok "v$v: exchange (exit codes ${JOB_RCS[*]})"
    show_run "$name"
    continue
  fi
  check_flags "$name"
  check "v$v: every plugin line reached the logger with NET, the NIC choice with INIT too"
  check_links "$name"
  check "v$v: 6 connections, each on the link NIC of the shared subnet, 6 accepted on link NICs"
  case $v in
  8)
    expect_grep "v8 without MESHCCL_SECRET: said once that connections are not authenticated" \
      "$TMP/$name.0.out" '^LOG WARN flags=0x[f]+ .*MESHCCL_SECRET is unset .* not authenticated'
    ;;
  11)
    expect_grep "v11 without MESHCCL_SECRET: the secret comes from NCCL's commId" \
      "$TMP/$name.0.out" '^LOG INFO flags=0x11 .*authenticated with a secret derived from NCCL.s commId'
    ;;
  *)
    expect_grep "v$v: authenticated with MESHCCL_SECRET" "$TMP/$name.0.out" \
      '^LOG INFO flags=0x11 .*authenticated with MESHCCL_SECRET'
    ;;
  esac
done

# Another secret: host 1 listens with one, host 2 connects with another.
for v in 10 12; do
  name="refuse$v"
  mkdir -p "$TMP/$name"
  ns_exec 1 env MESHCCL_SECRET=one NCCL_SOCKET_IFNAME=mcm0 timeout 60 \
    "$DRIVER" "$PLUGIN" "$v" 0 2 "$TMP/$name" refuse-listen >"$TMP/$name.0.out" 2>&1 &
  p0=$!
  ns_exec 2 env MESHCCL_SECRET=two NCCL_SOCKET_IFNAME=mcm0 timeout 60 \
    "$DRIVER" "$PLUGIN" "$v" 1 2 "$TMP/$name" refuse-connect >"$TMP/$name.1.out" 2>&1 &
  p1=$!
  wait "$p0"
  rc0=$?
  wait "$p1"
  rc1=$?
  if [ "$rc0" = 0 ] && [ "$rc1" = 0 ]; then
    ok "v$v: a driver with another MESHCCL_SECRET is refused, nothing accepted"
  else
    not_ok "v$v: refusal (exit codes $rc0 $rc1)"
    show_run "$name"
  fi
  expect_grep "v$v: the listener's refusal reached the logger as a WARN" "$TMP/$name.0.out" \
    '^LOG WARN flags=0x[f]+ .*NET/Mesh: refused connection from 10\.'"$X"'\.12\.2'
done
# Without a logger (NULL), the plugin logs as meshccl does, under NCCL_DEBUG.
name="nolog"
mkdir -p "$TMP/$name"
for i in 1 2; do
  ns_exec "$i" env MESHCCL_SECRET=s MESH_DRIVER_LOGGER=none NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=NET NCCL_SOCKET_IFNAME=mcm0 timeout 60 "$DRIVER" "$PLUGIN" 12 $((i - 1)) 2 \
    "$TMP/$name" >"$TMP/$name.$((i - 1)).out" 2>&1 &
  eval "pn$i=\$!"
done
wait "$pn1"
rc0=$?
wait "$pn2"
rc1=$?
if [ "$rc0" = 0 ] && [ "$rc1" = 0 ] && ! grep -q '^LOG ' "$TMP/$name.0.out"; then
  ok "v12 with a NULL logger: exchange done, no line through a logger"
else
  not_ok "v12 with a NULL logger (exit codes $rc0 $rc1)"
  show_run "$name"
fi
expect_grep "v12 with a NULL logger: meshccl's own NCCL INFO lines name the link NIC" \
  "$TMP/$name.0.out" 'NCCL INFO NET/Mesh: connection [0-9a-f]+ to host [^ ]+( \([^)]*\))? via mcl2 10\.'"$X"'\.12\.1'

grep -hE 'ok - v12 rank 0: (getProperties|[0-9]+ sizes)|NET/Mesh: connection' "$TMP/v12.0.out" |
  head -4 | sed 's/^/#   /'
mp_finish

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Liveness and failure of a running batch: while the executor waits
 * (coll_exec.c), every few milliseconds it checks the abort flag, errors
 * posted on the connections (by the proxy, or by a peer that failed), the
 * processes of same-host peers (gone, or stopped past MESHCCL_NET_TIMEOUT;
 * pids only in this rank's PID namespace, mc_peer_same_pidns), the NET
 * proxies blocked inside a plugin call, notices of mismatched calls and
 * stray steps (coll_check.c). A failed communicator poisons all its
 * connections, closes its network ones and refuses further operations
 * (mc_coll_comm_fail), so that its other peers learn it within
 * milliseconds.
 */
#include "coll/coll_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

/* Waiting this long, a rank also receives first steps on NET connections it
 * does not use (stray steps): a receive posted there stays posted, and a
 * peer that closes the connection then makes its net report an error. */
#define STRAY_NET_MS 1000
/* After a NET connection failed soon after its steps last moved, a rank looks
 * for a peer's mismatch notice until nothing has moved for this long (and at
 * most this long after the failure) before it reports the failure (health).
 * A failure seen after waiting longer than this (a net's own time bound:
 * MESHCCL_NET_TIMEOUT, MESHCCL_MESH_ROUTE_TIMEOUT_MS, the Mesh net's 1 s
 * judgement of a relayed close) is reported at once, so that those bounds
 * hold as documented: counted from the failure, a net's bound just under
 * this would have doubled. */
#define NOTICE_WAIT_MS 1000

static bool pid_gone(int pid)
{
  return (pid > 0) && (kill(pid, 0) != 0) && (errno == ESRCH);
}

/* Nothing of c waits on its peer right now: a send whose every step the
 * receiver took, or a receive whose next step has arrived (in this process:
 * with cross-memory attach the data stays in the peer's). A peer that
 * exits then (it finished its part: a broadcast's last ranks return while
 * the root still waits for the chain's check over the network) fails
 * nothing; if the task needs more of that peer, the connection waits again
 * and the peer's exit counts. */
static bool peer_owes_nothing(const struct mc_conn *c)
{
  if (c->is_send)
    return __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE) >= c->step;
  return !c->remote_read && mc_conn_recv_ready(c);
}

ncclResult_t mc_coll_conn_health(const struct mc_task *t, const struct mc_conn *c)
{
  struct ncclComm *comm = t->op->comm;
  const struct mc_peer_info *p;
  uint32_t e;

  if ((c == NULL) || (!c->is_send && t->recv_done))
    return ncclSuccess;
  p = &comm->peers[c->peer];
  e = mc_conn_error(c);
  if ((e != 0) && !c->is_send && mc_conn_recv_ready(c))
    e = 0; /* what arrived is consumed first; the failure counts when it is needed */
  if ((e != 0) && (c->kind != MC_TOPO_TRANSPORT_NET)) {
    /* A peer that stopped on a mismatch left a notice with the error. */
    char info[MC_CONN_ERR_INFO_BYTES];
    size_t n = mc_conn_error_info(c, info);
    struct mc_coll_notice notice;
    struct mc_coll_sig named;
    if ((n >= MC_NOTICE_BYTES) && mc_coll_notice_parse(info, MC_NOTICE_BYTES, &notice)) {
      ncclResult_t res = mc_coll_notice_fail(&t->op->sig, &notice, &named);
      mc_coll_note_mismatch(t->op, &named);
      return res;
    }
  }
  if ((e != 0) && (c->kind != MC_TOPO_TRANSPORT_NET) && (mc_conn_abort_rank(c) == c->peer))
    return MC_FAIL(ncclRemoteError,
                   "%s: rank %d: peer rank %d (pid %d on %s) aborted its communicator "
                   "(ncclCommAbort); the %s connection %s it is closed",
                   mc_coll_name(t->op->kind), comm->rank, c->peer, p->pid, p->host,
                   mc_topo_transport_str(c->kind), c->is_send ? "to" : "from");
  if (e != 0)
    return MC_FAIL((c->kind == MC_TOPO_TRANSPORT_NET) ? (ncclResult_t)e : ncclRemoteError,
                   "%s: rank %d: the %s connection %s rank %d (%s, pid %d) failed%s%s",
                   mc_coll_name(t->op->kind), comm->rank, mc_topo_transport_str(c->kind),
                   c->is_send ? "to" : "from", c->peer, p->host, p->pid,
                   (c->error_text[0] != '\0') ? ": " : "", c->error_text);
  /* Only a pid of this PID namespace is that process here (stage_peers). */
  if ((c->kind != MC_TOPO_TRANSPORT_NET) && !peer_owes_nothing(c) &&
      mc_peer_same_pidns(&comm->peers[comm->rank], p) && pid_gone(p->pid))
    return MC_FAIL(ncclRemoteError, "%s: rank %d: peer rank %d (pid %d on %s) exited",
                   mc_coll_name(t->op->kind), comm->rank, c->peer, p->pid, p->host);
  return ncclSuccess;
}

/* t's communicator was aborted (ncclCommAbort from another thread). */
static ncclResult_t task_aborted(const struct mc_task *t)
{
  struct ncclComm *comm = t->op->comm;

  if (__atomic_load_n(&comm->life.abort_flag, __ATOMIC_ACQUIRE))
    return MC_FAIL(ncclInvalidUsage, "%s: communicator %p was aborted", mc_coll_name(t->op->kind),
                   (void *)comm);
  return ncclSuccess;
}

/* A failure seen on t's connections or peers, or the communicator's abort. */
static ncclResult_t task_health(const struct mc_task *t)
{
  MC_CHECK(task_aborted(t));
  if (t->algo->task_health != NULL)
    return t->algo->task_health(t);
  for (int i = 0; i < t->n_send; i++)
    MC_CHECK(mc_coll_conn_health(t, t->send[i]));
  for (int i = 0; i < t->n_recv; i++)
    MC_CHECK(mc_coll_conn_health(t, t->recv[i]));
  return ncclSuccess;
}

#define CONNS_PER_CHANNEL (4 + 2 * MC_TREE_MAX_ARITY)

int mc_coll_comm_channel_conns(const struct ncclComm *comm)
{
  return (comm->data.channels != NULL) ? comm->data.n_channels * CONNS_PER_CHANNEL : 0;
}

/* The channels' connections, then each table's own (its n_conns, in
 * MC_ALGO_LIST order). */
int mc_coll_comm_conns(const struct ncclComm *comm)
{
  int n = mc_coll_comm_channel_conns(comm);

  for (int a = 0; a < mc_coll_n_algos; a++)
    n += mc_coll_algo_n_conns(comm, mc_coll_algos[a]);
  return n;
}

struct mc_conn *mc_coll_comm_conn(struct ncclComm *comm, int i)
{
  int n_ch = mc_coll_comm_channel_conns(comm);
  struct mc_conn *c = NULL;

  if (i < n_ch) {
    struct mc_channel *ch = &comm->data.channels[i / CONNS_PER_CHANNEL];
    int j = i % CONNS_PER_CHANNEL;
    struct mc_conn *fixed[4] = {&ch->send, &ch->recv, &ch->tree_send_up, &ch->tree_recv_up};
    if (j < 4)
      c = fixed[j];
    else
      c = ((j - 4) % 2 == 0) ? &ch->tree_send_down[(j - 4) / 2] : &ch->tree_recv_down[(j - 4) / 2];
  } else {
    i -= n_ch;
    for (int a = 0; (a < mc_coll_n_algos) && (i >= 0); a++) {
      int n = mc_coll_algo_n_conns(comm, mc_coll_algos[a]);
      if (i < n)
        c = mc_coll_algos[a]->conn(comm, i);
      i -= n;
    }
  }
  return ((c != NULL) && (c->ctrl != NULL)) ? c : NULL;
}

static void poison_conn(struct ncclComm *comm, struct mc_conn *c)
{
  if ((c != NULL) && __atomic_load_n(&comm->life.is_aborted, __ATOMIC_ACQUIRE))
    mc_conn_post_abort(c, comm->rank);
  if ((c != NULL) && (mc_conn_error(c) == 0))
    mc_conn_set_error(c, ncclRemoteError);
  /* The failed call returns next, and the user may free its buffers. */
  mc_conn_send_withdraw(c);
}

/* The communicator failed: tell every peer through every connection, close
 * its network connections, and refuse further operations. */
void mc_coll_comm_fail(struct ncclComm *comm, ncclResult_t res)
{
  int expected = ncclSuccess;

  if (!__atomic_compare_exchange_n(&comm->coll.result, &expected, (int)res, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return;
  for (int i = 0; i < mc_coll_comm_conns(comm); i++)
    poison_conn(comm, mc_coll_comm_conn(comm, i));
  mc_comm_free_connections(comm);
  __atomic_store_n(&comm->life.async_result, (int)res, __ATOMIC_RELEASE);
}

/* A proxy thread of the batch blocked inside one plugin call for
 * MESHCCL_NET_TIMEOUT (limit_ns): the watchdog, which runs in that thread,
 * cannot fail the collective, so the rank does (tp_net.c). */
ncclResult_t mc_coll_proxies_wedged(struct mc_coll_batch *b, uint64_t limit_ns,
                                    struct ncclComm **failed)
{
  char text[640] = "NET: the proxy thread was abandoned inside a plugin call (said before)";
  uint64_t now = mc_time_ns();

  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    if (!mc_coll_batch_comm_first(b, i) ||
        !mc_proxy_wedged_check(comm->data.tp.proxy, now, limit_ns, text, sizeof(text)))
      continue;
    *failed = comm;
    return MC_FAIL(ncclRemoteError, "%s", text);
  }
  return ncclSuccess;
}

/* Whether process pid (of this host) is stopped: state T (SIGSTOP) or t (a
 * tracer stopped it) in /proc/<pid>/stat. */
static bool pid_stopped(int pid)
{
  char path[64];
  char buf[512];
  const char *p;
  ssize_t n;
  int fd;

  if (pid <= 0)
    return false;
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  /* "pid (comm) S ...": the name may hold anything, the state follows the last ')' */
  p = strrchr(buf, ')');
  return (p != NULL) && (p[1] == ' ') && ((p[2] == 'T') || (p[2] == 't'));
}

/* Same-host peer rank peer stalled t for waited_s (at least
 * MESHCCL_NET_TIMEOUT) on how: where places it ("" or ", in another PID
 * namespace"), why says what the rank saw, up to "this rank waited". */
static ncclResult_t stall_fail(const struct mc_task *t, int peer, const char *where,
                               const char *why, const char *how, double waited_s)
{
  struct ncclComm *comm = t->op->comm;
  const struct mc_peer_info *p = &comm->peers[peer];

  return MC_FAIL(ncclRemoteError,
                 "%s: rank %d: peer rank %d (pid %d on %s%s) %s this rank waited %.1f s on "
                 "%s (MESHCCL_NET_TIMEOUT=%lld s)%s; docs/TROUBLESHOOTING.md#net-timeout",
                 mc_coll_name(t->op->kind), comm->rank, peer, p->pid, p->host, where, why, waited_s,
                 how, (long long)mc_param_int(MC_P_NET_TIMEOUT),
                 (where[0] != '\0') ? ": it exited, stopped, or has not called the collective"
                                    : "");
}

/* Whether same-host peer r has stalled t for waited_s: its process is
 * stopped (its pid is one of this PID namespace), or, in another PID
 * namespace, it just has not moved. how: what t waits on. */
static ncclResult_t peer_stalled(const struct mc_task *t, int r, const char *how, double waited_s)
{
  struct ncclComm *comm = t->op->comm;
  const struct mc_peer_info *me = &comm->peers[comm->rank];
  const struct mc_peer_info *p = &comm->peers[r];

  /* In another PID namespace (containers sharing /dev/shm) its process
   * cannot be looked at: nothing moving for that long counts as stalled, as
   * for a NET peer (tp_net.c's watchdog). */
  if (!mc_peer_same_pidns(me, p))
    return stall_fail(t, r, ", in another PID namespace", "moved nothing while", how, waited_s);
  if ((p->pid != me->pid) && pid_stopped(p->pid))
    return stall_fail(t, r, "", "is stopped (SIGSTOP, or a debugger) and", how, waited_s);
  return ncclSuccess;
}

/* A same-host peer of t that stalled it (peer_stalled), while the rank has
 * waited waited_s (at least MESHCCL_NET_TIMEOUT) for the batch: the peers of
 * t's P2P and SHM connections, or, for a task that keeps its connections
 * elsewhere (the one-shot: every rank of the host), every other rank of the
 * communicator on this host. */
static ncclResult_t task_stopped_peers(const struct mc_task *t, double waited_s)
{
  struct ncclComm *comm = t->op->comm;
  const struct mc_peer_info *me = &comm->peers[comm->rank];
  char how[64];

  for (int i = 0; i < t->n_send + t->n_recv; i++) {
    const struct mc_conn *c = (i < t->n_send) ? t->send[i] : t->recv[i - t->n_send];
    if ((c == NULL) || (c->kind == MC_TOPO_TRANSPORT_NET) || peer_owes_nothing(c))
      continue;
    snprintf(how, sizeof(how), "its %s connection %s it", mc_topo_transport_str(c->kind),
             c->is_send ? "to" : "from");
    MC_CHECK(peer_stalled(t, c->peer, how, waited_s));
  }
  if (t->n_send + t->n_recv > 0)
    return ncclSuccess;
  for (int r = 0; r < comm->n_ranks; r++)
    if ((r != comm->rank) && (comm->peers[r].host_hash == me->host_hash))
      MC_CHECK(peer_stalled(t, r, "it", waited_s));
  return ncclSuccess;
}

/* A NET connection of one of b's communicators failed. */
static bool batch_net_failed(struct mc_coll_batch *b)
{
  struct mc_coll_batch_it it = {0};
  const struct mc_conn *c;

  while ((c = mc_coll_batch_conn_next(b, &it)) != NULL)
    if ((c->kind == MC_TOPO_TRANSPORT_NET) && (mc_conn_error(c) != 0))
      return true;
  return false;
}

/* Every few ms of waiting (now, waited_s of it): the tasks' connections,
 * then the others (NET ones after STRAY_NET_MS of waiting). A peer that
 * stopped on a mismatch closes its NET connections once its notices left:
 * this rank may see the close before the notice, which can also come
 * through another peer (one that heard of the mismatch first). So from the
 * first NET failure (*net_down_at) the rank keeps running, looking for a
 * notice among the steps that arrived (its tasks may be blocked on a send),
 * until nothing has moved for NOTICE_WAIT_MS (waited_s) or NOTICE_WAIT_MS
 * after the failure, whichever comes first, before it reports the failure;
 * at once when nothing had moved for NOTICE_WAIT_MS already when that
 * failure was seen (*down_waited_s): notices are looked for from
 * STRAY_NET_MS of waiting on, and the peer's close comes after its notices,
 * so they would be here; that failure is then a net's time bound, which
 * must not be exceeded. */
ncclResult_t mc_coll_health(struct mc_coll_batch *b, struct mc_coll_plan *pl,
                            const struct mc_coll_plan *all, double now, double waited_s,
                            bool check_stopped, double *net_down_at, double *down_waited_s,
                            struct ncclComm **failed)
{
  ncclResult_t res;
  struct mc_op *op = NULL;
  bool grace;

  if ((*net_down_at == 0) && batch_net_failed(b)) {
    *net_down_at = now;
    *down_waited_s = waited_s;
  }
  if ((all != NULL) && ((*net_down_at != 0) || (waited_s * 1e3 >= STRAY_NET_MS)) &&
      mc_coll_notice_scan(b, &res, &op)) {
    *failed = op->comm;
    return res;
  }
  grace = (*net_down_at != 0) && (now - *net_down_at < NOTICE_WAIT_MS * 1e-3) &&
          (*down_waited_s < NOTICE_WAIT_MS * 1e-3) && (waited_s < NOTICE_WAIT_MS * 1e-3);
  for (int i = 0; i < pl->n_tasks; i++) {
    struct mc_task *t = &pl->tasks[i];
    if (!t->done && ((res = grace ? task_aborted(t) : task_health(t)) != ncclSuccess)) {
      *failed = t->op->comm;
      return res;
    }
    if (!t->done && !grace && check_stopped &&
        ((res = task_stopped_peers(t, waited_s)) != ncclSuccess)) {
      *failed = t->op->comm;
      return res;
    }
  }
  if ((all != NULL) && mc_coll_stray_check(b, all, waited_s * 1e3 >= STRAY_NET_MS, &res, &op)) {
    *failed = op->comm;
    return res;
  }
  return ncclSuccess;
}

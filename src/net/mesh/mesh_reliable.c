/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Mesh net's reliability layer: the comm NCCL drives (isend, irecv,
 * test) over the socket net's comm (net_socket_io.c), which it replaces by a
 * new one when the link under it goes down, without losing or duplicating a
 * byte (protocol in mesh_int.h):
 *   - every message has a sequence number, implicit in posting order; the
 *     receiver acknowledges, cumulatively, the messages it received whole;
 *   - a send completes (test() done) only once acknowledged, so that its
 *     buffer, which NCCL keeps until then, can be sent again;
 *   - a receive completes only once it and every earlier one are complete,
 *     so that nothing the caller was given is ever written again;
 *   - a break (a socket error: TCP_USER_TIMEOUT or keepalive expired, a
 *     reset; the local interface's carrier lost; the peer resuming first)
 *     keeps every request; the sender asks mesh_connect.c for a new route
 *     on the current view (through relays if needed) with a resume
 *     handshake, the receiver waits for it (the handshake thread files it
 *     under this comm), sends its next expected number first, re-posts its
 *     pending receives in order (a partial one is simply received again);
 *     the sender resends from that number;
 *   - a sender on a relayed route whose cable to the peer's host is up again
 *     moves back onto it the same way, without a break: at a step boundary
 *     (every message sent acknowledged) it sets up the new sockets with a
 *     resume handshake while the old route carries on, then switches; the
 *     receiver's next expected number decides what is sent again;
 *   - no new connection within MESHCCL_MESH_ROUTE_TIMEOUT_MS: every pending
 *     and later request fails with ncclRemoteError, WARNed once, naming the
 *     link that went down and both hosts.
 * Every wait is a state checked on the caller's next call, bounded by that
 * deadline and the abort flag: nothing here blocks.
 *
 * Length: the reliable comm's one state machine (send, break, reroute, resume, move back) over one
 * struct, whose steps share its bookkeeping.
 */
#include "mesh_int.h"

#include "check.h"
#include "log.h"
#include "net/net_socket_int.h"
#include "params.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NREQ          MC_NET_MAX_REQUESTS
#define RETRY_MS      250  /* between two attempts at a new route */
#define MOVE_CHECK_MS 100  /* a relayed sender looks for its cable that often */
#define MOVE_RETRY_MS 1000 /* after a failed attempt at moving back onto it */
/* A relayed connection reset while every cable of its route is up (the
 * peer's process went away, or a relay's onward cable failed and the link
 * state saying so is still on its way): how long to wait for the link state
 * before blaming the peer. Discovery announces an interface that went down
 * at once; a silent one only after MC_NET_MESH_SILENT_MIN_MS, which may be
 * longer than the relay's TCP timeout (MESHCCL_MESH_LINK_TIMEOUT_MS): that
 * difference is waited too (down_span_ns). */
#define PEER_CLOSE_MS   1000
#define ROUTE_RETRY_MS  1000 /* between two looks for a route's description */
#define LINK_TEXT_BYTES 384

/* ---------- bookkeeping (pure) ---------- */

void mc_net_mesh_rel_init(struct mc_net_mesh_rel *r, bool is_send)
{
  memset(r, 0, sizeof(*r));
  r->is_send = is_send;
}

bool mc_net_mesh_rel_post(struct mc_net_mesh_rel *r, uint64_t *seq_out)
{
  if (r->next_seq - r->tail >= NREQ)
    return false;
  r->slot[r->next_seq % NREQ] = MC_NET_MESH_SLOT_USED;
  *seq_out = r->next_seq++;
  return true;
}

void mc_net_mesh_rel_posted(struct mc_net_mesh_rel *r, uint64_t seq)
{
  r->slot[seq % NREQ] |= MC_NET_MESH_SLOT_POSTED;
}

void mc_net_mesh_rel_moved(struct mc_net_mesh_rel *r, uint64_t seq)
{
  r->slot[seq % NREQ] |= MC_NET_MESH_SLOT_MOVED;
  if (r->is_send)
    return;
  while ((r->acked < r->next_seq) && ((r->slot[r->acked % NREQ] & MC_NET_MESH_SLOT_MOVED) != 0))
    r->acked++;
}

bool mc_net_mesh_rel_ack(struct mc_net_mesh_rel *r, uint64_t ack)
{
  if (ack > r->next_seq)
    return false;
  if (ack > r->acked)
    r->acked = ack;
  return true;
}

bool mc_net_mesh_rel_is_done(const struct mc_net_mesh_rel *r, uint64_t seq)
{
  if (seq >= r->acked)
    return false;
  return !r->is_send || ((r->slot[seq % NREQ] & MC_NET_MESH_SLOT_MOVED) != 0);
}

void mc_net_mesh_rel_release(struct mc_net_mesh_rel *r, uint64_t seq)
{
  r->slot[seq % NREQ] = 0;
  while ((r->tail < r->next_seq) && (r->slot[r->tail % NREQ] == 0))
    r->tail++;
}

bool mc_net_mesh_rel_resume(struct mc_net_mesh_rel *r, uint64_t expected)
{
  if ((expected < r->acked) || (expected > r->next_seq))
    return false;
  r->acked = expected;
  for (uint64_t s = r->tail; s < r->next_seq; s++) {
    uint8_t *f = &r->slot[s % NREQ];

    if (*f == 0)
      continue;
    if (s < expected)
      *f |= MC_NET_MESH_SLOT_MOVED; /* the old sockets are gone: nothing touches it */
    else
      *f = MC_NET_MESH_SLOT_USED;
  }
  return true;
}

int mc_net_mesh_rel_to_post(const struct mc_net_mesh_rel *r, uint64_t *seqs, int max)
{
  int n = 0;

  for (uint64_t s = r->tail; (s < r->next_seq) && (n < max); s++) {
    if (r->slot[s % NREQ] == MC_NET_MESH_SLOT_USED)
      seqs[n++] = s;
  }
  return n;
}

void mc_net_mesh_ack_encode(uint64_t ack, uint8_t buf[MC_NET_MESH_ACK_BYTES])
{
  for (int i = 0; i < 8; i++)
    buf[i] = (uint8_t)(ack >> (56 - 8 * i));
}

uint64_t mc_net_mesh_ack_decode(const uint8_t buf[MC_NET_MESH_ACK_BYTES])
{
  uint64_t v = 0;

  for (int i = 0; i < 8; i++)
    v = (v << 8) | buf[i];
  return v;
}

/* ---------- the comm ---------- */

enum comm_state {
  ST_UP,        /* data flows on sc */
  ST_DOWN,      /* broken: sender waits to try a route, receiver for a resume */
  ST_RECONNECT, /* sender: a new route being set up */
  ST_WAIT_ACK,  /* sender: new sockets, waiting for the receiver's number */
  ST_LOST       /* no route left: every request fails */
};

struct mesh_req {
  struct mc_net_mesh_comm *comm;
  uint64_t seq;
  char *data;
  size_t bytes; /* send: the size; recv: the posted size */
  size_t got;   /* recv: the message's size */
  void *sreq;   /* the socket comm's request while posted on it */
};

struct mc_net_mesh_comm {
  struct mc_net_mesh_ctx *ctx;
  /* Held by the caller's calls and, for a receive comm whose caller is idle
   * while a resume waits, by the handshake thread (which only tries it). */
  pthread_mutex_t mu;
  struct mc_net_mesh_comm *next; /* ctx->recv_comms */
  bool is_send;
  uint64_t conn_id;
  uint64_t peer_host;
  uint8_t handle[MC_NET_HANDLE_BYTES]; /* send: the listener's, for new routes */
  int nic;                             /* local NIC of the current first hop */
  bool is_relayed;                     /* send: the route goes through relays */
  bool is_moving_back;                 /* send: the new sockets are a cable's that came back */
  uint64_t move_check_ns;              /* send: when to look for the cable again */
  char link[LINK_TEXT_BYTES];          /* the current route, for messages */
  char down_link[LINK_TEXT_BYTES];     /* the route that went down */
  char cause[256];
  /* The cables of the route (for failure reports), and whether the break
   * came from the peer's end closing or resetting the connection. */
  struct mc_net_mesh_route_desc route;
  bool is_route_own;        /* route: a direct one from the connection's ends, not the view */
  union mc_sockaddr remote; /* the socket's far end on the current first hop (family 0: unknown) */
  uint64_t route_try_ns;
  bool is_peer_closed;
  struct mc_net_sock_comm *sc;
  enum comm_state state;
  unsigned attempt;
  uint64_t down_ns;
  uint64_t deadline_ns;
  uint64_t retry_ns;
  struct mc_net_mesh_connect *rc;
  uint8_t ack_in[MC_NET_MESH_ACK_BYTES];
  size_t ack_in_got;
  uint8_t ack_out[MC_NET_MESH_ACK_BYTES];
  size_t ack_out_done; /* == MC_NET_MESH_ACK_BYTES: nothing being written */
  uint64_t ack_sent;
  bool must_ack; /* a resumed connection: say the number even if unchanged */
  struct mc_net_mesh_rel rel;
  struct mesh_req reqs[NREQ];
  /* Receive: a resume being filed by the handshake thread (ctx->mu). */
  struct mc_net_mesh_group *resume_partial;
  unsigned resume_attempt;
  struct mc_net_mesh_group *resume_ready;
  int has_resume; /* atomic */
  ncclResult_t lost_res;
};

static bool is_aborted(const struct mc_net_mesh_comm *mc)
{
  return (mc->ctx->abort_flag != NULL) &&
         (__atomic_load_n(mc->ctx->abort_flag, __ATOMIC_ACQUIRE) != 0);
}

static const char *role(const struct mc_net_mesh_comm *mc)
{
  return mc->is_send ? "to" : "from";
}

/* Whether the connection goes straight over one cable to the peer's host
 * (its peer's address then is on that cable): a sender whose NIC shares a
 * subnet with the listener's address; a receiver whose NIC's neighbour, as
 * discovery heard it, is the sender's host (a relayed connection arrives
 * from a relay). */
static bool is_direct(const struct mc_net_mesh_comm *mc)
{
  if (mc->is_send)
    return !mc->is_relayed;
  return mc_net_mesh_nic_neighbour(mc->ctx, mc->nic) == mc->peer_host;
}

/* Describes the route's cables from the current view (mc_net_mesh_route_describe),
 * as the connection is made or moved, so that a failure can name the cable.
 * A direct connection the view does not describe yet (discovery has not
 * finished) is described from its own ends (mc_net_mesh_route_direct), and
 * from the view once it can. */
static void note_route(struct mc_net_mesh_comm *mc)
{
  struct mc_net_mesh_view *v = mc_net_mesh_view_get(mc->ctx);
  uint64_t self = mc->ctx->host_hash;
  uint64_t src = mc->is_send ? self : mc->peer_host;
  uint64_t dst = mc->is_send ? mc->peer_host : self;
  union mc_sockaddr remote;
  socklen_t len = sizeof(remote);

  mc->route_try_ns = mc_time_ns() + (uint64_t)ROUTE_RETRY_MS * 1000000ull;
  mc->is_route_own = false;
  memset(&remote, 0, sizeof(remote));
  if ((mc->sc != NULL) && (getpeername(mc->sc->ctrl.fd, &remote.sa, &len) == 0))
    mc->remote = remote;
  if (!mc_net_mesh_route_describe(mc->ctx, v, src, dst, mc->conn_id, &mc->ctx->nics[mc->nic].addr,
                                  &mc->route)) {
    mc->route.n_hops = 0;
    if ((mc->remote.sa.sa_family != 0) && is_direct(mc)) {
      mc_net_mesh_route_direct(mc->ctx, v, src, dst, &mc->ctx->nics[mc->nic], &mc->remote,
                               &mc->route);
      mc->is_route_own = true;
    }
  }
  mc_net_mesh_view_put(v);
}

/* How long a broken connection may wait for a new route: the route timeout;
 * nothing when the peer itself closed a direct connection (its process went
 * away: no route will bring it back), PEER_CLOSE_MS for a relayed one (the
 * cable check in comm_progress extends it when a cable of the route is down). */
static uint64_t down_span_ns(const struct mc_net_mesh_comm *mc)
{
  uint64_t ms = (uint64_t)mc->ctx->route_timeout_ms;

  if (mc->is_peer_closed && (mc->route.n_hops == 1)) {
    ms = 0;
  } else if (mc->is_peer_closed) {
    uint64_t link_ms = (uint64_t)mc_param_int(MC_P_MESH_LINK_TIMEOUT_MS);
    uint64_t grace =
        PEER_CLOSE_MS +
        ((link_ms < MC_NET_MESH_SILENT_MIN_MS) ? (MC_NET_MESH_SILENT_MIN_MS - link_ms) : 0);

    ms = (ms < grace) ? ms : grace;
  }
  return ms * 1000000ull;
}

static void drop_sc(struct mc_net_mesh_comm *mc)
{
  if (mc->sc == NULL)
    return;
  mc_net_sock_comm_destroy(mc->sc);
  mc->sc = NULL;
  for (int i = 0; i < NREQ; i++)
    mc->reqs[i].sreq = NULL;
  /* The old sockets are gone: what was acknowledged is done (its socket
   * request may not have said so yet), the rest is posted again. */
  (void)mc_net_mesh_rel_resume(&mc->rel, mc->rel.acked);
  mc->ack_in_got = 0;
  mc->ack_out_done = MC_NET_MESH_ACK_BYTES;
}

/* UP -> DOWN: the requests stay, the sockets go. */
static void comm_break(struct mc_net_mesh_comm *mc, bool by_peer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* by_peer: the peer's end closed or reset the connection. With the local
 * interface up, that is the peer's process going away (a dead cable carries
 * no FIN and no reset); a relay whose onward cable failed resets too, which
 * the link state tells apart (comm_progress). */
static void comm_break(struct mc_net_mesh_comm *mc, bool by_peer, const char *fmt, ...)
{
  char host[MC_NET_MESH_HOST_TEXT_BYTES];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(mc->cause, sizeof(mc->cause), fmt, ap);
  va_end(ap);
  drop_sc(mc);
  snprintf(mc->down_link, sizeof(mc->down_link), "%s", mc->link);
  /* A sender moving back onto a cable goes on with that attempt. */
  mc->state = (mc->rc != NULL) ? ST_RECONNECT : ST_DOWN;
  mc->is_peer_closed =
      by_peer && (__atomic_load_n(&mc->ctx->nic_down[mc->nic], __ATOMIC_ACQUIRE) == 0);
  mc->down_ns = mc_time_ns();
  mc->deadline_ns = mc->down_ns + down_span_ns(mc);
  mc->retry_ns = 0;
  __atomic_add_fetch(&mc->ctx->stats.n_breaks, 1, __ATOMIC_RELAXED);
  mc_net_mesh_host_str(mc->ctx, mc->peer_host, host, sizeof(host));
  MC_INFO(MC_SUB_NET,
          "NET/Mesh: link down under connection %016llx %s %s over %s: %s; %s (%llu "
          "messages unacknowledged)",
          (unsigned long long)mc->conn_id, role(mc), host, mc->link, mc->cause,
          mc->is_send ? "moving it to another route" : "waiting for the sender to move it",
          (unsigned long long)(mc->rel.next_seq - mc->rel.acked));
}

/* DOWN past the deadline: lost for good, said once, blaming the peer's
 * process when its end closed it (for a relayed route, comm_progress found
 * every cable up at the deadline), else a cable of the route
 * (mc_net_mesh_route_blame: a direct connection's one cable, a relayed
 * route's first one the link state shows down, or the cable of a down
 * interface here), else the link the connection was on (a relayed route
 * discovery never described). */
static ncclResult_t comm_lose(struct mc_net_mesh_comm *mc, const char *why)
{
  char host[MC_NET_MESH_HOST_TEXT_BYTES];
  char self[MC_NET_MESH_HOST_TEXT_BYTES];
  char mesh[512];
  struct mc_net_mesh_view *v;
  unsigned long long n_unacked = (unsigned long long)(mc->rel.next_seq - mc->rel.acked);
  int broken;

  drop_sc(mc);
  mc_net_mesh_resume_free(mc->rc);
  mc->rc = NULL;
  mc->state = ST_LOST;
  mc->lost_res = ncclRemoteError;
  __atomic_add_fetch(&mc->ctx->stats.n_lost, 1, __ATOMIC_RELAXED);
  mc_net_mesh_host_str(mc->ctx, mc->peer_host, host, sizeof(host));
  mc_net_mesh_host_str(mc->ctx, mc->ctx->host_hash, self, sizeof(self));
  v = mc_net_mesh_view_get(mc->ctx);
  mc_net_mesh_view_str(mc->ctx, v, mesh, sizeof(mesh));
  broken = mc_net_mesh_route_blame(v, &mc->route, mc->is_peer_closed);
  if ((broken < 0) && (mc->route.n_hops == 0) && !mc->is_peer_closed &&
      (mc->remote.sa.sa_family != 0) &&
      (__atomic_load_n(&mc->ctx->nic_down[mc->nic], __ATOMIC_ACQUIRE) != 0)) {
    /* A route discovery never described, whose first hop's interface is
     * down here: that cable failed, whatever lay beyond it. Its far host is
     * the neighbour discovery heard on the interface, if any. */
    uint64_t far = mc_net_mesh_nic_neighbour(mc->ctx, mc->nic);

    mc_net_mesh_route_direct(mc->ctx, v, mc->ctx->host_hash, far, &mc->ctx->nics[mc->nic],
                             &mc->remote, &mc->route);
    snprintf(mc->route.path, sizeof(mc->route.path), "%s", mc->down_link);
    broken = 0;
  }
  mc_net_mesh_view_put(v);
  if (broken >= 0)
    return MC_FAIL(ncclRemoteError,
                   "NET/Mesh: cable %s went down and %s within MESHCCL_MESH_ROUTE_TIMEOUT_MS=%d "
                   "ms: connection %016llx %s %s (route %s) lost, %llu messages "
                   "unacknowledged (seen on %s as: %s); the mesh known on %s: %s. Check "
                   "that cable and its interfaces",
                   mc->route.cables[broken], why, mc->ctx->route_timeout_ms,
                   (unsigned long long)mc->conn_id, role(mc), host, mc->route.path, n_unacked, self,
                   mc->cause, self, mesh);
  if (mc->is_peer_closed)
    return MC_FAIL(ncclRemoteError,
                   "NET/Mesh: %s closed connection %016llx (%s %s, route %s) while "
                   "every cable of the route was up: its process ended or closed the "
                   "communicator (%s; %llu messages unacknowledged)",
                   host, (unsigned long long)mc->conn_id, mc->is_send ? "from" : "to", self,
                   (mc->route.n_hops > 0) ? mc->route.path : mc->down_link, mc->cause, n_unacked);
  return MC_FAIL(ncclRemoteError,
                 "NET/Mesh: link %s of %s went down (%s) and %s within "
                 "MESHCCL_MESH_ROUTE_TIMEOUT_MS=%d ms: connection %016llx %s %s lost, %llu "
                 "messages unacknowledged; the mesh known on %s: %s. Check the cables and "
                 "interfaces of that link",
                 mc->down_link, self, mc->cause, why, mc->ctx->route_timeout_ms,
                 (unsigned long long)mc->conn_id, role(mc), host, n_unacked, self, mesh);
}

/* A socket comm call failed: a link failure breaks the connection; the
 * caller's own mistakes and aborts propagate. */
static ncclResult_t on_sc_err(struct mc_net_mesh_comm *mc, ncclResult_t res)
{
  if ((res != ncclRemoteError) && (res != ncclSystemError))
    return res;
  comm_break(mc, mc->sc->err_kind == MC_NET_SOCK_CLOSED_BY_PEER, "%s", mc->sc->err_text);
  return ncclSuccess;
}

/* Hands the messages the socket comm does not have yet to it, in order. */
static ncclResult_t post_pending(struct mc_net_mesh_comm *mc)
{
  uint64_t seqs[NREQ];
  int n = mc_net_mesh_rel_to_post(&mc->rel, seqs, NREQ);

  for (int i = 0; (i < n) && (mc->state == ST_UP); i++) {
    struct mesh_req *r = &mc->reqs[seqs[i] % NREQ];
    ncclResult_t res;

    if (mc->is_send) {
      res = mc_net_sock_isend(mc->sc, r->data, r->bytes, 0, NULL, &r->sreq);
    } else {
      void *d[1] = {r->data};
      size_t sz[1] = {r->bytes};
      int tags[1] = {0};
      void *mh[1] = {NULL};

      res = mc_net_sock_irecv(mc->sc, 1, d, sz, tags, mh, &r->sreq);
    }
    if (res != ncclSuccess)
      return on_sc_err(mc, res);
    if (r->sreq == NULL)
      return ncclSuccess; /* the socket comm is full: the rest later, in order */
    mc_net_mesh_rel_posted(&mc->rel, r->seq);
  }
  return ncclSuccess;
}

/* Tests the socket comm's requests in order. */
static ncclResult_t test_posted(struct mc_net_mesh_comm *mc)
{
  for (uint64_t s = mc->rel.tail; (s < mc->rel.next_seq) && (mc->state == ST_UP); s++) {
    struct mesh_req *r = &mc->reqs[s % NREQ];
    int done = 0;
    size_t size = 0;
    ncclResult_t res;

    if (r->sreq == NULL)
      continue;
    res = mc_net_sock_test(r->sreq, &done, &size);
    if (res != ncclSuccess)
      return on_sc_err(mc, res);
    if (done) {
      r->sreq = NULL;
      r->got = size;
      mc_net_mesh_rel_moved(&mc->rel, s);
    }
  }
  return ncclSuccess;
}

/* The peer broke the protocol: what it did (fmt), its host named. */
static ncclResult_t protocol_error(struct mc_net_mesh_comm *mc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static ncclResult_t protocol_error(struct mc_net_mesh_comm *mc, const char *fmt, ...)
{
  char host[MC_NET_MESH_HOST_TEXT_BYTES];
  char what[256];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  mc_net_mesh_host_str(mc->ctx, mc->peer_host, host, sizeof(host));
  return MC_FAIL(ncclRemoteError, "NET/Mesh: protocol error: %s %s", host, what);
}

/* Sender: reads acknowledgements from the control socket's reverse side. */
static ncclResult_t read_acks(struct mc_net_mesh_comm *mc, bool *got_one)
{
  *got_one = false;
  for (;;) {
    ssize_t n = recv(mc->sc->ctrl.fd, mc->ack_in + mc->ack_in_got,
                     MC_NET_MESH_ACK_BYTES - mc->ack_in_got, MSG_DONTWAIT);

    if (n > 0) {
      mc->ack_in_got += (size_t)n;
      if (mc->ack_in_got < MC_NET_MESH_ACK_BYTES)
        continue;
      mc->ack_in_got = 0;
      if (mc->state == ST_WAIT_ACK) {
        uint64_t expected = mc_net_mesh_ack_decode(mc->ack_in);

        if (!mc_net_mesh_rel_resume(&mc->rel, expected))
          return protocol_error(mc,
                                "resumed connection %016llx at message %llu, but "
                                "%llu were acknowledged and %llu sent",
                                (unsigned long long)mc->conn_id, (unsigned long long)expected,
                                (unsigned long long)mc->rel.acked,
                                (unsigned long long)mc->rel.next_seq);
        *got_one = true;
        return ncclSuccess;
      }
      if (!mc_net_mesh_rel_ack(&mc->rel, mc_net_mesh_ack_decode(mc->ack_in)))
        return protocol_error(mc,
                              "acknowledged message %llu of connection %016llx, beyond the "
                              "%llu sent",
                              (unsigned long long)mc_net_mesh_ack_decode(mc->ack_in),
                              (unsigned long long)mc->conn_id,
                              (unsigned long long)mc->rel.next_seq);
      *got_one = true;
      continue;
    }
    if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
      return ncclSuccess;
    comm_break(mc, (n == 0) || (errno == ECONNRESET) || (errno == EPIPE), "%s",
               (n == 0) ? "the peer closed the connection" : strerror(errno));
    return ncclSuccess;
  }
}

/* Receiver: says its next expected number when it changed (or must). */
static void write_ack(struct mc_net_mesh_comm *mc)
{
  if ((mc->ack_out_done == MC_NET_MESH_ACK_BYTES) &&
      (mc->must_ack || (mc->ack_sent != mc->rel.acked))) {
    mc->ack_sent = mc->rel.acked;
    mc->must_ack = false;
    mc_net_mesh_ack_encode(mc->ack_sent, mc->ack_out);
    mc->ack_out_done = 0;
  }
  while (mc->ack_out_done < MC_NET_MESH_ACK_BYTES) {
    ssize_t n = send(mc->sc->ctrl.fd, mc->ack_out + mc->ack_out_done,
                     MC_NET_MESH_ACK_BYTES - mc->ack_out_done, MSG_DONTWAIT | MSG_NOSIGNAL);

    if (n > 0) {
      mc->ack_out_done += (size_t)n;
      continue;
    }
    if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
      return;
    comm_break(mc, (n == 0) || (errno == ECONNRESET) || (errno == EPIPE), "%s",
               (n == 0) ? "closed" : strerror(errno));
    return;
  }
}

static ncclResult_t new_sc(struct mc_net_mesh_comm *mc, struct mc_sock *socks, int n_socks,
                           int n_threads, uint32_t inline_bytes, uint32_t min_task_bytes)
{
  ncclResult_t res = mc_net_sock_comm_create(mc->is_send, mc->ctx->abort_flag, socks, n_socks,
                                             n_threads, inline_bytes, min_task_bytes, &mc->sc);

  for (int i = 0; i <= n_socks; i++)
    mc_sock_close(&socks[i]); /* only those comm_create did not take */
  if (res == ncclSuccess)
    mc->sc->is_quiet = true;
  return res;
}

static void log_resumed(struct mc_net_mesh_comm *mc)
{
  char host[MC_NET_MESH_HOST_TEXT_BYTES];

  __atomic_add_fetch(&mc->ctx->stats.n_resumed, 1, __ATOMIC_RELAXED);
  if (mc->is_moving_back && !mc->is_relayed)
    __atomic_add_fetch(&mc->ctx->stats.n_moved_back, 1, __ATOMIC_RELAXED);
  mc->is_moving_back = false;
  mc->is_peer_closed = false;
  note_route(mc);
  mc_net_mesh_host_str(mc->ctx, mc->peer_host, host, sizeof(host));
  MC_INFO(MC_SUB_NET,
          "NET/Mesh: connection %016llx %s %s moved from %s to %s, resumed at message %llu "
          "(%llu to %s again) after %llu ms",
          (unsigned long long)mc->conn_id, role(mc), host, mc->down_link, mc->link,
          (unsigned long long)mc->rel.acked, (unsigned long long)(mc->rel.next_seq - mc->rel.acked),
          mc->is_send ? "send" : "receive",
          (unsigned long long)((mc_time_ns() - mc->down_ns) / 1000000ull));
}

/* Receiver: takes a resumed connection the handshake thread filed. */
static ncclResult_t take_resume(struct mc_net_mesh_comm *mc, bool has_ctx_mu)
{
  struct mc_net_mesh_ctx *ctx = mc->ctx;
  struct mc_net_mesh_group *g;
  char a[MC_SOCKADDR_STRLEN];
  char nic[160];
  ncclResult_t res;

  if (!has_ctx_mu)
    pthread_mutex_lock(&ctx->mu);
  g = mc->resume_ready;
  mc->resume_ready = NULL;
  __atomic_store_n(&mc->has_resume, 0, __ATOMIC_RELEASE);
  if (!has_ctx_mu)
    pthread_mutex_unlock(&ctx->mu);
  if (g == NULL)
    return ncclSuccess;
  if (mc->state == ST_UP)
    comm_break(mc, false, "the sender moved the connection to another route");
  drop_sc(mc);
  mc->nic = g->nic;
  mc_net_mesh_nic_str(ctx, g->nic, nic, sizeof(nic));
  snprintf(mc->link, sizeof(mc->link), "%s from %s", nic,
           mc_sockaddr_str(&g->socks[0].addr, a, sizeof(a)));
  res = new_sc(mc, g->socks, g->n_socks, ctx->n_threads, ctx->inline_bytes, ctx->min_task_bytes);
  mc_net_mesh_group_free(g);
  if (res != ncclSuccess)
    return res;
  (void)mc_net_mesh_rel_resume(&mc->rel, mc->rel.acked);
  mc->state = ST_UP;
  mc->must_ack = true;
  log_resumed(mc);
  return post_pending(mc);
}

/* Sender: one step towards a new route. */
static ncclResult_t reconnect(struct mc_net_mesh_comm *mc)
{
  struct mc_net_mesh_ctx *ctx = mc->ctx;
  struct mc_sock socks[MC_NET_SOCK_MAX_SOCKS + 1];
  struct mc_net_mesh_handle h;
  char why[512];
  bool done = false;
  int nic = -1;
  ncclResult_t res;

  if (mc->state == ST_DOWN) {
    if (mc_time_ns() < mc->retry_ns)
      return ncclSuccess;
    mc->attempt = (mc->attempt + 1) & MC_NET_MESH_ATTEMPT_MASK;
    MC_CHECK(mc_net_mesh_resume_start(ctx, mc->handle, mc->conn_id, mc->attempt, mc->deadline_ns,
                                      &mc->rc));
    mc->state = ST_RECONNECT;
  }
  why[0] = '\0';
  res = mc_net_mesh_resume_progress(ctx, mc->rc, socks, &done, &nic, mc->link, sizeof(mc->link),
                                    why, sizeof(why));
  if (res != ncclSuccess) {
    mc_net_mesh_resume_free(mc->rc);
    mc->rc = NULL;
    mc->state = ST_DOWN;
    mc->is_moving_back = false;
    mc->retry_ns = mc_time_ns() + (uint64_t)RETRY_MS * 1000000ull;
    MC_INFO(MC_SUB_NET, "NET/Mesh: connection %016llx: attempt %u at a new route failed: %s",
            (unsigned long long)mc->conn_id, mc->attempt, why);
    return ncclSuccess;
  }
  if (!done)
    return ncclSuccess;
  mc_net_mesh_resume_free(mc->rc);
  mc->rc = NULL;
  mc->nic = nic;
  mc->is_relayed = !mc_net_mesh_nic_reaches(ctx, nic, mc->handle);
  MC_CHECK(mc_net_mesh_handle_decode(mc->handle, &h));
  MC_CHECK(new_sc(mc, socks, h.n_socks, h.n_threads, h.inline_bytes, h.min_task_bytes));
  mc->state = ST_WAIT_ACK;
  mc->ack_in_got = 0;
  return ncclSuccess;
}

/*
 * Sender on a relayed route, up: once the current view has a cable up to
 * the peer's host again, moves the connection back onto it, the reverse of
 * a break. It starts at a step boundary (every message sent acknowledged)
 * and sets up the new sockets with a resume handshake while the old route
 * carries on; then it drops the old route and waits for the receiver's next
 * expected number like after a break, so a message sent meanwhile and not
 * received whole is sent again, once. A failed attempt leaves the
 * connection on its route and is tried again MOVE_RETRY_MS later.
 */
static ncclResult_t move_back(struct mc_net_mesh_comm *mc)
{
  struct mc_net_mesh_ctx *ctx = mc->ctx;
  struct mc_sock socks[MC_NET_SOCK_MAX_SOCKS + 1];
  struct mc_net_mesh_handle h;
  char link[LINK_TEXT_BYTES];
  char why[512];
  char host[MC_NET_MESH_HOST_TEXT_BYTES];
  bool done = false;
  int nic = -1;
  uint64_t now = mc_time_ns();
  uint64_t route_ns = (uint64_t)ctx->route_timeout_ms * 1000000ull;
  ncclResult_t res;

  if (mc->rc == NULL) {
    if (!mc->is_relayed || (now < mc->move_check_ns) || (mc->rel.acked != mc->rel.next_seq))
      return ncclSuccess;
    mc->move_check_ns = now + (uint64_t)MOVE_CHECK_MS * 1000000ull;
    if (!mc_net_mesh_direct_up(ctx, mc->handle))
      return ncclSuccess;
    mc->attempt = (mc->attempt + 1) & MC_NET_MESH_ATTEMPT_MASK;
    MC_CHECK(mc_net_mesh_resume_start(ctx, mc->handle, mc->conn_id, mc->attempt, now + route_ns,
                                      &mc->rc));
    mc->is_moving_back = true;
    mc_net_mesh_host_str(ctx, mc->peer_host, host, sizeof(host));
    MC_INFO(MC_SUB_NET,
            "NET/Mesh: connection %016llx to %s: a cable to it is up again, moving back "
            "from %s",
            (unsigned long long)mc->conn_id, host, mc->link);
  }
  why[0] = '\0';
  res = mc_net_mesh_resume_progress(ctx, mc->rc, socks, &done, &nic, link, sizeof(link), why,
                                    sizeof(why));
  if (res != ncclSuccess) {
    mc_net_mesh_resume_free(mc->rc);
    mc->rc = NULL;
    mc->move_check_ns = now + (uint64_t)MOVE_RETRY_MS * 1000000ull;
    mc->is_moving_back = false;
    MC_INFO(MC_SUB_NET, "NET/Mesh: connection %016llx: moving back failed (%s); it stays on %s",
            (unsigned long long)mc->conn_id, why, mc->link);
    return ncclSuccess;
  }
  if (!done)
    return ncclSuccess;
  mc_net_mesh_resume_free(mc->rc);
  mc->rc = NULL;
  snprintf(mc->down_link, sizeof(mc->down_link), "%s", mc->link);
  drop_sc(mc);
  mc->nic = nic;
  snprintf(mc->link, sizeof(mc->link), "%s", link);
  mc->is_relayed = !mc_net_mesh_nic_reaches(ctx, nic, mc->handle);
  MC_CHECK(mc_net_mesh_handle_decode(mc->handle, &h));
  MC_CHECK(new_sc(mc, socks, h.n_socks, h.n_threads, h.inline_bytes, h.min_task_bytes));
  mc->state = ST_WAIT_ACK;
  mc->ack_in_got = 0;
  mc->down_ns = now;
  mc->deadline_ns = now + route_ns;
  return ncclSuccess;
}

/* A relayed connection reset by the far side: true when the link state
 * still has every cable of its route (the peer's process went away). */
static bool peer_close_stands(struct mc_net_mesh_comm *mc)
{
  struct mc_net_mesh_view *v = mc_net_mesh_view_get(mc->ctx);
  int broken = mc_net_mesh_route_broken_hop(v, &mc->route);

  mc_net_mesh_view_put(v);
  return broken < 0;
}

/* Everything a call on the comm moves. */
static ncclResult_t comm_progress(struct mc_net_mesh_comm *mc)
{
  bool got = false;

  if (is_aborted(mc))
    return ncclInternalError; /* aborted by the user: no WARN */
  if (mc->state == ST_LOST)
    return mc->lost_res;
  if (!mc->is_send && (__atomic_load_n(&mc->has_resume, __ATOMIC_ACQUIRE) != 0))
    MC_CHECK(take_resume(mc, false));
  if ((mc->state == ST_UP) && (__atomic_load_n(&mc->ctx->nic_down[mc->nic], __ATOMIC_ACQUIRE) != 0))
    comm_break(mc, false, "interface %s is down: no carrier, or its neighbour silent",
               mc->ctx->nics[mc->nic].name);
  if (mc->state == ST_UP) {
    if (mc->is_send)
      MC_CHECK(read_acks(mc, &got));
    if (mc->state == ST_UP)
      MC_CHECK(post_pending(mc));
    if (mc->state == ST_UP)
      MC_CHECK(test_posted(mc));
    if ((mc->state == ST_UP) && !mc->is_send)
      write_ack(mc);
    if ((mc->state == ST_UP) && mc->is_send)
      MC_CHECK(move_back(mc));
  }
  if (mc->is_send && ((mc->state == ST_DOWN) || (mc->state == ST_RECONNECT)))
    MC_CHECK(reconnect(mc));
  if (mc->state == ST_WAIT_ACK) {
    MC_CHECK(read_acks(mc, &got));
    if ((mc->state == ST_WAIT_ACK) && got) {
      mc->state = ST_UP;
      log_resumed(mc);
      MC_CHECK(post_pending(mc));
    }
  }
  if ((mc->state == ST_UP) && ((mc->route.n_hops == 0) || mc->is_route_own) &&
      (mc_time_ns() > mc->route_try_ns))
    note_route(mc); /* made before discovery knew the peer */
  if ((mc->state != ST_UP) && (mc->rel.acked == mc->rel.next_seq)) {
    /* Nothing unfinished on the connection (a peer that closed it after its
     * last message loses nothing): the time to find a route runs from the
     * first request that waits on it. */
    mc->deadline_ns = mc_time_ns() + down_span_ns(mc);
    return ncclSuccess;
  }
  if ((mc->state != ST_UP) && (mc_time_ns() > mc->deadline_ns) && mc->is_peer_closed &&
      (mc->route.n_hops > 1) && !peer_close_stands(mc)) {
    /* A relay reset it because a cable of the route failed: a cable failure. */
    mc->is_peer_closed = false;
    mc->deadline_ns = mc->down_ns + down_span_ns(mc);
  }
  if ((mc->state != ST_UP) && (mc_time_ns() > mc->deadline_ns))
    return comm_lose(mc, mc->is_send ? "no other route to the peer could be set up"
                                     : "the sender did not come back over another route");
  return ncclSuccess;
}

ncclResult_t mc_net_mesh_comm_create(struct mc_net_mesh_ctx *ctx, bool is_send,
                                     struct mc_net_sock_comm *sc, uint64_t conn_id,
                                     uint64_t peer_host, const uint8_t *handle, int nic,
                                     const char *link, struct mc_net_mesh_comm **comm_out)
{
  struct mc_net_mesh_comm *mc = NULL;

  MC_CHECK(mc_calloc(&mc, 1));
  mc->ctx = ctx;
  pthread_mutex_init(&mc->mu, NULL);
  mc->is_send = is_send;
  mc->conn_id = conn_id;
  mc->peer_host = peer_host;
  if (handle != NULL)
    memcpy(mc->handle, handle, MC_NET_HANDLE_BYTES);
  mc->nic = nic;
  mc->is_relayed = is_send && (handle != NULL) && !mc_net_mesh_nic_reaches(ctx, nic, handle);
  snprintf(mc->link, sizeof(mc->link), "%s", link);
  mc->sc = sc;
  sc->is_quiet = true;
  mc->state = ST_UP;
  mc->ack_out_done = MC_NET_MESH_ACK_BYTES;
  mc_net_mesh_rel_init(&mc->rel, is_send);
  for (int i = 0; i < NREQ; i++)
    mc->reqs[i].comm = mc;
  note_route(mc);
  if (!is_send) {
    pthread_mutex_lock(&ctx->mu);
    mc->next = ctx->recv_comms;
    ctx->recv_comms = mc;
    pthread_mutex_unlock(&ctx->mu);
  }
  *comm_out = mc;
  return ncclSuccess;
}

ncclResult_t mc_net_mesh_comm_close(void *comm)
{
  struct mc_net_mesh_comm *mc = comm;
  struct mc_net_mesh_ctx *ctx;

  if (mc == NULL)
    return ncclSuccess;
  ctx = mc->ctx;
  if (!mc->is_send) {
    pthread_mutex_lock(&ctx->mu);
    for (struct mc_net_mesh_comm **link = &ctx->recv_comms; *link != NULL; link = &(*link)->next) {
      if (*link == mc) {
        *link = mc->next;
        break;
      }
    }
    pthread_mutex_unlock(&ctx->mu);
    mc_net_mesh_group_free(mc->resume_partial);
    mc_net_mesh_group_free(mc->resume_ready);
  }
  mc_net_mesh_resume_free(mc->rc);
  drop_sc(mc);
  pthread_mutex_destroy(&mc->mu);
  free(mc);
  return ncclSuccess;
}

static ncclResult_t isend_locked(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                                 void **request)
{
  struct mc_net_mesh_comm *mc = send_comm;
  struct mesh_req *r;
  uint64_t seq;

  (void)tag;
  (void)mhandle;
  if ((mc == NULL) || !mc->is_send || (request == NULL) || ((data == NULL) && (size > 0)))
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: isend(comm %p, data %p, %zu bytes): bad argument", send_comm, data,
                   size);
  if (size > MC_NET_SOCK_MAX_BYTES)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: isend of %zu bytes: at most %llu bytes per request (max_p2p_bytes)",
                   size, (unsigned long long)MC_NET_SOCK_MAX_BYTES);
  *request = NULL;
  MC_CHECK(comm_progress(mc));
  if (!mc_net_mesh_rel_post(&mc->rel, &seq))
    return ncclSuccess; /* MC_NET_MAX_REQUESTS held: try later */
  r = &mc->reqs[seq % NREQ];
  r->seq = seq;
  r->data = data;
  r->bytes = size;
  r->got = size;
  r->sreq = NULL;
  if (mc->state == ST_UP)
    MC_CHECK(post_pending(mc));
  *request = r;
  return ncclSuccess;
}

static ncclResult_t irecv_locked(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                                 void **mhandles, void **request)
{
  struct mc_net_mesh_comm *mc = recv_comm;
  struct mesh_req *r;
  uint64_t seq;

  (void)tags;
  (void)mhandles;
  if ((mc == NULL) || mc->is_send || (request == NULL) || (data == NULL) || (sizes == NULL))
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: irecv(comm %p): bad argument", recv_comm);
  if (n != 1)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: irecv of %d buffers: one buffer per request (max_recvs 1)", n);
  if (sizes[0] > MC_NET_SOCK_MAX_BYTES)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: irecv of %zu bytes: at most %llu bytes per request (max_p2p_bytes)",
                   sizes[0], (unsigned long long)MC_NET_SOCK_MAX_BYTES);
  if ((data[0] == NULL) && (sizes[0] > 0))
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: irecv of %zu bytes into NULL", sizes[0]);
  *request = NULL;
  MC_CHECK(comm_progress(mc));
  if (!mc_net_mesh_rel_post(&mc->rel, &seq))
    return ncclSuccess;
  r = &mc->reqs[seq % NREQ];
  r->seq = seq;
  r->data = data[0];
  r->bytes = sizes[0];
  r->got = 0;
  r->sreq = NULL;
  if (mc->state == ST_UP)
    MC_CHECK(post_pending(mc));
  *request = r;
  return ncclSuccess;
}

static ncclResult_t test_locked(void *request, int *done, size_t *sizes)
{
  struct mesh_req *r = request;
  struct mc_net_mesh_comm *mc;

  if ((r == NULL) || (done == NULL) || (r->comm == NULL) ||
      ((r->comm->rel.slot[r->seq % NREQ] & MC_NET_MESH_SLOT_USED) == 0))
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: test(%p): not a pending request", request);
  mc = r->comm;
  *done = 0;
  MC_CHECK(comm_progress(mc));
  if (mc_net_mesh_rel_is_done(&mc->rel, r->seq) && (r->sreq == NULL)) {
    if (sizes != NULL)
      sizes[0] = r->got;
    mc_net_mesh_rel_release(&mc->rel, r->seq);
    *done = 1;
  }
  return ncclSuccess;
}

ncclResult_t mc_net_mesh_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                               void **request)
{
  struct mc_net_mesh_comm *mc = send_comm;
  ncclResult_t res;

  if (mc == NULL)
    return isend_locked(send_comm, data, size, tag, mhandle, request);
  pthread_mutex_lock(&mc->mu);
  res = isend_locked(send_comm, data, size, tag, mhandle, request);
  pthread_mutex_unlock(&mc->mu);
  return res;
}

ncclResult_t mc_net_mesh_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                               void **mhandles, void **request)
{
  struct mc_net_mesh_comm *mc = recv_comm;
  ncclResult_t res;

  if (mc == NULL)
    return irecv_locked(recv_comm, n, data, sizes, tags, mhandles, request);
  pthread_mutex_lock(&mc->mu);
  res = irecv_locked(recv_comm, n, data, sizes, tags, mhandles, request);
  pthread_mutex_unlock(&mc->mu);
  return res;
}

ncclResult_t mc_net_mesh_test(void *request, int *done, size_t *sizes)
{
  struct mesh_req *r = request;
  ncclResult_t res;

  if ((r == NULL) || (r->comm == NULL))
    return test_locked(request, done, sizes);
  pthread_mutex_lock(&r->comm->mu);
  res = test_locked(request, done, sizes);
  pthread_mutex_unlock(&r->comm->mu);
  return res;
}

void mc_net_mesh_comms_tick(struct mc_net_mesh_ctx *ctx)
{
  for (struct mc_net_mesh_comm *mc = ctx->recv_comms; mc != NULL; mc = mc->next) {
    if ((__atomic_load_n(&mc->has_resume, __ATOMIC_ACQUIRE) == 0) ||
        (pthread_mutex_trylock(&mc->mu) != 0))
      continue; /* nothing waits, or the caller is there and takes it */
    if ((mc->state != ST_LOST) && !is_aborted(mc) && (take_resume(mc, true) == ncclSuccess) &&
        (mc->state == ST_UP))
      write_ack(mc);
    pthread_mutex_unlock(&mc->mu);
  }
}

/* ---------- resumes, filed by the handshake thread (ctx->mu held) ---------- */

static struct mc_net_mesh_comm *find_recv(struct mc_net_mesh_ctx *ctx, uint64_t conn_id,
                                          uint64_t peer_host)
{
  for (struct mc_net_mesh_comm *mc = ctx->recv_comms; mc != NULL; mc = mc->next) {
    if ((mc->conn_id == conn_id) && (mc->peer_host == peer_host))
      return mc;
  }
  return NULL;
}

bool mc_net_mesh_resume_known(struct mc_net_mesh_ctx *ctx, uint64_t conn_id, uint64_t peer_host)
{
  return find_recv(ctx, conn_id, peer_host) != NULL;
}

const char *mc_net_mesh_resume_file(struct mc_net_mesh_ctx *ctx, uint64_t conn_id,
                                    uint64_t peer_host, unsigned attempt, int index, int n_socks,
                                    int fd, const union mc_sockaddr *peer, int nic)
{
  struct mc_net_mesh_comm *mc = find_recv(ctx, conn_id, peer_host);
  struct mc_net_mesh_group *g;

  if (mc == NULL)
    return "no receive comm of that connection is open here";
  g = mc->resume_partial;
  if ((g != NULL) && (mc->resume_attempt != attempt)) {
    /* A newer attempt: what the last one left is stale. */
    mc_net_mesh_group_free(g);
    mc->resume_partial = g = NULL;
  }
  if (g == NULL) {
    g = calloc(1, sizeof(*g));
    if (g != NULL)
      g->socks = calloc((size_t)n_socks + 1, sizeof(*g->socks));
    if ((g == NULL) || (g->socks == NULL)) {
      free(g);
      return "out of memory";
    }
    g->conn_id = conn_id;
    g->peer_host = peer_host;
    g->n_socks = n_socks;
    g->since_ns = mc_time_ns();
    g->nic = nic;
    for (int i = 0; i <= n_socks; i++)
      mc_sock_init(&g->socks[i]);
    mc->resume_partial = g;
    mc->resume_attempt = attempt;
  }
  if (g->n_socks != n_socks)
    return "its socket count differs from the other sockets of its connection";
  if (g->socks[index].fd >= 0)
    return "duplicate socket index";
  g->socks[index].fd = fd;
  g->socks[index].addr = *peer;
  if (index == 0)
    g->nic = nic;
  if (++g->n_got < g->n_socks + 1)
    return NULL;
  mc->resume_partial = NULL;
  mc_net_mesh_group_free(mc->resume_ready);
  mc->resume_ready = g;
  __atomic_store_n(&mc->has_resume, 1, __ATOMIC_RELEASE);
  return NULL;
}

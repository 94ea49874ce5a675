/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connections between ranks, NCCL's SIMPLE protocol on host memory
 * (NCCL src/transport/p2p.cc, shm.cc, net.cc and src/device/prims_simple.h): one direction, one
 * peer, one channel; a FIFO of MC_STEPS slots with monotonically increasing counters.
 *
 *   sender:   wait head + MC_STEPS > step, write slot step % MC_STEPS (or
 *             publish a pointer to its own memory, P2P only), then
 *             tail = step + 1
 *   receiver: wait tail > step, read the slot (or the published pointer),
 *             then head = step + 1
 *
 * Three transports fill the FIFO, chosen per pair in NCCL's order
 * (src/transport.cc selectTransport: the first whose canConnect accepts):
 *   P2P  same host, path allowed by ncclTopoCheckP2p: in one process the
 *        slots live on the sender's side and the receiver reads them (and
 *        any buffer the sender publishes) directly; across processes the
 *        slots are in a /dev/shm segment both map, and steps of at least
 *        the host's single-copy threshold (tp_cma.c) are the sender's own
 *        buffer, which the receiver reads with process_vm_readv
 *        (cross-memory attach: one copy where the FIFO makes two).
 *   SHM  same host: counters and slots in a /dev/shm segment created by the
 *        receiver and unlinked as soon as the sender has mapped it.
 *   NET  other hosts: local slots on both sides, moved by the rank's proxy
 *        thread through a net (struct mc_net_ops).
 * The data-path functions below are what the collectives call; they never
 * block. Waiting, backoff, abort and peer liveness belong to the caller.
 *
 * A step may carry a header of MC_CONN_HDR_BYTES beside its data (the
 * collectives put an operation's signature in the first step of each
 * connection, coll/coll.h): P2P and SHM keep it in the FIFO's control words,
 * which both ends share; NET sends it in front of the data in the same
 * message, and the receiving proxy takes it off again, on the step the
 * receiver announced as carrying one (mc_conn_recv_expect). A failure may
 * leave a few bytes of detail beside the error code (mc_conn_set_error_info),
 * which the other end reads where the control words are shared (P2P, SHM).
 */
#ifndef MC_TRANSPORT_H
#define MC_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nccl.h"
#include "topo/topo.h"
#include "topo/topo_graph.h"
#include "utils.h"

#define MC_STEPS               8   /* NCCL_STEPS */
#define MC_CONN_INFO_BYTES     256 /* one connect blob */
#define MC_CONN_ERR_BYTES      768 /* a failure's text kept with the connection */
#define MC_CONN_HDR_BYTES      32  /* a step's header (an operation's signature) */
#define MC_CONN_ERR_INFO_BYTES 64  /* detail of a failure beside ctrl->error */
#define MC_CONN_HDR_ROOM       64  /* NET: per slot, room for a header in front of the data */

/* Shared by both ends (heap in one process, /dev/shm across processes, the
 * proxy's heap for NET). */
struct mc_conn_ctrl {
  uint64_t tail __attribute__((aligned(64)));  /* written by the sender */
  uint64_t head __attribute__((aligned(64)));  /* written by the receiver */
  uint32_t error __attribute__((aligned(64))); /* ncclResult_t of a failure on either side */
  uint32_t info_claim;                         /* the first to post detail sets it (atomic) */
  uint32_t info_bytes;                         /* detail of that failure (0: none; atomic) */
  uint8_t info[MC_CONN_ERR_INFO_BYTES];
  /* P2P between ranks of one process, whose receiver reads the sender's
   * buffers in place: reader, the receiver is inside such a read
   * (mc_conn_recv_pin); withdrawn, the sender's operation failed and its
   * unread pointers are gone (mc_conn_send_withdraw). */
  uint32_t reader __attribute__((aligned(64)));
  uint32_t withdrawn;
  uint64_t want __attribute__((aligned(64))); /* receiver: steps its operations will take (NET) */
  uint64_t hdr_step;                          /* receiver: the announced step with a header (NET) */
  struct {
    uint64_t ptr; /* 0: data in the slot; else an address in the sender */
    uint64_t bytes;
    uint32_t hdr_bytes; /* 0, or MC_CONN_HDR_BYTES when hdr holds the step's header */
    uint8_t hdr[MC_CONN_HDR_BYTES];
  } fifo[MC_STEPS] __attribute__((aligned(64)));
};

struct mc_proxy;
struct mc_net_conn;
struct mc_tp_shared;
struct mc_transport;

/* Sender over SHM: whether slot writes stream past the caches
 * (tp_stream.c). A line the receiver reads while it is dirty in the
 * sender's cache crosses between the cores; a streamed line comes from
 * memory. Which is faster depends on the cores, the caches and memory of
 * the host, which a VM's placement may change, so in "auto" the sender
 * measures it: after MC_STREAM_WARMUP_STEPS large steps with plain stores
 * it alternates windows of plain and of streaming writes, times each step's
 * cycle (from the previous commit to its own, within one operation: the
 * write, the wait for the receiver to free the slot and whatever else paces
 * the pipeline), keeps the mode in use unless the other's windows are
 * clearly faster (mc_tp_decide_stream) and measures again every
 * MC_STREAM_RECHECK_BYTES. */
#define MC_STREAM_SAMPLES       5            /* windows per mode in one calibration */
#define MC_STREAM_RECHECK_BYTES (512u << 20) /* large-step bytes between calibrations */
/* Large steps before the first calibration: as many as a calibration
 * takes (2 modes x MC_STREAM_SAMPLES windows of 2 * MC_STEPS steps), so that
 * it does not time the ranks' warm-up */
#define MC_STREAM_WARMUP_STEPS (2u * MC_STREAM_SAMPLES * 2u * MC_STEPS)
struct mc_conn_stream {
  int8_t mode;          /* MESHCCL_SHM_STREAM: -1 auto, 0 never, 1 always */
  bool on;              /* slot writes stream now */
  bool calibrating;     /* auto: windows of both modes in turns */
  uint8_t win_steps;    /* large steps of the current window so far */
  uint8_t n_samples[2]; /* windows measured per mode (0 plain, 1 streaming) */
  uint64_t commit_ns;   /* CLOCK_MONOTONIC of the last commit while calibrating (0: none) */
  uint64_t win_ns;      /* the window's counted slot cycles */
  uint64_t win_bytes;   /* ... and their bytes */
  uint64_t run_bytes;   /* large-step bytes since the last decision */
  float mbps[2][MC_STREAM_SAMPLES]; /* the calibration's window rates (MB/s) */
  float med[2];                     /* the last decision's medians (MB/s) */
  uint32_t n_decide;                /* decisions taken (for the log) */
  uint32_t n_flip;                  /* decisions that changed the mode (for the log) */
  bool kept;                        /* the mode decided last (plain before the first) */
  bool unsure;                      /* the last calibration's windows did not separate */
  uint32_t warm_steps;              /* large steps before the first calibration so far */
};

struct mc_conn {
  enum mc_topo_transport kind;
  const struct mc_transport *tp; /* the table that set it up */
  bool is_send;
  int peer; /* rank at the other end */
  int channel;
  bool remote_read;     /* receiver: published pointers are in another process
                         * (P2P/CMA; its slots are in a segment both map) */
  bool ignores_ptr;     /* receiver: the counters are shared with another process
                         * that publishes no pointers (SHM): one found in the FIFO
                         * is never followed, the data is the slot's */
  int peer_pid;         /* for process_vm_readv */
  bool can_send_ptr;    /* sender: may publish pointers to its own memory (P2P) */
  size_t ptr_min_bytes; /* sender: ... for steps of at least this many bytes
                         * (P2P/CMA: the host's threshold, tp_cma.c) */
  struct mc_conn_ctrl *ctrl;
  char *slots; /* MC_STEPS * slot_bytes (an address in the sender if remote_read) */
  size_t slot_bytes;
  uint64_t step;                /* this side's next step */
  uint64_t ptr_step;            /* sender: 1 + last step that published a pointer */
  uint32_t hdr_next;            /* sender: a header is staged for the next commit (its bytes) */
  bool pinned;                  /* receiver: holds ctrl->reader (mc_conn_recv_pin) */
  struct mc_conn_stream stream; /* sender over SHM (mode 0 elsewhere) */
  /* owned resources */
  void *map; /* shm mapping */
  size_t map_bytes;
  char shm_name[64]; /* while still linked */
  void *own_ctrl;    /* heap ctrl (NET) */
  /* P2P in one process: the counters and the sender's slots, shared by both
   * ends and freed by the last (either communicator may be aborted or
   * destroyed while the other still polls them). */
  struct mc_tp_shared *shared;
  void *own_slots; /* heap slots (P2P sender, NET) */
  struct mc_net_conn *net;
  struct mc_proxy *proxy;
  /* Why the connection failed, as the side that saw it said it (the NET
   * proxy: the net's message), for the collective's own error; written
   * before ctrl->error, read after it. */
  char error_text[MC_CONN_ERR_BYTES];
};

/* ---------------------------------------------------------------- data path */

static inline uint32_t mc_conn_error(const struct mc_conn *c)
{
  return __atomic_load_n(&c->ctrl->error, __ATOMIC_ACQUIRE);
}

static inline void mc_conn_set_error(struct mc_conn *c, ncclResult_t res)
{
  __atomic_store_n(&c->ctrl->error, (uint32_t)res, __ATOMIC_RELEASE);
}

/* Posts a failure with bytes (<= MC_CONN_ERR_INFO_BYTES) of detail, unless one
 * was posted already; the detail is written before the code. Both ends may
 * post at once: one writes the detail (info_claim), which is complete
 * before info_bytes says it is there. */
static inline void mc_conn_set_error_info(struct mc_conn *c, ncclResult_t res, const void *info,
                                          size_t bytes)
{
  uint32_t unclaimed = 0;
  uint32_t no_error = 0;

  if (mc_conn_error(c) != 0)
    return;
  if (!__atomic_compare_exchange_n(&c->ctrl->info_claim, &unclaimed, 1, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return;
  if (bytes > MC_CONN_ERR_INFO_BYTES)
    bytes = MC_CONN_ERR_INFO_BYTES;
  memcpy(c->ctrl->info, info, bytes);
  __atomic_store_n(&c->ctrl->info_bytes, (uint32_t)bytes, __ATOMIC_RELEASE);
  __atomic_compare_exchange_n(&c->ctrl->error, &no_error, (uint32_t)res, false, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
}

/* The detail of a posted failure (read after mc_conn_error): its bytes, 0 for none. */
static inline size_t mc_conn_error_info(const struct mc_conn *c, void *out)
{
  size_t bytes = __atomic_load_n(&c->ctrl->info_bytes, __ATOMIC_ACQUIRE);

  if (bytes > MC_CONN_ERR_INFO_BYTES)
    return 0;
  memcpy(out, c->ctrl->info, bytes);
  return bytes;
}

/* Sender whose operation failed: a receiver of this process may still
 * read pointers it published (the user's buffers, which the user may free
 * once the call returns). Withdraws them, so that no receiver starts such a
 * read, and waits (at most MC_WITHDRAW_WAIT_MS; a read in progress takes
 * one step's copy) for one in progress to end (mc_conn_recv_pin). Nothing
 * for other connections. */
#define MC_WITHDRAW_WAIT_MS 1000
void mc_conn_send_withdraw(struct mc_conn *c);

/* The end at rank `rank` was aborted (ncclCommAbort): posted on its P2P and
 * SHM connections, whose control words the peer shares, so that the peer
 * stops waiting at once and names the rank (unless a failure was posted
 * already). */
void mc_conn_post_abort(struct mc_conn *c, int rank);
/* The rank whose abort c's posted failure is, or -1 (read after mc_conn_error). */
int mc_conn_abort_rank(const struct mc_conn *c);

/* Sender: a slot is free. */
static inline bool mc_conn_send_ready(const struct mc_conn *c)
{
  return __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE) + MC_STEPS > c->step;
}

/* Sender: mc_conn_send_ready (the collectives' hook for the sender's
 * measurements; none needs it now). */
static inline bool mc_conn_send_ready_sampled(struct mc_conn *c)
{
  return mc_conn_send_ready(c);
}

/* Sender over SHM in auto mode: the step just committed (bytes, its slot
 * cycle cycle_ns: 0 when it was not timed) in the calibration, or in the
 * count towards the next one; true when it ended a calibration (the
 * decision is in on, med, n_decide, n_flip). Pure: tests drive it. */
bool mc_conn_stream_step(struct mc_conn_stream *st, size_t slot_bytes, size_t bytes,
                         uint64_t cycle_ns);
/* Sender over SHM in auto mode: the step just committed, timed unless it
 * is the first of an operation (is_first: it carried a header). */
void mc_conn_stream_commit(struct mc_conn *c, size_t bytes, bool is_first);
/* Sender over SHM: its stream settings from MESHCCL_SHM_STREAM. */
void mc_conn_stream_init(struct mc_conn *c);
/* dst = src with streaming stores (x86-64; the bytes before dst's first
 * 16-byte boundary, and copies under 64 bytes past it, with memcpy; memcpy
 * elsewhere), fenced: the lines are in memory, not in this core's cache. */
void mc_copy_stream(void *dst, const void *src, size_t bytes);
/* Sender: copies bytes into a slot, streamed when the connection says so. */
void mc_conn_slot_copy(const struct mc_conn *c, void *slot, const void *src, size_t bytes);

static inline void *mc_conn_send_slot(const struct mc_conn *c)
{
  return c->slots + (size_t)(c->step % MC_STEPS) * c->slot_bytes;
}

/* Sender (the slot is free: mc_conn_send_ready): the next committed step
 * carries hdr (MC_CONN_HDR_BYTES) beside its data. */
static inline void mc_conn_send_hdr(struct mc_conn *c, const void *hdr)
{
  memcpy(c->ctrl->fifo[c->step % MC_STEPS].hdr, hdr, MC_CONN_HDR_BYTES);
  c->hdr_next = MC_CONN_HDR_BYTES;
}

/* Sender: whether a step of bytes of stable data (unchanged until the
 * operation ends) may be published as a pointer instead of copied into a
 * slot (P2P between processes: from the host's single-copy threshold). */
static inline bool mc_conn_send_ptr_ok(const struct mc_conn *c, size_t bytes)
{
  return c->can_send_ptr && (bytes >= c->ptr_min_bytes);
}

/* Sender: publishes the slot (ptr NULL) or a pointer to its own memory that
 * stays unchanged until the receiver released that step. */
static inline void mc_conn_send_commit(struct mc_conn *c, const void *ptr, size_t bytes)
{
  unsigned s = (unsigned)(c->step % MC_STEPS);
  uint32_t hdr = c->hdr_next;
  c->ctrl->fifo[s].ptr = (uint64_t)(uintptr_t)ptr;
  c->ctrl->fifo[s].bytes = bytes;
  c->ctrl->fifo[s].hdr_bytes = hdr;
  c->hdr_next = 0;
  if (ptr != NULL)
    c->ptr_step = c->step + 1;
  c->step++;
  __atomic_store_n(&c->ctrl->tail, c->step, __ATOMIC_RELEASE);
  if (c->stream.mode < 0)
    mc_conn_stream_commit(c, bytes, hdr != 0);
}

/* Sender: the user's buffers and this process may go: every published
 * pointer has been read, and with P2P (slots in this process) and NET (the
 * proxy still sending) every step has been taken. */
static inline bool mc_conn_send_drained(const struct mc_conn *c)
{
  uint64_t need = (c->kind == MC_TOPO_TRANSPORT_SHM) ? c->ptr_step : c->step;
  return __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE) >= need;
}

/* Receiver: steps c->step .. the returned one - 1 have arrived. */
static inline uint64_t mc_conn_recv_arrived(const struct mc_conn *c)
{
  return __atomic_load_n(&c->ctrl->tail, __ATOMIC_ACQUIRE);
}

/* Receiver: the next step's data is a pointer into a sender of this
 * process (P2P between ranks of one process), read in place. */
static inline bool mc_conn_recv_direct(const struct mc_conn *c)
{
  return (c->kind == MC_TOPO_TRANSPORT_P2P) && !c->remote_read &&
         (c->ctrl->fifo[c->step % MC_STEPS].ptr != 0);
}

/* Receiver: the next step has arrived (and, read in place, its sender has
 * not withdrawn it: then the step never comes, and the sender's posted
 * failure says why). */
static inline bool mc_conn_recv_ready(const struct mc_conn *c)
{
  return (mc_conn_recv_arrived(c) > c->step) &&
         !(mc_conn_recv_direct(c) && (__atomic_load_n(&c->ctrl->withdrawn, __ATOMIC_ACQUIRE) != 0));
}

/* Receiver (after mc_conn_recv_ready), before it touches the next step's
 * data: a step read in place stays valid until mc_conn_recv_release or
 * mc_conn_recv_unpin, even if its sender fails meanwhile (the sender waits
 * for the reader, mc_conn_send_withdraw: the user may free the buffer as
 * soon as the failed call returns). False: the sender withdrew it first;
 * the step is not ready after all. Nothing to do for other steps. */
static inline bool mc_conn_recv_pin(struct mc_conn *c)
{
  if (c->pinned || !mc_conn_recv_direct(c))
    return true;
  __atomic_store_n(&c->ctrl->reader, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&c->ctrl->withdrawn, __ATOMIC_SEQ_CST) != 0) {
    __atomic_store_n(&c->ctrl->reader, 0, __ATOMIC_RELEASE);
    return false;
  }
  c->pinned = true;
  return true;
}

/* Receiver: done with the next step's data without taking the step. */
static inline void mc_conn_recv_unpin(struct mc_conn *c)
{
  if (!c->pinned)
    return;
  c->pinned = false;
  __atomic_store_n(&c->ctrl->reader, 0, __ATOMIC_RELEASE);
}

/* Receiver: where the data of step k (arrived, not released) is (in the
 * sender when c->remote_read) and its size. */
static inline const char *mc_conn_recv_data_at(const struct mc_conn *c, uint64_t k, size_t *bytes)
{
  unsigned s = (unsigned)(k % MC_STEPS);
  uint64_t p = c->ctrl->fifo[s].ptr;
  /* UINT64_MAX: the net could not tell (MC_NET_SIZE_UNKNOWN). */
  *bytes = (c->ctrl->fifo[s].bytes == UINT64_MAX) ? (size_t)-1 : (size_t)c->ctrl->fifo[s].bytes;
  return ((p != 0) && !c->ignores_ptr) ? (const char *)(uintptr_t)p
                                       : c->slots + (size_t)s * c->slot_bytes;
}

/* Receiver: the header of step k (arrived, not released), NULL when it carries none. */
static inline const void *mc_conn_recv_hdr_at(const struct mc_conn *c, uint64_t k)
{
  unsigned s = (unsigned)(k % MC_STEPS);

  return (c->ctrl->fifo[s].hdr_bytes == MC_CONN_HDR_BYTES) ? c->ctrl->fifo[s].hdr : NULL;
}

/* Receiver: where the next step's data is and its size. */
static inline const char *mc_conn_recv_data(const struct mc_conn *c, size_t *bytes)
{
  return mc_conn_recv_data_at(c, c->step, bytes);
}

/* Receiver (after mc_conn_recv_ready): the header of the next step, NULL when it carries none. */
static inline const void *mc_conn_recv_hdr(const struct mc_conn *c)
{
  return mc_conn_recv_hdr_at(c, c->step);
}

/* Receiver: an operation starting now (c's earlier steps all taken) takes
 * steps c->step .. c->step + n - 1, the first with a header. The proxy posts
 * network receives only for announced steps (as NCCL's proxy ops carry their
 * step count), so nothing is pending when the peer closes after the last;
 * announcing the same steps again changes nothing. */
static inline void mc_conn_recv_expect(struct mc_conn *c, uint64_t n)
{
  uint64_t want = c->step + n;

  /* Atomic: the proxy thread reads it while it posts receives; the release
   * store of want below publishes it with the steps it belongs to. */
  __atomic_store_n(&c->ctrl->hdr_step, c->step, __ATOMIC_RELAXED);
  if (want > c->ctrl->want)
    __atomic_store_n(&c->ctrl->want, want, __ATOMIC_RELEASE);
}

static inline void mc_conn_recv_release(struct mc_conn *c)
{
  c->step++;
  __atomic_store_n(&c->ctrl->head, c->step, __ATOMIC_RELEASE);
  mc_conn_recv_unpin(c);
}

/* Receiver: the next step's data lives in the sending process (a pointer
 * it published over P2P/CMA): mc_conn_read must fetch it. */
static inline bool mc_conn_recv_remote(const struct mc_conn *c)
{
  return c->remote_read && (c->ctrl->fifo[c->step % MC_STEPS].ptr != 0);
}

/* Receiver: copies bytes of the next step's data at src (from
 * mc_conn_recv_data) into dst: memcpy, or process_vm_readv from the sending
 * process when it is remote (mc_conn_recv_remote). */
ncclResult_t mc_conn_read(const struct mc_conn *c, void *dst, const char *src, size_t bytes);

/* ------------------------------------------------------------------- setup */

/* What the transports need to know about a rank. */
struct mc_tp_peer {
  int pid;
  uint64_t host_hash;
  uint64_t pid_hash;
  uint64_t shm_dev;
  uint64_t canary; /* an address in that process, readable to test process_vm_readv */
  /* In this rank's PID namespace (both known): only then is pid that
   * process here, for process_vm_readv. */
  bool same_pidns;
};

struct mc_boot;
struct mc_topo_system;
struct mc_net_ops;

/* One rank's transport state (owned by its communicator). */
struct mc_tp_comm {
  struct mc_boot *boot;
  int rank;
  int n_ranks;
  const struct mc_tp_peer *peers; /* [n_ranks] */
  struct mc_topo_system *topo;    /* this rank's system (P2P/SHM/NET choice) */
  uint64_t comm_hash;
  const volatile uint32_t *abort_flag;
  size_t slot_bytes; /* NCCL_BUFFSIZE / MC_STEPS */
  /* All-reduces of at most this many bytes go one-shot (init_connect.c
   * decides; the same on every rank of the communicator). */
  size_t oneshot_bytes;
  /* Out-of-place operations with at least this many bytes of output write
   * what they receive into it with streaming stores (init_connect.c
   * decides: mc_tp_decide_stream_out; 0: never). */
  size_t stream_out_bytes;
  /* The symmetric all-reduce's pipeline chunk (coll_sym.c; init_connect.c
   * decides: mc_tp_decide_sym_chunk, the same on every rank of the host). */
  size_t sym_chunk_bytes;
  const struct mc_net_ops *net;
  const uint8_t *net_secret; /* MC_NET_SECRET_BYTES, or NULL (struct mc_net_init_args) */
  void *net_ctx;             /* net's context, initialised and owned by the caller */
  int net_ndev;              /* devices of net (physical and virtual) */
  struct mc_proxy *proxy;    /* started with the first NET connection */
  /* The rank abandoned the proxy thread inside a plugin call: the net's
   * context, which that call may use, must not be finalized. */
  bool proxy_abandoned;
  bool cma_warned;
  /* NET connections must be established by setup_dl (the owner sets it
   * around init's connect; without it, mc_boot_op_timeout_ms from the call). */
  bool has_setup_dl;
  struct mc_deadline setup_dl;
};

/* A connection to make: this rank's send end towards peer, or its receive
 * end from peer, for a channel; conn_index separates ring (0) from p2p (1). */
struct mc_conn_req {
  int peer;
  bool is_send;
  int channel;
  int conn_index;
  size_t slot_bytes;    /* 0: the communicator's (NCCL_BUFFSIZE / MC_STEPS) */
  struct mc_conn *conn; /* in: zeroed storage; out: connected */
  bool has_net_dev;     /* NET: the topology chose the device (ncclTopoGetNetDev) */
  int net_dev;          /* that device; without it, channel % devices */
};

/* Connects every request (a collective call: each request's peer must make
 * the matching one). Blocks until every connection is up, the set-up
 * deadline (tc->setup_dl) passes (ncclTimeout naming a pending connection),
 * without a set-up deadline (a collective's connections at first use) no
 * NET connection completed for MESHCCL_NET_TIMEOUT (ncclRemoteError naming
 * a pending connection), the bootstrap root reports another rank's failure (that report, naming
 * the rank), or the abort flag is set. On failure every connection made is
 * freed. */
ncclResult_t mc_transport_connect(struct mc_tp_comm *tc, struct mc_conn_req *reqs, int n);

/* Several communicators' requests at once (one thread driving several
 * ranks, as ncclCommInitAll users do): every round runs over all of them. */
struct mc_tp_set {
  struct mc_tp_comm *tc;
  struct mc_conn_req *reqs;
  int n;
};
ncclResult_t mc_transport_connect_sets(struct mc_tp_set *sets, int n_sets);

/* Releases a connection's resources (stops its use by the proxy first). */
void mc_conn_free(struct mc_conn *c);

/* What a pass of the proxy over its connections did (flags): posted a
 * request to the net (the rank's own work: a step it wrote, a receive it
 * wants), or completed a step (a peer took or gave data: the only sign of a
 * live peer, which the rank's and the watchdog's clocks of waiting count). */
#define MC_PROXY_POSTED 1u
#define MC_PROXY_DONE   2u

/* The rank, while it waits on the network, advances the proxy's connections
 * itself when the proxy thread is not at it (no hand-off between threads);
 * returns MC_PROXY_* flags, 0 when nothing moved. p may be NULL. */
unsigned mc_proxy_help(struct mc_proxy *p);

/* Stops the rank's proxy thread (before its connections are freed). */
void mc_tp_proxy_stop(struct mc_tp_comm *tc);
/* Finalizes the net (after every connection was freed). */
void mc_tp_comm_free(struct mc_tp_comm *tc);

/* While a collective waits (now_ns): whether the proxy thread has been
 * inside one plugin call for limit_ns (MESHCCL_NET_TIMEOUT); the first time
 * it is, the rank abandons the thread (it and what it may touch are never
 * freed) and text says so. p may be NULL. */
bool mc_proxy_wedged_check(struct mc_proxy *p, uint64_t now_ns, uint64_t limit_ns, char *text,
                           size_t text_bytes);
/* Whether the rank abandoned the proxy thread (mc_proxy_wedged_check). */
bool mc_proxy_wedged(const struct mc_proxy *p);

/* A collective starts (+1) or ends (-1) on this rank: the proxy thread
 * polls its NET connections only while one runs. p may be NULL. */
void mc_proxy_activity(struct mc_proxy *p, int delta);

/* The P2P/CMA probe of this process (tp_cma.c; figures: tp_decide.h):
 * measured at the first call (a few ms) unless adopted from the host's first
 * local rank (mc_tp_cma_adopt), logged once at
 * NCCL_DEBUG_SUBSYS=TUNING with the decision for slots of slot_bytes;
 * *why_out (may be NULL) says why it could not measure CMA (then no
 * figures), else NULL. Thread-safe. bench/limit prints it too. */
struct mc_cma_figures;
void mc_tp_cma_probe(size_t slot_bytes, struct mc_cma_figures *out, const char **why_out);
/* Whether the settings leave single copy between processes to the probe:
 * MESHCCL_P2P_CMA auto (-1) and MESHCCL_P2P_CMA_BYTES unset. */
bool mc_tp_cma_by_probe(void);
/* The same figures without the TUNING line: measured here at the first call
 * of either (a host's first local rank, for the others: init_connect.c). */
void mc_tp_cma_measure(struct mc_cma_figures *out, const char **why_out);
/* Takes figures measured by rank from_rank's process on this host as this
 * process's, unless it has its own already; the TUNING line names that rank. */
void mc_tp_cma_adopt(const struct mc_cma_figures *f, int from_rank);

/* The hand-off probe of this process (tp_handoff.c; figures: tp_decide.h
 * mc_handoff_figures): measured at the first call (at most 2 ms, two
 * threads pinned to this thread's CPU and another), no log of its own;
 * *info_out (may be NULL) says where and how long, and why there are no
 * figures (why[0] != 0). Thread-safe. */
struct mc_handoff_figures;
struct mc_handoff_info {
  int cpu_a; /* the CPUs of the two threads (-1: none) */
  int cpu_b;
  double ms; /* wall time of the probe */
  char why[96];
};
void mc_tp_handoff_probe(struct mc_handoff_figures *out, struct mc_handoff_info *info_out);
/* What the hand-off probe found, without running it: false (and cpu_a -1)
 * when it has not run in this process. */
bool mc_tp_handoff_probe_peek(struct mc_handoff_figures *out, struct mc_handoff_info *info_out);

/* Removes /dev/shm segments left by processes that were killed between
 * creating a segment and their peer mapping it (once per communicator init). */
void mc_tp_collect_orphans(void);

#define MC_TREE_MAX_ARITY 3 /* NCCL_MAX_TREE_ARITY */

/* One channel (NCCL's ncclChannel): its ring (the order, this rank's place
 * in it, two connections) and its tree (NCCL's ncclTree: parent and up to
 * three children, -1 = none, and a connection each way with each). The
 * ring and tree orders may differ from channel to channel; the collectives
 * take positions from them, never from rank numbers. Tree connections are
 * made at the first collective that runs on the tree (runtime connect). */
struct mc_channel {
  int id;
  int prev;  /* rank this rank receives from */
  int next;  /* rank this rank sends to */
  int *ring; /* [n_ranks] ring order starting at this rank: ring[0] == rank */
  struct mc_conn send;
  struct mc_conn recv;
  int tree_up;                                      /* parent, -1 at the root */
  int tree_down[MC_TREE_MAX_ARITY];                 /* children, -1 = none */
  struct mc_conn tree_send_up;                      /* to tree_up */
  struct mc_conn tree_recv_up;                      /* from tree_up */
  struct mc_conn tree_send_down[MC_TREE_MAX_ARITY]; /* to tree_down[i] */
  struct mc_conn tree_recv_down[MC_TREE_MAX_ARITY]; /* from tree_down[i] */
};

/* Most channels a communicator runs (NCCL's MAXCHANNELS). */
#define MC_MAX_CHANNELS MC_TOPO_MAX_CHANNELS

/* A communicator's data path (its part of struct ncclComm, comm->data): the
 * transports and channels init's stage "connect" makes (init_connect.c)
 * and the collectives (src/coll) run on; freed by mc_comm_free_connections. */
struct mc_comm_data {
  struct mc_tp_peer *tp_peers; /* [n_ranks] what the transports know of each peer */
  struct mc_tp_comm tp;
  int n_channels;
  struct mc_channel *channels; /* [n_channels] */
  char *scratch;               /* n_channels + 1 slot-sized bounce buffers */
  int spin_passes; /* idle polls before yielding: few when the host's ranks outnumber its CPUs */
  int n_threads;   /* threads that run this rank's channels (mc_tp_decide_threads) */
};

#endif /* MC_TRANSPORT_H */

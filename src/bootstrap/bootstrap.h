/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap network of one communicator: unique id, root, ring, ring
 * allgather, send/recv by (peer, tag), barrier, allgather among a subset of
 * ranks. Mirrors NCCL's bootstrap.cc, with one addition: every rank keeps a
 * control connection to the root until its init completes, so a rank that
 * dies, fails or never arrives is named to every other rank within a poll
 * tick (NCCL leaves them waiting).
 *
 * Thread-safety: one struct mc_boot is used by one thread at a time (the
 * communicator's init or API thread); the abort flag may be set from any
 * thread and ends every wait within about 10 ms.
 */
#ifndef MC_BOOTSTRAP_H
#define MC_BOOTSTRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"
#include "socket/socket.h"

#define MC_BOOT_SECRET_BYTES 32

/* Where the secret of an id comes from. */
enum mc_boot_secret_source {
  MC_BOOT_SECRET_RANDOM = 1,  /* getrandom, in an id that travels (ncclGetUniqueId) */
  MC_BOOT_SECRET_ENV = 2,     /* NCCL_COMM_ID id: derived from MESHCCL_SECRET and the address */
  MC_BOOT_SECRET_ADDRESS = 3, /* NCCL_COMM_ID id without MESHCCL_SECRET: from the address only */
  MC_BOOT_SECRET_PUBLIC = 4,  /* published id (meshcclGetPublicUniqueId): no secret in it */
  MC_BOOT_SECRET_NONCE = 5    /* from MESHCCL_SECRET and a published id's magic and nonce */
};

/*
 * The contents of ncclUniqueId (128 bytes): NCCL's ncclBootstrapHandle
 * (magic, address, nRanks) followed by the job's secret and a nonce. Every
 * bootstrap connection proves knowledge of the secret (docs/design/bootstrap.md), so the id must
 * travel only among the job's ranks, except in its published form (MC_BOOT_SECRET_PUBLIC), whose
 * secret is zero and is derived on every rank from MESHCCL_SECRET and the nonce.
 */
struct mc_boot_handle {
  uint64_t magic;                       /* offset 0 */
  union mc_sockaddr addr;               /* offset 8: the root's listening address */
  int32_t n_ranks;                      /* offset 36: 0 for ids of ncclGetUniqueId */
  uint32_t secret_source;               /* offset 40: enum mc_boot_secret_source */
  uint32_t reserved;                    /* offset 44: 0 */
  uint8_t secret[MC_BOOT_SECRET_BYTES]; /* offset 48 */
  uint8_t reserved2[16];                /* offset 80: 0 */
  uint8_t nonce[32];                    /* offset 96: random in a published id, else 0 (users may
                                           write their own, as the torch backend does) */
};

/* NCCL's magic for ids built from NCCL_COMM_ID. */
#define MC_BOOT_COMM_ID_MAGIC 0x0280028002800280ull

/* Reserved tags of mc_boot_send/recv (NCCL's values). */
#define MC_BOOT_TAG_COMMSPLIT (1 << 29)
#define MC_BOOT_TAG_SHRINK    (1 << 27)
#define MC_BOOT_TAG_INTRANODE (1 << 28)

/* Largest payload accepted from a peer by send/recv and allgather. */
#define MC_BOOT_MAX_MSG_BYTES (256u << 20)

/* Finds the bootstrap interface once per process (NCCL_SOCKET_IFNAME,
 * NCCL_SOCKET_FAMILY, and the route to the root: root_hint when not NULL,
 * else NCCL_COMM_ID) and returns it. */
ncclResult_t mc_boot_net_init(const union mc_sockaddr *root_hint, struct mc_ifc *ifc_out);

/* An id naming a root at addr with NCCL's NCCL_COMM_ID magic: every rank
 * computes the same one (its secret from MESHCCL_SECRET and addr, or from
 * addr alone, said once at WARN); rank 0 starts the root during init. */
ncclResult_t mc_boot_unique_id_at(const union mc_sockaddr *addr, ncclUniqueId *id_out);

/* A wait of ms milliseconds (< 0: no deadline) that ends on the abort flag. */
struct mc_wait mc_boot_wait_make(int64_t ms, const volatile uint32_t *abort_flag);

/*
 * Fills a unique id. With use_comm_id and NCCL_COMM_ID set, the id names that
 * address (magic MC_BOOT_COMM_ID_MAGIC, secret as mc_boot_unique_id_at) and
 * no root is started; otherwise the id gets a random magic and secret
 * (getrandom) and a root starts listening on the bootstrap interface in this
 * process.
 */
ncclResult_t mc_boot_unique_id(bool use_comm_id, ncclUniqueId *id_out);

/*
 * The published form of a unique id (meshcclGetPublicUniqueId), for
 * channels others can read: like mc_boot_unique_id(true, ...) (NCCL_COMM_ID
 * or a root started here), with a random nonce, the secret zero and
 * MC_BOOT_SECRET_PUBLIC. The root started here, if any, already expects the
 * secret mc_boot_id_add_secret derives. ncclInvalidUsage when MESHCCL_SECRET
 * is unset.
 */
ncclResult_t mc_boot_unique_id_public(ncclUniqueId *id_out);

/*
 * Completes a published id: secret = HMAC-SHA256 keyed with MESHCCL_SECRET
 * over a label, the magic and the nonce (MC_BOOT_SECRET_NONCE). An id that
 * is not published is left as it is. ncclInvalidUsage, naming the
 * variable, when MESHCCL_SECRET is unset and the id is published.
 */
ncclResult_t mc_boot_id_add_secret(ncclUniqueId *id_io);

/* Says once per process, at WARN, that an id whose secret comes from its
 * address alone (NCCL_COMM_ID without MESHCCL_SECRET) lets anyone who can
 * reach the root join; other ids say nothing. */
void mc_boot_id_say_open(const ncclUniqueId *id);

/* True for the published form of an id (no secret: no rank may init with it). */
bool mc_boot_id_is_public(const ncclUniqueId *id);

/* True when the id was built from NCCL_COMM_ID (rank 0 must start the root). */
bool mc_boot_id_is_comm_id(const ncclUniqueId *id);

/*
 * Several roots (ncclCommInitRankScalable with nId > 1). Mirrors NCCL's
 * rootIdFromRank / firstRankFromRoot (bootstrap.cc): the ranks are cut into
 * n_roots contiguous groups in rank order, the first n_ranks % n_roots
 * groups one rank larger; group i registers with root i. Pure functions,
 * 1 <= n_roots <= n_ranks, 0 <= rank < n_ranks, 0 <= root <= n_roots (root
 * n_roots gives n_ranks).
 */
int mc_boot_root_of_rank(int rank, int n_ranks, int n_roots);
int mc_boot_root_first_rank(int root, int n_ranks, int n_roots);

/*
 * The id of a job with n_ids roots (n_ids >= 1): the magic and address of
 * ids[0] (as NCCL takes its magic from the first handle) and a secret that
 * every rank derives alike, SHA-256 over a label and every id's magic and
 * secret in order. Ring and peer connections authenticate with it; each
 * root only admits ranks that prove its own id's secret. With one id, the
 * id itself. ncclInvalidArgument naming the index when an id is not one of
 * ncclGetUniqueId's (zero, NCCL_COMM_ID, no usable address) or two ids
 * name the same root.
 */
ncclResult_t mc_boot_job_id(const ncclUniqueId *ids, int n_ids, const char *call,
                            ncclUniqueId *job_out);

struct mc_boot_root;

/* Starts the root for an NCCL_COMM_ID id (rank 0). A failed communicator's
 * root of this process that still holds the port is stopped (and waited for
 * up to a second); when another process listens on the port, fails at once
 * with ncclInvalidUsage naming the port. */
ncclResult_t mc_boot_root_start_comm_id(const ncclUniqueId *id, const struct mc_wait *w);

/* Takes a reference on the root of `id` when it lives in this process (else NULL). */
struct mc_boot_root *mc_boot_root_claim(const ncclUniqueId *id);
/* Drops the reference; the last one waits up to wait_ms for the root to
 * finish, then stops it (telling ranks still waiting why) and joins it. */
void mc_boot_root_release(struct mc_boot_root *root, int wait_ms);

struct mc_boot;

struct mc_boot_config {
  int rank;
  int n_ranks;
  ncclUniqueId id; /* the job's id (mc_boot_job_id when n_ids > 1) */
  /* The roots: n_ids == 1, id's root; else rank registers with root
   * mc_boot_root_of_rank of ids[], and the first rank of each root's group
   * also with the previous root (the stitch of the ring, see boot_root.c). */
  int n_ids;
  const ncclUniqueId *ids;
  const volatile uint32_t *abort_flag;
  int64_t timeout_ms; /* whole init */
};

struct mc_boot_timings {
  double total, create, send, recv, ring, delay;
};

/*
 * Joins the communicator: registers with the root, connects the ring, and
 * learns every rank's listening address, host name and pid (from the root's
 * table, or by the ring allgather). Blocks until
 * done, the deadline, the abort flag, or a failure elsewhere that the root
 * reports. The error names the rank(s) involved.
 */
ncclResult_t mc_boot_init(const struct mc_boot_config *cfg, struct mc_boot **boot_out);

/* Tells the root this rank's init completed and closes the control connection. */
void mc_boot_init_done(struct mc_boot *boot);
/* After a local failure during init: waits up to wait_ms for the root's
 * notice that another rank failed first (a failure elsewhere is often the
 * cause of this one: a peer that gave up removed what this rank was
 * opening). Returns that notice as an error (recorded with MC_FAIL, naming
 * the rank that failed), else ncclSuccess. boot may be NULL. */
ncclResult_t mc_boot_root_reason(struct mc_boot *boot, int64_t wait_ms);

/* Tells the root this rank's init failed, so that every other rank learns it now. */
void mc_boot_init_failed(struct mc_boot *boot, ncclResult_t res, const char *why);

/* Timings of mc_boot_init. */
const struct mc_boot_timings *mc_boot_timings(const struct mc_boot *boot);
/* Host name and pid of a rank (from the allgather), for messages. */
const char *mc_boot_peer_host(const struct mc_boot *boot, int rank);
int mc_boot_peer_pid(const struct mc_boot *boot, int rank);
/* The interface this rank bootstraps over. */
const struct mc_ifc *mc_boot_ifc(const struct mc_boot *boot);

/* Ring allgather: slice i of data (slice_bytes each) is rank i's; the caller
 * fills its own slice first. */
ncclResult_t mc_boot_allgather(struct mc_boot *boot, void *data, size_t slice_bytes);

/* One message to peer with tag; the receiver must post the same size. */
ncclResult_t mc_boot_send(struct mc_boot *boot, int peer, int tag, const void *data, size_t bytes);
/* Receives the message of (peer, tag); messages of other (peer, tag) pairs
 * that arrive first wait in the unexpected queue. */
ncclResult_t mc_boot_recv(struct mc_boot *boot, int peer, int tag, void *data, size_t bytes);

/* Dissemination barrier over the ranks listed in ranks[0..n) (all ranks when ranks == NULL). */
ncclResult_t mc_boot_barrier(struct mc_boot *boot, const int *ranks, int n, int my_index, int tag);

/* Allgather among ranks[0..n) (this rank is ranks[my_index]) over a ring of
 * dedicated connections. */
ncclResult_t mc_boot_allgather_sub(struct mc_boot *boot, const int *ranks, int n, int my_index,
                                   void *data, size_t slice_bytes, int tag);

/* Closes every socket. Never blocks. Accepts NULL. */
void mc_boot_destroy(struct mc_boot *boot);

/* Seconds of deadline for bootstrap operations after init. */
int64_t mc_boot_op_timeout_ms(void);

/* A communicator's bootstrap (its part of struct ncclComm, comm->bootstrap;
 * set by init's bootstrap stage, freed by mc_comm_free). */
struct mc_comm_bootstrap {
  struct mc_boot *boot;      /* this rank's bootstrap (mc_boot_init) */
  struct mc_boot_root *root; /* when this process hosts the root of this comm */
  /* ncclCommInitRankScalable with nId > 1: the ids of the roots (the
   * communicator's id is then mc_boot_job_id's), and a reference on each
   * root this process hosts. */
  int n_ids;
  ncclUniqueId *ids;
  struct mc_boot_root **id_roots;
  bool has_grow_id;               /* an id from ncclCommGetUniqueId not consumed yet */
  ncclUniqueId grow_id;           /* that id (its n_ranks: this communicator's size) */
  struct mc_boot_root *grow_root; /* its root (in this process), stopped at destroy */
};

#endif /* MC_BOOTSTRAP_H */

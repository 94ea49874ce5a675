/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bootstrap (src/bootstrap/): N ranks as threads of this process over the
 * loopback interface, with the root started by mc_boot_unique_id in this
 * process. Collectives, tagged send/recv with the unexpected queue, subsets,
 * resource release, and the failures the root reports to every rank.
 * Attacks on the bootstrap are in test_boot_auth.c.
 *
 * Assertions run on the main thread only: rank threads record what they saw.
 */
#include "bootstrap/bootstrap.h"
#include "core/log.h"
#include "core/params.h"
#include "core/utils.h"

#include "mc_boot_fixture.h"
#include "mc_test.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS  8
#define TIMEOUT_MS 20000
#define N_EARLY    100 /* messages sent before the receiver asks */

enum rank_mode {
  MODE_FULL,     /* init, then every operation, then done */
  MODE_INIT_ONLY /* init, done */
};

struct rank {
  struct mc_boot_config cfg;
  uint32_t abort_flag;
  enum rank_mode mode;
  pthread_t th;
  /* results */
  ncclResult_t init_res;
  ncclResult_t op_res; /* first failing operation */
  char op_failed[64];
  char err[1024];
  char ifc_name[MC_IF_NAME_BYTES];
  int gathered[MAX_RANKS];
  int sub_gathered[MAX_RANKS];
  int tag1_val;
  int tag2_val;
  int ring_val;
  bool peers_ok;
  bool early_ok;
};

static struct rank ranks[MAX_RANKS];

/* ---------- helpers ---------- */

/* Waits (bounded) until the number of threads is back to `want`. */
static int wait_tasks(int want)
{
  return mc_count_threads_settled(want, 5000);
}

static bool op_ok(struct rank *r, ncclResult_t res, const char *what)
{
  if (res == ncclSuccess)
    return true;
  if (r->op_res == ncclSuccess) {
    r->op_res = res;
    snprintf(r->op_failed, sizeof(r->op_failed), "%s", what);
    snprintf(r->err, sizeof(r->err), "%s", mc_error_last());
  }
  return false;
}

static void run_ops(struct rank *r, struct mc_boot *b)
{
  int rank = r->cfg.rank;
  int n = r->cfg.n_ranks;
  int data[MAX_RANKS];
  int subset[MAX_RANKS];
  int n_sub = 0;
  int x;
  char host[256];

  /* ring allgather (during init: the control connection is still open) */
  memset(data, 0, sizeof(data));
  data[rank] = 100 + rank;
  if (!op_ok(r, mc_boot_allgather(b, data, sizeof(int)), "allgather"))
    return;
  memcpy(r->gathered, data, sizeof(data));
  mc_boot_init_done(b);

  /* tags and the unexpected queue: rank 0 asks for tag 2 first */
  if ((n >= 2) && (rank == 1)) {
    x = 1001;
    if (!op_ok(r, mc_boot_send(b, 0, 1, &x, sizeof(x)), "send tag 1"))
      return;
    x = 1002;
    if (!op_ok(r, mc_boot_send(b, 0, 2, &x, sizeof(x)), "send tag 2"))
      return;
  }
  if ((n >= 2) && (rank == 0)) {
    if (!op_ok(r, mc_boot_recv(b, 1, 2, &r->tag2_val, sizeof(int)), "recv tag 2"))
      return;
    if (!op_ok(r, mc_boot_recv(b, 1, 1, &r->tag1_val, sizeof(int)), "recv tag 1"))
      return;
  }
  /* many messages before the receiver asks for any (more than a listener
   * keeps authenticating at once): each send completes, rank 0 takes them
   * in reverse order after a barrier */
  if ((n >= 2) && (rank == 1)) {
    for (int i = 0; i < N_EARLY; i++) {
      x = 5000 + i;
      if (!op_ok(r, mc_boot_send(b, 0, 1000 + i, &x, sizeof(x)), "early send"))
        return;
    }
  }
  if (!op_ok(r, mc_boot_barrier(b, NULL, 0, 0, 9), "barrier after early sends"))
    return;
  if ((n >= 2) && (rank == 0)) {
    r->early_ok = true;
    for (int i = N_EARLY - 1; i >= 0; i--) {
      if (!op_ok(r, mc_boot_recv(b, 1, 1000 + i, &x, sizeof(x)), "early recv"))
        return;
      if (x != 5000 + i)
        r->early_ok = false;
    }
  }
  /* everybody to the next rank (to itself when alone) */
  x = rank * 10;
  if (!op_ok(r, mc_boot_send(b, (rank + 1) % n, 7, &x, sizeof(x)), "ring send"))
    return;
  if (!op_ok(r, mc_boot_recv(b, (rank + n - 1) % n, 7, &r->ring_val, sizeof(int)), "ring recv"))
    return;

  if (!op_ok(r, mc_boot_barrier(b, NULL, 0, 0, 10), "barrier"))
    return;

  /* the even ranks among themselves */
  for (int i = 0; i < n; i += 2)
    subset[n_sub++] = i;
  if ((rank % 2) == 0) {
    if (!op_ok(r, mc_boot_barrier(b, subset, n_sub, rank / 2, 11), "sub barrier"))
      return;
    memset(data, 0, sizeof(data));
    data[rank / 2] = 1000 + rank;
    if (!op_ok(r, mc_boot_allgather_sub(b, subset, n_sub, rank / 2, data, sizeof(int), 12),
               "sub allgather"))
      return;
    memcpy(r->sub_gathered, data, sizeof(data));
  }

  mc_host_name(host, sizeof(host));
  r->peers_ok = true;
  for (int i = 0; i < n; i++) {
    if ((strcmp(mc_boot_peer_host(b, i), host) != 0) || (mc_boot_peer_pid(b, i) != getpid()))
      r->peers_ok = false;
  }
  snprintf(r->ifc_name, sizeof(r->ifc_name), "%s", mc_boot_ifc(b)->name);
  (void)op_ok(r, mc_boot_barrier(b, NULL, 0, 0, 13), "last barrier");
}

static void *rank_main(void *arg)
{
  struct rank *r = arg;
  struct mc_boot *b = NULL;

  r->init_res = bt_init(&r->cfg, &b, r->err, sizeof(r->err));
  if (r->init_res != ncclSuccess)
    return NULL;
  if (r->mode == MODE_FULL)
    run_ops(r, b);
  else
    mc_boot_init_done(b);
  mc_boot_destroy(b);
  return NULL;
}

static void rank_prepare(int i, int rank, int n_ranks, const ncclUniqueId *id, int64_t timeout_ms,
                         enum rank_mode mode)
{
  struct rank *r = &ranks[i];

  memset(r, 0, sizeof(*r));
  bt_config(&r->cfg, rank, n_ranks, id, &r->abort_flag, timeout_ms);
  r->mode = mode;
  r->init_res = ncclInternalError;
}

static void rank_start(int i)
{
  MC_T_EQ_INT(pthread_create(&ranks[i].th, NULL, rank_main, &ranks[i]), 0);
}

static void rank_join(int i)
{
  MC_T_EQ_INT(pthread_join(ranks[i].th, NULL), 0);
}

/* Runs ranks 0..n-1 (prepared) to the end, then releases the job's root
 * (waiting up to wait_ms for it, mc_boot_root_release). */
static void ranks_run(struct mc_boot_root *root, int n, int wait_ms)
{
  for (int i = 0; i < n; i++)
    rank_start(i);
  for (int i = 0; i < n; i++)
    rank_join(i);
  mc_boot_root_release(root, wait_ms);
}

static void check_rank_ok(int i)
{
  struct rank *r = &ranks[i];

  if (r->init_res != ncclSuccess)
    MC_T_FAIL("rank %d: init returned %d: %s", r->cfg.rank, r->init_res, r->err);
  if (r->op_res != ncclSuccess)
    MC_T_FAIL("rank %d: %s returned %d: %s", r->cfg.rank, r->op_failed, r->op_res, r->err);
}

/* ---------- success ---------- */

static void run_job(int n)
{
  ncclUniqueId id;
  struct mc_boot_root *root;
  int fds0;
  int tasks0;

  bt_setup();
  fds0 = mc_count_fds();
  tasks0 = mc_count_threads_stable();
  root = bt_job_new(&id);
  for (int i = 0; i < n; i++)
    rank_prepare(i, i, n, &id, TIMEOUT_MS, MODE_FULL);
  ranks_run(root, n, 2000);

  for (int i = 0; i < n; i++) {
    struct rank *r = &ranks[i];
    check_rank_ok(i);
    for (int k = 0; k < n; k++)
      MC_T_EQ_INT(r->gathered[k], 100 + k);
    MC_T_EQ_INT(r->ring_val, ((i + n - 1) % n) * 10);
    MC_T_TRUE(r->peers_ok);
    MC_T_EQ_STR(r->ifc_name, "lo");
    if ((i % 2) == 0) {
      for (int k = 0; 2 * k < n; k++)
        MC_T_EQ_INT(r->sub_gathered[k], 1000 + 2 * k);
    }
  }
  if (n >= 2) {
    MC_T_EQ_INT(ranks[0].tag1_val, 1001);
    MC_T_EQ_INT(ranks[0].tag2_val, 1002);
    MC_T_TRUE(ranks[0].early_ok);
  }
  /* every socket closed, the root thread joined */
  MC_T_EQ_INT(mc_count_fds(), fds0);
  MC_T_EQ_INT(wait_tasks(tasks0), tasks0);
}

static void one_rank(void)
{
  run_job(1);
}

static void two_ranks(void)
{
  run_job(2);
}

static void five_ranks(void)
{
  run_job(5);
}

/* The same over NCCL's ring allgather of the addresses (no table from the root). */
static void five_ranks_over_the_ring(void)
{
  mc_param_set_for_tests(MC_P_BOOT_TABLE_MAX_RANKS, "4");
  run_job(5);
  mc_param_set_for_tests(MC_P_BOOT_TABLE_MAX_RANKS, NULL);
}

/* ---------- failures ---------- */

static void rank_never_joins(void)
{
  ncclUniqueId id;
  struct mc_boot_root *root;

  bt_setup();
  mc_param_set_for_tests(MC_P_INIT_TIMEOUT, "2"); /* the root reads it when it starts */
  root = bt_job_new(&id);
  mc_param_set_for_tests(MC_P_INIT_TIMEOUT, NULL);
  for (int i = 0; i < 2; i++)
    rank_prepare(i, i, 3, &id, 5000, MODE_INIT_ONLY);
  ranks_run(root, 2, 0);
  for (int i = 0; i < 2; i++) {
    MC_T_EQ_INT(ranks[i].init_res, ncclTimeout);
    MC_T_CONTAINS(ranks[i].err, "rank 2 of 3 never joined");
    MC_T_CONTAINS(ranks[i].err, "MESHCCL_INIT_TIMEOUT");
    MC_T_CONTAINS(ranks[i].err, "joined: 0-1");
  }
}

static void duplicate_rank(void)
{
  ncclUniqueId id;
  struct mc_boot_root *root;

  bt_setup();
  root = bt_job_new(&id);
  for (int i = 0; i < 2; i++)
    rank_prepare(i, 0, 2, &id, TIMEOUT_MS, MODE_INIT_ONLY);
  ranks_run(root, 2, 0);
  for (int i = 0; i < 2; i++) {
    MC_T_EQ_INT(ranks[i].init_res, ncclInvalidUsage);
    MC_T_CONTAINS(ranks[i].err, "rank 0 joined twice");
  }
}

static void mismatched_nranks(void)
{
  ncclUniqueId id;
  struct mc_boot_root *root;

  bt_setup();
  root = bt_job_new(&id);
  rank_prepare(0, 0, 2, &id, TIMEOUT_MS, MODE_INIT_ONLY);
  rank_prepare(1, 1, 3, &id, TIMEOUT_MS, MODE_INIT_ONLY);
  ranks_run(root, 2, 0);
  for (int i = 0; i < 2; i++) {
    MC_T_EQ_INT(ranks[i].init_res, ncclInvalidUsage);
    MC_T_CONTAINS(ranks[i].err, "nranks");
    MC_T_CONTAINS(ranks[i].err, "every rank must pass the same nranks");
  }
}

/* Rank 1 aborts while waiting for rank 2: rank 0 learns it from the root at
 * once, and rank 2, arriving later, is told at registration. */
static void aborted_rank_named_to_others(void)
{
  ncclUniqueId id;
  struct mc_boot_root *root;

  bt_setup();
  root = bt_job_new(&id);
  for (int i = 0; i < 3; i++)
    rank_prepare(i, i, 3, &id, TIMEOUT_MS, MODE_INIT_ONLY);
  rank_start(0);
  rank_start(1);
  /* Rank 1 registers within milliseconds on loopback and then waits for
   * rank 2; abort it after that. */
  mc_sleep_ms_abortable(200, NULL);
  __atomic_store_n(&ranks[1].abort_flag, 1, __ATOMIC_RELEASE);
  rank_join(1);
  rank_join(0);
  rank_start(2);
  rank_join(2);
  mc_boot_root_release(root, 0);

  MC_T_EQ_INT(ranks[1].init_res, ncclInternalError);
  /* a failure elsewhere is ncclRemoteError, not a timeout: nobody waited 20 s */
  MC_T_EQ_INT(ranks[0].init_res, ncclRemoteError);
  MC_T_CONTAINS(ranks[0].err, "Bootstrap: rank 0: rank 1 (host ");
  MC_T_CONTAINS(ranks[0].err, "left before its init completed");
  MC_T_EQ_INT(ranks[2].init_res, ncclRemoteError);
  MC_T_CONTAINS(ranks[2].err, "Bootstrap: rank 2: rank 1 (host ");
}

/* A rank that closes its bootstrap (its communicator destroyed or aborted)
 * says goodbye on its message connections: what it sent before still
 * arrives, in any order asked, and a wait for a message it never sent fails
 * at once naming it, instead of waiting out the bootstrap timeout. */
struct bye_rank {
  struct mc_boot_config cfg;
  pthread_t th;
  ncclResult_t res; /* rank 0: the wait for tag 3 */
  int got[2];       /* rank 0: tags 2 and 1 */
  double wait_s;    /* rank 0: how long the wait for tag 3 took */
  char err[1024];
};

static void *bye_main(void *arg)
{
  struct bye_rank *r = arg;
  struct mc_boot *b = NULL;
  int x;

  mc_error_clear_thread();
  r->res = mc_boot_init(&r->cfg, &b);
  if (r->res != ncclSuccess) {
    snprintf(r->err, sizeof(r->err), "init: %s", mc_error_last());
    return NULL;
  }
  mc_boot_init_done(b);
  if (r->cfg.rank == 1) {
    for (x = 1; (x <= 2) && (r->res == ncclSuccess); x++)
      r->res = mc_boot_send(b, 0, x, &x, sizeof(x));
  } else {
    uint64_t t0;
    mc_sleep_ms_abortable(300, NULL); /* rank 1's goodbye is there first */
    for (int k = 0; (k < 2) && (r->res == ncclSuccess); k++)
      r->res = mc_boot_recv(b, 1, 2 - k, &r->got[k], sizeof(int));
    if (r->res == ncclSuccess) {
      t0 = mc_time_ns();
      r->res = mc_boot_recv(b, 1, 3, &x, sizeof(x));
      r->wait_s = (double)(mc_time_ns() - t0) * 1e-9;
    }
    snprintf(r->err, sizeof(r->err), "%s", mc_error_last());
  }
  mc_boot_destroy(b);
  return NULL;
}

static void goodbye_ends_waits_for_that_rank(void)
{
  struct bye_rank r[2];
  ncclUniqueId id;
  struct mc_boot_root *root;

  bt_setup();
  root = bt_job_new(&id);
  memset(r, 0, sizeof(r));
  for (int i = 0; i < 2; i++)
    bt_config(&r[i].cfg, i, 2, &id, NULL, 60000);
  for (int i = 0; i < 2; i++)
    MC_T_EQ_INT(pthread_create(&r[i].th, NULL, bye_main, &r[i]), 0);
  for (int i = 0; i < 2; i++)
    MC_T_EQ_INT(pthread_join(r[i].th, NULL), 0);
  mc_boot_root_release(root, 2000);
  MC_T_EQ_INT(r[1].res, ncclSuccess);
  MC_T_EQ_INT(r[0].got[0], 2);
  MC_T_EQ_INT(r[0].got[1], 1);
  MC_T_EQ_INT(r[0].res, ncclRemoteError);
  MC_T_CONTAINS(r[0].err, "Bootstrap: rank 0: rank 1 (host ");
  MC_T_CONTAINS(r[0].err, "closed its bootstrap (its communicator was destroyed or aborted) while "
                          "this rank waited for its message (tag 3)");
  /* the goodbye, not the 60 s bootstrap timeout */
  MC_T_TRUE(r[0].wait_s < 30.0);
}

/* Other communicators' roots are created (and finished roots reaped) while
 * one is released: the release must keep its root alive until it joins it. */
struct churn {
  uint32_t stop;
  int n_created;
  ncclResult_t res;
};

static void *root_churn(void *arg)
{
  struct churn *c = arg;

  while (__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) == 0) {
    ncclUniqueId id;
    struct mc_boot_root *root;
    ncclResult_t res = mc_boot_unique_id(false, &id); /* reaps finished roots */
    if (res != ncclSuccess) {
      c->res = res;
      break;
    }
    root = mc_boot_root_claim(&id);
    mc_boot_root_release(root, 0);
    c->n_created++;
  }
  return NULL;
}

static void release_while_roots_come_and_go(void)
{
  struct churn c;
  pthread_t th;
  int fds0;
  int tasks0;

  bt_setup();
  fds0 = mc_count_fds();
  tasks0 = mc_count_threads_stable();
  memset(&c, 0, sizeof(c));
  MC_T_EQ_INT(pthread_create(&th, NULL, root_churn, &c), 0);
  for (int trial = 0; trial < 20; trial++) {
    ncclUniqueId id;
    struct mc_boot_root *root = bt_job_new(&id);

    rank_prepare(0, 0, 1, &id, TIMEOUT_MS, MODE_INIT_ONLY);
    rank_start(0);
    rank_join(0);
    check_rank_ok(0);
    /* the root finishes by itself now that its only rank is done */
    mc_boot_root_release(root, 2000);
  }
  __atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
  MC_T_EQ_INT(pthread_join(th, NULL), 0);
  MC_T_OK(c.res);
  MC_T_TRUE(c.n_created > 0);
  MC_T_EQ_INT(mc_count_fds(), fds0);
  MC_T_EQ_INT(wait_tasks(tasks0), tasks0);
}

/* ---------- messages to many peers ---------- */

#define MANY_RANKS 66 /* each sends to 65 peers: more than a rank keeps connections to (64) */

struct many_rank {
  struct mc_boot_config cfg;
  pthread_t th;
  ncclResult_t res;
  int n_wrong;
  char err[1024];
};

static struct many_rank many[MANY_RANKS];

static void *many_main(void *arg)
{
  struct many_rank *m = arg;
  struct mc_boot *b = NULL;
  int me = m->cfg.rank;
  int n = m->cfg.n_ranks;

  mc_error_clear_thread();
  m->res = mc_boot_init(&m->cfg, &b);
  if (m->res == ncclSuccess)
    mc_boot_init_done(b);
  /* Two rounds: every rank sends one message to every other before it
   * receives any (they wait in the receivers' queues), then receives them. */
  for (int round = 0; (m->res == ncclSuccess) && (round < 2); round++) {
    for (int k = 1; (m->res == ncclSuccess) && (k < n); k++) {
      int to = (me + k) % n;
      int v = 100000 * round + 1000 * me + to;
      m->res = mc_boot_send(b, to, 50 + round, &v, sizeof(v));
    }
    for (int k = 1; (m->res == ncclSuccess) && (k < n); k++) {
      int from = (me + n - k) % n;
      int v = -1;
      m->res = mc_boot_recv(b, from, 50 + round, &v, sizeof(v));
      m->n_wrong += (m->res == ncclSuccess) && (v != 100000 * round + 1000 * from + me);
    }
  }
  if (m->res == ncclSuccess)
    m->res = mc_boot_barrier(b, NULL, 0, 0, 60);
  if (m->res != ncclSuccess)
    snprintf(m->err, sizeof(m->err), "%s", mc_error_last());
  mc_boot_destroy(b);
  return NULL;
}

/*
 * Messages travel on connections kept open between peers: with 66 ranks,
 * each sending to every other twice, a rank closes its least recently used
 * connection for a new peer (it keeps 64) and dials it again later; every
 * message arrives with its value, in order, and every fd and thread is gone
 * after.
 */
static void messages_to_many_peers(void)
{
  ncclUniqueId id;
  struct mc_boot_root *root;
  int fds0;
  int tasks0;

  bt_setup();
  fds0 = mc_count_fds();
  tasks0 = mc_count_threads_stable();
  root = bt_job_new(&id);
  for (int i = 0; i < MANY_RANKS; i++) {
    memset(&many[i], 0, sizeof(many[i]));
    bt_config(&many[i].cfg, i, MANY_RANKS, &id, NULL, 60000);
  }
  for (int i = 0; i < MANY_RANKS; i++)
    MC_T_EQ_INT(pthread_create(&many[i].th, NULL, many_main, &many[i]), 0);
  for (int i = 0; i < MANY_RANKS; i++)
    MC_T_EQ_INT(pthread_join(many[i].th, NULL), 0);
  mc_boot_root_release(root, 2000);
  for (int i = 0; i < MANY_RANKS; i++) {
    if (many[i].res != ncclSuccess)
      MC_T_FAIL("rank %d: %d: %s", i, many[i].res, many[i].err);
    MC_T_EQ_INT(many[i].n_wrong, 0);
  }
  MC_T_EQ_INT(mc_count_fds(), fds0);
  MC_T_EQ_INT(wait_tasks(tasks0), tasks0);
}

MC_T_MAIN(one_rank, two_ranks, five_ranks, five_ranks_over_the_ring, rank_never_joins,
          duplicate_rank, mismatched_nranks, aborted_rank_named_to_others,
          goodbye_ends_waits_for_that_rank, release_while_roots_come_and_go, messages_to_many_peers)

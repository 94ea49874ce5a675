/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public communicator API of nccl.h. Mirrors NCCL's init.cc entry points:
 * arguments are checked at once (ncclInvalidArgument with a message), the
 * init itself runs through the group machinery (init_group.c). Every symbol
 * also exists as pnccl*, the profiling alias NCCL exports.
 *
 * Length: NCCL's init.cc entry points, one per public function, kept together as nccl.h lists them.
 */
#include "init_api.h"

#include "comm.h"
#include "init_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "crypto.h"
#include "log.h"
#include "meshccl.h"
#include "params.h"
#include "registry.h"
#include "utils.h"

#define PTR_CHECK(_p, _call, _name)                                                                \
  do {                                                                                             \
    if ((_p) == NULL)                                                                              \
      return MC_FAIL(ncclInvalidArgument, "%s : %s argument is NULL", (_call), (_name));           \
  } while (0)

ncclResult_t mc_comm_check(const struct ncclComm *comm, const char *call)
{
  if (comm == NULL)
    return MC_FAIL(ncclInvalidArgument, "%s : comm argument is NULL", call);
  switch (mc_registry_state(comm)) {
  case MC_HANDLE_LIVE:
    return ncclSuccess;
  case MC_HANDLE_GONE:
    return MC_FAIL(ncclInvalidArgument,
                   "%s : communicator %p was destroyed (ncclCommDestroy or ncclCommAbort); it "
                   "cannot be used any more",
                   call, (const void *)comm);
  default:
    return MC_FAIL(ncclInvalidArgument,
                   "%s : %p is not a communicator (not made by an ncclCommInit* call, or "
                   "destroyed)",
                   call, (const void *)comm);
  }
}

bool mc_comm_is_live(const struct ncclComm *comm)
{
  return mc_registry_state(comm) == MC_HANDLE_LIVE;
}

uint64_t mc_comm_destroyed_count(void)
{
  return mc_registry_releases();
}

/* Guards every communicator's users, is_closing and is_orphaned, and the
 * registry's verdict taken with them: a thread that passed the handle check
 * of mc_comm_enter has its use counted before abort or destroy can look. */
static pthread_mutex_t users_lock = PTHREAD_MUTEX_INITIALIZER;

ncclResult_t mc_comm_enter(struct ncclComm *comm, const char *call)
{
  ncclResult_t res;

  pthread_mutex_lock(&users_lock);
  res = (mc_comm_is_live(comm) && !comm->life.is_closing) ? ncclSuccess : ncclInvalidArgument;
  if (res == ncclSuccess)
    __atomic_add_fetch(&comm->life.users, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&users_lock);
  if (res == ncclSuccess)
    return ncclSuccess;
  /* Not live: the registry's message. Live but closing: abort or destroy runs. */
  MC_CHECK(mc_comm_check(comm, call));
  return MC_FAIL(ncclInvalidArgument,
                 "%s : communicator %p is being destroyed (ncclCommDestroy or ncclCommAbort); it "
                 "cannot be used any more",
                 call, (const void *)comm);
}

void mc_comm_ref(struct ncclComm *comm)
{
  __atomic_add_fetch(&comm->life.users, 1, __ATOMIC_ACQ_REL);
}

void mc_comm_leave(struct ncclComm *comm)
{
  bool is_last;

  pthread_mutex_lock(&users_lock);
  is_last =
      (__atomic_sub_fetch(&comm->life.users, 1, __ATOMIC_ACQ_REL) == 0) && comm->life.is_orphaned;
  pthread_mutex_unlock(&users_lock);
  if (is_last) {
    MC_INFO(MC_SUB_INIT | MC_SUB_DESTROY,
            "comm %p rank %d nranks %d - Abort: freed by the last thread that used it",
            (void *)comm, comm->rank, comm->n_ranks);
    mc_comm_free(comm, 0);
  }
}

/* The calling thread, as the communicator records its holder (pthread_t
 * is an integer on Linux; debuggers show it: "Thread 0x7f... (LWP n)"). */
static unsigned long this_thread(void)
{
  return (unsigned long)pthread_self();
}

ncclResult_t mc_comm_hold(struct ncclComm *comm, const char *call)
{
  unsigned long me = this_thread();
  unsigned long holder = 0;

  if (__atomic_compare_exchange_n(&comm->life.holder, &holder, me, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    comm->life.holds = 1;
    return ncclSuccess;
  }
  if (holder == me) {
    comm->life.holds++;
    return ncclSuccess;
  }
  return MC_FAIL(ncclInvalidUsage,
                 "%s : communicator %p (rank %d) is in use by another thread (thread 0x%lx is "
                 "running a collective on it, or holds its operations in an open ncclGroupStart); "
                 "a communicator must be driven by one thread at a time",
                 call, (void *)comm, comm->rank, holder);
}

void mc_comm_release(struct ncclComm *comm)
{
  if (__atomic_load_n(&comm->life.holder, __ATOMIC_ACQUIRE) != this_thread())
    return;
  if (--comm->life.holds == 0)
    __atomic_store_n(&comm->life.holder, 0, __ATOMIC_RELEASE);
}

/* NCCL's ncclCommEnsureReady: the comm must have finished its init successfully. */
ncclResult_t mc_comm_ready(const struct ncclComm *comm, const char *call)
{
  ncclResult_t state;

  MC_CHECK(mc_comm_check(comm, call));
  state = (ncclResult_t)__atomic_load_n(&comm->life.async_result, __ATOMIC_ACQUIRE);
  if (state == ncclInProgress)
    return MC_FAIL(ncclInvalidArgument,
                   "%s : attempt to use communicator %p before the previous "
                   "operation returned ncclSuccess (init still in progress)",
                   call, (const void *)comm);
  if (state != ncclSuccess)
    return MC_FAIL(state, "%s : communicator %p failed earlier: %s", call, (const void *)comm,
                   comm->last_error);
  return ncclSuccess;
}

void mc_api_enter(void)
{
  mc_error_clear_thread();
  mc_param_report_once();
}

NCCL_API(ncclResult_t, ncclGetVersion, int *version);
ncclResult_t ncclGetVersion(int *version)
{
  PTR_CHECK(version, "ncclGetVersion", "version");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId *uniqueId);
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
  mc_api_enter();
  PTR_CHECK(uniqueId, "ncclGetUniqueId", "uniqueId");
  return mc_boot_unique_id(true, uniqueId);
}

__attribute__((visibility("default"))) ncclResult_t meshcclGetPublicUniqueId(ncclUniqueId *uniqueId)
{
  mc_api_enter();
  PTR_CHECK(uniqueId, "meshcclGetPublicUniqueId", "uniqueId");
  return mc_boot_unique_id_public(uniqueId);
}

__attribute__((visibility("default"))) ncclResult_t meshcclUniqueIdAddSecret(ncclUniqueId *uniqueId)
{
  mc_api_enter();
  PTR_CHECK(uniqueId, "meshcclUniqueIdAddSecret", "uniqueId");
  return mc_boot_id_add_secret(uniqueId);
}

/* A published id has no secret: it must be completed before any init. */
static ncclResult_t check_not_public(const ncclUniqueId *id, const char *call)
{
  if (!mc_boot_id_is_public(id))
    return ncclSuccess;
  return MC_FAIL(ncclInvalidArgument,
                 "%s : the unique id is the published form of meshcclGetPublicUniqueId, which "
                 "carries no secret: call meshcclUniqueIdAddSecret on it first (with the job's "
                 "MESHCCL_SECRET set, the same on every rank)",
                 call);
}

/* What some inits add to an id (NULL: nothing). */
struct init_extra {
  int n_ids;                     /* ncclCommInitRankScalable: nId > 1 roots ... */
  const ncclUniqueId *ids;       /* ... their ids (id is mc_boot_job_id's) */
  struct mc_boot_root **root_io; /* ncclCommGrow: the grow id's root, handed over on success */
};

static ncclResult_t init_rank_ex(ncclComm_t *newcomm, int nranks, const ncclUniqueId *id, int rank,
                                 int dev, ncclConfig_t *config, enum mc_comm_init_kind kind,
                                 const char *call, const struct init_extra *x)
{
  ncclConfig_t resolved;
  struct ncclComm *comm = NULL;

  mc_api_enter();
  PTR_CHECK(newcomm, call, "newcomm");
  *newcomm = NULL;
  if (nranks < 1)
    return MC_FAIL(ncclInvalidArgument, "%s : invalid number of ranks %d (must be >= 1)", call,
                   nranks);
  if ((rank < 0) || (rank >= nranks))
    return MC_FAIL(ncclInvalidArgument, "%s : invalid rank requested : %d/%d", call, rank, nranks);
  if (rank == 0)
    mc_log_version_once(); /* NCCL's ncclCommInitRankFunc: rank 0 shows the version */
  MC_CHECK(check_not_public(id, call));
  for (int i = 0; (x != NULL) && (x->ids != NULL) && (i < x->n_ids); i++)
    MC_CHECK(check_not_public(&x->ids[i], call));
  MC_CHECK(mc_comm_config_resolve(config, &resolved));
  MC_CHECK(mc_comm_alloc(nranks, id, rank, dev, &resolved, kind, &comm));
  if ((x != NULL) && (x->n_ids > 1)) {
    ncclResult_t res = mc_calloc(&comm->bootstrap.ids, (size_t)x->n_ids);
    if (res != ncclSuccess) {
      mc_comm_free(comm, 0);
      return res;
    }
    memcpy(comm->bootstrap.ids, x->ids, (size_t)x->n_ids * sizeof(*x->ids));
    comm->bootstrap.n_ids = x->n_ids;
  }
  if ((x != NULL) && (x->root_io != NULL)) {
    comm->bootstrap.root = *x->root_io; /* the new communicator stops it when it is destroyed */
    *x->root_io = NULL;
  }
  *newcomm = comm;
  return mc_group_launch_init(comm);
}

static ncclResult_t init_rank(ncclComm_t *newcomm, int nranks, const ncclUniqueId *id, int rank,
                              int dev, ncclConfig_t *config, enum mc_comm_init_kind kind,
                              const char *call)
{
  return init_rank_ex(newcomm, nranks, id, rank, dev, config, kind, call, NULL);
}

static int default_device(void)
{
  int dev = mc_thread_device();

  return (dev >= 0) ? dev : (int)mc_param_int(MC_P_DEVICE);
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t *comm, int nranks, ncclUniqueId commId,
         int rank);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
  return init_rank(comm, nranks, &commId, rank, default_device(), NULL, MC_INIT_RANK,
                   "ncclCommInitRank");
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t *comm, int nranks, ncclUniqueId commId,
         int rank, ncclConfig_t *config);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
  return init_rank(comm, nranks, &commId, rank, default_device(), config, MC_INIT_RANK,
                   "ncclCommInitRankConfig");
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
  ncclUniqueId id;
  ncclResult_t res = ncclSuccess;
  ncclResult_t end_res;

  mc_api_enter();
  PTR_CHECK(comms, "ncclCommInitAll", "comms");
  if (ndev < 1)
    return MC_FAIL(ncclInvalidArgument, "ncclCommInitAll : invalid ndev %d (must be >= 1)", ndev);
  for (int i = 0; (devlist != NULL) && (i < ndev); i++) {
    if (devlist[i] < 0)
      return MC_FAIL(ncclInvalidArgument, "ncclCommInitAll : devlist[%d] = %d is not a device", i,
                     devlist[i]);
    for (int j = 0; (j < i) && (mc_param_int(MC_P_MULTI_RANK_GPU_ENABLE) == 0); j++) {
      if (devlist[j] == devlist[i])
        return MC_FAIL(ncclInvalidUsage,
                       "ncclCommInitAll : devlist[%d] and devlist[%d] are both "
                       "device %d; set NCCL_MULTI_RANK_GPU_ENABLE=1 to allow it",
                       j, i, devlist[i]);
    }
  }
  for (int i = 0; i < ndev; i++)
    comms[i] = NULL;
  MC_CHECK(mc_boot_unique_id(true, &id));
  mc_group_start();
  for (int i = 0; (i < ndev) && (res == ncclSuccess); i++)
    res = init_rank(&comms[i], ndev, &id, i, (devlist != NULL) ? devlist[i] : i, NULL, MC_INIT_ALL,
                    "ncclCommInitAll");
  end_res = mc_group_end();
  return (res != ncclSuccess) ? res : end_res;
}

/* ---------- split ---------- */

struct split_entry {
  int32_t color;
  int32_t key;
};

/* Ranks of my color ordered by (key, parent rank); returns my index and count. */
static ncclResult_t split_members(const struct split_entry *all, int n, int me, int **members_out,
                                  int *n_out, int *idx_out)
{
  int *m = NULL;
  int k = 0;

  MC_CHECK(mc_calloc(&m, (size_t)n));
  for (int r = 0; r < n; r++) {
    int pos;
    if (all[r].color != all[me].color)
      continue;
    /* Stable insertion by key: ties keep parent rank order. */
    pos = k;
    while ((pos > 0) && (all[m[pos - 1]].key > all[r].key)) {
      m[pos] = m[pos - 1];
      pos--;
    }
    m[pos] = r;
    k++;
  }
  for (int i = 0; i < k; i++) {
    if (m[i] == me)
      *idx_out = i;
  }
  *members_out = m;
  *n_out = k;
  return ncclSuccess;
}

static ncclResult_t comm_split(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                               ncclConfig_t *config)
{
  struct split_entry *all = NULL;
  int *members = NULL;
  int n_members = 0;
  int idx = 0;
  ncclUniqueId id;
  ncclResult_t res;

  MC_CHECK(mc_comm_ready(comm, "ncclCommSplit"));
  if ((color < 0) && (color != NCCL_SPLIT_NOCOLOR))
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommSplit : invalid color %d (>= 0 or "
                   "NCCL_SPLIT_NOCOLOR)",
                   color);
  *newcomm = NULL;
  MC_CHECK(mc_calloc(&all, (size_t)comm->n_ranks));
  all[comm->rank].color = color;
  all[comm->rank].key = key;
  MC_CHECK_GOTO(mc_boot_allgather(comm->bootstrap.boot, all, sizeof(*all)), res, out);
  if (color == NCCL_SPLIT_NOCOLOR) {
    res = ncclSuccess;
    goto out;
  }
  MC_CHECK_GOTO(split_members(all, comm->n_ranks, comm->rank, &members, &n_members, &idx), res,
                out);
  /* The first member creates the child's id (and root); the others receive it. */
  if (idx == 0) {
    MC_CHECK_GOTO(mc_boot_unique_id(false, &id), res, out);
    for (int i = 1; i < n_members; i++)
      MC_CHECK_GOTO(
          mc_boot_send(comm->bootstrap.boot, members[i], MC_BOOT_TAG_COMMSPLIT, &id, sizeof(id)),
          res, out);
  } else {
    MC_CHECK_GOTO(
        mc_boot_recv(comm->bootstrap.boot, members[0], MC_BOOT_TAG_COMMSPLIT, &id, sizeof(id)), res,
        out);
  }
  res = init_rank(newcomm, n_members, &id, idx, comm->dev,
                  (config != NULL) ? config : &comm->config, MC_INIT_SPLIT, "ncclCommSplit");
  if (res == ncclSuccess)
    MC_INFO(MC_SUB_INIT, "ncclCommSplit comm %p rank %d color %d key %d -> comm %p rank %d of %d",
            (void *)comm, comm->rank, color, key, (void *)*newcomm, idx, n_members);
out:
  free(all);
  free(members);
  return res;
}

/* Split and shrink use comm (mc_comm_enter) while they run: an abort on
 * another thread stops their bootstrap waits and frees comm after them. */
NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
         ncclConfig_t *config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
  ncclResult_t res;

  mc_api_enter();
  PTR_CHECK(newcomm, "ncclCommSplit", "newcomm");
  MC_CHECK(mc_comm_enter(comm, "ncclCommSplit"));
  res = comm_split(comm, color, key, newcomm, config);
  mc_comm_leave(comm);
  return res;
}

/* ---------- lifecycle ---------- */

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm);
ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
  mc_api_enter();
  MC_CHECK(mc_comm_ready(comm, "ncclCommFinalize"));
  if (comm->life.is_finalized)
    return MC_FAIL(ncclInvalidArgument, "ncclCommFinalize : comm %p is already finalized",
                   (void *)comm);
  /* Host operations complete before their calls return: nothing is pending. */
  comm->life.is_finalized = true;
  MC_INFO(MC_SUB_INIT, "comm %p rank %d nranks %d - Finalize COMPLETE", (void *)comm, comm->rank,
          comm->n_ranks);
  return ncclSuccess;
}

/* Freeing a communicator under a running collective, or under operations
 * queued in an open group, would leave them on freed memory: destroy waits
 * for neither (ncclCommAbort stops a running collective first). */
static ncclResult_t not_held(struct ncclComm *comm, const char *call)
{
  unsigned long holder = __atomic_load_n(&comm->life.holder, __ATOMIC_ACQUIRE);

  if (holder == 0)
    return ncclSuccess;
  if (holder == this_thread())
    return MC_FAIL(ncclInvalidUsage,
                   "%s : communicator %p (rank %d) has operations queued in this thread's open "
                   "group; end the group (ncclGroupEnd) first",
                   call, (void *)comm, comm->rank);
  return MC_FAIL(ncclInvalidUsage,
                 "%s : communicator %p (rank %d) is in use by thread 0x%lx (a collective running, "
                 "or operations queued in its open group); wait for it, or stop it with "
                 "ncclCommAbort",
                 call, (void *)comm, comm->rank, holder);
}

/* Starts the end of comm (destroy, or abort when is_abort): from here on
 * mc_comm_enter refuses it and the registry calls it destroyed. Destroy is
 * refused while a thread uses comm; abort sets the abort flag, which stops
 * a running collective within a poll tick. */
static ncclResult_t comm_close(struct ncclComm *comm, const char *call, bool is_abort)
{
  ncclResult_t res = ncclSuccess;

  pthread_mutex_lock(&users_lock);
  if (!mc_comm_is_live(comm) || comm->life.is_closing) {
    pthread_mutex_unlock(&users_lock);
    MC_CHECK(mc_comm_check(comm, call));
    return MC_FAIL(ncclInvalidArgument,
                   "%s : communicator %p is already being destroyed (ncclCommDestroy or "
                   "ncclCommAbort on another thread)",
                   call, (const void *)comm);
  }
  if (!is_abort)
    res = not_held(comm, call);
  if ((res == ncclSuccess) && !is_abort &&
      (__atomic_load_n(&comm->life.users, __ATOMIC_ACQUIRE) > 0))
    res = MC_FAIL(ncclInvalidUsage,
                  "%s : communicator %p (rank %d) is in use by another thread (a call on it has "
                  "not returned yet); wait for it, or stop it with ncclCommAbort",
                  call, (void *)comm, comm->rank);
  if (res == ncclSuccess) {
    comm->life.is_closing = true;
    __atomic_store_n(&comm->life.is_aborted, is_abort, __ATOMIC_RELEASE);
    if (is_abort)
      __atomic_store_n(&comm->life.abort_flag, 1, __ATOMIC_RELEASE);
    mc_registry_release(comm);
  }
  pthread_mutex_unlock(&users_lock);
  return res;
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
  int rank;

  if (comm == NULL)
    return ncclSuccess;
  MC_CHECK(comm_close(comm, "ncclCommDestroy", false));
  rank = comm->rank;
  /* A non-blocking init still running is waited for, as NCCL does. */
  mc_comm_join_init(comm);
  MC_INFO(MC_SUB_INIT | MC_SUB_DESTROY, "comm %p rank %d nranks %d - Destroy COMPLETE",
          (void *)comm, rank, comm->n_ranks);
  mc_comm_free(comm, MC_COMM_ROOT_WAIT_MS);
  return ncclSuccess;
}

/* Abort: waits up to MC_COMM_ABORT_WAIT_MS for the threads that use comm
 * (a collective that sees the abort flag, operations queued in a group until
 * its ncclGroupEnd) to leave it; true when they did. Otherwise comm is left
 * to the last of them (mc_comm_leave frees it). */
static bool abort_wait_users(struct ncclComm *comm)
{
  struct mc_deadline dl = mc_deadline_in_ms(MC_COMM_ABORT_WAIT_MS);
  bool is_free;

  /* This thread's own open group holds comm until its ncclGroupEnd. */
  if (__atomic_load_n(&comm->life.holder, __ATOMIC_ACQUIRE) != this_thread())
    while ((__atomic_load_n(&comm->life.users, __ATOMIC_ACQUIRE) > 0) && !mc_deadline_passed(dl))
      usleep(1000);
  pthread_mutex_lock(&users_lock);
  is_free = (__atomic_load_n(&comm->life.users, __ATOMIC_ACQUIRE) == 0);
  comm->life.is_orphaned = !is_free;
  if (!is_free) /* said under the lock: the last user may free comm right after */
    MC_INFO(MC_SUB_INIT | MC_SUB_DESTROY,
            "comm %p rank %d nranks %d - Abort: still used by %d call(s) (operations queued "
            "in an open group?); the last to leave frees it",
            (void *)comm, comm->rank, comm->n_ranks,
            __atomic_load_n(&comm->life.users, __ATOMIC_ACQUIRE));
  pthread_mutex_unlock(&users_lock);
  return is_free;
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
  bool was_ready;

  if (comm == NULL)
    return ncclSuccess;
  MC_CHECK(comm_close(comm, "ncclCommAbort", true));
  was_ready = __atomic_load_n(&comm->life.async_result, __ATOMIC_ACQUIRE) == ncclSuccess;
  mc_comm_join_init(comm); /* every wait sees the flag within a poll tick */
  if (!abort_wait_users(comm))
    return ncclSuccess; /* comm may be gone already */
  MC_INFO(MC_SUB_INIT | MC_SUB_DESTROY, "comm %p rank %d nranks %d - Abort COMPLETE", (void *)comm,
          comm->rank, comm->n_ranks);
  /* An init in progress is cut short; after a complete init, the root (if
   * hosted here) gets a moment to serve ranks that are finishing theirs. */
  mc_comm_free(comm, was_ready ? MC_COMM_ROOT_WAIT_MS / 2 : 0);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
  ncclResult_t state;

  PTR_CHECK(asyncError, "ncclCommGetAsyncError", "asyncError");
  MC_CHECK(mc_comm_check(comm, "ncclCommGetAsyncError"));
  state = (ncclResult_t)__atomic_load_n(&comm->life.async_result, __ATOMIC_ACQUIRE);
  if ((state != ncclInProgress) && comm->life.has_init_thread)
    mc_comm_join_init(comm);
  *asyncError = state;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int *count);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
  PTR_CHECK(count, "ncclCommCount", "count");
  MC_CHECK(mc_comm_ready(comm, "ncclCommCount"));
  *count = comm->n_ranks;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int *device);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
  PTR_CHECK(device, "ncclCommCuDevice", "device");
  MC_CHECK(mc_comm_ready(comm, "ncclCommCuDevice"));
  *device = comm->dev;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int *rank);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
  PTR_CHECK(rank, "ncclCommUserRank", "rank");
  MC_CHECK(mc_comm_ready(comm, "ncclCommUserRank"));
  *rank = comm->rank;
  return ncclSuccess;
}

NCCL_API(const char *, ncclGetErrorString, ncclResult_t result);
const char *ncclGetErrorString(ncclResult_t result)
{
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError:
    return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError:
    return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument:
    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage:
    return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  case ncclTimeout:
    return "timeout";
  default:
    return "unknown result code";
  }
}

NCCL_API(const char *, ncclGetLastError, ncclComm_t comm);
const char *ncclGetLastError(ncclComm_t comm)
{
  if (mc_comm_is_live(comm) && (comm->last_error[0] != '\0'))
    return comm->last_error;
  return mc_error_last();
}

/* ---------- suspend, resume, grow ids, logging ---------- */

ncclResult_t mc_comm_usable(const struct ncclComm *comm, const char *call)
{
  if (__atomic_load_n(&comm->life.is_revoked, __ATOMIC_ACQUIRE) != 0)
    return MC_FAIL(ncclInvalidUsage,
                   "%s : communicator %p (rank %d) was revoked by ncclCommRevoke; only "
                   "ncclCommDestroy, ncclCommAbort, ncclCommSplit and ncclCommShrink remain",
                   call, (const void *)comm, comm->rank);
  if (__atomic_load_n(&comm->life.is_suspended, __ATOMIC_ACQUIRE) != 0)
    return MC_FAIL(ncclInvalidUsage,
                   "%s : communicator %p (rank %d) is suspended (ncclCommSuspend); call "
                   "ncclCommResume first",
                   call, (const void *)comm, comm->rank);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags);
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags)
{
  mc_api_enter();
  MC_CHECK(mc_comm_ready(comm, "ncclCommSuspend"));
  if ((flags & ~NCCL_SUSPEND_MEM) != 0)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommSuspend : flags 0x%x has unknown bits (known: NCCL_SUSPEND_MEM)",
                   (unsigned)flags);
  if (__atomic_exchange_n(&comm->life.is_suspended, 1, __ATOMIC_ACQ_REL) != 0)
    return MC_FAIL(ncclInvalidUsage, "ncclCommSuspend : communicator %p is already suspended",
                   (void *)comm);
  /* Host buffers stay where they are: there is no GPU memory to release. */
  MC_INFO(MC_SUB_INIT, "comm %p rank %d suspended (flags 0x%x)", (void *)comm, comm->rank,
          (unsigned)flags);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm);
ncclResult_t ncclCommResume(ncclComm_t comm)
{
  mc_api_enter();
  MC_CHECK(mc_comm_ready(comm, "ncclCommResume"));
  if (__atomic_exchange_n(&comm->life.is_suspended, 0, __ATOMIC_ACQ_REL) == 0)
    return MC_FAIL(ncclInvalidUsage, "ncclCommResume : communicator %p is not suspended",
                   (void *)comm);
  MC_INFO(MC_SUB_INIT, "comm %p rank %d resumed", (void *)comm, comm->rank);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId *uniqueId);
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId)
{
  ncclUniqueId id;

  mc_api_enter();
  MC_CHECK(mc_comm_ready(comm, "ncclCommGetUniqueId"));
  PTR_CHECK(uniqueId, "ncclCommGetUniqueId", "uniqueId");
  /* NCCL's rule: one id at a time, consumed by the grow it was made for. */
  if (comm->bootstrap.has_grow_id)
    return MC_FAIL(ncclInvalidUsage,
                   "ncclCommGetUniqueId : comm %p already has an id not consumed by "
                   "ncclCommGrow; grow with it before asking for another",
                   (void *)comm);
  /* A root listening in this process, as ncclGetUniqueId starts one. Like
   * NCCL's grow handle, the id carries this communicator's size: new ranks
   * check their rank against it. */
  MC_CHECK(mc_boot_unique_id(false, &id));
  {
    struct mc_boot_handle h;
    memcpy(&h, id.internal, sizeof(h));
    h.n_ranks = comm->n_ranks;
    memcpy(id.internal, &h, sizeof(h));
    mc_crypto_wipe(&h, sizeof(h));
  }
  /* The communicator holds the root, so that destroying it stops the root. */
  comm->bootstrap.grow_root = mc_boot_root_claim(&id);
  comm->bootstrap.grow_id = id;
  comm->bootstrap.has_grow_id = true;
  *uniqueId = id;
  MC_INFO(MC_SUB_INIT, "ncclCommGetUniqueId comm %p rank %d nranks %d: grow id made", (void *)comm,
          comm->rank, comm->n_ranks);
  return ncclSuccess;
}

NCCL_API(void, ncclResetDebugInit, void);
void ncclResetDebugInit(void)
{
  mc_log_reload_env();
}

/* Exported by NCCL 2.30's libnccl.so.2 without a header or a pnccl alias
 * (the deprecated ncclResetDebugInit's worker); the same here. */
void ncclResetDebugInitInternal(void);
__attribute__((visibility("default"))) void ncclResetDebugInitInternal(void)
{
  mc_log_reload_env();
}

/* ---------- revoke, shrink, grow, scalable init ---------- */

/* Refuses new collectives on comm, then stops those in flight on other
 * threads (they see the abort flag within a poll tick and fail) and waits
 * for them. The flag is cleared afterwards so that the bootstrap still
 * serves ncclCommSplit / ncclCommShrink and destroy. */
static void comm_revoke(struct ncclComm *comm)
{
  __atomic_store_n(&comm->life.is_revoked, 1, __ATOMIC_RELEASE);
  if (__atomic_load_n(&comm->coll.running, __ATOMIC_ACQUIRE) == 0)
    return;
  __atomic_store_n(&comm->life.abort_flag, 1, __ATOMIC_RELEASE);
  while (__atomic_load_n(&comm->coll.running, __ATOMIC_ACQUIRE) > 0)
    usleep(1000);
  __atomic_store_n(&comm->life.abort_flag, 0, __ATOMIC_RELEASE);
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
  mc_api_enter();
  MC_CHECK(mc_comm_ready(comm, "ncclCommRevoke"));
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommRevoke : revokeFlags %d must be NCCL_REVOKE_DEFAULT (0)", revokeFlags);
  comm_revoke(comm);
  MC_INFO(MC_SUB_INIT, "comm %p rank %d nranks %d - Revoke COMPLETE", (void *)comm, comm->rank,
          comm->n_ranks);
  return ncclSuccess;
}

/* The ranks that stay, in parent order; my index among them. */
static ncclResult_t shrink_members(const struct ncclComm *comm, const int *exclude, int n_exclude,
                                   int **members_out, int *n_out, int *idx_out)
{
  bool *gone = NULL;
  int *m = NULL;
  int k = 0;
  ncclResult_t res = ncclSuccess;

  MC_CHECK(mc_calloc(&gone, (size_t)comm->n_ranks));
  for (int i = 0; i < n_exclude; i++) {
    int r = exclude[i];
    if ((r < 0) || (r >= comm->n_ranks)) {
      res = MC_FAIL(ncclInvalidArgument,
                    "ncclCommShrink : excludeRanksList[%d] = %d is not a rank of comm (0..%d)", i,
                    r, comm->n_ranks - 1);
      goto out;
    }
    if (gone[r]) {
      res = MC_FAIL(ncclInvalidArgument,
                    "ncclCommShrink : rank %d appears twice in excludeRanksList", r);
      goto out;
    }
    if (r == comm->rank) {
      res = MC_FAIL(ncclInvalidArgument,
                    "ncclCommShrink : rank %d is in excludeRanksList; excluded ranks do not call "
                    "ncclCommShrink",
                    r);
      goto out;
    }
    gone[r] = true;
  }
  MC_CHECK_GOTO(mc_calloc(&m, (size_t)comm->n_ranks), res, out);
  for (int r = 0; r < comm->n_ranks; r++) {
    if (gone[r])
      continue;
    if (r == comm->rank)
      *idx_out = k;
    m[k++] = r;
  }
  *members_out = m;
  *n_out = k;
out:
  free(gone);
  return res;
}

static ncclResult_t comm_shrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
  int *members = NULL;
  int n_members = 0;
  int idx = 0;
  ncclUniqueId id;
  ncclResult_t res;

  MC_CHECK(mc_comm_ready(comm, "ncclCommShrink"));
  if ((shrinkFlags != NCCL_SHRINK_DEFAULT) && (shrinkFlags != NCCL_SHRINK_ABORT))
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommShrink : shrinkFlags %d is neither NCCL_SHRINK_DEFAULT nor "
                   "NCCL_SHRINK_ABORT",
                   shrinkFlags);
  if ((excludeRanksCount < 0) || (excludeRanksCount >= comm->n_ranks))
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommShrink : excludeRanksCount %d is not in 0..%d (comm has %d ranks)",
                   excludeRanksCount, comm->n_ranks - 1, comm->n_ranks);
  if ((excludeRanksCount > 0) && (excludeRanksList == NULL))
    return MC_FAIL(ncclInvalidArgument, "ncclCommShrink : excludeRanksList argument is NULL");
  MC_CHECK(shrink_members(comm, excludeRanksList, excludeRanksCount, &members, &n_members, &idx));
  *newcomm = NULL;
  /* A parent with failed ranks may have collectives stuck on them: stop those first. */
  if (shrinkFlags == NCCL_SHRINK_ABORT)
    comm_revoke(comm);
  /* As ncclCommSplit, but point to point among the survivors only: the
   * excluded ranks do not call, so no allgather over the parent. */
  if (idx == 0) {
    MC_CHECK_GOTO(mc_boot_unique_id(false, &id), res, out);
    for (int i = 1; i < n_members; i++)
      MC_CHECK_GOTO(
          mc_boot_send(comm->bootstrap.boot, members[i], MC_BOOT_TAG_SHRINK, &id, sizeof(id)), res,
          out);
  } else {
    MC_CHECK_GOTO(
        mc_boot_recv(comm->bootstrap.boot, members[0], MC_BOOT_TAG_SHRINK, &id, sizeof(id)), res,
        out);
  }
  res = init_rank(newcomm, n_members, &id, idx, comm->dev,
                  (config != NULL) ? config : &comm->config, MC_INIT_SPLIT, "ncclCommShrink");
  if (res == ncclSuccess)
    MC_INFO(MC_SUB_INIT,
            "ncclCommShrink comm %p rank %d excluding %d ranks -> comm %p rank %d of %d",
            (void *)comm, comm->rank, excludeRanksCount, (void *)*newcomm, idx, n_members);
out:
  free(members);
  return res;
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int *excludeRanksList,
         int excludeRanksCount, ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
  ncclResult_t res;

  mc_api_enter();
  PTR_CHECK(newcomm, "ncclCommShrink", "newcomm");
  MC_CHECK(mc_comm_enter(comm, "ncclCommShrink"));
  res = comm_shrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  mc_comm_leave(comm);
  return res;
}

/* What each existing rank says in a grow (allgathered over the parent). */
struct grow_entry {
  int32_t has_id; /* holds the id of ncclCommGetUniqueId(parent) */
  int32_t n_ranks;
  ncclUniqueId id;
};

/*
 * The existing ranks agree over the parent's bootstrap on nRanks and on
 * the one rank holding the grow id (NCCL sends the id from that rank to the
 * parent's first and last ranks; an allgather lets every existing rank
 * check the others' arguments too). Every existing rank sees the same
 * entries, so all of them fail alike. *holder_out: that rank.
 */
static ncclResult_t grow_agree(struct ncclComm *comm, int n_ranks, ncclUniqueId *id_out,
                               int *holder_out)
{
  struct grow_entry *all = NULL;
  ncclResult_t res = ncclSuccess;
  int holder = -1;

  MC_CHECK(mc_calloc(&all, (size_t)comm->n_ranks));
  all[comm->rank].has_id = comm->bootstrap.has_grow_id ? 1 : 0;
  all[comm->rank].n_ranks = n_ranks;
  if (comm->bootstrap.has_grow_id)
    all[comm->rank].id = comm->bootstrap.grow_id;
  MC_CHECK_GOTO(mc_boot_allgather(comm->bootstrap.boot, all, sizeof(*all)), res, out);
  for (int r = 0; r < comm->n_ranks; r++) {
    if (all[r].n_ranks != n_ranks) {
      res = MC_FAIL(ncclInvalidUsage,
                    "ncclCommGrow : rank %d of comm %p passes nRanks %d, but rank %d passes %d: "
                    "every rank (existing and new) must pass the same nRanks",
                    comm->rank, (void *)comm, n_ranks, r, all[r].n_ranks);
      goto out;
    }
    if (all[r].has_id == 0)
      continue;
    if (holder >= 0) {
      res = MC_FAIL(ncclInvalidUsage,
                    "ncclCommGrow : ranks %d and %d of comm %p both hold an id of "
                    "ncclCommGetUniqueId: one grow needs one id (the new ranks pass that one)",
                    holder, r, (void *)comm);
      goto out;
    }
    holder = r;
  }
  if (holder < 0) {
    res = MC_FAIL(ncclInvalidUsage,
                  "ncclCommGrow : no rank of comm %p (%d ranks) holds an id of "
                  "ncclCommGetUniqueId: one existing rank calls ncclCommGetUniqueId(comm) first "
                  "and gives that id to the new ranks",
                  (void *)comm, comm->n_ranks);
    goto out;
  }
  *id_out = all[holder].id;
  *holder_out = holder;
out:
  if (all != NULL)
    mc_crypto_wipe(all, (size_t)comm->n_ranks * sizeof(*all));
  free(all);
  return res;
}

/* An existing rank: comm, rank -1, the id only from its holder (NULL elsewhere). */
static ncclResult_t grow_existing(struct ncclComm *comm, int n_ranks, const ncclUniqueId *unique_id,
                                  int rank, ncclComm_t *newcomm, ncclConfig_t *config)
{
  struct init_extra x = {.n_ids = 1};
  ncclUniqueId id;
  ncclResult_t res;
  int holder = -1;

  MC_CHECK(mc_comm_ready(comm, "ncclCommGrow"));
  if (rank != -1)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommGrow : rank %d with comm %p: existing ranks pass rank -1 (they keep "
                   "their rank, %d here); only new ranks (comm NULL) name theirs",
                   rank, (void *)comm, comm->rank);
  if (n_ranks <= comm->n_ranks)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommGrow : nRanks %d is not larger than the %d ranks of comm %p", n_ranks,
                   comm->n_ranks, (void *)comm);
  if ((unique_id != NULL) && comm->bootstrap.has_grow_id &&
      (memcmp(unique_id->internal, comm->bootstrap.grow_id.internal, sizeof(unique_id->internal)) !=
       0))
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommGrow : uniqueId is not the id ncclCommGetUniqueId gave for comm %p "
                   "(rank %d): pass that one, or NULL",
                   (void *)comm, comm->rank);
  MC_CHECK(grow_agree(comm, n_ranks, &id, &holder));
  if (holder == comm->rank) {
    /* Consumed: the new communicator takes over the root's reference. */
    x.root_io = &comm->bootstrap.grow_root;
    comm->bootstrap.has_grow_id = false;
    mc_crypto_wipe(&comm->bootstrap.grow_id, sizeof(comm->bootstrap.grow_id));
  }
  res = init_rank_ex(newcomm, n_ranks, &id, comm->rank, comm->dev,
                     (config != NULL) ? config : &comm->config, MC_INIT_GROW, "ncclCommGrow", &x);
  mc_crypto_wipe(&id, sizeof(id));
  if ((res == ncclSuccess) || (res == ncclInProgress))
    MC_INFO(MC_SUB_INIT,
            "ncclCommGrow comm %p rank %d of %d -> comm %p rank %d of %d (id of rank %d)",
            (void *)comm, comm->rank, comm->n_ranks, (void *)*newcomm, comm->rank, n_ranks, holder);
  return res;
}

/* A new rank: comm NULL, the id, a rank after the parent's. */
static ncclResult_t grow_new(int n_ranks, const ncclUniqueId *unique_id, int rank,
                             ncclComm_t *newcomm, ncclConfig_t *config)
{
  struct mc_boot_handle h;
  int n_old;

  if (unique_id == NULL)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommGrow : uniqueId argument is NULL: a new rank (comm NULL) passes the id "
                   "an existing rank got from ncclCommGetUniqueId");
  if (n_ranks < 1)
    return MC_FAIL(ncclInvalidArgument, "ncclCommGrow : invalid nRanks %d (must be >= 1)", n_ranks);
  if ((rank < 0) || (rank >= n_ranks))
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommGrow : new rank %d is out of range (0..%d for nRanks %d)", rank,
                   n_ranks - 1, n_ranks);
  memcpy(&h, unique_id->internal, sizeof(h));
  n_old = h.n_ranks;
  mc_crypto_wipe(&h, sizeof(h));
  if (n_old < 1)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommGrow : uniqueId is not an id of ncclCommGetUniqueId (it names no "
                   "communicator to grow; ncclGetUniqueId's ids are for ncclCommInitRank)");
  if (n_ranks <= n_old)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommGrow : nRanks %d is not larger than the %d ranks of the communicator "
                   "being grown",
                   n_ranks, n_old);
  if (rank < n_old)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommGrow : new rank %d is a rank of the communicator being grown (ranks "
                   "0..%d keep theirs); new ranks take %d..%d",
                   rank, n_old - 1, n_old, n_ranks - 1);
  return init_rank_ex(newcomm, n_ranks, unique_id, rank, default_device(), config, MC_INIT_GROW,
                      "ncclCommGrow", NULL);
}

/*
 * NCCL 2.28's contract (init.cc, ncclCommGrow): every rank of comm calls
 * with comm and rank -1 and keeps its rank; the rank that called
 * ncclCommGetUniqueId(comm) may pass that id, the others pass NULL; each
 * new rank calls with comm NULL, the id and its rank (after comm's ranks).
 * The new communicator is complete (its own bootstrap over the id's root,
 * topology, channels, transports); comm stays usable.
 */
NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
         int rank, ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config)
{
  mc_api_enter();
  PTR_CHECK(newcomm, "ncclCommGrow", "newcomm");
  *newcomm = NULL;
  if (comm != NULL)
    return grow_existing(comm, nRanks, uniqueId, rank, newcomm, config);
  return grow_new(nRanks, uniqueId, rank, newcomm, config);
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t *newcomm, int nranks, int myrank,
         int nId, ncclUniqueId *commIds, ncclConfig_t *config);
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config)
{
  struct init_extra x = {.n_ids = nId, .ids = commIds};
  ncclUniqueId job;

  mc_api_enter();
  PTR_CHECK(newcomm, "ncclCommInitRankScalable", "newcomm");
  PTR_CHECK(commIds, "ncclCommInitRankScalable", "commIds");
  if ((nId < 1) || (nId > nranks))
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommInitRankScalable : invalid nId %d (must be in 1..nranks = %d)", nId,
                   nranks);
  /* One id is ncclCommInitRankConfig. Several: rank r registers with root
   * mc_boot_root_of_rank(r) (NCCL's mapping) proving that root's secret;
   * ring and peer connections prove the job secret derived from every id
   * (mc_boot_job_id; docs/design/bootstrap.md). */
  if (nId == 1)
    return init_rank(newcomm, nranks, &commIds[0], myrank, default_device(), config, MC_INIT_RANK,
                     "ncclCommInitRankScalable");
  if ((myrank < 0) || (myrank >= nranks)) {
    *newcomm = NULL;
    return MC_FAIL(ncclInvalidArgument, "ncclCommInitRankScalable : invalid rank requested : %d/%d",
                   myrank, nranks);
  }
  MC_CHECK(mc_boot_job_id(commIds, nId, "ncclCommInitRankScalable", &job));
  MC_INFO(MC_SUB_INIT | MC_SUB_BOOTSTRAP,
          "ncclCommInitRankScalable rank %d nranks %d: %d bootstrap roots, this rank registers "
          "with commIds[%d] (ranks %d..%d)",
          myrank, nranks, nId, mc_boot_root_of_rank(myrank, nranks, nId),
          mc_boot_root_first_rank(mc_boot_root_of_rank(myrank, nranks, nId), nranks, nId),
          mc_boot_root_first_rank(mc_boot_root_of_rank(myrank, nranks, nId) + 1, nranks, nId) - 1);
  return init_rank_ex(newcomm, nranks, &job, myrank, default_device(), config, MC_INIT_RANK,
                      "ncclCommInitRankScalable", &x);
}

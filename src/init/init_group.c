/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Group calls and asynchronous init. Mirrors NCCL's group.cc for inits:
 * ncclGroupStart/End nest per thread and only the outermost End acts; inits
 * issued inside a group run at that End, one thread each when there are
 * several; a blocking group waits for them, a non-blocking one returns
 * ncclInProgress and each communicator's state is read with
 * ncclCommGetAsyncError. When one init of a group fails, the others are
 * aborted rather than left waiting for a rank that will never come.
 */
#include "init_group.h"

#include "comm.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "utils.h"

struct mc_comm_group {
  pthread_mutex_t lock;
  int refs;
  int n;
  struct ncclComm **comms;
};

static __thread int group_depth;
static __thread ncclResult_t group_error;
static __thread struct ncclComm **group_jobs;
static __thread int group_n_jobs;
static __thread int group_cap_jobs;
static __thread int thread_device = -1;

int mc_thread_device(void)
{
  return thread_device;
}

void mc_thread_set_device(int dev)
{
  thread_device = dev;
}

int mc_group_depth(void)
{
  return group_depth;
}

bool mc_group_active(void)
{
  return group_depth > 0;
}

static ncclResult_t group_create(struct ncclComm **comms, int n)
{
  struct mc_comm_group *g = NULL;

  if (n < 2)
    return ncclSuccess;
  MC_CHECK(mc_calloc(&g, 1));
  if (mc_calloc(&g->comms, (size_t)n) != ncclSuccess) {
    free(g);
    return ncclSystemError;
  }
  pthread_mutex_init(&g->lock, NULL);
  g->n = n;
  g->refs = n;
  for (int i = 0; i < n; i++) {
    g->comms[i] = comms[i];
    comms[i]->life.group = g;
  }
  return ncclSuccess;
}

void mc_group_forget(struct ncclComm *comm)
{
  struct mc_comm_group *g = comm->life.group;
  bool is_last;

  if (g == NULL)
    return;
  pthread_mutex_lock(&g->lock);
  for (int i = 0; i < g->n; i++) {
    if (g->comms[i] == comm)
      g->comms[i] = NULL;
  }
  is_last = (--g->refs == 0);
  pthread_mutex_unlock(&g->lock);
  comm->life.group = NULL;
  if (is_last) {
    pthread_mutex_destroy(&g->lock);
    free(g->comms);
    free(g);
  }
}

/* A failed init aborts its siblings: they would wait for this rank forever. */
static void group_abort_siblings(struct ncclComm *comm)
{
  struct mc_comm_group *g = comm->life.group;

  if (g == NULL)
    return;
  pthread_mutex_lock(&g->lock);
  for (int i = 0; i < g->n; i++) {
    if ((g->comms[i] != NULL) && (g->comms[i] != comm))
      __atomic_store_n(&g->comms[i]->life.abort_flag, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g->lock);
}

static void *init_thread_main(void *arg)
{
  struct ncclComm *comm = arg;

  mc_thread_set_name("NCCL Init");
  if (mc_comm_init_run(comm) != ncclSuccess)
    group_abort_siblings(comm);
  return NULL;
}

static ncclResult_t start_thread(struct ncclComm *comm)
{
  int rc = pthread_create(&comm->life.init_thread, NULL, init_thread_main, comm);

  if (rc != 0) {
    ncclResult_t res =
        MC_FAIL(ncclSystemError, "init of rank %d: pthread_create: %s", comm->rank, strerror(rc));
    __atomic_store_n(&comm->life.async_result, (int)res, __ATOMIC_RELEASE);
    return res;
  }
  comm->life.has_init_thread = true;
  return ncclSuccess;
}

static ncclResult_t launch(struct ncclComm **jobs, int n)
{
  ncclResult_t res = ncclSuccess;
  bool blocking = jobs[0]->config.blocking != 0;

  for (int i = 1; i < n; i++) {
    if ((jobs[i]->config.blocking != 0) != blocking)
      return MC_FAIL(ncclInvalidArgument, "Blocking and nonblocking communicators are not allowed "
                                          "in the same group");
  }
  if (blocking && (n == 1))
    return mc_comm_init_run(jobs[0]);
  MC_CHECK(group_create(jobs, n));
  for (int i = 0; i < n; i++) {
    if (start_thread(jobs[i]) != ncclSuccess) {
      res = ncclSystemError;
      group_abort_siblings(jobs[i]);
    }
  }
  if (!blocking)
    return (res == ncclSuccess) ? ncclInProgress : res;
  for (int i = 0; i < n; i++) {
    ncclResult_t r;
    mc_comm_join_init(jobs[i]);
    r = (ncclResult_t)__atomic_load_n(&jobs[i]->life.async_result, __ATOMIC_ACQUIRE);
    if ((res == ncclSuccess) && (r != ncclSuccess))
      res = r;
  }
  return res;
}

ncclResult_t mc_group_launch_init(struct ncclComm *comm)
{
  if (group_depth == 0)
    return launch(&comm, 1);
  if (group_n_jobs == group_cap_jobs) {
    int cap = (group_cap_jobs == 0) ? 16 : 2 * group_cap_jobs;
    struct ncclComm **jobs = realloc(group_jobs, (size_t)cap * sizeof(*jobs));
    if (jobs == NULL) {
      group_error = MC_FAIL(ncclSystemError, "out of memory queueing an init in a group");
      return group_error;
    }
    group_jobs = jobs;
    group_cap_jobs = cap;
  }
  group_jobs[group_n_jobs++] = comm;
  return (comm->config.blocking != 0) ? ncclSuccess : ncclInProgress;
}

ncclResult_t mc_group_start(void)
{
  group_depth++;
  return ncclSuccess;
}

ncclResult_t mc_group_end(void)
{
  ncclResult_t res;

  if (group_depth == 0)
    return MC_FAIL(ncclInvalidUsage, "ncclGroupEnd: not in a group call");
  if (--group_depth > 0)
    return ncclSuccess;
  res = group_error;
  group_error = ncclSuccess;
  if ((res == ncclSuccess) && (group_n_jobs > 0))
    res = launch(group_jobs, group_n_jobs);
  group_n_jobs = 0;
  free(group_jobs);
  group_jobs = NULL;
  group_cap_jobs = 0;
  return res;
}

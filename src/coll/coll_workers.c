/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A rank's channels on several threads (comm->data.n_threads, decided at
 * init by mc_tp_decide_threads from the cores the job leaves idle, or
 * MESHCCL_NTHREADS): the host edition of NCCL running its channels on
 * several thread blocks of a kernel (src/enqueue.cc gives each channel its
 * blocks). A batch's tasks are shared by channel: channel c's on thread
 * c % k, thread 0 being the calling one, which also takes every task of no
 * channel (point-to-point, one-shot, symmetric: they drive connections of
 * their own) and watches the batch's stray steps and notices. Each thread
 * runs the executor's scheduler loop (mc_coll_tasks_loop) over its own
 * tasks; a connection belongs to one channel, so only one thread ever
 * advances it. The call returns when every thread is done; the first error
 * fails the batch and the others stop at their next pass; their liveness
 * checks take turns (struct mc_coll_share), so that a failure all of them
 * see (a dead peer, an abort) is reported once.
 *
 * The workers (threads 1 .. k-1) are the communicator's: started at its
 * first batch that uses them, parked on a condition variable between
 * batches, stopped and joined when the communicator frees its connections
 * (destroy, abort, a failed collective). Each is pinned to one CPU near the
 * rank (pick_cpus): named "meshccl-coll N" with NCCL_SET_THREAD_NAME=1.
 */
#include "coll/coll_int.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "transport/tp_decide.h"
#include "utils.h"

struct mc_coll_pool;

struct mc_coll_worker {
  struct mc_coll_pool *pool;
  int ix;  /* 1 .. k-1 */
  int cpu; /* pinned to; -1: not pinned */
  pthread_t thread;
};

/* A communicator's workers and the batch they run. Fields below lock are
 * written under it; sh is the batch's shared failure (coll_int.h). */
struct mc_coll_pool {
  struct ncclComm *comm;
  int k;                          /* threads including the caller */
  struct mc_coll_worker *workers; /* [k - 1] */
  struct mc_coll_plan *views;     /* [k]: each thread's tasks within the batch's plan */
  pthread_mutex_t lock;
  pthread_cond_t wake; /* a batch is posted, or quit */
  pthread_cond_t idle; /* busy dropped to 0 */
  uint64_t gen;        /* batches posted */
  bool quit;
  int busy; /* workers still on the batch */
  struct mc_coll_batch *b;
  struct mc_coll_share sh;
};

void mc_coll_share_fail(struct mc_coll_share *sh, ncclResult_t res, struct ncclComm *failed)
{
  int expected = 0;

  if (!__atomic_compare_exchange_n(&sh->stop, &expected, 1, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return;
  sh->res = res;
  sh->failed = failed;
  mc_error_last_copy(sh->why, sizeof(sh->why));
}

static void run_view(struct mc_coll_pool *p, int ix, const struct mc_coll_plan *all)
{
  struct ncclComm *failed = NULL;

  /* A failure is recorded in p->sh by the loop. */
  if (p->views[ix].n_tasks > 0)
    (void)mc_coll_tasks_loop(p->b, &p->views[ix], all, &p->sh, &failed);
}

static void *worker_main(void *arg)
{
  struct mc_coll_worker *w = arg;
  struct mc_coll_pool *p = w->pool;
  uint64_t seen = 0;
  char name[16];

  snprintf(name, sizeof(name), "meshccl-coll %d", w->ix);
  mc_thread_set_name(name);
  mc_log_set_thread_dev(p->comm->dev);
  pthread_mutex_lock(&p->lock);
  for (;;) {
    /* Parked between batches: woken by the next one or by quit. */
    while (!p->quit && (p->gen == seen))
      pthread_cond_wait(&p->wake, &p->lock);
    if (p->quit)
      break;
    seen = p->gen;
    pthread_mutex_unlock(&p->lock);
    run_view(p, w->ix, NULL);
    mc_error_clear_thread();
    pthread_mutex_lock(&p->lock);
    if (--p->busy == 0)
      pthread_cond_signal(&p->idle);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* The CPUs of this rank's workers (cpus[1 .. k-1]; -1: not pinned), near
 * the calling thread's (mc_tp_decide_worker_cpus: its affinity mask's
 * nearest, or the host's idle cores). */
static void pick_cpus(int k, int local_rank, int local_ranks, int *cpus)
{
  cpu_set_t mask;
  int mask_cpus[CPU_SETSIZE];
  int n_mask = 0;
  long n = sysconf(_SC_NPROCESSORS_ONLN);

  cpus[0] = -1;
  for (int i = 1; i < k; i++)
    cpus[i] = -1;
  if ((n <= 0) || (sched_getaffinity(0, sizeof(mask), &mask) != 0))
    return;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &mask))
      mask_cpus[n_mask++] = c;
  mc_tp_decide_worker_cpus(mask_cpus, n_mask, (int)n, sched_getcpu(), k, local_rank, local_ranks,
                           cpus + 1);
}

static void pool_free(struct mc_coll_pool *p, int n_started)
{
  pthread_mutex_lock(&p->lock);
  p->quit = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < n_started; i++)
    pthread_join(p->workers[i].thread, NULL);
  pthread_cond_destroy(&p->idle);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->sh.lock);
  pthread_mutex_destroy(&p->lock);
  free(p->workers);
  free(p->views);
  free(p);
}

void mc_coll_workers_free(struct ncclComm *comm)
{
  struct mc_coll_pool *p = comm->coll.workers;

  if (p == NULL)
    return;
  comm->coll.workers = NULL;
  pool_free(p, p->k - 1);
}

/* comm's pool of k threads, started now if it is not yet; NULL when not
 * even one worker could start (the batch then runs on the caller alone). */
static struct mc_coll_pool *pool_get(struct ncclComm *comm, int k)
{
  struct mc_coll_pool *p = comm->coll.workers;
  int cpus[MC_THREADS_MAX];
  int started = 0;

  if (p != NULL)
    return p;
  p = calloc(1, sizeof(*p));
  if (p == NULL)
    return NULL;
  p->workers = calloc((size_t)k, sizeof(*p->workers));
  p->views = calloc((size_t)k, sizeof(*p->views));
  if ((p->workers == NULL) || (p->views == NULL)) {
    free(p->workers);
    free(p->views);
    free(p);
    return NULL;
  }
  p->comm = comm;
  pthread_mutex_init(&p->lock, NULL);
  pthread_mutex_init(&p->sh.lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->idle, NULL);
  pick_cpus(k, comm->nodes.local_rank, comm->nodes.local_ranks, cpus);
  for (int i = 1; i < k; i++) {
    struct mc_coll_worker *w = &p->workers[started];
    pthread_attr_t attr;
    int err;
    w->pool = p;
    w->ix = i;
    w->cpu = cpus[i];
    pthread_attr_init(&attr);
    if (w->cpu >= 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(w->cpu, &one);
      pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
    }
    err = pthread_create(&w->thread, &attr, worker_main, w);
    pthread_attr_destroy(&attr);
    if (err != 0) {
      MC_INFO(MC_SUB_TUNING, "rank %d: collective worker %d of %d not started (%s): %d threads",
              comm->rank, i, k - 1, strerror(err), started + 1);
      break;
    }
    started++;
  }
  if (started == 0) {
    pool_free(p, 0);
    return NULL;
  }
  p->k = started + 1;
  comm->coll.workers = p;
  comm->coll.workers_free = mc_coll_workers_free;
  {
    char where[256] = "";
    size_t len = 0;
    for (int i = 0; (i < started) && (len + 16 < sizeof(where)); i++)
      len += (size_t)snprintf(where + len, sizeof(where) - len, "%s%d", (i > 0) ? "," : "",
                              p->workers[i].cpu);
    MC_INFO(MC_SUB_TUNING,
            "rank %d: %d collective worker thread(s) started beside the caller (on CPU %d), "
            "pinned to CPUs %s (-1: not pinned)",
            comm->rank, started, sched_getcpu(), where);
  }
  return p;
}

/* The channel of t's connections, -1 for none (its own connections). */
static int task_channel(const struct ncclComm *comm, const struct mc_task *t)
{
  const char *lo = (const char *)comm->data.channels;
  const char *hi = (const char *)(comm->data.channels + comm->data.n_channels);

  if ((lo == NULL) || (t->algo->task_progress != NULL))
    return -1;
  for (int i = 0; i < t->n_send + t->n_recv; i++) {
    const char *c = (const char *)((i < t->n_send) ? t->send[i] : t->recv[i - t->n_send]);
    if ((c >= lo) && (c < hi))
      return (int)((size_t)(c - lo) / sizeof(struct mc_channel));
  }
  return -1;
}

/* Orders pl's tasks by thread (each thread's in their order) and sets the
 * threads' views: false when fewer than two threads have work, or when a
 * task would wait for one of another thread (then pl stays runnable on
 * one thread). */
static bool split(struct mc_coll_plan *pl, struct mc_coll_pool *p, struct ncclComm *comm)
{
  int n = pl->n_tasks;
  int k = p->k;
  int *who = malloc((size_t)n * sizeof(*who));
  struct mc_task *copy = malloc((size_t)n * sizeof(*copy));
  int at = 0;
  int busy = 0;
  bool ok = true;

  if ((who == NULL) || (copy == NULL)) {
    free(who);
    free(copy);
    return false;
  }
  for (int i = 0; i < n; i++) {
    struct mc_task *t = &pl->tasks[i];
    int c = task_channel(comm, t);
    who[i] = (c < 0) ? 0 : c % k;
    if (t->after != NULL)
      who[i] = who[t->after - pl->tasks]; /* a chain stays on one thread */
  }
  memcpy(copy, pl->tasks, (size_t)n * sizeof(*copy));
  for (int w = 0; w < k; w++) {
    struct mc_coll_plan *v = &p->views[w];
    v->tasks = pl->tasks + at;
    v->n_tasks = 0;
    for (int i = 0; i < n; i++)
      if (who[i] == w)
        pl->tasks[at + v->n_tasks++] = copy[i];
    v->cap = v->n_tasks;
    at += v->n_tasks;
    busy += (v->n_tasks > 0);
  }
  mc_coll_plan_link(pl);
  for (int w = 0; w < k; w++) {
    const struct mc_coll_plan *v = &p->views[w];
    for (int i = 0; i < v->n_tasks; i++) {
      const struct mc_task *a = v->tasks[i].after;
      if ((a != NULL) && ((a < v->tasks) || (a >= v->tasks + v->n_tasks)))
        ok = false;
    }
  }
  free(who);
  free(copy);
  return ok && (busy > 1);
}

ncclResult_t mc_coll_workers_run(struct mc_coll_batch *b, struct mc_coll_plan *pl, int k,
                                 struct ncclComm **failed)
{
  struct ncclComm *comm = b->ops[0].comm;
  struct mc_coll_pool *p = pool_get(comm, (k > MC_THREADS_MAX) ? MC_THREADS_MAX : k);

  if ((p == NULL) || !split(pl, p, comm))
    return mc_coll_tasks_loop(b, pl, pl, NULL, failed);
  pthread_mutex_lock(&p->lock);
  p->b = b;
  p->sh.stop = 0;
  p->sh.res = ncclSuccess;
  p->sh.failed = NULL;
  p->sh.why[0] = '\0';
  p->busy = p->k - 1;
  p->gen++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);

  run_view(p, 0, pl);

  /* The workers' loops end as the caller's does: done, failed (their
   * liveness checks are bounded), or stopped by the first failure. */
  pthread_mutex_lock(&p->lock);
  while (p->busy > 0)
    pthread_cond_wait(&p->idle, &p->lock);
  p->b = NULL;
  pthread_mutex_unlock(&p->lock);
  if (p->sh.res == ncclSuccess)
    return ncclSuccess;
  mc_error_set_thread(p->sh.why);
  *failed = p->sh.failed;
  return p->sh.res;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Process helpers of the tests (see mc_proc.h). */
#include "mc_proc.h"

#include <dirent.h>
#include <pthread.h>

int mc_count_dir(const char *path)
{
  DIR *d = opendir(path);
  struct dirent *e;
  int n = 0;

  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] != '.')
      n++;
  }
  closedir(d);
  return n;
}

int mc_count_fds(void)
{
  return mc_count_dir("/proc/self/fd") - 1; /* the directory stream's own fd */
}

int mc_count_threads(void)
{
  return mc_count_dir("/proc/self/task");
}

static void *no_op_main(void *arg)
{
  return arg;
}

int mc_count_threads_stable(void)
{
  double end;
  int n;
  int same = 0;
  pthread_t t;

  /* ThreadSanitizer's runtime starts a thread of its own at the process's
   * first pthread_create: one thread created and joined first puts it in
   * the baseline rather than among the library's threads. */
  if (pthread_create(&t, NULL, no_op_main, NULL) == 0)
    pthread_join(t, NULL);
  end = mc_clock_sec(CLOCK_MONOTONIC) + 2.0;
  n = mc_count_threads();

  /* A thread just joined can linger in /proc/self/task for a moment (the
   * kernel ends the task after waking the joiner): wait for 5 equal
   * samples 10 ms apart, 2 s at most. */
  while ((same < 5) && (mc_clock_sec(CLOCK_MONOTONIC) < end)) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    int m;

    nanosleep(&ts, NULL);
    m = mc_count_threads();
    same = (m == n) ? same + 1 : 0;
    n = m;
  }
  return n;
}

int mc_count_threads_settled(int want, int timeout_ms)
{
  double end = mc_clock_sec(CLOCK_MONOTONIC) + timeout_ms / 1000.0;
  int n = mc_count_threads();

  while ((n != want) && (mc_clock_sec(CLOCK_MONOTONIC) < end)) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    n = mc_count_threads();
  }
  return n;
}

double mc_clock_sec(clockid_t id)
{
  struct timespec ts;

  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Supervising the job: the main loop (poll on the ranks' pipes and the
 * signal pipe), reaping the ranks, the time the others get to end on their
 * own once one has failed (SETTLE_SEC), then SIGTERM and SIGKILL after the
 * grace period, and the launcher's exit status: the first failed rank's.
 */
#include "run.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

/* Time the other ranks get to end on their own once one has failed. */
#define SETTLE_SEC 1.0

/* Text for a wait status: "exited with status 3", "was killed by signal 9 (Killed)". */
static void describe_status(int status, char *buf, size_t size)
{
  if (WIFEXITED(status)) {
    snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  } else {
    snprintf(buf, size, "ended with wait status 0x%x", (unsigned)status);
  }
}

static int status_exit_code(int status)
{
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  if (WIFSIGNALED(status)) {
    return 128 + WTERMSIG(status);
  }
  return 1;
}

static void rank_exited(struct launcher *l, int r, int status)
{
  struct rank *rk = &l->ranks[r];
  char desc[96];
  bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  rk->running = false;
  rk->status = status;
  l->live--;
  run_output_drain(l, r); /* its last words come before ours */
  if (l->stopping || failed) {
    kill(-rk->pid, SIGKILL); /* whatever it left behind in its group */
  }
  if (!failed || l->stopping || l->settling) {
    return;
  }
  l->first_failed = r;
  describe_status(status, desc, sizeof(desc));
  fprintf(stderr, PROG_NAME ": rank %d (pid %ld) %s%s\n", r, (long)rk->pid, desc,
          (l->live > 0) ? "; stopping the other ranks" : "");
  /*
   * Not SIGTERM at once: the rank that failed first is often not the one
   * where the failure began (a peer told of the failure can exit before the
   * rank that saw it has printed why).
   */
  l->settling = true;
  l->settle_end = run_now_sec() + SETTLE_SEC;
}

static void reap_children(struct launcher *l)
{
  run_pending_chld = 0;
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);

    if (pid < 0 && errno == EINTR) {
      continue;
    }
    if (pid <= 0) {
      break;
    }
    for (int r = 0; r < l->opt.np; r++) {
      if (l->ranks[r].running && l->ranks[r].pid == pid) {
        rank_exited(l, r, status);
        break;
      }
    }
  }
}

static void check_deadline(struct launcher *l)
{
  if (l->settling && !l->stopping && l->live > 0 && run_now_sec() >= l->settle_end) {
    run_signals_stop(l, SIGTERM);
    return;
  }
  if (!l->stopping || l->killed || l->live == 0 || run_now_sec() < l->deadline) {
    return;
  }
  l->killed = true;
  fprintf(stderr, PROG_NAME ": %d rank(s) still running %g s after SIGTERM; sending SIGKILL\n",
          l->live, l->opt.grace);
  run_signals_send(l, SIGKILL, false);
}

static int poll_timeout_ms(const struct launcher *l)
{
  double left;

  if (l->settling && !l->stopping) {
    left = l->settle_end - run_now_sec();
  } else if (!l->stopping || l->killed) {
    return -1;
  } else {
    left = l->deadline - run_now_sec();
  }
  if (left <= 0.0) {
    return 0;
  }
  if (left > 86400.0) {
    left = 86400.0;
  }
  return (int)(left * 1000.0) + 1; /* round up, so that the deadline has passed on wake-up */
}

/* Fills l->pfd with the wake pipe and every open rank pipe; returns the count. */
static int build_pollset(struct launcher *l)
{
  int n = 1;

  l->pfd[0].fd = run_wake_pipe[0];
  l->pfd[0].events = POLLIN;
  for (int r = 0; r < l->opt.np; r++) {
    for (int s = 0; s < N_STREAMS; s++) {
      if (l->ranks[r].fd[s] < 0) {
        continue;
      }
      l->pfd[n].fd = l->ranks[r].fd[s];
      l->pfd[n].events = POLLIN;
      l->pfd_rank[n] = r;
      l->pfd_stream[n] = s;
      n++;
    }
  }
  return n;
}

/*
 * Once our stdout (or stderr) is gone, closes that pipe of every rank, so that
 * the ranks get SIGPIPE as they would writing to it directly.
 */
static void drop_broken_outputs(struct launcher *l)
{
  for (int s = 0; s < N_STREAMS; s++) {
    if (!l->out_broken[s]) {
      continue;
    }
    for (int r = 0; r < l->opt.np; r++) {
      if (l->ranks[r].fd[s] >= 0) {
        run_output_close(l, r, s); /* its partial line goes nowhere */
      }
    }
  }
}

int run_job_loop(struct launcher *l)
{
  while (l->live > 0) {
    int n = build_pollset(l);
    int ready = poll(l->pfd, (nfds_t)n, poll_timeout_ms(l));

    if (ready < 0 && errno != EINTR) {
      fprintf(stderr, PROG_NAME ": poll: %s\n", strerror(errno));
      return -1;
    }
    for (int i = 1; ready > 0 && i < n; i++) {
      if (l->pfd[i].revents != 0 && l->ranks[l->pfd_rank[i]].fd[l->pfd_stream[i]] >= 0) {
        run_output_read(l, l->pfd_rank[i], l->pfd_stream[i]);
      }
    }
    drop_broken_outputs(l);
    run_signals_handle(l);
    reap_children(l);
    check_deadline(l);
  }
  /* Every rank is gone: take what is left in the pipes and close them. */
  for (int r = 0; r < l->opt.np; r++) {
    run_output_drain(l, r);
    for (int s = 0; s < N_STREAMS; s++) {
      if (l->ranks[r].fd[s] >= 0) {
        run_output_close(l, r, s);
      }
    }
  }
  return 0;
}

int run_job_exit_code(const struct launcher *l)
{
  char desc[96];

  if (l->got_signal != 0) {
    fprintf(stderr, PROG_NAME ": job interrupted by signal %d (%s)\n", l->got_signal,
            strsignal(l->got_signal));
    return 128 + l->got_signal;
  }
  if (l->first_failed >= 0) {
    int status = l->ranks[l->first_failed].status;

    describe_status(status, desc, sizeof(desc));
    /* Which port is which, for a failure that is a clash (the last line names the rank). */
    if (run_env_ports_desc[0] != '\0') {
      fprintf(stderr, PROG_NAME ": ports of this job: %s\n", run_env_ports_desc);
    }
    fprintf(stderr, PROG_NAME ": job failed: rank %d %s\n", l->first_failed, desc);
    return status_exit_code(status);
  }
  if (l->spawn_failed) {
    fprintf(stderr, PROG_NAME ": job failed: could not start every rank\n");
    return 1;
  }
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Signals: SIGCHLD and the forwarded ones (SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT) are caught by a handler that only records them and wakes the main
 * loop through a pipe; the loop forwards them to every rank's process group.
 * SIGINT and SIGTERM stop the job: the signal now, SIGKILL after --grace.
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const int run_fwd_signals[N_FWD] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
volatile sig_atomic_t run_pending_sig[N_FWD];
volatile sig_atomic_t run_pending_chld;
bool run_ignored_sig[N_FWD];
int run_wake_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
  int saved = errno;

  if (sig == SIGCHLD) {
    run_pending_chld = 1;
  } else {
    for (size_t i = 0; i < N_FWD; i++) {
      if (run_fwd_signals[i] == sig) {
        run_pending_sig[i] = 1;
      }
    }
  }
  if (write(run_wake_pipe[1], "x", 1) < 0) {
    /* full pipe: a wake-up is already pending */
  }
  errno = saved;
}

void run_signals_set_handled(sigset_t *set)
{
  sigemptyset(set);
  sigaddset(set, SIGCHLD);
  for (size_t i = 0; i < N_FWD; i++) {
    sigaddset(set, run_fwd_signals[i]);
  }
}

int run_signals_install(void)
{
  struct sigaction sa;

  if (pipe2(run_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return -1;
  }
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  run_signals_set_handled(&sa.sa_mask);
  if (sigaction(SIGCHLD, &sa, NULL) != 0) {
    return -1;
  }
  for (size_t i = 0; i < N_FWD; i++) {
    struct sigaction cur;

    if (sigaction(run_fwd_signals[i], NULL, &cur) == 0 && cur.sa_handler == SIG_IGN) {
      run_ignored_sig[i] = true;
      continue;
    }
    if (sigaction(run_fwd_signals[i], &sa, NULL) != 0) {
      return -1;
    }
  }
  /* A closed stdout must not kill the launcher; children get SIG_DFL back. */
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

/* Sends sig to the process group of every running rank. */
void run_signals_send(struct launcher *l, int sig, bool cont)
{
  for (int r = 0; r < l->opt.np; r++) {
    struct rank *rk = &l->ranks[r];

    if (!rk->running) {
      continue;
    }
    if (kill(-rk->pid, sig) != 0 && errno == ESRCH) {
      kill(rk->pid, sig);
    }
    if (cont) {
      kill(-rk->pid, SIGCONT);
    }
  }
}

/* Starts stopping the job: sig to every rank now, SIGKILL after the grace period. */
void run_signals_stop(struct launcher *l, int sig)
{
  if (!l->stopping) {
    l->stopping = true;
    l->deadline = run_now_sec() + l->opt.grace;
  }
  run_signals_send(l, sig, true);
}

void run_signals_handle(struct launcher *l)
{
  char junk[64];

  while (read(run_wake_pipe[0], junk, sizeof(junk)) > 0) {
  }
  for (size_t i = 0; i < N_FWD; i++) {
    int sig = run_fwd_signals[i];

    if (run_pending_sig[i] == 0) {
      continue;
    }
    run_pending_sig[i] = 0;
    if ((sig == SIGINT || sig == SIGTERM) && !l->stopping) {
      l->got_signal = sig;
      fprintf(stderr, PROG_NAME ": got signal %d (%s); stopping the ranks\n", sig, strsignal(sig));
      run_signals_stop(l, sig);
    } else {
      run_signals_send(l, sig, false);
    }
  }
}

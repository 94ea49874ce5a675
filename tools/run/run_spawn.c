/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Starting the ranks: a fork per rank, each in its own process group, its
 * stdout and stderr on pipes back to the launcher, stdin /dev/null but for
 * rank 0 (unless a terminal), only fds 0, 1 and 2, the launcher's signal
 * dispositions reset (an ignored one stays ignored), RANK and LOCAL_RANK set,
 * and with --bind-to core pinned to one CPU: rank i to the i-th of the
 * launcher's affinity mask, round robin past its end (mpirun --bind-to core).
 */
#include "run.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

static int set_nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL);

  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    return -1;
  }
  return 0;
}

/* Closes every fd from 3 up, so that the child gets only stdin, stdout and stderr. */
static void close_fds_from_3(void)
{
  long max;

#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0) {
    return;
  }
#endif
  max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) {
    max = 65536;
  }
  for (long fd = 3; fd < max; fd++) {
    close((int)fd);
  }
}

/*
 * Runs in the child after fork(). The launcher is single-threaded, so setenv()
 * and snprintf() are safe here.
 */
static void child_exec(struct launcher *l, int r, int out_w, int err_w, const sigset_t *mask)
{
  char num[16];

  for (size_t i = 0; i < N_FWD; i++) {
    signal(run_fwd_signals[i], run_ignored_sig[i] ? SIG_IGN : SIG_DFL);
  }
  signal(SIGCHLD, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigprocmask(SIG_SETMASK, mask, NULL);
  setpgid(0, 0);
  if (r != 0 || isatty(STDIN_FILENO)) {
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    if (null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
    }
  }
  if (dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0) {
    _exit(127);
  }
  close_fds_from_3();
  if (l->n_cpus > 0) {
    cpu_set_t one;
    int cpu = l->cpus[r % l->n_cpus];
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) {
      dprintf(STDERR_FILENO, PROG_NAME ": rank %d: cannot bind to CPU %d: %s\n", r, cpu,
              strerror(errno));
      _exit(127);
    }
  }
  snprintf(num, sizeof(num), "%d", r);
  setenv("RANK", num, 1);
  setenv("LOCAL_RANK", num, 1);
  execvp(l->opt.argv[0], l->opt.argv);
  dprintf(STDERR_FILENO, PROG_NAME ": rank %d: cannot run '%s': %s\n", r, l->opt.argv[0],
          strerror(errno));
  _exit(127);
}

static int spawn_rank(struct launcher *l, int r)
{
  struct rank *rk = &l->ranks[r];
  int out[2], err[2];
  sigset_t block, old;
  pid_t pid;

  if (pipe2(out, O_CLOEXEC) != 0) {
    return -1;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return -1;
  }
  /* No handler may run in the child before it resets them. */
  run_signals_set_handled(&block);
  sigprocmask(SIG_BLOCK, &block, &old);
  pid = fork();
  if (pid == 0) {
    child_exec(l, r, out[1], err[1], &old);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    return -1;
  }
  setpgid(pid, pid); /* also done by the child; whichever runs first wins */
  set_nonblock(out[0]);
  set_nonblock(err[0]);
  rk->pid = pid;
  rk->running = true;
  rk->fd[STREAM_OUT] = out[0];
  rk->fd[STREAM_ERR] = err[0];
  l->started++;
  l->live++;
  return 0;
}

/* --bind-to core: the CPUs of the launcher's mask, in order; 0, or -1 said. */
static int bind_setup(struct launcher *l)
{
  cpu_set_t set;

  if (!l->opt.bind_core)
    return 0;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    fprintf(stderr, PROG_NAME ": --bind-to core: cannot read this process's affinity: %s\n",
            strerror(errno));
    return -1;
  }
  l->cpus = calloc((size_t)CPU_SETSIZE, sizeof(*l->cpus));
  if (l->cpus == NULL) {
    fprintf(stderr, PROG_NAME ": --bind-to core: out of memory\n");
    return -1;
  }
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set))
      l->cpus[l->n_cpus++] = c;
  if (l->opt.np > l->n_cpus)
    fprintf(stderr,
            PROG_NAME ": warning: --bind-to core: %d ranks on %d CPUs; ranks share CPUs "
                      "round robin\n",
            l->opt.np, l->n_cpus);
  return 0;
}

void run_spawn_all(struct launcher *l)
{
  if (bind_setup(l) != 0) {
    l->spawn_failed = true;
    return;
  }
  for (int r = 0; (r < l->opt.np) && l->opt.report_bindings; r++) {
    if (l->n_cpus > 0)
      fprintf(stderr, PROG_NAME ": rank %d bound to CPU %d\n", r, l->cpus[r % l->n_cpus]);
    else
      fprintf(stderr, PROG_NAME ": rank %d not bound\n", r);
  }
  for (int r = 0; r < l->opt.np; r++) {
    if (run_pending_sig[0] != 0 || run_pending_sig[1] != 0) {
      break; /* SIGINT or SIGTERM while starting: the main loop stops the job */
    }
    if (spawn_rank(l, r) != 0) {
      int e = errno;
      struct rlimit rl;
      fprintf(stderr, PROG_NAME ": cannot start rank %d: %s\n", r, strerror(e));
      /* Two pipes per rank (stdout, stderr): a low limit stops the launcher first. */
      if ((e == EMFILE) && (getrlimit(RLIMIT_NOFILE, &rl) == 0))
        fprintf(stderr,
                PROG_NAME ": this process is at its open-files limit (RLIMIT_NOFILE %llu, hard "
                          "%llu; it holds two pipes per rank): raise `ulimit -n`\n",
                (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
      l->spawn_failed = true;
      run_signals_stop(l, SIGTERM);
      break;
    }
  }
}

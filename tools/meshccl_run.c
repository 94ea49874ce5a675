/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-run: the local launcher. It starts N copies of a program on this
 * host as the ranks of one job, each in its own process group, with RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MESHCCL_RUN, a shared
 * NCCL_COMM_ID (a free port on 127.0.0.1) and a shared random MESHCCL_SECRET
 * (unless set: the bootstrap's proof that a connection is one of the job's)
 * in its environment. The ranks'
 * stdout and stderr come back through pipes and are written line by line,
 * each line prefixed with "[rank] ", to the launcher's stdout and stderr.
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to every rank (a signal
 * the launcher was started with ignored, as under nohup, stays ignored by the
 * launcher and the ranks). When a rank fails, the others get a short time
 * to end on their own (a failed communicator ends every rank's job, and the
 * rank where the failure began says why as it exits), then SIGTERM and, after
 * a grace period, SIGKILL; the launcher then exits with the status of the
 * first rank that failed.
 *
 * Rank 0 reads the launcher's stdin unless it is a terminal; every other rank
 * reads /dev/null. Children get only fds 0, 1 and 2.
 *
 * The tool is standalone: it uses libc and POSIX only, no meshccl function.
 * Its parts are in tools/run/ (run.h says which file does what); this file
 * sets the launcher up, runs the job and ends it.
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Makes sure fds 0, 1 and 2 are open, so that no pipe of ours lands on them. */
static void open_std_fds(void)
{
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      /* The lower fds are open by now, so this lands on fd itself. */
      if (open("/dev/null", (fd == 0) ? O_RDONLY : O_WRONLY) < 0) {
        return;
      }
    }
  }
}

static int launcher_init(struct launcher *l, int argc, char **argv)
{
  size_t npfd;

  memset(l, 0, sizeof(*l));
  l->first_failed = -1;
  run_args_parse(argc, argv, &l->opt);
  open_std_fds();
  npfd = 1 + (size_t)l->opt.np * N_STREAMS;
  l->ranks = calloc((size_t)l->opt.np, sizeof(*l->ranks));
  l->pfd = calloc(npfd, sizeof(*l->pfd));
  l->pfd_rank = calloc(npfd, sizeof(*l->pfd_rank));
  l->pfd_stream = calloc(npfd, sizeof(*l->pfd_stream));
  if (l->ranks == NULL || l->pfd == NULL || l->pfd_rank == NULL || l->pfd_stream == NULL) {
    fprintf(stderr, PROG_NAME ": out of memory\n");
    return -1;
  }
  for (int r = 0; r < l->opt.np; r++) {
    l->ranks[r].fd[STREAM_OUT] = -1;
    l->ranks[r].fd[STREAM_ERR] = -1;
  }
  if (run_env_setup(&l->opt) != 0) {
    return -1;
  }
  if (run_signals_install() != 0) {
    fprintf(stderr, PROG_NAME ": cannot set up signal handling: %s\n", strerror(errno));
    return -1;
  }
  return 0;
}

static void launcher_fini(struct launcher *l)
{
  for (int r = 0; (l->ranks != NULL) && (r < l->opt.np); r++) {
    for (int st = 0; st < N_STREAMS; st++)
      free(l->ranks[r].line[st].data);
  }
  free(l->ranks);
  free(l->pfd);
  free(l->pfd_rank);
  free(l->pfd_stream);
  free(l->cpus);
}

int main(int argc, char **argv)
{
  struct launcher l;
  int rc;

  if (launcher_init(&l, argc, argv) != 0) {
    launcher_fini(&l);
    return 1;
  }
  run_args_warn_if_mpi(&l.opt);
  run_spawn_all(&l);
  if (run_job_loop(&l) != 0) {
    run_signals_send(&l, SIGKILL, false);
    launcher_fini(&l);
    return 1;
  }
  rc = run_job_exit_code(&l);
  launcher_fini(&l);
  return rc;
}

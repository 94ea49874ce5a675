/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-run's private header, shared by tools/meshccl_run.c (main: the
 * launcher's set-up and end) and the files of tools/run/, one job each:
 * run_args.c (the command line), run_env.c (what every rank's environment
 * shares: ports, secret), run_spawn.c (starting the ranks), run_signals.c
 * (signals: caught, forwarded, and the stop of the job), run_output.c (the
 * ranks' output, line by line and tagged) and run_job.c (supervising the
 * job: the main loop, reaping, the exit code). The tool uses libc and POSIX
 * only, no meshccl function.
 */
#ifndef MC_TOOLS_RUN_H
#define MC_TOOLS_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>
#include <poll.h>
#include <sys/types.h>

#define PROG_NAME   "meshccl-run"
#define MAX_EXPORTS 64

enum { STREAM_OUT = 0, STREAM_ERR = 1, N_STREAMS = 2 };

/* Bytes of one stream of one rank that do not form a complete line yet. */
struct line_buf {
  char *data;
  size_t len;
  size_t cap;
};

struct rank {
  pid_t pid;         /* also the id of the rank's process group; 0 if never started */
  bool running;      /* started and not reaped yet */
  int status;        /* wait status, once reaped */
  int fd[N_STREAMS]; /* read ends of the stdout and stderr pipes, or -1 */
  struct line_buf line[N_STREAMS];
};

/* How each output line is prefixed. */
enum tag_style {
  TAG_NONE = 0,
  TAG_RANK, /* "[r] " (MESHCCL_RUN_TAG_OUTPUT=1) */
  TAG_MPI,  /* Open MPI's --tag-output: "[1,r]<stdout>:" / "[1,r]<stderr>:" */
  TAG_SRUN  /* srun's --label: "r: " */
};

struct options {
  int np;
  double grace;
  enum tag_style tag;
  int n_exports;
  const char *exports[MAX_EXPORTS]; /* mpirun's -x: "VAR" (inherited anyway) or "VAR=value" */
  char **argv;                      /* program and its arguments, NULL-terminated */
  bool bind_core;                   /* --bind-to core: rank i on the i-th CPU of our mask */
  bool report_bindings;             /* --report-bindings */
};

struct launcher {
  struct options opt;
  int n_cpus; /* --bind-to core: the CPUs of the launcher's affinity mask, in order */
  int *cpus;
  struct rank *ranks;
  int started;      /* ranks started */
  int live;         /* ranks started and not reaped */
  int first_failed; /* first rank that failed, or -1 */
  int got_signal;   /* SIGINT or SIGTERM that stopped the job, or 0 */
  bool spawn_failed;
  bool settling;              /* a rank failed: the others may still end on their own */
  double settle_end;          /* when settling ends, CLOCK_MONOTONIC seconds */
  bool stopping;              /* SIGTERM sent, waiting for the grace period */
  bool killed;                /* grace period over, SIGKILL sent */
  double deadline;            /* end of the grace period, CLOCK_MONOTONIC seconds */
  bool out_broken[N_STREAMS]; /* our own stdout or stderr is gone */
  struct pollfd *pfd;
  int *pfd_rank;
  int *pfd_stream;
};

static inline double run_now_sec(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------- run_args.c ---------- */

/* Fills opt from the command line; on bad usage says why and exits with 2,
 * on --help prints the usage and exits with 0. */
void run_args_parse(int argc, char **argv, struct options *opt);
/* Warns that an MPI program started by this launcher runs as singletons. */
void run_args_warn_if_mpi(const struct options *opt);

/* ---------- run_env.c ---------- */

/* Which port is which, for the message of a failed job ("" if unset). */
extern char run_env_ports_desc[600];
/* Sets what every rank's environment shares (NCCL_COMM_ID, MASTER_ADDR and
 * MASTER_PORT, WORLD_SIZE, MESHCCL_SECRET, -x ...); 0, or -1 said. */
int run_env_setup(const struct options *opt);

/* ---------- run_signals.c ---------- */

/* The signals forwarded to the ranks: SIGINT, SIGTERM, SIGHUP, SIGQUIT. */
#define N_FWD 4
extern const int run_fwd_signals[N_FWD];
extern volatile sig_atomic_t run_pending_sig[N_FWD];
extern volatile sig_atomic_t run_pending_chld;
/* Ignored when we started (nohup, background job): left so, in the ranks too. */
extern bool run_ignored_sig[N_FWD];
/* Written by the handler, polled by the main loop. */
extern int run_wake_pipe[2];

/* SIGCHLD and the forwarded signals. */
void run_signals_set_handled(sigset_t *set);
int run_signals_install(void);
/* Sends sig to the process group of every running rank (then SIGCONT if cont). */
void run_signals_send(struct launcher *l, int sig, bool cont);
/* Starts stopping the job: sig to every rank now, SIGKILL after the grace period. */
void run_signals_stop(struct launcher *l, int sig);
/* Acts on the signals caught since the last call. */
void run_signals_handle(struct launcher *l);

/* ---------- run_spawn.c ---------- */

/* Starts every rank; on a failure stops the job (l->spawn_failed). */
void run_spawn_all(struct launcher *l);

/* ---------- run_output.c ---------- */

/* One read() from rank r's pipe of stream, its complete lines written;
 * false when there is nothing more to read now. */
bool run_output_read(struct launcher *l, int r, int stream);
/* Writes what is left of rank r's output, once it has exited. */
void run_output_drain(struct launcher *l, int r);
/* Closes rank r's stream, writing its partial line. */
void run_output_close(struct launcher *l, int r, int stream);

/* ---------- run_job.c ---------- */

/* Runs the job until every rank is reaped; -1 on an internal failure. */
int run_job_loop(struct launcher *l);
/* The launcher's exit status, and what it says of the job. */
int run_job_exit_code(const struct launcher *l);

#endif /* MC_TOOLS_RUN_H */

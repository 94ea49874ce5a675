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
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h> /* isfinite(), a macro: no libm needed */
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#define ROOT_PORT_MIN 12000
#define ROOT_PORT_MAX 28000
#define PROG_NAME     "meshccl-run"
#define MAX_RANKS     1024
#define MAX_LINE      (64 * 1024) /* longer lines are split */
#define FIRST_BUF     4096
#define PREFIX_MAX    32
#define DEFAULT_GRACE 5.0
/* Time the other ranks get to end on their own once one has failed. */
#define SETTLE_SEC  1.0
#define MAX_GRACE   86400.0
#define DRAIN_READS 256 /* bound on reads per drain, against a writer that never stops */

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

#define MAX_EXPORTS 64

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
};

struct launcher {
  struct options opt;
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

static const int fwd_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define N_FWD (sizeof(fwd_signals) / sizeof(fwd_signals[0]))

static volatile sig_atomic_t pending_sig[N_FWD];
static volatile sig_atomic_t pending_chld;
static bool ignored_sig[N_FWD]; /* ignored when we started (nohup, background job): left so */
static int wake_pipe[2] = {-1, -1};
static char out_line[PREFIX_MAX + MAX_LINE + 1];

/* --- small helpers ------------------------------------------------------ */

static double now_sec(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
  fprintf(f,
          "usage: " PROG_NAME " [-n N] [-x VAR[=value]]... [--grace SECONDS]\n"
          "                   [--tag-output | --label | --no-tag] [--] prog [args...]\n"
          "Starts N ranks of prog on this host, with RANK, WORLD_SIZE, LOCAL_RANK,\n"
          "LOCAL_WORLD_SIZE, NODE_RANK, MESHCCL_RUN, NCCL_COMM_ID, MASTER_ADDR and\n"
          "MASTER_PORT set (NCCL_COMM_ID and MASTER_PORT are two different free ports).\n"
          "\n"
          "  -n, -np, --np N    number of ranks, 1 to %d (default 1); also torchrun's\n"
          "                     --nproc_per_node / --nproc-per-node N\n"
          "  -x VAR[=value]     mpirun's export: VAR=value is set for every rank (the\n"
          "                     ranks inherit the launcher's environment anyway)\n"
          "  --grace SECONDS    time between SIGTERM and SIGKILL when stopping ranks\n"
          "                     (default %g)\n"
          "  --tag-output       prefix every output line as Open MPI's mpirun does:\n"
          "                     \"[1,rank]<stdout>:\" or \"[1,rank]<stderr>:\"\n"
          "  --label, -l        prefix every output line as srun does: \"rank: \"\n"
          "                     (MESHCCL_RUN_TAG_OUTPUT=1: \"[rank] \")\n"
          "  --no-tag           forward output lines unchanged (the default)\n"
          "  --nnodes 1, --standalone, --oversubscribe, --allow-run-as-root\n"
          "                     accepted for torchrun and mpirun command lines\n"
          "  -h, --help         print this help and exit\n"
          "\n"
          "One host only: across hosts, start ranks with mpirun, srun or torchrun\n"
          "(meshcclCommInitFromEnv reads their variables).\n"
          "\n"
          "Exit status: 0 if every rank exited 0; else the status of the first rank\n"
          "that failed (128+signal if it was killed); 128+signal if the launcher got\n"
          "SIGINT or SIGTERM; 2 on bad usage.\n",
          MAX_RANKS, DEFAULT_GRACE);
}

static void usage_error(const char *msg, const char *arg)
{
  if (arg != NULL) {
    fprintf(stderr, PROG_NAME ": %s '%s'\n", msg, arg);
  } else {
    fprintf(stderr, PROG_NAME ": %s\n", msg);
  }
  fprintf(stderr, "Try '" PROG_NAME " --help' for more information.\n");
  exit(2);
}

static int parse_np(const char *s)
{
  char *end = NULL;
  long v;

  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 1 || v > MAX_RANKS) {
    usage_error("-n/--np needs a number of ranks from 1 to 1024, got", s);
  }
  return (int)v;
}

static double parse_grace(const char *s)
{
  char *end = NULL;
  double v;

  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0.0 || v > MAX_GRACE) {
    usage_error("--grace needs a number of seconds from 0 to 86400, got", s);
  }
  return v;
}

/* mpirun's -x VAR or -x VAR=value: VAR must be a shell variable name. */
static void parse_export(const char *v, struct options *opt)
{
  size_t n = strcspn(v, "=");

  if (n == 0 || !((v[0] == '_') || ((v[0] | 0x20) >= 'a' && (v[0] | 0x20) <= 'z'))) {
    usage_error("-x needs VAR or VAR=value, got", v);
  }
  for (size_t k = 1; k < n; k++) {
    char c = v[k];

    if (!((c == '_') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9'))) {
      usage_error("-x needs VAR or VAR=value, got", v);
    }
  }
  if (opt->n_exports >= MAX_EXPORTS) {
    usage_error("too many -x options (at most 64), at", v);
  }
  opt->exports[opt->n_exports++] = v;
}

/*
 * Returns the value of option `name` (short form `short_name` or NULL) at
 * argv[*i], accepting "--name V", "--name=V", "-n V" and "-nV"; NULL if
 * argv[*i] is not that option.
 */
static const char *option_value(char **argv, int argc, int *i, const char *name,
                                const char *short_name)
{
  const char *a = argv[*i];
  size_t n = strlen(name);

  if (strncmp(a, name, n) == 0 && a[n] == '=') {
    return a + n + 1;
  }
  if (short_name != NULL && strncmp(a, short_name, 2) == 0 && a[2] != '\0') {
    return a + 2;
  }
  if (strcmp(a, name) != 0 && (short_name == NULL || strcmp(a, short_name) != 0)) {
    return NULL;
  }
  if (*i + 1 >= argc) {
    usage_error("missing value for option", a);
  }
  (*i)++;
  return argv[*i];
}

static void parse_args(int argc, char **argv, struct options *opt)
{
  int i = 1;
  const char *v;

  opt->np = 1;
  opt->grace = DEFAULT_GRACE;
  opt->tag = ((getenv("MESHCCL_RUN_TAG_OUTPUT") != NULL) &&
              (strcmp(getenv("MESHCCL_RUN_TAG_OUTPUT"), "1") == 0))
                 ? TAG_RANK
                 : TAG_NONE;
  for (; i < argc; i++) {
    const char *a = argv[i];

    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-') {
      break;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--tag-output") == 0) {
      opt->tag = TAG_MPI;
    } else if ((strcmp(a, "--label") == 0) || (strcmp(a, "-l") == 0)) {
      opt->tag = TAG_SRUN;
    } else if (strcmp(a, "--no-tag") == 0) {
      opt->tag = TAG_NONE;
    } else if ((strcmp(a, "--oversubscribe") == 0) || (strcmp(a, "--allow-run-as-root") == 0) ||
               (strcmp(a, "--standalone") == 0)) {
      /* mpirun's and torchrun's: nothing to do on one host */
    } else if (((v = option_value(argv, argc, &i, "-np", NULL)) != NULL) ||
               ((v = option_value(argv, argc, &i, "--np", "-n")) != NULL) ||
               ((v = option_value(argv, argc, &i, "--nproc_per_node", NULL)) != NULL) ||
               ((v = option_value(argv, argc, &i, "--nproc-per-node", NULL)) != NULL)) {
      opt->np = parse_np(v);
    } else if ((v = option_value(argv, argc, &i, "--nnodes", NULL)) != NULL) {
      if (strcmp(v, "1") != 0 && strcmp(v, "1:1") != 0) {
        usage_error("starts ranks on this host only (use mpirun, srun or torchrun across "
                    "hosts); got --nnodes",
                    v);
      }
    } else if ((v = option_value(argv, argc, &i, "-x", NULL)) != NULL) {
      parse_export(v, opt);
    } else if ((v = option_value(argv, argc, &i, "--grace", NULL)) != NULL) {
      opt->grace = parse_grace(v);
    } else {
      usage_error("unknown option", a);
    }
  }
  if (i >= argc) {
    usage_error("no program given", NULL);
  }
  opt->argv = argv + i;
}

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

/* --- signals ------------------------------------------------------------ */

static void on_signal(int sig)
{
  int saved = errno;

  if (sig == SIGCHLD) {
    pending_chld = 1;
  } else {
    for (size_t i = 0; i < N_FWD; i++) {
      if (fwd_signals[i] == sig) {
        pending_sig[i] = 1;
      }
    }
  }
  if (write(wake_pipe[1], "x", 1) < 0) {
    /* full pipe: a wake-up is already pending */
  }
  errno = saved;
}

static int set_nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL);

  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    return -1;
  }
  return 0;
}

static void handled_sigset(sigset_t *set)
{
  sigemptyset(set);
  sigaddset(set, SIGCHLD);
  for (size_t i = 0; i < N_FWD; i++) {
    sigaddset(set, fwd_signals[i]);
  }
}

static int install_signals(void)
{
  struct sigaction sa;

  if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return -1;
  }
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  handled_sigset(&sa.sa_mask);
  if (sigaction(SIGCHLD, &sa, NULL) != 0) {
    return -1;
  }
  for (size_t i = 0; i < N_FWD; i++) {
    struct sigaction cur;

    if (sigaction(fwd_signals[i], NULL, &cur) == 0 && cur.sa_handler == SIG_IGN) {
      ignored_sig[i] = true;
      continue;
    }
    if (sigaction(fwd_signals[i], &sa, NULL) != 0) {
      return -1;
    }
  }
  /* A closed stdout must not kill the launcher; children get SIG_DFL back. */
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

/* Sends sig to the process group of every running rank. */
static void signal_ranks(struct launcher *l, int sig, bool cont)
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
static void begin_stop(struct launcher *l, int sig)
{
  if (!l->stopping) {
    l->stopping = true;
    l->deadline = now_sec() + l->opt.grace;
  }
  signal_ranks(l, sig, true);
}

static void handle_signals(struct launcher *l)
{
  char junk[64];

  while (read(wake_pipe[0], junk, sizeof(junk)) > 0) {
  }
  for (size_t i = 0; i < N_FWD; i++) {
    int sig = fwd_signals[i];

    if (pending_sig[i] == 0) {
      continue;
    }
    pending_sig[i] = 0;
    if ((sig == SIGINT || sig == SIGTERM) && !l->stopping) {
      l->got_signal = sig;
      fprintf(stderr, PROG_NAME ": got signal %d (%s); stopping the ranks\n", sig, strsignal(sig));
      begin_stop(l, sig);
    } else {
      signal_ranks(l, sig, false);
    }
  }
}

/* --- output ------------------------------------------------------------- */

static void write_all(struct launcher *l, int stream, const char *p, size_t n)
{
  int fd = (stream == STREAM_OUT) ? STDOUT_FILENO : STDERR_FILENO;

  while (n > 0 && !l->out_broken[stream]) {
    ssize_t w = write(fd, p, n);

    if (w >= 0) {
      p += w;
      n -= (size_t)w;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      struct pollfd pf = {.fd = fd, .events = POLLOUT};

      poll(&pf, 1, -1);
    } else if (errno != EINTR) {
      l->out_broken[stream] = true; /* e.g. EPIPE: drop this stream's output */
    }
  }
}

/* Writes one line of rank r, with its prefix and a newline, in one write(). */
static void emit_line(struct launcher *l, int r, int stream, const char *data, size_t n)
{
  size_t len = 0;

  if (l->opt.tag == TAG_RANK)
    len = (size_t)snprintf(out_line, PREFIX_MAX, "[%d] ", r);
  else if (l->opt.tag == TAG_MPI)
    len = (size_t)snprintf(out_line, PREFIX_MAX, "[1,%d]<%s>:", r,
                           (stream == STREAM_OUT) ? "stdout" : "stderr");
  else if (l->opt.tag == TAG_SRUN)
    len = (size_t)snprintf(out_line, PREFIX_MAX, "%d: ", r);
  if (n > MAX_LINE) {
    n = MAX_LINE;
  }
  memcpy(out_line + len, data, n);
  len += n;
  if (n == 0 || data[n - 1] != '\n') {
    out_line[len++] = '\n';
  }
  write_all(l, stream, out_line, len);
}

/* Emits every complete line in b, and a full buffer as a split line; from: bytes already scanned.
 */
static void emit_lines(struct launcher *l, int r, int stream, struct line_buf *b, size_t from)
{
  size_t start = 0;
  char *nl;

  while (from < b->len && (nl = memchr(b->data + from, '\n', b->len - from)) != NULL) {
    size_t end = (size_t)(nl - b->data) + 1;

    emit_line(l, r, stream, b->data + start, end - start);
    start = end;
    from = end;
  }
  if (start > 0) {
    memmove(b->data, b->data + start, b->len - start);
    b->len -= start;
  }
  if (b->len == MAX_LINE) {
    emit_line(l, r, stream, b->data, b->len);
    b->len = 0;
  }
}

/* Makes room for more bytes in b; flushes b as a split line if it cannot grow. */
static void line_buf_room(struct launcher *l, int r, int stream, struct line_buf *b)
{
  size_t cap;
  char *p;

  if (b->len < b->cap) {
    return;
  }
  cap = (b->cap == 0) ? FIRST_BUF : b->cap * 2;
  if (cap > MAX_LINE) {
    cap = MAX_LINE;
  }
  p = (cap > b->cap) ? realloc(b->data, cap) : NULL;
  if (p != NULL) {
    b->data = p;
    b->cap = cap;
  } else if (b->len > 0) {
    emit_line(l, r, stream, b->data, b->len);
    b->len = 0;
  }
}

static void close_stream(struct launcher *l, int r, int stream)
{
  struct rank *rk = &l->ranks[r];
  struct line_buf *b = &rk->line[stream];

  if (b->len > 0) {
    emit_line(l, r, stream, b->data, b->len); /* partial last line */
  }
  free(b->data);
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  close(rk->fd[stream]);
  rk->fd[stream] = -1;
}

/* One read() from a rank's pipe. Returns false when there is nothing more to read now. */
static bool read_stream(struct launcher *l, int r, int stream)
{
  struct rank *rk = &l->ranks[r];
  struct line_buf *b = &rk->line[stream];
  size_t old;
  ssize_t n;

  line_buf_room(l, r, stream, b);
  if (b->cap == 0) {
    char tmp[512]; /* no memory at all: forward what comes, as is */

    n = read(rk->fd[stream], tmp, sizeof(tmp));
    if (n > 0) {
      write_all(l, stream, tmp, (size_t)n);
      return true;
    }
  } else {
    n = read(rk->fd[stream], b->data + b->len, b->cap - b->len);
  }
  if (n < 0 && errno == EINTR) {
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    return false;
  }
  if (n <= 0) {
    close_stream(l, r, stream); /* EOF, or a read error we cannot recover from */
    return false;
  }
  old = b->len;
  b->len += (size_t)n;
  emit_lines(l, r, stream, b, old);
  return true;
}

/* Reads whatever a rank's pipes hold now, without waiting. */
static void drain_rank(struct launcher *l, int r)
{
  for (int s = 0; s < N_STREAMS; s++) {
    for (int i = 0; i < DRAIN_READS && l->ranks[r].fd[s] >= 0; i++) {
      if (!read_stream(l, r, s)) {
        break;
      }
    }
  }
}

/* --- children ----------------------------------------------------------- */

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
    signal(fwd_signals[i], ignored_sig[i] ? SIG_IGN : SIG_DFL);
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
  handled_sigset(&block);
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

/* Returns a free TCP port on 127.0.0.1, or -1. */
/* Binds 127.0.0.1:port (0: any) and returns the port bound, or -1. */
static int try_port(int port)
{
  struct sockaddr_in sa;
  socklen_t len = sizeof(sa);
  int got = -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd < 0) {
    return -1;
  }
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons((uint16_t)port);
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
      getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
    got = ntohs(sa.sin_port);
  }
  close(fd);
  return got;
}

/*
 * A free port (not `other`) below Linux's ephemeral range (32768-60999):
 * ports the kernel hands out for port 0 can be taken by any listener of the
 * job (the ranks' own bootstrap sockets) between two communicators that reuse
 * NCCL_COMM_ID, and a rank would then register with the wrong socket.
 */
static int find_free_port(int other)
{
  unsigned int seed = (unsigned int)getpid() ^ (unsigned int)time(NULL) ^ (unsigned int)other;

  for (int i = 0; i < 200; i++) {
    int port = ROOT_PORT_MIN + (int)(rand_r(&seed) % (ROOT_PORT_MAX - ROOT_PORT_MIN));
    if ((port != other) && (try_port(port) == port)) {
      return port;
    }
  }
  return try_port(0);
}

/*
 * MESHCCL_SECRET, unless the caller set one: 32 random bytes in hex. With
 * NCCL_COMM_ID nothing secret travels between the ranks, so the bootstrap
 * keys its authentication with this (docs/ARCHITECTURE.md, bootstrap);
 * without it, any process that knows the port could join the job.
 */
static int set_secret(void)
{
  unsigned char raw[32];
  char hex[2 * sizeof(raw) + 1];
  size_t got = 0;

  if (getenv("MESHCCL_SECRET") != NULL)
    return 0;
  while (got < sizeof(raw)) {
    ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    got += (size_t)n;
  }
  for (size_t i = 0; i < sizeof(raw); i++)
    snprintf(hex + 2 * i, 3, "%02x", raw[i]);
  return setenv("MESHCCL_SECRET", hex, 1);
}

/* Which port is which ("NCCL_COMM_ID=... (meshccl's bootstrap root), ..."), for failures. */
static char ports_desc[600];

/* The port of "host:port" or "[v6]:port", or -1. */
static int port_of(const char *hostport)
{
  const char *colon = (hostport != NULL) ? strrchr(hostport, ':') : NULL;
  char *end = NULL;
  long v;

  if ((colon == NULL) || (colon[1] == '\0')) {
    return -1;
  }
  errno = 0;
  v = strtol(colon + 1, &end, 10);
  if ((errno != 0) || (*end != '\0') || (v < 1) || (v > 65535)) {
    return -1;
  }
  return (int)v;
}

static bool is_loopback_name(const char *h, size_t n)
{
  return ((n == 9) && (strncmp(h, "localhost", n) == 0)) ||
         ((n >= 4) && (strncmp(h, "127.", 4) == 0)) || ((n == 3) && (strncmp(h, "::1", n) == 0)) ||
         ((n == 5) && (strncmp(h, "[::1]", n) == 0));
}

/* Whether NCCL_COMM_ID's host and MASTER_ADDR may be one host (equal, or both loopback). */
static bool same_host(const char *comm_id, const char *master_addr)
{
  size_t n = (size_t)(strrchr(comm_id, ':') - comm_id);
  size_t m = strlen(master_addr);

  if ((n == m) && (strncmp(comm_id, master_addr, n) == 0)) {
    return true;
  }
  return is_loopback_name(comm_id, n) && is_loopback_name(master_addr, m);
}

/*
 * Sets the variables every rank shares in our own environment; children
 * inherit them. Two different ports: NCCL_COMM_ID's for meshccl's bootstrap
 * root, and MASTER_PORT for the store a torch.distributed job opens at
 * MASTER_ADDR (torch's env:// init); one port for both makes the second
 * listener fail, or a rank join the wrong one. A port the user set is kept,
 * and the one we pick avoids it.
 */
static int setup_env(const struct options *opt)
{
  char buf[64];
  const char *user_id = NULL;
  const char *user_mport = NULL;
  const char *maddr = NULL;
  int id_port = -1;
  int mport = -1;
  int port = -1;
  int store_port = -1;

  for (int i = 0; i < opt->n_exports; i++) {
    const char *eq = strchr(opt->exports[i], '=');
    char name[256];

    if (eq == NULL) {
      continue; /* -x VAR: the ranks inherit it */
    }
    snprintf(name, sizeof(name), "%.*s", (int)(eq - opt->exports[i]), opt->exports[i]);
    if (setenv(name, eq + 1, 1) != 0) {
      return -1;
    }
  }
  snprintf(buf, sizeof(buf), "%d", opt->np);
  if (setenv("WORLD_SIZE", buf, 1) != 0 || setenv("LOCAL_WORLD_SIZE", buf, 1) != 0 ||
      setenv("NODE_RANK", "0", 1) != 0 || setenv("MESHCCL_RUN", "1", 1) != 0) {
    return -1;
  }
  /* After the -x exports: a port given there is the user's too. */
  user_id = getenv("NCCL_COMM_ID");
  user_mport = getenv("MASTER_PORT");
  maddr = getenv("MASTER_ADDR");
  id_port = (user_id != NULL) ? port_of(user_id) : -1;
  if (user_mport != NULL) {
    snprintf(buf, sizeof(buf), ":%s", user_mport);
    mport = port_of(buf);
  }
  if ((id_port > 0) && (id_port == mport) &&
      same_host(user_id, (maddr != NULL) ? maddr : "127.0.0.1")) {
    fprintf(
        stderr,
        PROG_NAME
        ": NCCL_COMM_ID=%s (meshccl's bootstrap root) and MASTER_ADDR:MASTER_PORT=%s:%s "
        "(the store torch.distributed opens) name the same port; unset one of them and " PROG_NAME
        " picks a free port for it\n",
        user_id, (maddr != NULL) ? maddr : "127.0.0.1", user_mport);
    return -1;
  }
  port = (user_id == NULL) ? find_free_port(mport) : id_port;
  store_port = (user_mport == NULL) ? find_free_port(port) : mport;
  if ((user_id == NULL) && ((port < 0) || (port == mport))) {
    fprintf(stderr, PROG_NAME ": cannot find a free TCP port on 127.0.0.1 for NCCL_COMM_ID: %s\n",
            strerror(errno));
    return -1;
  }
  if ((user_mport == NULL) && ((store_port < 0) || (store_port == port))) {
    fprintf(stderr, PROG_NAME ": cannot find a free TCP port on 127.0.0.1 for MASTER_PORT: %s\n",
            strerror(errno));
    return -1;
  }
  if (user_id == NULL) {
    snprintf(buf, sizeof(buf), "127.0.0.1:%d", port);
    setenv("NCCL_COMM_ID", buf, 1);
  }
  if (set_secret() != 0) {
    fprintf(stderr, PROG_NAME ": cannot make a random MESHCCL_SECRET: %s\n", strerror(errno));
    return -1;
  }
  if (maddr == NULL) {
    setenv("MASTER_ADDR", "127.0.0.1", 1);
  }
  if (user_mport == NULL) {
    snprintf(buf, sizeof(buf), "%d", store_port);
    setenv("MASTER_PORT", buf, 1);
  }
  snprintf(ports_desc, sizeof(ports_desc),
           "NCCL_COMM_ID=%s (meshccl's bootstrap root), MASTER_ADDR:MASTER_PORT=%s:%s (the store "
           "torch.distributed opens with env://)",
           getenv("NCCL_COMM_ID"), getenv("MASTER_ADDR"), getenv("MASTER_PORT"));
  return 0;
}

static void spawn_all(struct launcher *l)
{
  for (int r = 0; r < l->opt.np; r++) {
    if (pending_sig[0] != 0 || pending_sig[1] != 0) {
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
      begin_stop(l, SIGTERM);
      break;
    }
  }
}

/* --- main loop ---------------------------------------------------------- */

static void rank_exited(struct launcher *l, int r, int status)
{
  struct rank *rk = &l->ranks[r];
  char desc[96];
  bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  rk->running = false;
  rk->status = status;
  l->live--;
  drain_rank(l, r); /* its last words come before ours */
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
  l->settle_end = now_sec() + SETTLE_SEC;
}

static void reap_children(struct launcher *l)
{
  pending_chld = 0;
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
  if (l->settling && !l->stopping && l->live > 0 && now_sec() >= l->settle_end) {
    begin_stop(l, SIGTERM);
    return;
  }
  if (!l->stopping || l->killed || l->live == 0 || now_sec() < l->deadline) {
    return;
  }
  l->killed = true;
  fprintf(stderr, PROG_NAME ": %d rank(s) still running %g s after SIGTERM; sending SIGKILL\n",
          l->live, l->opt.grace);
  signal_ranks(l, SIGKILL, false);
}

static int poll_timeout_ms(const struct launcher *l)
{
  double left;

  if (l->settling && !l->stopping) {
    left = l->settle_end - now_sec();
  } else if (!l->stopping || l->killed) {
    return -1;
  } else {
    left = l->deadline - now_sec();
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

  l->pfd[0].fd = wake_pipe[0];
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
        close_stream(l, r, s); /* its partial line goes nowhere */
      }
    }
  }
}

static int event_loop(struct launcher *l)
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
        read_stream(l, l->pfd_rank[i], l->pfd_stream[i]);
      }
    }
    drop_broken_outputs(l);
    handle_signals(l);
    reap_children(l);
    check_deadline(l);
  }
  /* Every rank is gone: take what is left in the pipes and close them. */
  for (int r = 0; r < l->opt.np; r++) {
    drain_rank(l, r);
    for (int s = 0; s < N_STREAMS; s++) {
      if (l->ranks[r].fd[s] >= 0) {
        close_stream(l, r, s);
      }
    }
  }
  return 0;
}

static int exit_code(const struct launcher *l)
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
    if (ports_desc[0] != '\0') {
      fprintf(stderr, PROG_NAME ": ports of this job: %s\n", ports_desc);
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
  parse_args(argc, argv, &l->opt);
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
  if (setup_env(&l->opt) != 0) {
    return -1;
  }
  if (install_signals() != 0) {
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
}

/* The file execvp() would run for `prog` (a name without '/' is looked up
 * in PATH); false when none is found. */
static bool resolve_prog(const char *prog, char *out, size_t size)
{
  const char *path = getenv("PATH");

  if (strchr(prog, '/') != NULL) {
    snprintf(out, size, "%s", prog);
    return access(out, X_OK) == 0;
  }
  for (const char *p = (path != NULL) ? path : "/usr/bin:/bin"; *p != '\0';) {
    size_t n = strcspn(p, ":");

    snprintf(out, size, "%.*s%s%s", (int)n, p, (n > 0) ? "/" : "", prog);
    if (access(out, X_OK) == 0) {
      return true;
    }
    p += n + ((p[n] == ':') ? 1 : 0);
  }
  return false;
}

/*
 * An MPI program started by this launcher runs as N singletons (each one's
 * MPI_COMM_WORLD holds only itself): say so. The sign is an ELF executable
 * naming libmpi.so (its DT_NEEDED string) in its first MiB, where the
 * dynamic string table lies.
 */
static void warn_if_mpi(const struct options *opt)
{
  static const char needle[] = "libmpi.so";
  char path[4096];
  char *buf;
  ssize_t n;
  int fd;

  if ((opt->np < 2) || !resolve_prog(opt->argv[0], path, sizeof(path))) {
    return;
  }
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return;
  }
  buf = malloc(1 << 20);
  n = (buf != NULL) ? read(fd, buf, 1 << 20) : -1;
  close(fd);
  if ((n > 4) && (memcmp(buf, "\177ELF", 4) == 0)) {
    const char *hit = memmem(buf, (size_t)n, needle, sizeof(needle) - 1);

    if (hit != NULL) {
      fprintf(stderr,
              PROG_NAME
              ": warning: %s links %.*s (an MPI program): started by " PROG_NAME
              " each of the %d ranks is an MPI singleton (MPI_COMM_WORLD of size 1); start "
              "MPI programs with mpirun\n",
              opt->argv[0], (int)strnlen(hit, (size_t)(buf + n - hit)), hit, opt->np);
    }
  }
  free(buf);
}

int main(int argc, char **argv)
{
  struct launcher l;
  int rc;

  if (launcher_init(&l, argc, argv) != 0) {
    launcher_fini(&l);
    return 1;
  }
  warn_if_mpi(&l.opt);
  spawn_all(&l);
  if (event_loop(&l) != 0) {
    signal_ranks(&l, SIGKILL, false);
    launcher_fini(&l);
    return 1;
  }
  rc = exit_code(&l);
  launcher_fini(&l);
  return rc;
}

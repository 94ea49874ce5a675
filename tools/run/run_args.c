/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-run's command line: mpirun's, srun's and torchrun's flags that
 * make sense on one host (-n/-np/--nproc_per_node, -x, --tag-output,
 * --label, --grace ...), and a warning when the program is an MPI one.
 */
#include "run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#define MAX_RANKS     1024
#define DEFAULT_GRACE 5.0
#define MAX_GRACE     86400.0

static void usage(FILE *f)
{
  fprintf(f,
          "usage: " PROG_NAME " [-n N] [-x VAR[=value]]... [--grace SECONDS]\n"
          "                   [--bind-to core|none] [--report-bindings]\n"
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
          "  --bind-to core|none\n"
          "                     core: pin rank i to the i-th CPU of the launcher's\n"
          "                     affinity mask (mpirun --bind-to core); none: leave\n"
          "                     the ranks unbound (the default)\n"
          "  --report-bindings  print one line per rank on stderr: \"rank i bound to\n"
          "                     CPU c\" or \"rank i not bound\"\n"
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

void run_args_parse(int argc, char **argv, struct options *opt)
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
    } else if (strcmp(a, "--report-bindings") == 0) {
      opt->report_bindings = true;
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
    } else if ((v = option_value(argv, argc, &i, "--bind-to", NULL)) != NULL) {
      if (strcmp(v, "core") == 0) {
        opt->bind_core = true;
      } else if (strcmp(v, "none") == 0) {
        opt->bind_core = false;
      } else {
        usage_error("--bind-to takes core or none, got", v);
      }
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
void run_args_warn_if_mpi(const struct options *opt)
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Throughput of the socket net (src/net/net_socket*.c) between two processes.
 *
 *   net_socket_bench [--configs 0x1,2x1,...] [--sizes 65536,4194304,...] [--bytes N]
 *       loopback: forks a sender; the parent receives and prints one line per
 *       config and size.
 *   net_socket_bench --recv DIR [--ifname IF] [options]
 *   net_socket_bench --send DIR [--ifname IF] [options]
 *       the two ends in different places (bench/net_socket_netns.sh runs them in
 *       two network namespaces); the receiver writes config i's handle to
 *       DIR/handle.<i>, the sender waits for it.
 *   --wait yield|spin|sleep   what the caller does between tests (yield).
 *
 * A config "TxS" is NCCL_SOCKET_NTHREADS=T, NCCL_NSOCKS_PERTHREAD=S, chosen by
 * the receiver (the listener's handle carries it to the sender). For each
 * size the sender keeps WINDOW messages in flight; the receiver times from
 * the end of the first (warm-up) message to the end of the last one.
 */
#include "core/log.h"
#include "core/params.h"
#include "core/utils.h"
#include "net/net.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define WINDOW    4
#define MAX_CONFS 16
#define MAX_SIZES 16

static const struct mc_net_ops *const net = &mc_net_socket_ops;
/* Between two tests of an unfinished request: 1 sched_yield (NCCL's proxy
 * progress thread yields when a round moved nothing; the default), 0 spin,
 * 2 usleep(20). */
static int wait_mode = 1;

struct opts {
  int n_confs;
  int threads[MAX_CONFS];
  int socks[MAX_CONFS];
  int n_sizes;
  size_t sizes[MAX_SIZES];
  size_t total_bytes;
  const char *dir; /* NULL: loopback with a pipe */
  const char *ifname;
};

static void die(const char *what, ncclResult_t res)
{
  fprintf(stderr, "net_socket_bench: %s failed (%d): %s\n", what, (int)res, mc_error_last());
  exit(1);
}

#define CHECK(_call)                                                                               \
  do {                                                                                             \
    ncclResult_t r_ = (_call);                                                                     \
    if (r_ != ncclSuccess)                                                                         \
      die(#_call, r_);                                                                             \
  } while (0)

static int iters_for(const struct opts *o, size_t size)
{
  size_t n = o->total_bytes / size;

  return (n < 8) ? 8 : (n > 100000 ? 100000 : (int)n);
}

static void set_int(enum mc_param_id id, int v)
{
  char buf[32];

  snprintf(buf, sizeof(buf), "%d", v);
  mc_param_set_for_tests(id, buf);
}

static void write_all(int fd, const void *buf, size_t n)
{
  if (write(fd, buf, n) != (ssize_t)n) {
    perror("write");
    exit(1);
  }
}

static void read_all(int fd, void *buf, size_t n)
{
  size_t got = 0;

  while (got < n) {
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r <= 0) {
      perror("read");
      exit(1);
    }
    got += (size_t)r;
  }
}

/* Handle of config i: through the pipe, or DIR/handle.<i>. */
static void put_handle(const struct opts *o, int fd, int i, const char *h)
{
  char path[4096];
  char tmp[4200];
  FILE *f;

  if (o->dir == NULL) {
    write_all(fd, h, MC_NET_HANDLE_BYTES);
    return;
  }
  snprintf(path, sizeof(path), "%s/handle.%d", o->dir, i);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  f = fopen(tmp, "wb");
  if ((f == NULL) || (fwrite(h, 1, MC_NET_HANDLE_BYTES, f) != MC_NET_HANDLE_BYTES) ||
      (fclose(f) != 0) || (rename(tmp, path) != 0)) {
    perror(path);
    exit(1);
  }
}

static void get_handle(const struct opts *o, int fd, int i, char *h)
{
  char path[4096];
  FILE *f;
  double t0 = mc_time_sec();

  if (o->dir == NULL) {
    read_all(fd, h, MC_NET_HANDLE_BYTES);
    return;
  }
  snprintf(path, sizeof(path), "%s/handle.%d", o->dir, i);
  while ((f = fopen(path, "rb")) == NULL) {
    if (mc_time_sec() - t0 > 60) {
      fprintf(stderr, "net_socket_bench: no %s after 60 s\n", path);
      exit(1);
    }
    usleep(10000);
  }
  if (fread(h, 1, MC_NET_HANDLE_BYTES, f) != MC_NET_HANDLE_BYTES) {
    perror(path);
    exit(1);
  }
  fclose(f);
}

static void wait_req(void *req, size_t *size)
{
  int done = 0;

  for (;;) {
    CHECK(net->test(req, &done, size));
    if (done)
      break;
    if (wait_mode == 1)
      sched_yield();
    else if (wait_mode == 2)
      usleep(20);
  }
}

static void run_sender(const struct opts *o, int fd)
{
  size_t max = 0;
  char *buf;

  for (int s = 0; s < o->n_sizes; s++)
    max = (o->sizes[s] > max) ? o->sizes[s] : max;
  buf = malloc(max);
  if (buf == NULL)
    exit(1);
  memset(buf, 7, max);
  for (int c = 0; c < o->n_confs; c++) {
    char handle[MC_NET_HANDLE_BYTES];
    void *ctx = NULL;
    void *send = NULL;

    CHECK(net->init(&(struct mc_net_init_args){.abort_flag = NULL}, &ctx));
    get_handle(o, fd, c, handle);
    while (send == NULL)
      CHECK(net->connect(ctx, 0, handle, &send));
    for (int s = 0; s < o->n_sizes; s++) {
      int n = iters_for(o, o->sizes[s]) + 1;
      void *reqs[WINDOW] = {NULL};

      for (int i = 0; i < n; i++) {
        void **slot = &reqs[i % WINDOW];
        if (*slot != NULL)
          wait_req(*slot, NULL);
        *slot = NULL;
        while (*slot == NULL)
          CHECK(net->isend(send, buf, o->sizes[s], 0, NULL, slot));
      }
      for (int i = 0; i < WINDOW; i++) {
        if (reqs[i] != NULL)
          wait_req(reqs[i], NULL);
      }
    }
    CHECK(net->close_send(send));
    CHECK(net->finalize(ctx));
  }
  free(buf);
}

static void run_receiver(const struct opts *o, int fd)
{
  size_t max = 0;
  char *bufs[WINDOW];

  for (int s = 0; s < o->n_sizes; s++)
    max = (o->sizes[s] > max) ? o->sizes[s] : max;
  for (int i = 0; i < WINDOW; i++) {
    bufs[i] = malloc(max);
    if (bufs[i] == NULL)
      exit(1);
    memset(bufs[i], 0, max);
  }
  printf("%-8s %10s %8s %10s %10s\n", "threads", "socks/thr", "size", "GB/s", "Gbit/s");
  for (int c = 0; c < o->n_confs; c++) {
    char handle[MC_NET_HANDLE_BYTES];
    void *ctx = NULL;
    void *listen = NULL;
    void *recv = NULL;

    set_int(MC_P_SOCKET_NTHREADS, o->threads[c]);
    set_int(MC_P_NSOCKS_PERTHREAD, o->socks[c]);
    CHECK(net->init(&(struct mc_net_init_args){.abort_flag = NULL}, &ctx));
    CHECK(net->listen(ctx, 0, handle, &listen));
    put_handle(o, fd, c, handle);
    while (recv == NULL)
      CHECK(net->accept(listen, &recv));
    for (int s = 0; s < o->n_sizes; s++) {
      int n = iters_for(o, o->sizes[s]) + 1;
      void *reqs[WINDOW] = {NULL};
      double t0 = 0;
      double t1;
      int tag = 0;

      for (int i = 0; i < n + WINDOW; i++) {
        void **slot = &reqs[i % WINDOW];
        if (*slot != NULL) {
          size_t got = 0;
          wait_req(*slot, &got);
          if (i == WINDOW)
            t0 = mc_time_sec(); /* the warm-up message is in */
        }
        *slot = NULL;
        if (i < n) {
          void *d = bufs[i % WINDOW];
          size_t sz = o->sizes[s];
          CHECK(net->irecv(recv, 1, &d, &sz, &tag, NULL, slot));
        }
      }
      t1 = mc_time_sec();
      {
        double gbs = (double)o->sizes[s] * (n - 1) / (t1 - t0) / 1e9;
        char sz[32];
        if (o->sizes[s] >= 1024 * 1024)
          snprintf(sz, sizeof(sz), "%zuM", o->sizes[s] >> 20);
        else
          snprintf(sz, sizeof(sz), "%zuK", o->sizes[s] >> 10);
        printf("%-8d %10d %8s %10.2f %10.2f\n", o->threads[c], o->socks[c], sz, gbs, gbs * 8);
        fflush(stdout);
      }
    }
    CHECK(net->close_recv(recv));
    CHECK(net->close_listen(listen));
    CHECK(net->finalize(ctx));
  }
  for (int i = 0; i < WINDOW; i++)
    free(bufs[i]);
}

static void parse_confs(struct opts *o, const char *s)
{
  o->n_confs = 0;
  while ((*s != '\0') && (o->n_confs < MAX_CONFS)) {
    int t;
    int k;
    int used = 0;
    if (sscanf(s, "%dx%d%n", &t, &k, &used) != 2) {
      fprintf(stderr, "bad --configs entry at '%s' (expected TxS,TxS...)\n", s);
      exit(2);
    }
    o->threads[o->n_confs] = t;
    o->socks[o->n_confs] = k;
    o->n_confs++;
    s += used;
    if (*s == ',')
      s++;
  }
}

static void parse_sizes(struct opts *o, const char *s)
{
  o->n_sizes = 0;
  while ((*s != '\0') && (o->n_sizes < MAX_SIZES)) {
    char *end;
    o->sizes[o->n_sizes++] = strtoull(s, &end, 0);
    s = end;
    if (*s == ',')
      s++;
  }
}

int main(int argc, char **argv)
{
  struct opts o;
  bool is_send = false;
  bool is_recv = false;

  memset(&o, 0, sizeof(o));
  parse_confs(&o, "0x1,0x2,1x1,1x2,2x1,2x2,4x1");
  parse_sizes(&o, "65536,4194304,67108864");
  o.total_bytes = 2ull << 30;
  o.ifname = "=lo";
  for (int i = 1; i < argc; i++) {
    const char *next = (i + 1 < argc) ? argv[i + 1] : NULL;
    if ((strcmp(argv[i], "--configs") == 0) && (next != NULL)) {
      parse_confs(&o, next);
      i++;
    } else if ((strcmp(argv[i], "--sizes") == 0) && (next != NULL)) {
      parse_sizes(&o, next);
      i++;
    } else if ((strcmp(argv[i], "--bytes") == 0) && (next != NULL)) {
      o.total_bytes = strtoull(next, NULL, 0);
      i++;
    } else if ((strcmp(argv[i], "--wait") == 0) && (next != NULL)) {
      wait_mode = (strcmp(next, "yield") == 0) ? 1 : ((strcmp(next, "sleep") == 0) ? 2 : 0);
      i++;
    } else if ((strcmp(argv[i], "--ifname") == 0) && (next != NULL)) {
      o.ifname = next;
      i++;
    } else if ((strcmp(argv[i], "--send") == 0) && (next != NULL)) {
      is_send = true;
      o.dir = next;
      i++;
    } else if ((strcmp(argv[i], "--recv") == 0) && (next != NULL)) {
      is_recv = true;
      o.dir = next;
      i++;
    } else {
      fprintf(stderr,
              "usage: %s [--configs TxS,...] [--sizes B,...] [--bytes N] [--ifname IF] "
              "[--wait yield|spin|sleep] [--send DIR | --recv DIR]\n",
              argv[0]);
      return 2;
    }
  }
  mc_param_set_for_tests(MC_P_SOCKET_IFNAME, o.ifname);
  mc_param_set_for_tests(MC_P_SOCKET_FAMILY, "AF_INET");
  if (is_send) {
    run_sender(&o, -1);
    return 0;
  }
  if (is_recv) {
    run_receiver(&o, -1);
    return 0;
  }
  {
    int p[2];
    pid_t pid;
    int status = 0;

    if (pipe(p) != 0)
      return 1;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
      close(p[1]);
      run_sender(&o, p[0]);
      _exit(0);
    }
    close(p[0]);
    run_receiver(&o, p[1]);
    close(p[1]);
    waitpid(pid, &status, 0);
    return (WIFEXITED(status) && (WEXITSTATUS(status) == 0)) ? 0 : 1;
  }
}

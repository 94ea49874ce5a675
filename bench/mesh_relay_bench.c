/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Throughput of the mesh relay service (src/net/mesh/mesh_relay.c) on
 * loopback TCP: the same two-way stream over a direct connection, through
 * one relay, and through two chained relays (A -> R1 -> R2 -> C).
 *
 *   mesh_relay_bench [--bytes N] [--piece N] [--copy] [--dir-bytes N]
 *       --bytes      bytes sent each way per path (default 1 GiB)
 *       --piece      largest send()/recv() of the ends (default 1 MiB)
 *       --copy       relays forward with read/write instead of splice
 *       --dir-bytes  the relays' per-direction bound (default: pipe capacity)
 *
 * Both directions run at once (one sender and one receiver thread per end);
 * the time is from the start of the senders to the last byte received. Each
 * line prints GB/s (10^9 bytes per second) per direction and both together.
 */
#include "core/utils.h"
#include "net/mesh/mesh_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct flow {
  int fd;
  bool is_send;
  size_t bytes;
  size_t piece;
  double end_sec;
  int err;
};

static void die(const char *what)
{
  fprintf(stderr, "mesh_relay_bench: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void tcp_pair(int *x_out, int *y_out)
{
  struct sockaddr_in sa;
  socklen_t len = sizeof(sa);
  int one = 1;
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int x;
  int y;

  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if ((lfd < 0) || (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0) || (listen(lfd, 4) != 0) ||
      (getsockname(lfd, (struct sockaddr *)&sa, &len) != 0))
    die("listen");
  x = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if ((x < 0) || (connect(x, (struct sockaddr *)&sa, sizeof(sa)) != 0))
    die("connect");
  y = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
  if (y < 0)
    die("accept");
  close(lfd);
  setsockopt(x, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(y, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  *x_out = x;
  *y_out = y;
}

static void *flow_main(void *arg)
{
  struct flow *f = arg;
  char *buf = calloc(1, f->piece);
  size_t done = 0;

  while ((buf != NULL) && (done < f->bytes)) {
    size_t n = (f->bytes - done < f->piece) ? f->bytes - done : f->piece;
    ssize_t r = f->is_send ? send(f->fd, buf, n, MSG_NOSIGNAL) : recv(f->fd, buf, n, 0);

    if (r <= 0) {
      if ((r < 0) && (errno == EINTR))
        continue;
      f->err = (r < 0) ? errno : EPIPE;
      break;
    }
    done += (size_t)r;
  }
  f->end_sec = mc_time_sec();
  free(buf);
  return NULL;
}

/* One path with n_relays relays; prints one line. */
static void run_path(int n_relays, size_t bytes, size_t piece,
                     const struct mc_mesh_relay_opts *opts)
{
  struct mc_mesh_relay *relays[2] = {NULL, NULL};
  struct flow f[4];
  pthread_t th[4];
  double t0;
  double ac;
  double ca;
  int a;
  int c;
  int left;

  for (int r = 0; r < n_relays; r++) {
    if (mc_mesh_relay_create(opts, NULL, &relays[r]) != ncclSuccess) {
      fprintf(stderr, "mesh_relay_bench: relay create failed\n");
      exit(1);
    }
  }
  tcp_pair(&a, &left);
  for (int r = 0; r < n_relays; r++) {
    int right;
    int next;

    tcp_pair(&right, &next);
    if (mc_mesh_relay_add(relays[r], left, right, "bench") != ncclSuccess) {
      fprintf(stderr, "mesh_relay_bench: relay add failed\n");
      exit(1);
    }
    left = next;
  }
  c = left;
  memset(f, 0, sizeof(f));
  f[0] = (struct flow){.fd = a, .is_send = true, .bytes = bytes, .piece = piece};
  f[1] = (struct flow){.fd = c, .is_send = false, .bytes = bytes, .piece = piece};
  f[2] = (struct flow){.fd = c, .is_send = true, .bytes = bytes, .piece = piece};
  f[3] = (struct flow){.fd = a, .is_send = false, .bytes = bytes, .piece = piece};
  t0 = mc_time_sec();
  for (int i = 0; i < 4; i++) {
    if (pthread_create(&th[i], NULL, flow_main, &f[i]) != 0)
      die("pthread_create");
  }
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) {
    if (f[i].err != 0) {
      fprintf(stderr, "mesh_relay_bench: %d relay(s), flow %d: %s\n", n_relays, i,
              strerror(f[i].err));
      exit(1);
    }
  }
  ac = (double)bytes / (f[1].end_sec - t0) / 1e9;
  ca = (double)bytes / (f[3].end_sec - t0) / 1e9;
  printf("%-10s %10.2f %10.2f %10.2f\n",
         (n_relays == 0) ? "direct" : ((n_relays == 1) ? "1 relay" : "2 relays"), ac, ca,
         2.0 * (double)bytes /
             (((f[1].end_sec > f[3].end_sec) ? f[1].end_sec : f[3].end_sec) - t0) / 1e9);
  fflush(stdout);
  close(a);
  close(c);
  for (int r = 0; r < n_relays; r++)
    mc_mesh_relay_destroy(relays[r]);
}

int main(int argc, char **argv)
{
  struct mc_mesh_relay_opts opts = {.name = "bench"};
  size_t bytes = (size_t)1 << 30;
  size_t piece = (size_t)1 << 20;

  for (int i = 1; i < argc; i++) {
    if ((strcmp(argv[i], "--bytes") == 0) && (i + 1 < argc))
      bytes = strtoull(argv[++i], NULL, 0);
    else if ((strcmp(argv[i], "--piece") == 0) && (i + 1 < argc))
      piece = strtoull(argv[++i], NULL, 0);
    else if ((strcmp(argv[i], "--dir-bytes") == 0) && (i + 1 < argc))
      opts.dir_bytes = strtoull(argv[++i], NULL, 0);
    else if (strcmp(argv[i], "--copy") == 0)
      opts.force_copy = true;
    else {
      fprintf(stderr, "usage: mesh_relay_bench [--bytes N] [--piece N] [--copy] [--dir-bytes N]\n");
      return 2;
    }
  }
  if ((bytes == 0) || (piece == 0)) {
    fprintf(stderr, "mesh_relay_bench: --bytes and --piece must be > 0\n");
    return 2;
  }
  printf("# %zu bytes each way at once over loopback TCP, pieces of %zu bytes, relays %s\n", bytes,
         piece, opts.force_copy ? "read/write" : "splice");
  printf("%-10s %10s %10s %10s\n", "# path", "a->c GB/s", "c->a GB/s", "both GB/s");
  for (int n = 0; n <= 2; n++)
    run_path(n, bytes, piece, &opts);
  return 0;
}

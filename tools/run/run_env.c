/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every rank's environment shares, set in the launcher's own
 * environment before the ranks start: NCCL_COMM_ID (a free port on
 * 127.0.0.1 for meshccl's bootstrap root), MASTER_ADDR and MASTER_PORT (a
 * second free port, for torch.distributed's store), WORLD_SIZE and the
 * others, a random MESHCCL_SECRET unless set, and mpirun's -x variables.
 */
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>

#define ROOT_PORT_MIN 12000
#define ROOT_PORT_MAX 28000

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
 * keys its authentication with this (docs/design/bootstrap.md);
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
char run_env_ports_desc[600];

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
int run_env_setup(const struct options *opt)
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
  snprintf(run_env_ports_desc, sizeof(run_env_ports_desc),
           "NCCL_COMM_ID=%s (meshccl's bootstrap root), MASTER_ADDR:MASTER_PORT=%s:%s (the store "
           "torch.distributed opens with env://)",
           getenv("NCCL_COMM_ID"), getenv("MASTER_ADDR"), getenv("MASTER_PORT"));
  return 0;
}

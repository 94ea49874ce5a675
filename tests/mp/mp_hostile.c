/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_hostile: a bootstrap root must survive hostile connections.
 *   mp_hostile rank DIR
 *       One rank (RANK of WORLD_SIZE, no NCCL_COMM_ID). Rank 0 calls
 *       ncclGetUniqueId (which starts the root) and writes the id to DIR/id;
 *       every rank then waits for DIR/go and calls ncclCommInitRank.
 *   mp_hostile attack DIR
 *       Reads DIR/id (magic = bytes 0..7, root address = bytes 8..35, a
 *       struct sockaddr_in or sockaddr_in6; it must be loopback) and opens
 *       connections to the root that send: random bytes; the wrong magic;
 *       the right magic with a wrong socket type; the right magic and type
 *       0x100 followed by a length prefix 0xFFFFFFFF; the right magic and type
 *       then a close; the right magic and type and a short message; nothing
 *       at all (kept open). Then creates DIR/go and keeps the silent
 *       connection open until DIR/done exists (30 s at most).
 *   mp_hostile stranger HOST:PORT
 *       A process that knows the bootstrap root's address (NCCL_COMM_ID, a
 *       loopback one) and NCCL's fixed magic, but not the job's secret
 *       (MESHCCL_SECRET). Waits up to 20 s for the root to listen, then:
 *       NCCL's handshake followed by a registration as rank 1 of 3 and a
 *       failure notice "ATTACKER TEXT" in the control framing (the root must
 *       close the connection); the authentication hello and a guessed proof
 *       (the root must answer REJECT, then close).
 *   mp_hostile p2p DIR
 *       One rank of 2 (RANK, WORLD_SIZE, NCCL_COMM_ID; the test forces NET).
 *       After init, rank 1 touches DIR/recv and receives 4096 bytes from rank
 *       0 with ncclRecv, which must be rank 0's bytes; rank 0 waits for
 *       DIR/attacked (30 s at most), then sends them.
 *   mp_hostile net-stranger PID DIR
 *       A process that knows no secret and no id, only what any user can
 *       read: once DIR/recv exists, it finds the TCP ports PID listens on
 *       (/proc/PID/fd and /proc/net/tcp) and sends each, on 2 sockets of one
 *       connection, NCCL's socket handshake (NCCL_SOCKET_MAGIC, type NET),
 *       a 16-byte hello (connection id, index, 1 data socket) and a forged
 *       message ("EVIL" x 1024 after its size); on a third socket the
 *       handshake alone. Then touches DIR/attacked, reads the third
 *       sockets' challenges (the authenticated socket net's) and answers
 *       them with guessed responses and the forged message. Exits 0
 *       whatever the listeners did: what counts is what rank 1 received.
 * Exits 0 when every check passed, 1 with a message on stderr otherwise.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

#define ROOT_TYPE      0x100u
#define COMM_ID_MAGIC  0x0280028002800280ull /* NCCL's magic of NCCL_COMM_ID ids */
#define AUTH_VERSION   1u
#define VERDICT_REJECT 0x544a4552u /* "REJT" */
#define CTL_BYTES      716         /* the root's control message */

static int g_rank = -1;

static void path_in(char *buf, size_t bytes, const char *dir, const char *name)
{
  snprintf(buf, bytes, "%s/%s", dir, name);
}

/* Waits up to limit_s for DIR/name. */
static bool wait_for(const char *dir, const char *name, int limit_s)
{
  char p[4096];

  path_in(p, sizeof(p), dir, name);
  return mc_mp_wait_path(p, limit_s);
}

static void read_id(const char *dir, ncclUniqueId *id)
{
  char p[4096];

  if (!wait_for(dir, "id", 20))
    MC_MP_FAIL("%s/id did not appear within 20 s", dir);
  path_in(p, sizeof(p), dir, "id");
  if (mc_mp_read_id(p, id) != sizeof(*id))
    MC_MP_FAIL("cannot read %s", p);
}

static int run_rank(const char *dir)
{
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  int n = mc_mp_env_int("WORLD_SIZE", -1);

  g_rank = mc_mp_env_int("RANK", -1);
  mc_mp_set_rank(g_rank);
  if (getenv("NCCL_COMM_ID") != NULL)
    MC_MP_FAIL("NCCL_COMM_ID must be unset");
  if (g_rank == 0) {
    char p[4096];
    MC_MP_CHECK(ncclGetUniqueId(&id));
    path_in(p, sizeof(p), dir, "id");
    if (mc_mp_write_id(p, &id) != 0)
      MC_MP_FAIL("cannot write %s", p);
  } else {
    read_id(dir, &id);
  }
  if (!wait_for(dir, "go", 20))
    MC_MP_FAIL("%s/go did not appear within 20 s", dir);
  MC_MP_CHECK(ncclCommInitRank(&comm, n, id, g_rank));
  mc_mp_expect_count_rank(comm, n, g_rank);
  MC_MP_CHECK(ncclCommDestroy(comm));
  printf("rank %d: init ok despite the hostile connections\n", g_rank);
  return 0;
}

/* Connects to the root; the address must be loopback (tests stay on this host). */
static int connect_root(const struct sockaddr_storage *ss)
{
  socklen_t len =
      (ss->ss_family == AF_INET6) ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if ((fd < 0) || (connect(fd, (const struct sockaddr *)ss, len) != 0))
    MC_MP_FAIL("connect to the root: %s", strerror(errno));
  return fd;
}

static void send_all(int fd, const void *buf, size_t bytes)
{
  if (send(fd, buf, bytes, MSG_NOSIGNAL) != (ssize_t)bytes)
    fprintf(stderr, "attack: send of %zu bytes: %s (the root may have dropped us)\n", bytes,
            strerror(errno));
}

/* Handshake of meshccl's sockets: magic (8 bytes) then type (4 bytes). */
static void send_handshake(int fd, uint64_t magic, uint32_t type)
{
  unsigned char hs[12];

  memcpy(hs, &magic, sizeof(magic));
  memcpy(hs + sizeof(magic), &type, sizeof(type));
  send_all(fd, hs, sizeof(hs));
}

static int run_attack(const char *dir)
{
  ncclUniqueId id;
  struct sockaddr_storage ss;
  uint64_t magic;
  unsigned char junk[256];
  uint32_t big = 0xFFFFFFFFu;
  uint32_t small = 8;
  char go[4096];
  int fd;
  int silent;

  read_id(dir, &id);
  memcpy(&magic, id.internal, sizeof(magic));
  memset(&ss, 0, sizeof(ss));
  memcpy(&ss, id.internal + 8, 28);
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
    if ((ntohl(sin->sin_addr.s_addr) >> 24) != 127)
      MC_MP_FAIL("root address is not loopback: refusing to connect");
  } else if (ss.ss_family == AF_INET6) {
    const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&ss;
    if (!IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr))
      MC_MP_FAIL("root address is not loopback: refusing to connect");
  } else {
    MC_MP_FAIL("root address family %d unknown", ss.ss_family);
  }
  srand(12345);
  for (size_t i = 0; i < sizeof(junk); i++)
    junk[i] = (unsigned char)rand();

  fd = connect_root(&ss); /* random bytes */
  send_all(fd, junk, sizeof(junk));
  close(fd);
  fd = connect_root(&ss); /* wrong magic */
  send_handshake(fd, magic ^ 0x5a5a5a5a5a5a5a5aull, ROOT_TYPE);
  close(fd);
  fd = connect_root(&ss); /* right magic, wrong socket type */
  send_handshake(fd, magic, 1);
  close(fd);
  fd = connect_root(&ss); /* right magic and type, absurd length prefix */
  send_handshake(fd, magic, ROOT_TYPE);
  send_all(fd, &big, sizeof(big));
  usleep(100000);
  close(fd);
  fd = connect_root(&ss); /* right magic and type, then nothing but a close */
  send_handshake(fd, magic, ROOT_TYPE);
  usleep(100000);
  close(fd);
  fd = connect_root(&ss); /* right magic and type, a message too short to register */
  send_handshake(fd, magic, ROOT_TYPE);
  send_all(fd, &small, sizeof(small));
  send_all(fd, junk, small);
  usleep(100000);
  close(fd);
  silent = connect_root(&ss); /* nothing at all, kept open */
  path_in(go, sizeof(go), dir, "go");
  mc_mp_touch(go);
  if (!wait_for(dir, "done", 30))
    MC_MP_FAIL("%s/done did not appear within 30 s", dir);
  close(silent);
  printf("attack: done\n");
  return 0;
}

/* Reads up to bytes within 5 s: what arrived before EOF or the deadline. */
static size_t recv_some(int fd, void *buf, size_t bytes)
{
  struct timeval tv = {.tv_sec = 5, .tv_usec = 0};
  size_t got = 0;

  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  while (got < bytes) {
    ssize_t n = recv(fd, (char *)buf + got, bytes - got, 0);
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  return got;
}

/* True when the peer closes within 5 s (whatever it sends first). */
static bool sees_close(int fd)
{
  char sink[256];
  struct timeval tv = {.tv_sec = 5, .tv_usec = 0};

  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (;;) {
    ssize_t n = recv(fd, sink, sizeof(sink), 0);
    if (n == 0)
      return true;
    if (n < 0)
      return (errno == ECONNRESET);
  }
}

/* Connects to a loopback HOST:PORT, retrying for 20 s while it refuses. */
static int connect_loopback(const char *hostport)
{
  struct sockaddr_storage ss;
  struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
  char host[64];
  const char *colon = strrchr(hostport, ':');

  if ((colon == NULL) || ((size_t)(colon - hostport) >= sizeof(host)))
    MC_MP_FAIL("bad address %s", hostport);
  snprintf(host, sizeof(host), "%.*s", (int)(colon - hostport), hostport);
  memset(&ss, 0, sizeof(ss));
  sin->sin_family = AF_INET;
  sin->sin_port = htons((uint16_t)atoi(colon + 1));
  if ((inet_pton(AF_INET, host, &sin->sin_addr) != 1) ||
      ((ntohl(sin->sin_addr.s_addr) >> 24) != 127))
    MC_MP_FAIL("%s is not an IPv4 loopback address: refusing to connect", hostport);
  for (int i = 0; i < 400; i++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if ((fd >= 0) && (connect(fd, (struct sockaddr *)sin, sizeof(*sin)) == 0))
      return fd;
    if (fd >= 0)
      close(fd);
    usleep(50000);
  }
  MC_MP_FAIL("nothing listens on %s after 20 s", hostport);
  return -1;
}

static int run_stranger(const char *hostport)
{
  unsigned char ctl[CTL_BYTES];
  unsigned char hello[48];
  unsigned char reply[36];
  unsigned char guess[32];
  uint32_t len = CTL_BYTES;
  uint32_t version = AUTH_VERSION;
  uint32_t status = 0;
  int32_t fields[4];
  int fd;

  /* NCCL's handshake, then a registration as rank 1 and a failure notice */
  fd = connect_loopback(hostport);
  send_handshake(fd, COMM_ID_MAGIC, ROOT_TYPE);
  memset(ctl, 0, sizeof(ctl));
  fields[0] = 1; /* REGISTER */
  fields[1] = 0;
  fields[2] = 1; /* rank */
  fields[3] = 3; /* nranks */
  memcpy(ctl, fields, sizeof(fields));
  send_all(fd, &len, sizeof(len));
  send_all(fd, ctl, sizeof(ctl));
  fields[0] = 3; /* FAIL */
  memcpy(ctl, fields, sizeof(fields));
  snprintf((char *)ctl + CTL_BYTES - 600, 600, "ATTACKER TEXT");
  send_all(fd, &len, sizeof(len));
  send_all(fd, ctl, sizeof(ctl));
  if (!sees_close(fd))
    MC_MP_FAIL("the root kept a connection that registered without authenticating");
  close(fd);
  printf("stranger: registration without authentication: closed by the root\n");

  /* the authentication, with a guessed proof */
  fd = connect_loopback(hostport);
  memset(hello, 0, sizeof(hello));
  memcpy(hello, &(uint64_t){COMM_ID_MAGIC}, 8);
  memcpy(hello + 8, &(uint32_t){ROOT_TYPE}, 4);
  memcpy(hello + 12, &version, 4);
  for (size_t i = 16; i < sizeof(hello); i++)
    hello[i] = (unsigned char)rand();
  send_all(fd, hello, sizeof(hello));
  if (recv_some(fd, reply, sizeof(reply)) != sizeof(reply))
    MC_MP_FAIL("no challenge from the root");
  for (size_t i = 0; i < sizeof(guess); i++)
    guess[i] = (unsigned char)rand();
  send_all(fd, guess, sizeof(guess));
  if (recv_some(fd, reply, sizeof(reply)) != sizeof(reply))
    MC_MP_FAIL("no verdict from the root");
  memcpy(&status, reply, sizeof(status));
  if (status != VERDICT_REJECT)
    MC_MP_FAIL("verdict 0x%08x for a guessed proof, expected REJECT", status);
  send_all(fd, &len, sizeof(len));
  if (!sees_close(fd))
    MC_MP_FAIL("the root kept a connection whose proof it rejected");
  close(fd);
  printf("stranger: guessed proof: rejected and closed by the root\n");
  return 0;
}

#define P2P_BYTES 4096

static int run_p2p(const char *dir)
{
  ncclComm_t comm = NULL;
  char p[4096];
  char *buf = malloc(P2P_BYTES);
  int n = mc_mp_env_int("WORLD_SIZE", -1);

  g_rank = mc_mp_env_int("RANK", -1);
  mc_mp_set_rank(g_rank);
  if ((buf == NULL) || (n != 2))
    MC_MP_FAIL("2 ranks and 4 KiB of memory needed");
  MC_MP_CHECK(meshcclCommInitFromEnv(&comm, NULL));
  if (g_rank == 0) {
    if (!wait_for(dir, "attacked", 30))
      MC_MP_FAIL("%s/attacked did not appear within 30 s", dir);
    memset(buf, 'R', P2P_BYTES);
    MC_MP_CHECK(ncclSend(buf, P2P_BYTES, ncclChar, 1, comm, NULL));
  } else {
    memset(buf, 0, P2P_BYTES);
    path_in(p, sizeof(p), dir, "recv");
    mc_mp_touch(p);
    MC_MP_CHECK(ncclRecv(buf, P2P_BYTES, ncclChar, 0, comm, NULL));
    for (int i = 0; i < P2P_BYTES; i++) {
      if (buf[i] != 'R')
        MC_MP_FAIL("byte %d of the message from rank 0 is 0x%02x, not 'R' (%.4s...): a stranger's "
                   "bytes were delivered",
                   i, (unsigned char)buf[i], buf + i);
    }
    printf("rank 1: received rank 0's %d bytes, not the stranger's\n", P2P_BYTES);
  }
  MC_MP_CHECK(ncclCommDestroy(comm));
  free(buf);
  return 0;
}

/* The TCP ports pid listens on (IPv4 and IPv6), from what any user reads. */
static int listening_ports(int pid, int *ports, int max_ports)
{
  unsigned long inodes[256];
  int n_inodes = 0;
  int n = 0;
  char path[4096];
  DIR *d;
  struct dirent *e;

  snprintf(path, sizeof(path), "/proc/%d/fd", pid);
  d = opendir(path);
  if (d == NULL)
    return 0;
  while (((e = readdir(d)) != NULL) && (n_inodes < 256)) {
    char link[4096];
    char target[256];
    ssize_t len;

    snprintf(link, sizeof(link), "/proc/%d/fd/%s", pid, e->d_name);
    len = readlink(link, target, sizeof(target) - 1);
    if (len <= 0)
      continue;
    target[len] = '\0';
    if (sscanf(target, "socket:[%lu]", &inodes[n_inodes]) == 1)
      n_inodes++;
  }
  closedir(d);
  for (int v = 0; v < 2; v++) {
    FILE *f = fopen((v == 0) ? "/proc/net/tcp" : "/proc/net/tcp6", "r");
    char line[512];

    if (f == NULL)
      continue;
    while ((fgets(line, sizeof(line), f) != NULL) && (n < max_ports)) {
      char local[64];
      unsigned state = 0;
      unsigned long inode = 0;
      char *colon;

      if (sscanf(line, " %*d: %63s %*s %x %*s %*s %*s %*s %*s %lu", local, &state, &inode) != 3)
        continue;
      colon = strrchr(local, ':');
      if ((state != 0x0A) || (colon == NULL))
        continue;
      for (int i = 0; i < n_inodes; i++) {
        if (inodes[i] == inode)
          ports[n++] = (int)strtol(colon + 1, NULL, 16);
      }
    }
    fclose(f);
  }
  return n;
}

static int connect_port(int port)
{
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct timeval tv = {.tv_sec = 5, .tv_usec = 0};

  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if ((fd >= 0) && (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)) {
    close(fd);
    return -1;
  }
  if (fd >= 0)
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

static int run_net_stranger(int pid, const char *dir)
{
  const uint64_t magic = 0x564ab9f2fc4b9d6cull; /* NCCL_SOCKET_MAGIC's default */
  char p[4096];
  int ports[64];
  int n_ports;
  int fds[64 * 3];
  int chal_fds[64];
  int n_fds = 0;
  char *evil = malloc(P2P_BYTES);

  if (evil == NULL)
    MC_MP_FAIL("malloc");
  for (int i = 0; i < P2P_BYTES; i++)
    evil[i] = "EVIL"[i % 4];
  if (!wait_for(dir, "recv", 30))
    MC_MP_FAIL("%s/recv did not appear within 30 s", dir);
  usleep(300000); /* rank 1 is inside ncclRecv, listening for rank 0 */
  n_ports = listening_ports(pid, ports, 64);
  printf("net-stranger: pid %d listens on %d TCP ports\n", pid, n_ports);
  for (int k = 0; k < n_ports; k++) {
    uint32_t size = P2P_BYTES;

    for (uint32_t index = 0; index < 2; index++) {
      unsigned char hello[16];
      int fd = connect_port(ports[k]);

      if (fd < 0)
        continue;
      send_handshake(fd, magic, 3 /* NET */);
      memcpy(hello, &(uint64_t){0x5eedULL}, 8);
      memcpy(hello + 8, &index, 4);
      memcpy(hello + 12, &(uint32_t){1}, 4);
      send_all(fd, hello, sizeof(hello));
      if (index == 0) {
        send_all(fd, &size, sizeof(size));
        send_all(fd, evil, P2P_BYTES);
      }
      fds[n_fds++] = fd;
    }
    chal_fds[k] = connect_port(ports[k]);
    if (chal_fds[k] >= 0)
      send_handshake(chal_fds[k], magic, 3 /* NET */);
  }
  /* Rank 0 goes on now: rank 1's listener answers only while rank 1
   * waits for it, so the guessed responses race rank 0's connection. */
  path_in(p, sizeof(p), dir, "attacked");
  mc_mp_touch(p);
  for (int k = 0; k < n_ports; k++) {
    uint32_t size = P2P_BYTES;
    unsigned char buf[128];
    int fd = chal_fds[k];

    if (fd < 0)
      continue;
    if (recv(fd, buf, 24, MSG_WAITALL) != 24) {
      printf("net-stranger: port %d: no socket-net challenge\n", ports[k]);
    } else {
      printf("net-stranger: port %d: a challenge; a guessed response\n", ports[k]);
      for (size_t i = 0; i < 88; i++)
        buf[i] = (unsigned char)rand();
      memcpy(buf, "SCKR\1\0\0\0", 8);
      send_all(fd, buf, 88);
      send_all(fd, &size, sizeof(size));
      send_all(fd, evil, P2P_BYTES);
    }
    fds[n_fds++] = fd;
  }
  sleep(2);
  for (int i = 0; i < n_fds; i++)
    close(fds[i]);
  free(evil);
  printf("net-stranger: attacked %d ports with %d connections\n", n_ports, n_fds);
  return 0;
}

int main(int argc, char **argv)
{
  mc_mp_set_name("mp_hostile", g_rank);
  if ((argc == 3) && (strcmp(argv[1], "rank") == 0))
    return run_rank(argv[2]);
  if ((argc == 3) && (strcmp(argv[1], "attack") == 0))
    return run_attack(argv[2]);
  if ((argc == 3) && (strcmp(argv[1], "stranger") == 0))
    return run_stranger(argv[2]);
  if ((argc == 3) && (strcmp(argv[1], "p2p") == 0))
    return run_p2p(argv[2]);
  if ((argc == 4) && (strcmp(argv[1], "net-stranger") == 0))
    return run_net_stranger(atoi(argv[2]), argv[3]);
  fprintf(stderr, "usage: mp_hostile rank DIR | attack DIR | stranger HOST:PORT | p2p DIR | "
                  "net-stranger PID DIR\n");
  return 2;
}

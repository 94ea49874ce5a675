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
 * Exits 0 when every check passed, 1 with a message on stderr otherwise.
 */
#include <arpa/inet.h>
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

int main(int argc, char **argv)
{
  mc_mp_set_name("mp_hostile", g_rank);
  if ((argc == 3) && (strcmp(argv[1], "rank") == 0))
    return run_rank(argv[2]);
  if ((argc == 3) && (strcmp(argv[1], "attack") == 0))
    return run_attack(argv[2]);
  if ((argc == 3) && (strcmp(argv[1], "stranger") == 0))
    return run_stranger(argv[2]);
  fprintf(stderr, "usage: mp_hostile rank DIR | attack DIR | stranger HOST:PORT\n");
  return 2;
}

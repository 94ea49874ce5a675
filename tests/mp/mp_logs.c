/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_logs DIR: one rank of a job (meshcclCommInitFromEnv) that makes the
 * calls whose log lines tests/mp/test_logs.sh checks, and writes what those
 * lines must say, from its own arguments, for the driver to compare:
 *   DIR/expect.<pid>  one line per call, the text NCCL 2.30's
 *                     NCCL_DEBUG_SUBSYS=COLL line has after "NCCL INFO "
 *                     (enqueue.cc, ncclEnqueueCheck): an all-reduce, a
 *                     broadcast from rank 1, a grouped send to the next rank
 *                     and receive from the previous one (one opCount for the
 *                     group), then a second all-reduce;
 *   DIR/maps.<pid>    the transports this process really uses, as its memory
 *                     shows them: one line "<kind> <send> <recv> <channel>
 *                     <conn>" per meshccl shared-memory segment it maps (P2P's
 *                     counters "p2p", SHM's FIFO "shm"; NET maps none).
 * Exits 0 when every call succeeded, 1 with a message otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

static FILE *open_out(const char *dir, const char *what)
{
  char path[4096];
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s.%d", dir, what, (int)getpid());
  f = fopen(path, "w");
  if (f == NULL)
    MC_MP_FAIL("cannot write %s", path);
  return f;
}

/* The line's text after "NCCL INFO ", formatted independently of the library. */
static void expect(FILE *f, const char *name, unsigned long op_count, const void *sendbuff,
                   const void *recvbuff, size_t count, ncclDataType_t type, int op, int root,
                   ncclComm_t comm, int n_ranks)
{
  fprintf(f,
          "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p "
          "[nranks=%d] stream %p\n",
          name, op_count, sendbuff, recvbuff, count, (int)type, op, root, (void *)comm, n_ranks,
          (void *)NULL);
}

/* /proc/self/maps lines naming /dev/shm/meshccl-<kind>-<hash>-<send>-<recv>-<ch>-<conn>-<pid>. */
static void write_maps(FILE *out)
{
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[4096];

  if (maps == NULL)
    MC_MP_FAIL("cannot read /proc/self/maps");
  while (fgets(line, sizeof(line), maps) != NULL) {
    const char *p = strstr(line, "/dev/shm/meshccl-");
    char kind[16];
    unsigned long long hash;
    int send;
    int recv;
    int ch;
    int conn;
    if ((p != NULL) && (sscanf(p, "/dev/shm/meshccl-%15[a-z0-9]-%llx-%d-%d-%d-%d", kind, &hash,
                               &send, &recv, &ch, &conn) == 6))
      fprintf(out, "%s %d %d %d %d\n", kind, send, recv, ch, conn);
  }
  fclose(maps);
}

int main(int argc, char **argv)
{
  ncclComm_t comm = NULL;
  float in[3] = {1, 2, 3};
  float out[3];
  int bcast[5] = {0};
  char sbuf[4] = {1, 2, 3, 4};
  char rbuf[4];
  int rank = -1;
  int n = 0;
  FILE *exp;
  FILE *maps;

  if (argc != 2) {
    fprintf(stderr, "usage: mp_logs DIR\n");
    return 2;
  }
  mc_mp_set_name("mp_logs", MC_MP_NO_RANK);
  MC_MP_CHECK(meshcclCommInitFromEnv(&comm, NULL));
  MC_MP_CHECK(ncclCommUserRank(comm, &rank));
  MC_MP_CHECK(ncclCommCount(comm, &n));
  mc_mp_set_rank(rank);
  exp = open_out(argv[1], "expect");

  MC_MP_CHECK(ncclAllReduce(in, out, 3, ncclFloat, ncclSum, comm, NULL));
  expect(exp, "AllReduce", 0, in, out, 3, ncclFloat, (int)ncclSum, 0, comm, n);

  MC_MP_CHECK(ncclBroadcast(bcast, bcast, 5, ncclInt32, 1 % n, comm, NULL));
  expect(exp, "Broadcast", 1, bcast, bcast, 5, ncclInt32, (int)ncclSum, 1 % n, comm, n);

  MC_MP_CHECK(ncclGroupStart());
  MC_MP_CHECK(ncclSend(sbuf, 4, ncclInt8, (rank + 1) % n, comm, NULL));
  MC_MP_CHECK(ncclRecv(rbuf, 4, ncclInt8, (rank + n - 1) % n, comm, NULL));
  MC_MP_CHECK(ncclGroupEnd());
  /* As NCCL: the buffer of a send is logged as recvbuff, its peer as root. */
  expect(exp, "Send", 2, NULL, sbuf, 4, ncclInt8, (int)ncclSum, (rank + 1) % n, comm, n);
  expect(exp, "Recv", 2, NULL, rbuf, 4, ncclInt8, (int)ncclSum, (rank + n - 1) % n, comm, n);

  MC_MP_CHECK(ncclAllReduce(out, out, 3, ncclFloat, ncclMax, comm, NULL));
  expect(exp, "AllReduce", 3, out, out, 3, ncclFloat, (int)ncclMax, 0, comm, n);
  if (fclose(exp) != 0)
    MC_MP_FAIL("cannot write the expected lines");

  maps = open_out(argv[1], "maps");
  write_maps(maps);
  if (fclose(maps) != 0)
    MC_MP_FAIL("cannot write the mappings");
  MC_MP_CHECK(ncclCommDestroy(comm));
  return 0;
}

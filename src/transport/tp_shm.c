/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /dev/shm segments of the SHM transport (and of P2P's counters across
 * processes). The receiver creates and maps a segment named after the
 * communicator and the connection; the sender maps it; the receiver unlinks
 * it as soon as the sender said so, so a crash after connect leaves nothing
 * in /dev/shm. Space is reserved with posix_fallocate: a full or too small
 * /dev/shm fails at connect with the size needed, not later with SIGBUS.
 * Both ends map every page at connect (MAP_POPULATE), as NCCL's buffers
 * are device memory that never faults: otherwise each process takes a page
 * fault on each FIFO page the first time a step reaches it, inside the
 * collectives (a connection made at first use, the one-shot's, took 16 a
 * step on a 64 KiB all-reduce for its first 8 steps).
 */
#include "transport/tp_int.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"
#include "topo/topo.h"

ncclResult_t mc_shm_create(const char *name, size_t bytes, void **map_out)
{
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  char hint[MC_FD_HINT_BYTES];
  void *map;
  int err;

  if (fd < 0)
    return MC_FAIL(ncclSystemError, "NCCL SHM: shm_open(/dev/shm%s): %s%s", name, strerror(errno),
                   mc_fd_limit_hint(errno, hint, sizeof(hint)));
  err = posix_fallocate(fd, 0, (off_t)bytes);
  if (err != 0) {
    close(fd);
    shm_unlink(name);
    if ((err == ENOSPC) || (err == EFBIG))
      return MC_FAIL(ncclSystemError,
                     "NCCL SHM: /dev/shm has no room for %zu bytes (segment %s): enlarge "
                     "/dev/shm (docker run --shm-size) or lower NCCL_BUFFSIZE",
                     bytes, name);
    return MC_FAIL(ncclSystemError, "NCCL SHM: reserving %zu bytes for /dev/shm%s: %s", bytes, name,
                   strerror(err));
  }
  map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  err = errno;
  close(fd);
  if (map == MAP_FAILED) {
    shm_unlink(name);
    return MC_FAIL(ncclSystemError, "NCCL SHM: mmap of %zu bytes of /dev/shm%s: %s", bytes, name,
                   strerror(err));
  }
  *map_out = map;
  return ncclSuccess;
}

ncclResult_t mc_shm_attach(const char *name, size_t bytes, void **map_out)
{
  int fd = shm_open(name, O_RDWR, 0600);
  char hint[MC_FD_HINT_BYTES];
  struct stat st;
  void *map;
  int err;

  if (fd < 0)
    return MC_FAIL(ncclSystemError, "NCCL SHM: opening /dev/shm%s of the peer: %s%s", name,
                   strerror(errno), mc_fd_limit_hint(errno, hint, sizeof(hint)));
  if ((fstat(fd, &st) != 0) || ((size_t)st.st_size < bytes)) {
    close(fd);
    return MC_FAIL(ncclSystemError, "NCCL SHM: /dev/shm%s is smaller than the %zu bytes announced",
                   name, bytes);
  }
  map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  err = errno;
  close(fd);
  if (map == MAP_FAILED)
    return MC_FAIL(ncclSystemError, "NCCL SHM: mmap of /dev/shm%s: %s", name, strerror(err));
  *map_out = map;
  return ncclSuccess;
}

/* Segments whose creator (the pid at the end of the name) no longer exists:
 * a rank killed between creating a segment and its peer mapping it. */
void mc_tp_collect_orphans(void)
{
  DIR *d = opendir("/dev/shm");
  struct dirent *e;

  if (d == NULL)
    return;
  while ((e = readdir(d)) != NULL) {
    const char *dash = strrchr(e->d_name, '-');
    char path[300];
    long pid;
    char *end = NULL;
    if ((strncmp(e->d_name, "meshccl-", 8) != 0) || (dash == NULL))
      continue;
    pid = strtol(dash + 1, &end, 10);
    if ((end == dash + 1) || (*end != '\0') || (pid <= 0))
      continue;
    if ((kill((pid_t)pid, 0) != 0) && (errno == ESRCH)) {
      snprintf(path, sizeof(path), "/%s", e->d_name);
      if (shm_unlink(path) == 0)
        MC_INFO(MC_SUB_SHM | MC_SUB_INIT, "NCCL SHM: removed /dev/shm%s of exited process %ld",
                path, pid);
    }
  }
  closedir(d);
}

void mc_shm_unlink(const char *name)
{
  if ((name != NULL) && (name[0] != '\0'))
    (void)shm_unlink(name);
}

/* ------------------------------------------------------- the SHM transport */

static bool shm_can_connect(struct mc_tp_comm *tc, const struct mc_tp_select *sel)
{
  (void)tc;
  /* topo's choice already applied NCCL_SHM_DISABLE, shmDev and the NIC check;
   * a P2P pair that P2P declined (another process, no CMA) falls to SHM,
   * unless NCCL_SHM_DISABLE=1: then to NET, as NCCL does when neither P2P
   * nor SHM can connect. */
  return sel->same_host && (sel->topo_choice != MC_TOPO_TRANSPORT_NET) &&
         (mc_param_int(MC_P_SHM_DISABLE) == 0);
}

static ncclResult_t shm_recv_setup(struct mc_tp_comm *tc, struct mc_conn_req *q,
                                   struct mc_blob_r1 *r1)
{
  struct mc_conn *c = q->conn;

  c->map_bytes = mc_tp_ctrl_bytes() + MC_STEPS * c->slot_bytes;
  mc_shm_name(c->shm_name, tc->comm_hash, "shm", tc->rank, q->peer, q->channel, q->conn_index,
              (int)getpid());
  MC_CHECK(mc_shm_create(c->shm_name, c->map_bytes, &c->map));
  c->ctrl = c->map;
  c->slots = (char *)c->map + mc_tp_ctrl_bytes();
  c->ignores_ptr = true; /* the sender writes these counters, and never a pointer */
  r1->bytes = c->map_bytes;
  snprintf(r1->shm_name, sizeof(r1->shm_name), "%s", c->shm_name);
  return ncclSuccess;
}

static ncclResult_t shm_send_setup(struct mc_tp_comm *tc, struct mc_conn_req *q,
                                   const struct mc_blob_r1 *r1, struct mc_blob_r2 *r2)
{
  struct mc_conn *c = q->conn;

  (void)tc;
  (void)r2;
  /* r1 passed mc_tp_blob_r1_check: the size this rank's slots make, the
   * name the peer had to give the segment. */
  c->map_bytes = (size_t)r1->bytes;
  MC_CHECK(mc_shm_attach(r1->shm_name, c->map_bytes, &c->map));
  mc_shm_unlink(r1->shm_name); /* both ends have it mapped now */
  c->ctrl = c->map;
  c->slots = (char *)c->map + mc_tp_ctrl_bytes();
  c->slot_bytes = (c->map_bytes - mc_tp_ctrl_bytes()) / MC_STEPS;
  mc_conn_stream_init(c);
  return ncclSuccess;
}

static ncclResult_t shm_recv_connect(struct mc_conn_req *q, const struct mc_blob_r2 *r2)
{
  (void)q;
  (void)r2;
  return ncclSuccess;
}

static void shm_free(struct mc_conn *c)
{
  /* the mapping: mc_conn_free */
  if (c->is_send && (c->stream.n_decide > 0))
    MC_INFO(MC_SUB_SHM,
            "SHM: send to rank %d channel %d: %s stores, %u calibrations of plain vs streaming "
            "stores, %u flips; last medians plain %.2f GB/s, streaming %.2f GB/s",
            c->peer, c->channel, c->stream.on ? "streaming" : "plain", c->stream.n_decide,
            c->stream.n_flip, c->stream.med[0] / 1000.0, c->stream.med[1] / 1000.0);
}

static const char *shm_how(const struct mc_tp_comm *tc, const struct mc_conn *c)
{
  (void)tc;
  (void)c;
  return "direct/direct";
}

const struct mc_transport mc_tp_shm = {
    .kind = MC_TOPO_TRANSPORT_SHM,
    .name = "SHM",
    .can_connect = shm_can_connect,
    .recv_setup = shm_recv_setup,
    .send_setup = shm_send_setup,
    .recv_connect = shm_recv_connect,
    .progress = NULL,
    .start = NULL,
    .free = shm_free,
    .how = shm_how,
};

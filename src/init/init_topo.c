/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Init stage "topo". Mirrors the topology part of NCCL's initTransportsRank
 * (ncclTopoGetSystem, ComputePaths, TrimSystem, ComputePaths, SearchInit):
 *   NCCL_TOPO_FILE (this rank takes the dev-th GPU of the file) or detection
 *   of this host with the devices of the communicator's net as its NICs
 *   (stage "net" chose and initialised it) -> allgather of the XML among the ranks of the host ->
 * fusion in local-rank order -> NCCL_TOPO_DUMP_FILE -> system graph -> paths (both once per host
 * from MESHCCL_PATHS_SHARE local ranks, host_topo) -> trim -> paths.
 * The transport of each peer is logged where connections are made (src/transport/transport.c),
 * with the topology's reason, so that the log names the transport really used. Input: comm with
 * bootstrap, peers and nodes. Output: comm->topo.
 */
#include "init_topo.h"

#include "comm.h"
#include "init_steps.h"
#include "init_gather.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"
#include "topo/topo.h"
#include "topo/topo_detect.h"
#include "topo/topo_graph.h"
#include "topo/topo_xml.h"
#include "utils.h"

#define RANK_XML_NODES 256                             /* NCCL_TOPO_XML_MAX_NODES: one rank's XML */
#define TAG_TOPO_XML   (MC_BOOT_TAG_INTRANODE | 0x102) /* to + 3 */
#define TAG_TOPO_PATHS (MC_BOOT_TAG_INTRANODE | 0x106)
/* The shared memfd: a token, the system, then the paths at a multiple of
 * this (the mapping's offsets keep mc_topo_paths_export's alignment). */
#define SHARED_PAGE_BYTES 4096
#define XML_MAX_BYTES     (4u << 20) /* one rank's serialized XML */
/* This rank's gdrSupport (NCCL 2.30 src/init.cc ncclGpuGdrSupport: 1 when a
 * net device can register GPU memory). meshccl's buffers are host memory and
 * its nets register host memory only, so no rank supports GPUDirect RDMA. */
#define RANK_GDR_SUPPORT 0

/* Walks the tree from its root (removed subtrees are not reached). */
static void collect_gpus(struct mc_xml_node *node, struct mc_xml_node **gpus, int *n, int max)
{
  if ((strcmp(node->name, "gpu") == 0) && (*n < max))
    gpus[(*n)++] = node;
  for (int s = 0; s < node->n_subs; s++)
    collect_gpus(node->subs[s], gpus, n, max);
}

/* NCCL_TOPO_FILE: the file is the server this host stands for; this rank is
 * its dev-th GPU, so that one host can stand for a GPU server. GPUs that are bare
 * PCI leaves (AWS's static p4d files) get their <gpu> as NVML would fill
 * them. A file without any GPU (AWS's p5 file) is completed as NCCL
 * completes it on a real host: the rank's own device comes from detection,
 * placed under the file's CPU of the rank's NUMA node; its NICs stay the net
 * devices. */
static ncclResult_t claim_file_gpu(struct ncclComm *comm, struct mc_xml *xml, const char *path,
                                   const struct mc_topo_detect_rank *me)
{
  struct mc_xml_node *gpus[64];
  int n = 0;

  if (xml->n_nodes > 0)
    collect_gpus(&xml->nodes[0], gpus, &n, 64);
  if (n == 0) {
    int added = 0;
    MC_CHECK(mc_topo_gpus_from_file(xml, &added));
    if (added > 0)
      collect_gpus(&xml->nodes[0], gpus, &n, 64);
  }
  if (n == 0) {
    struct mc_topo_detect_rank partial = *me;
    partial.skip_nics = true;
    MC_INFO(MC_SUB_GRAPH | MC_SUB_ENV,
            "NCCL_TOPO_FILE=%s has no GPU: rank %d's device %d completed by detection", path,
            comm->rank, comm->dev);
    return mc_topo_detect(NULL, &partial, xml);
  }
  if (comm->dev >= n)
    return MC_FAIL(ncclInvalidUsage,
                   "NCCL_TOPO_FILE=%s has %d GPU(s); rank %d uses device %d: give each local rank "
                   "one of the file's GPUs (fewer ranks per host, or a file with more GPUs)",
                   path, n, comm->rank, comm->dev);
  for (int g = 0; g < n; g++)
    mc_xml_unset_attr(gpus[g], "rank");
  MC_CHECK(mc_xml_set_attr_int(gpus[comm->dev], "rank", comm->rank));
  MC_CHECK(mc_xml_init_attr_int(gpus[comm->dev], "dev", comm->dev));
  MC_CHECK(mc_xml_init_attr_int(gpus[comm->dev], "sm", 0));
  /* A file's <gpu> may lack gdr (hand-written or completed offline files):
   * NCCL sets it from the rank's gdrSupport, and so do we. */
  MC_CHECK(mc_topo_xml_gpus_complete(xml, RANK_GDR_SUPPORT, NULL));
  return ncclSuccess;
}

/* NCCL overwrites every cpu's host_hash of a loaded file with the local one. */
static ncclResult_t set_host_hash(struct mc_xml_node *node, uint64_t host_hash)
{
  if (strcmp(node->name, "cpu") == 0)
    MC_CHECK(mc_xml_set_attr_long(node, "host_hash", (int64_t)host_hash));
  for (int s = 0; s < node->n_subs; s++)
    MC_CHECK(set_host_hash(node->subs[s], host_hash));
  return ncclSuccess;
}

/* This rank's own XML. */
static ncclResult_t rank_xml(struct ncclComm *comm, struct mc_xml *xml, bool *from_file_out)
{
  const char *path = mc_param_str(MC_P_TOPO_FILE);
  uint64_t host_hash = comm->peers[comm->rank].host_hash;
  struct mc_topo_detect_rank me = {.rank = comm->rank,
                                   .dev = comm->dev,
                                   .numa_node = -1,
                                   .host_hash = host_hash,
                                   .is_compute = (comm->dev_requested < 0)};

  *from_file_out = false;
  if (path != NULL) {
    if (access(path, R_OK) != 0) {
      MC_INFO(MC_SUB_GRAPH | MC_SUB_ENV, "Could not open XML topology file %s : %s", path,
              strerror(errno));
    } else {
      MC_CHECK(mc_xml_load_file(path, xml));
      if (xml->n_nodes > 0)
        MC_CHECK(set_host_hash(&xml->nodes[0], host_hash));
      MC_CHECK(claim_file_gpu(comm, xml, path, &me));
      /* NCCL's order per rank: own GPU kept, nets imported (kept), then the
       * trim drops the other GPUs; the ranks' trees are fused afterwards. */
      MC_CHECK(mc_topo_nets_from_file(xml));
      *from_file_out = true;
      return ncclSuccess;
    }
  }
  /* This host: its CPUs and the rank's device from detection, its NICs the
   * devices of the communicator's net (NCCL's ncclTopoProcessNet; with
   * NCCL_TOPO_DUMP_FILE NCCL imports physical devices only, and so here). */
  me.skip_nics = true;
  MC_CHECK(mc_topo_detect(NULL, &me, xml));
  return mc_topo_nets_from_net(xml, NULL, host_hash, comm->net.ops, comm->net.ctx,
                               mc_param_str(MC_P_TOPO_DUMP_FILE) != NULL);
}

static ncclResult_t xml_to_text(const struct mc_xml *xml, char **buf_out, size_t *bytes_out)
{
  char *buf = NULL;
  size_t bytes = 0;
  FILE *f = open_memstream(&buf, &bytes);
  ncclResult_t res;

  if (f == NULL)
    return MC_FAIL(ncclSystemError, "topology: open_memstream: %s", strerror(errno));
  res = mc_xml_dump(xml, f);
  fclose(f);
  if (res != ncclSuccess) {
    free(buf);
    return res;
  }
  *buf_out = buf;
  *bytes_out = bytes;
  return ncclSuccess;
}

/* Each local rank's XML goes to local rank 0 in a slot of this many bytes:
 * its size, then its text (a host's XML is about 1 KiB: one CPU, its NICs,
 * the rank's device); a larger one (NCCL_TOPO_FILE of a big server) follows
 * in a message of its own. NCCL exchanges fixed slots too,
 * xmlMemSize(NCCL_TOPO_XML_MAX_NODES) bytes each (ncclTopoGetSystem). */
#define XML_SLOT_BYTES  4096
#define XML_SLOT_HEADER sizeof(uint64_t)

/* Local rank 0's side of NCCL's intra-node allgather and fusion: every
 * local rank's text (its own is text), parsed and fused in local-rank order. */
static ncclResult_t gather_and_fuse(struct ncclComm *comm, const char *text, uint64_t bytes,
                                    struct mc_xml *fused)
{
  const struct mc_comm_nodes *nd = &comm->nodes;
  char slot[XML_SLOT_BYTES];
  char *big = NULL;
  struct mc_xml *tmp = NULL;
  ncclResult_t res = ncclSuccess;

  MC_CHECK(mc_xml_create(RANK_XML_NODES, &tmp));
  for (int i = 0; i < nd->local_ranks; i++) {
    int peer = nd->local_rank_to_rank[i];
    const char *t = text;
    uint64_t size = bytes;
    char name[64];
    if (i > 0) {
      MC_CHECK_GOTO(mc_boot_recv(comm->bootstrap.boot, peer, TAG_TOPO_XML, slot, sizeof(slot)), res,
                    out);
      memcpy(&size, slot, sizeof(size));
      t = slot + XML_SLOT_HEADER;
      if (size > XML_MAX_BYTES) {
        res = MC_FAIL(ncclRemoteError, "topology: rank %d sent an XML of %llu bytes (at most %u)",
                      peer, (unsigned long long)size, XML_MAX_BYTES);
        goto out;
      }
      if (size > XML_SLOT_BYTES - XML_SLOT_HEADER) {
        free(big);
        big = NULL;
        MC_CHECK_GOTO(mc_calloc(&big, (size_t)size + 1), res, out);
        MC_CHECK_GOTO(mc_boot_recv(comm->bootstrap.boot, peer, TAG_TOPO_XML + 1, big, (size_t)size),
                      res, out);
        t = big;
      }
    }
    snprintf(name, sizeof(name), "topology of rank %d", peer);
    mc_xml_clear(tmp);
    MC_CHECK_GOTO(mc_xml_load_buf(t, (size_t)size, name, tmp), res, out);
    MC_CHECK_GOTO(mc_xml_fuse(fused, tmp), res, out);
  }
out:
  free(big);
  mc_xml_destroy(tmp);
  return res;
}

/* The fused tree as it came from local rank 0, not yet unpacked. */
struct packed_xml {
  void *buf;
  size_t bytes;
};

/*
 * NCCL's intra-node allgather of the ranks' XML and the fusion every rank
 * makes of them, done once: the texts go to local rank 0 (in a slot of
 * XML_SLOT_BYTES, a larger text in a message of its own), which fuses them in
 * local-rank order and sends the fused tree to every local rank, packed
 * (mc_xml_pack keeps elements, attributes, types, lines and order): each rank
 * holds the tree its own fusion would have made. With keep, a rank other than
 * local rank 0 keeps the packed tree there instead of unpacking it (it may
 * take the host's system from local rank 0, host_topo).
 */
static ncclResult_t exchange_and_fuse(struct ncclComm *comm, const char *text, uint64_t bytes,
                                      struct mc_xml *fused, struct packed_xml *keep)
{
  const struct mc_comm_nodes *nd = &comm->nodes;
  void *packed = NULL;
  size_t packed_bytes = 0;
  uint64_t total = 0;
  ncclResult_t res = ncclSuccess;

  if (nd->local_rank != 0) {
    char slot[XML_SLOT_BYTES];
    memset(slot, 0, sizeof(slot));
    memcpy(slot, &bytes, sizeof(bytes));
    if (bytes <= XML_SLOT_BYTES - XML_SLOT_HEADER)
      memcpy(slot + XML_SLOT_HEADER, text, (size_t)bytes);
    MC_CHECK(mc_boot_send(comm->bootstrap.boot, nd->local_rank_to_rank[0], TAG_TOPO_XML, slot,
                          sizeof(slot)));
    if (bytes > XML_SLOT_BYTES - XML_SLOT_HEADER)
      MC_CHECK(mc_boot_send(comm->bootstrap.boot, nd->local_rank_to_rank[0], TAG_TOPO_XML + 1, text,
                            (size_t)bytes));
  } else {
    MC_CHECK(gather_and_fuse(comm, text, bytes, fused));
    MC_CHECK(mc_xml_pack(fused, &packed, &packed_bytes));
    total = packed_bytes;
  }
  MC_CHECK_GOTO(mc_comm_bcast_tree(comm, nd->local_rank_to_rank, nd->local_ranks, nd->local_rank,
                                   &total, sizeof(total), TAG_TOPO_XML + 2),
                res, out);
  if (total > MC_BOOT_MAX_MSG_BYTES) {
    res = MC_FAIL(ncclRemoteError, "topology: rank %d announced a fused XML of %llu bytes",
                  nd->local_rank_to_rank[0], (unsigned long long)total);
    goto out;
  }
  if (packed == NULL) {
    char *p = NULL;
    MC_CHECK_GOTO(mc_calloc(&p, (size_t)total + 1), res, out);
    packed = p;
  }
  MC_CHECK_GOTO(mc_comm_bcast_tree(comm, nd->local_rank_to_rank, nd->local_ranks, nd->local_rank,
                                   packed, (size_t)total, TAG_TOPO_XML + 3),
                res, out);
  if ((nd->local_rank != 0) && (keep != NULL)) {
    keep->buf = packed;
    keep->bytes = (size_t)total;
    packed = NULL;
  } else if (nd->local_rank != 0) {
    MC_CHECK_GOTO(mc_xml_unpack(packed, (size_t)total, fused), res, out);
  }
out:
  free(packed);
  return res;
}

/* Every local rank's XML, fused in local-rank order. */
static ncclResult_t fuse_host(struct ncclComm *comm, const struct mc_xml *mine,
                              struct mc_comm_steps *steps, struct packed_xml *keep,
                              struct mc_xml **fused_out)
{
  const struct mc_comm_nodes *nd = &comm->nodes;
  char *text = NULL;
  size_t bytes = 0;
  struct mc_xml *fused = NULL;
  struct mc_xml *tmp = NULL;
  ncclResult_t res;
  int cap = nd->local_ranks * RANK_XML_NODES;

  if (cap > MC_XML_MAX_NODES)
    cap = MC_XML_MAX_NODES;
  MC_CHECK(xml_to_text(mine, &text, &bytes));
  MC_CHECK_GOTO(mc_xml_create(cap, &fused), res, out);
  if (nd->local_ranks > 1) {
    MC_CHECK_GOTO(exchange_and_fuse(comm, text, bytes, fused, keep), res, out);
    mc_comm_steps_mark(steps, "exchange");
  } else {
    /* The text, as the other ranks' would be: what NCCL fuses. */
    MC_CHECK_GOTO(mc_xml_create(RANK_XML_NODES, &tmp), res, out);
    char name[64];
    snprintf(name, sizeof(name), "topology of rank %d", comm->rank);
    MC_CHECK_GOTO(mc_xml_load_buf(text, bytes, name, tmp), res, out);
    MC_CHECK_GOTO(mc_xml_fuse(fused, tmp), res, out);
  }
  *fused_out = fused;
  fused = NULL;
  res = ncclSuccess;
out:
  mc_xml_destroy(tmp);
  mc_xml_destroy(fused);
  free(text);
  return res;
}

/* ------------------------------------------------ shared system and paths */

/* What local rank 0 sends down the host's tree once its paths are computed. */
struct paths_msg {
  uint8_t digest[MC_TOPO_SEARCH_DIGEST_BYTES];     /* of its system and path options */
  uint8_t sys_digest[MC_TOPO_SEARCH_DIGEST_BYTES]; /* of its system alone */
  uint64_t bytes;     /* of the memfd; 0: none, every rank builds its own */
  uint64_t token;     /* random, also the memfd's first 8 bytes */
  uint64_t sys_off;   /* the system's bytes in the memfd (after the token) */
  uint64_t sys_bytes; /* 0: no system, every rank builds its own */
  uint64_t paths_off; /* the paths, from there to the end (page-aligned) */
  int32_t pid;        /* the memfd is /proc/<pid>/fd/<fd> */
  int32_t fd;
};

void mc_comm_paths_close(struct ncclComm *comm)
{
  if (comm->topo.paths_fd >= 0) {
    close(comm->topo.paths_fd);
    comm->topo.paths_fd = -1;
  }
}

/* Local rank 0: the token, the system its paths were computed on (sys_bytes
 * of mc_topo_system_export, made before the paths) and its paths
 * (mc_topo_paths_export, a page in) in a memfd, kept open in comm->topo.paths_fd.
 * One that cannot be made leaves msg->bytes 0. No name: the memory goes with
 * the last process that holds it, whatever happens to rank 0. */
static void paths_publish(struct ncclComm *comm, const struct mc_topo_system *sys,
                          const void *sys_buf, size_t sys_bytes, struct paths_msg *msg)
{
  size_t paths = mc_topo_paths_export_bytes(sys);
  size_t sys_off = 64; /* after the token */
  size_t paths_off =
      (sys_off + sys_bytes + SHARED_PAGE_BYTES - 1) & ~(size_t)(SHARED_PAGE_BYTES - 1);
  size_t bytes = paths_off + paths;
  char *map = MAP_FAILED;
  int err = 0;
  int fd = memfd_create("meshccl-paths", MFD_CLOEXEC);

  if ((fd < 0) || (mc_random_bytes(&msg->token, sizeof(msg->token)) != ncclSuccess)) {
    err = (fd < 0) ? errno : EIO;
  }
  /* Every byte now: a write beyond what memory allows would be a SIGBUS. */
  if ((err == 0) && ((err = posix_fallocate(fd, 0, (off_t)bytes)) == 0)) {
    map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    err = (map == MAP_FAILED) ? errno : 0;
  }
  if ((err == 0) && (mc_topo_paths_export(sys, map + paths_off, paths) != ncclSuccess)) {
    err = EINVAL;
  }
  if (err == 0) {
    memcpy(map, &msg->token, sizeof(msg->token));
    if (sys_bytes > 0)
      memcpy(map + sys_off, sys_buf, sys_bytes);
    msg->bytes = bytes;
    msg->sys_off = sys_off;
    msg->sys_bytes = sys_bytes;
    msg->paths_off = paths_off;
    msg->pid = (int32_t)getpid();
    msg->fd = fd;
    comm->topo.paths_fd = fd;
  } else {
    MC_INFO(MC_SUB_GRAPH | MC_SUB_INIT,
            "Topo: no shared paths (a memfd of %zu bytes: %s): each local rank computes its own",
            bytes, strerror(err));
    mc_error_clear_thread();
    if (fd >= 0) {
      close(fd);
    }
  }
  if (map != MAP_FAILED) {
    (void)munmap(map, bytes);
  }
}

/* The other local ranks: local rank 0's memfd, mapped read-only (*map_out,
 * msg->bytes), once its token is checked. */
static ncclResult_t shared_map(const struct paths_msg *msg, char **map_out)
{
  char path[64];
  struct stat st;
  char *map;
  uint64_t token;
  int fd;

  snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)msg->pid, (int)msg->fd);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return MC_FAIL(ncclSystemError, "open %s: %s", path, strerror(errno));
  }
  if ((fstat(fd, &st) != 0) || ((uint64_t)st.st_size != msg->bytes) ||
      (msg->sys_off < sizeof(token)) || (msg->sys_off > msg->bytes) ||
      (msg->sys_bytes > msg->bytes - msg->sys_off) || (msg->paths_off >= msg->bytes) ||
      (msg->paths_off % SHARED_PAGE_BYTES != 0)) {
    close(fd);
    return MC_FAIL(ncclSystemError, "%s is not the announced %llu bytes", path,
                   (unsigned long long)msg->bytes);
  }
  map = mmap(NULL, (size_t)msg->bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    return MC_FAIL(ncclSystemError, "mmap of %s: %s", path, strerror(errno));
  }
  memcpy(&token, map, sizeof(token));
  if (token != msg->token) {
    (void)munmap(map, (size_t)msg->bytes);
    return MC_FAIL(ncclSystemError, "%s is another file (another pid namespace?)", path);
  }
  *map_out = map;
  return ncclSuccess;
}

/* The system this rank would build from the fused tree, from local rank 0's
 * bytes in map: refused (ncclInternalError) unless its digest, with this
 * rank's path options or alone, is rank 0's. */
static ncclResult_t system_take(const struct paths_msg *msg, const char *map,
                                const struct mc_topo_paths_opts *opts,
                                struct mc_topo_system **sys_out, bool *same_paths_out)
{
  uint8_t got[MC_TOPO_SEARCH_DIGEST_BYTES];
  struct mc_topo_system *sys = NULL;

  if (msg->sys_bytes == 0)
    return MC_FAIL(ncclInternalError, "no system in the shared memory");
  MC_CHECK(mc_topo_system_import(map + msg->sys_off, (size_t)msg->sys_bytes, &sys));
  /* The digest of the system and the path options covers the system: only
   * when it differs is the system's own asked. */
  mc_topo_paths_digest(sys, opts, got);
  *same_paths_out = (memcmp(got, msg->digest, sizeof(got)) == 0);
  if (!*same_paths_out) {
    mc_topo_system_digest(sys, got);
    if (memcmp(got, msg->sys_digest, sizeof(got)) != 0) {
      mc_topo_system_destroy(sys);
      return MC_FAIL(ncclInternalError, "the shared system's digest is not rank 0's");
    }
  }
  *sys_out = sys;
  return ncclSuccess;
}

/* A rank that cannot take local rank 0's system builds its own from the
 * packed fused tree. */
static ncclResult_t system_build(struct ncclComm *comm, struct mc_xml *fused,
                                 const struct packed_xml *packed, struct mc_topo_system **sys_out)
{
  if ((packed != NULL) && (packed->buf != NULL))
    MC_CHECK(mc_xml_unpack(packed->buf, packed->bytes, fused));
  return mc_topo_system_from_xml(fused, comm->peers[comm->rank].host_hash, sys_out);
}

/* Whether the host's local rank 0 builds the system and computes the paths
 * for every local rank: from MESHCCL_PATHS_SHARE local ranks on, as local
 * rank 0's own setting says (every local rank follows it), when every local
 * rank is in one PID namespace (the others open its memfd as
 * /proc/<pid>/fd/<fd>). */
static bool host_shares(const struct ncclComm *comm)
{
  const struct mc_comm_nodes *nd = &comm->nodes;
  int64_t from = comm->peers[nd->local_rank_to_rank[0]].paths_share;

  return (from != 0) && (nd->local_ranks >= 2) && (nd->local_ranks >= from) &&
         comm->local_one_pidns;
}

/* Local rank 0's side of host_topo: its system, exported before its paths,
 * then its paths, both published. */
static ncclResult_t host_topo_first(struct ncclComm *comm, struct mc_xml *fused,
                                    const struct mc_topo_paths_opts *opts, struct paths_msg *msg,
                                    struct mc_topo_system **sys_out)
{
  struct mc_topo_system *sys = NULL;
  char *sys_buf = NULL;
  size_t sys_bytes;
  ncclResult_t res;

  MC_CHECK(system_build(comm, fused, NULL, &sys));
  sys_bytes = mc_topo_system_export_bytes(sys);
  MC_CHECK_GOTO(mc_calloc(&sys_buf, sys_bytes), res, fail);
  MC_CHECK_GOTO(mc_topo_system_export(sys, sys_buf, sys_bytes), res, fail);
  mc_topo_system_digest(sys, msg->sys_digest);
  mc_topo_paths_digest(sys, opts, msg->digest);
  MC_CHECK_GOTO(mc_topo_compute_paths(sys, opts), res, fail);
  paths_publish(comm, sys, sys_buf, sys_bytes, msg);
  free(sys_buf);
  *sys_out = sys;
  return ncclSuccess;
fail:
  free(sys_buf);
  mc_topo_system_destroy(sys);
  return res;
}

/* Another local rank's side: rank 0's system and, with the same path
 * options, its paths; whatever cannot be taken is made here. */
static ncclResult_t host_topo_take(struct ncclComm *comm, struct mc_xml *fused,
                                   const struct packed_xml *packed,
                                   const struct mc_topo_paths_opts *opts,
                                   const struct paths_msg *msg, struct mc_topo_system **sys_out)
{
  const struct mc_comm_nodes *nd = &comm->nodes;
  uint8_t mine[MC_TOPO_SEARCH_DIGEST_BYTES];
  struct mc_topo_system *sys = NULL;
  char *map = NULL;
  bool same_paths = false;
  ncclResult_t res;

  if ((msg->bytes > 0) && (shared_map(msg, &map) == ncclSuccess) &&
      (system_take(msg, map, opts, &sys, &same_paths) == ncclSuccess)) {
    MC_INFO(MC_SUB_GRAPH, "Topo: rank %d takes the system of rank %d (%llu bytes)", comm->rank,
            nd->local_rank_to_rank[0], (unsigned long long)msg->sys_bytes);
  } else {
    if (msg->bytes > 0) {
      MC_INFO(MC_SUB_GRAPH, "Topo: rank %d could not take the system of rank %d (%s): building it",
              comm->rank, nd->local_rank_to_rank[0], mc_error_last());
      mc_error_clear_thread();
    }
    MC_CHECK_GOTO(system_build(comm, fused, packed, &sys), res, fail);
    mc_topo_paths_digest(sys, opts, mine);
    same_paths = (map != NULL) && (memcmp(msg->digest, mine, sizeof(mine)) == 0);
  }
  if (same_paths) {
    if (mc_topo_paths_import(sys, map, (size_t)msg->bytes, (size_t)msg->paths_off) == ncclSuccess) {
      MC_INFO(MC_SUB_GRAPH, "Topo: rank %d maps the paths of rank %d (same system, %llu bytes)",
              comm->rank, nd->local_rank_to_rank[0], (unsigned long long)msg->bytes);
      *sys_out = sys;
      return ncclSuccess; /* the mapping is the system's now */
    }
    MC_INFO(MC_SUB_GRAPH, "Topo: rank %d could not map the paths of rank %d (%s): computing them",
            comm->rank, nd->local_rank_to_rank[0], mc_error_last());
    mc_error_clear_thread();
  } else if (map != NULL) {
    MC_INFO(MC_SUB_GRAPH,
            "Topo: rank %d's path options differ from rank %d's (other parameters): computing "
            "its paths",
            comm->rank, nd->local_rank_to_rank[0]);
  }
  if (map != NULL) {
    (void)munmap(map, (size_t)msg->bytes);
    map = NULL;
  }
  MC_CHECK_GOTO(mc_topo_compute_paths(sys, opts), res, fail);
  *sys_out = sys;
  return ncclSuccess;
fail:
  if (map != NULL)
    (void)munmap(map, (size_t)msg->bytes);
  mc_topo_system_destroy(sys);
  return res;
}

/*
 * The system and paths of the host, once per host from MESHCCL_PATHS_SHARE
 * local ranks on (host_shares): local rank 0 builds the system from the
 * fused XML, exports it, computes its paths and puts both in a memfd; every
 * other local rank imports the system (equal to the one its own build of the
 * same fused XML would give: the build reads no parameter, and the digests
 * are compared) and maps the paths when its path options give the same
 * digest, else computes its own. NCCL has every rank unpack the host's XML,
 * build its system and compute every path (O(GPUs^2) per rank). A rank that
 * cannot open the memfd (another pid namespace) builds its own from the
 * packed tree. Rank 0 closes its memfd after init's last barrier of the host
 * (every local rank has mapped it then), or when init fails; the mappings
 * stay, and the memory goes with the last of them. Without sharing, each
 * rank builds its system from fused and computes its paths.
 */
static ncclResult_t host_topo(struct ncclComm *comm, struct mc_xml *fused,
                              const struct packed_xml *packed,
                              const struct mc_topo_paths_opts *opts, struct mc_comm_steps *steps,
                              struct mc_topo_system **sys_out)
{
  const struct mc_comm_nodes *nd = &comm->nodes;
  struct mc_topo_system *sys = NULL;
  struct paths_msg msg;
  ncclResult_t res;

  if (!host_shares(comm)) {
    MC_CHECK(system_build(comm, fused, NULL, &sys));
    mc_comm_steps_mark(steps, "system");
    res = mc_topo_compute_paths(sys, opts);
    if (res != ncclSuccess) {
      mc_topo_system_destroy(sys);
      return res;
    }
    mc_comm_steps_mark(steps, "paths");
    *sys_out = sys;
    return ncclSuccess;
  }
  memset(&msg, 0, sizeof(msg));
  if (nd->local_rank == 0)
    MC_CHECK(host_topo_first(comm, fused, opts, &msg, &sys));
  mc_comm_steps_mark(steps, "system");
  res = mc_comm_bcast_tree(comm, nd->local_rank_to_rank, nd->local_ranks, nd->local_rank, &msg,
                           sizeof(msg), TAG_TOPO_PATHS);
  if ((res == ncclSuccess) && (nd->local_rank != 0))
    res = host_topo_take(comm, fused, packed, opts, &msg, &sys);
  if (res != ncclSuccess) {
    mc_topo_system_destroy(sys);
    return res;
  }
  mc_comm_steps_mark(steps, "paths");
  *sys_out = sys;
  return ncclSuccess;
}

/* ncclTopoPrint's lines at INFO (GRAPH), as NCCL logs them. */
static void log_system(const struct mc_topo_system *sys)
{
  char *buf = NULL;
  size_t bytes = 0;
  FILE *f = open_memstream(&buf, &bytes);
  char *save = NULL;

  if (f == NULL)
    return;
  (void)mc_topo_print(sys, f);
  fclose(f);
  for (char *line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
    MC_INFO(MC_SUB_GRAPH, "%s", line);
  free(buf);
}

ncclResult_t mc_comm_stage_topo(struct ncclComm *comm)
{
  struct mc_xml *mine = NULL;
  struct mc_xml *fused = NULL;
  struct mc_topo_system *sys = NULL;
  struct mc_topo_paths_opts opts;
  struct packed_xml packed = {NULL, 0};
  const char *dump = mc_param_str(MC_P_TOPO_DUMP_FILE);
  bool is_dump_rank = (dump != NULL) && (comm->rank == mc_param_int(MC_P_TOPO_DUMP_FILE_RANK));
  /* A rank that may take its system from local rank 0 unpacks the fused
   * tree only if it cannot (host_topo), unless it dumps it. */
  bool defer = host_shares(comm) && !is_dump_rank;
  bool from_file = false;
  bool trimmed = false;
  struct mc_comm_steps steps;
  ncclResult_t res;

  mc_comm_steps_start(&steps);
  MC_CHECK(mc_xml_create(RANK_XML_NODES, &mine));
  MC_CHECK_GOTO(rank_xml(comm, mine, &from_file), res, out);
  mc_comm_steps_mark(&steps, "detect");
  MC_CHECK_GOTO(fuse_host(comm, mine, &steps, defer ? &packed : NULL, &fused), res, out);
  /* The fused tree's <system> is local rank 0's, which a rank that has not
   * unpacked it read itself (the same file, or the same detection). */
  mc_xml_log_loading((packed.buf != NULL) ? mine : fused);
  mc_comm_steps_mark(&steps, "fuse");
  if (is_dump_rank) {
    MC_INFO(MC_SUB_GRAPH | MC_SUB_ENV, "Dumping topology of the host to %s", dump);
    MC_CHECK_GOTO(mc_xml_dump_file(fused, dump), res, out);
  }
  mc_topo_paths_opts_from_params(&opts);
  MC_CHECK_GOTO(host_topo(comm, fused, &packed, &opts, &steps, &sys), res, out);
  MC_CHECK_GOTO(mc_topo_trim_system(sys, comm->rank, comm->n_ranks, &trimmed), res, out);
  mc_comm_steps_mark(&steps, "trim");
  /* NCCL computes the paths again; without a removed GPU they are the same. */
  if (trimmed) {
    MC_CHECK_GOTO(mc_topo_compute_paths(sys, &opts), res, out);
  }
  mc_topo_search_init(sys);
  mc_comm_steps_mark(&steps, "paths2");
  comm->topo.system = sys;
  sys = NULL;
  if (mc_log_enabled(MC_LOG_INFO, MC_SUB_GRAPH))
    log_system(comm->topo.system);
  mc_comm_steps_mark(&steps, "log");
  mc_comm_steps_log(&steps, comm, "Topo");
  res = ncclSuccess;
out:
  free(packed.buf);
  mc_topo_system_destroy(sys);
  mc_xml_destroy(fused);
  mc_xml_destroy(mine);
  return res;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stands for NCCL in front of libnccl-net-mesh.so: it includes only
 * include/nccl_net.h and system headers and knows nothing of meshccl. It
 * dlopens the plugin, takes the ncclNetPlugin_v<N> table of the version
 * given, passes a logger that prints every line with its level and flags,
 * and exchanges data with the other processes of the run (one per host)
 * the way NCCL's NET transport does (NCCL src/transport/net.cc): listen,
 * handles out of band (files in a shared directory), connect and accept
 * polled until non-NULL, regMr, isend/irecv with receives larger than the
 * sends, test until done, close, finalize (v11+), dlclose.
 *
 *   mesh_plugin_driver LIB VERSION RANK NRANKS DIR [MODE]
 *
 * Every ordered pair of ranks carries one connection. The size matrix
 * (0 B .. 8 MiB) is posted at once on every connection (so requests are
 * outstanding together and must match in posting order); every received
 * message is checked byte for byte, with its reported size, and the bytes
 * past it must be untouched. Checks print "ok - ..." / "not ok - ...";
 * logger lines print "LOG <LEVEL> flags=0x<hex> <file>:<line> <message>".
 * MODE:
 *   (none)          the exchange above;
 *   refuse-listen   rank 0 only listens for rank 1 and must accept nothing
 *                   for REFUSE_MS (rank 1 has another secret);
 *   refuse-connect  rank 1 only connects to rank 0 and must not get a
 *                   send comm that carries a message to it.
 * MESH_DRIVER_LOGGER=none passes a NULL logger (the plugin then logs as
 * meshccl does, under NCCL_DEBUG).
 * Exit status: 0 when every check passed, 1 otherwise, 2 on bad usage.
 */
#include "nccl_net.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS   8
#define N_SIZES     8
#define RECV_EXTRA  64    /* receives are posted this much larger than the sends */
#define DEADLINE_MS 60000 /* every wait of the run */
#define REFUSE_MS   8000  /* how long a refused connection must stay refused */
#define COMM_ID     0x6d657368706c7567ull
#define SENTINEL    0xee

static const size_t sizes[N_SIZES] = {0, 1, 3, 4096, 65541, 1048583, 4194304, 8388608};

static int version;
static int rank;
static int n_ranks;
static const char *dir;
static int failed;
static const void *table;
static ncclDebugLogger_t log_fn; /* what init passes: logger, or NULL */
static void *ctx;                /* v11+ */

/* ---------- reporting and the logger ---------- */

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
  va_list ap;

  pthread_mutex_lock(&out_mu);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
}

static void report(bool is_ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(bool is_ok, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (!is_ok)
    failed = 1;
  say("%s - v%d rank %d: %s\n", is_ok ? "ok" : "not ok", version, rank, msg);
}

#define OK(...)  report(true, __VA_ARGS__)
#define BAD(...) report(false, __VA_ARGS__)

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...)
{
  static const char *names[] = {"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE"};
  char msg[2048];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  say("LOG %s flags=0x%lx %s:%d %s\n", ((int)level >= 0) && ((int)level <= 5) ? names[level] : "?",
      flags, (file != NULL) ? file : "?", line, msg);
}

static long long now_ms(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(void)
{
  struct timespec ts = {0, 200000}; /* 0.2 ms */

  nanosleep(&ts, NULL);
}

/* Entries of a /proc/self directory, for leak checks. */
static int count_entries(const char *path)
{
  DIR *d = opendir(path);
  struct dirent *e;
  int n = 0;

  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL)
    n += (e->d_name[0] != '.');
  closedir(d);
  return n; /* the same way before and after: opendir's own fd counts both times */
}

/* ---------- one interface over the five versions ---------- */

#define T(_v) ((const ncclNet_v##_v##_t *)table)

static ncclResult_t net_init(void)
{
  ncclNetCommConfig_v12_t config12 = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ncclNetCommConfig_v11_t config11 = {NCCL_NET_TRAFFIC_CLASS_UNDEF};

  switch (version) {
  case 8:
    return T(8)->init(log_fn);
  case 9:
    return T(9)->init(log_fn);
  case 10:
    return T(10)->init(log_fn, NULL);
  case 11:
    return T(11)->init(&ctx, COMM_ID, &config11, log_fn, NULL);
  default:
    return T(12)->init(&ctx, COMM_ID, &config12, log_fn, NULL);
  }
}

static ncclResult_t net_devices(int *n)
{
  /* devices is the second member of every version */
  return T(8)->devices(n);
}

static ncclResult_t net_listen(void *handle, void **lc)
{
  switch (version) {
  case 8:
    return T(8)->listen(0, handle, lc);
  case 9:
    return T(9)->listen(0, handle, lc);
  case 10:
    return T(10)->listen(0, handle, lc);
  case 11:
    return T(11)->listen(ctx, 0, handle, lc);
  default:
    return T(12)->listen(ctx, 0, handle, lc);
  }
}

static ncclResult_t net_connect(void *handle, void **sc)
{
  ncclNetDeviceHandle_v8_t *dh = NULL;
  ncclNetCommConfig_v10_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};

  switch (version) {
  case 8:
    return T(8)->connect(0, handle, sc, &dh);
  case 9:
    return T(9)->connect(0, handle, sc, &dh);
  case 10:
    return T(10)->connect(0, &config, handle, sc, &dh);
  case 11:
    return T(11)->connect(ctx, 0, handle, sc, &dh);
  default:
    return T(12)->connect(ctx, 0, handle, sc, &dh);
  }
}

/* accept, regMr, regMrDmaBuf, deregMr, iflush, test and the closes have
 * the same prototype and place from v8 to v12. */
static ncclResult_t net_accept(void *lc, void **rc)
{
  ncclNetDeviceHandle_v8_t *dh = NULL;

  return T(8)->accept(lc, rc, &dh);
}

static ncclResult_t net_isend(void *sc, void *data, size_t size, void *mh, void **req)
{
  switch (version) {
  case 8:
    return T(8)->isend(sc, data, (int)size, 0, mh, req);
  case 9:
    return T(9)->isend(sc, data, size, 0, mh, req);
  case 10:
    return T(10)->isend(sc, data, size, 0, mh, NULL, req);
  case 11:
    return T(11)->isend(sc, data, size, 0, mh, NULL, req);
  default:
    return T(12)->isend(sc, data, size, 0, mh, NULL, req);
  }
}

static ncclResult_t net_irecv(void *rc, void *data, size_t size, void *mh, void **req)
{
  int tag = 0;
  int size_i = (int)size;
  void *phandle = NULL;

  switch (version) {
  case 8:
    return T(8)->irecv(rc, 1, &data, &size_i, &tag, &mh, req);
  case 9:
    return T(9)->irecv(rc, 1, &data, &size, &tag, &mh, req);
  case 10:
    return T(10)->irecv(rc, 1, &data, &size, &tag, &mh, &phandle, req);
  case 11:
    return T(11)->irecv(rc, 1, &data, &size, &tag, &mh, &phandle, req);
  default:
    return T(12)->irecv(rc, 1, &data, &size, &tag, &mh, &phandle, req);
  }
}

/* ---------- properties ---------- */

#define CHECK_COMMON(_p)                                                                           \
  do {                                                                                             \
    if (((_p).name == NULL) || ((_p).ptrSupport != NCCL_PTR_HOST) || ((_p).regIsGlobal != 0) ||    \
        ((_p).speed <= 0) || ((_p).maxComms <= 0) || ((_p).maxRecvs != 1) ||                       \
        ((_p).netDeviceType != NCCL_NET_DEVICE_HOST) || ((_p).latency != 0.0f))                    \
      BAD("getProperties: common fields");                                                         \
    else                                                                                           \
      OK("getProperties: %s, pciPath %s, guid %llx, speed %d, maxComms %d, maxRecvs 1, host "      \
         "memory, host device",                                                                    \
         (_p).name, ((_p).pciPath != NULL) ? (_p).pciPath : "NULL", (unsigned long long)(_p).guid, \
         (_p).speed, (_p).maxComms);                                                               \
  } while (0)

#define CHECK_V9(_p)                                                                               \
  do {                                                                                             \
    if (((_p).forceFlush != 0) || ((_p).vProps.ndevs != 1) || ((_p).vProps.devs[0] != 0) ||        \
        ((_p).maxP2pBytes == 0) || ((_p).maxP2pBytes > (size_t)NCCL_MAX_NET_SIZE_BYTES) ||         \
        ((_p).maxCollBytes == 0) || ((_p).maxCollBytes > (size_t)NCCL_MAX_NET_SIZE_BYTES))         \
      BAD("getProperties: forceFlush, vProps, maxP2pBytes, maxCollBytes");                         \
    else                                                                                           \
      OK("getProperties: vProps {1, [0]}, maxP2pBytes %zu, maxCollBytes %zu", (_p).maxP2pBytes,    \
         (_p).maxCollBytes);                                                                       \
  } while (0)

static void check_properties(void)
{
  int n = 0;
  ncclResult_t res;

  res = net_devices(&n);
  if ((res != ncclSuccess) || (n != 1)) {
    BAD("devices: %d, %d devices", (int)res, n);
    return;
  }
  OK("devices: 1");
  if (version == 8) {
    ncclNetProperties_v8_t p;
    memset(&p, 0x5a, sizeof(p));
    res = T(8)->getProperties(0, &p);
    if (res == ncclSuccess)
      CHECK_COMMON(p);
  } else if (version == 9) {
    ncclNetProperties_v9_t p;
    memset(&p, 0x5a, sizeof(p));
    res = T(9)->getProperties(0, &p);
    if (res == ncclSuccess) {
      CHECK_COMMON(p);
      CHECK_V9(p);
    }
  } else if (version == 10) {
    ncclNetProperties_v10_t p;
    memset(&p, 0x5a, sizeof(p));
    res = T(10)->getProperties(0, &p);
    if (res == ncclSuccess) {
      CHECK_COMMON(p);
      CHECK_V9(p);
    }
  } else if (version == 11) {
    ncclNetProperties_v11_t p;
    memset(&p, 0x5a, sizeof(p));
    res = T(11)->getProperties(0, &p);
    if (res == ncclSuccess) {
      CHECK_COMMON(p);
      CHECK_V9(p);
      if (p.maxMultiRequestSize < 1)
        BAD("getProperties: maxMultiRequestSize %d", p.maxMultiRequestSize);
    }
  } else {
    ncclNetProperties_v12_t p;
    memset(&p, 0x5a, sizeof(p));
    res = T(12)->getProperties(0, &p);
    if (res == ncclSuccess) {
      CHECK_COMMON(p);
      CHECK_V9(p);
      if ((p.maxMultiRequestSize < 1) || (p.railId != NCCL_NET_ID_UNDEF) ||
          (p.planeId != NCCL_NET_ID_UNDEF) || (p.vProps.devs[7] != 0))
        BAD("getProperties: maxMultiRequestSize %d, railId %d, planeId %d", p.maxMultiRequestSize,
            p.railId, p.planeId);
      else
        OK("getProperties: maxMultiRequestSize %d, railId -1, planeId -1", p.maxMultiRequestSize);
    }
  }
  if (res != ncclSuccess)
    BAD("getProperties: %d", (int)res);
  /* NCCL (src/graph/topo.cc) keeps the physical devices when makeVDevice is NULL. */
  if (((version >= 9) && (T(9)->makeVDevice != NULL)) || (T(8)->getDeviceMr != NULL) ||
      (T(8)->irecvConsumed != NULL))
    BAD("makeVDevice, getDeviceMr and irecvConsumed must be NULL");
  {
    ncclNetProperties_v12_t any; /* the largest properties of all versions */
    if (T(8)->getProperties(1, (ncclNetProperties_v8_t *)(void *)&any) == ncclSuccess)
      BAD("getProperties of device 1 succeeded");
  }
}

/* ---------- handles through files ---------- */

static void handle_path(char *out, size_t out_bytes, int listener, int sender)
{
  snprintf(out, out_bytes, "%s/v%d.h%d.%d", dir, version, listener, sender);
}

static int handle_put(int sender, const char handle[NCCL_NET_HANDLE_MAXSIZE])
{
  char path[PATH_MAX];
  char tmp[PATH_MAX + 8];
  FILE *f;

  handle_path(path, sizeof(path), rank, sender);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  f = fopen(tmp, "wb");
  if (f == NULL)
    return -1;
  if (fwrite(handle, 1, NCCL_NET_HANDLE_MAXSIZE, f) != NCCL_NET_HANDLE_MAXSIZE) {
    fclose(f);
    return -1;
  }
  if (fclose(f) != 0)
    return -1;
  return rename(tmp, path); /* the reader sees all of it or nothing */
}

static int handle_get(int listener, char handle[NCCL_NET_HANDLE_MAXSIZE])
{
  char path[PATH_MAX];
  long long t0 = now_ms();

  handle_path(path, sizeof(path), listener, rank);
  while (now_ms() - t0 < DEADLINE_MS) {
    FILE *f = fopen(path, "rb");
    if (f != NULL) {
      size_t n = fread(handle, 1, NCCL_NET_HANDLE_MAXSIZE, f);
      fclose(f);
      if (n == NCCL_NET_HANDLE_MAXSIZE)
        return 0;
    }
    usleep(10000);
  }
  return -1;
}

/* ---------- the exchange ---------- */

struct peer {
  void *lc; /* listen comm for this peer's connection to us */
  void *sc;
  void *rc;
  void *send_mh[N_SIZES];
  void *recv_mh[N_SIZES];
  unsigned char *send_buf[N_SIZES];
  unsigned char *recv_buf[N_SIZES];
  int n_reg; /* send and receive buffers registered, by size index */
  void *send_req[N_SIZES];
  void *recv_req[N_SIZES];
  int n_send_posted;
  int n_recv_posted;
  int n_send_done;
  int n_recv_done;
};

static struct peer peers[MAX_RANKS];
/* NCCL keeps the handle buffer of a pending connect: one per peer here too. */
static char handles[MAX_RANKS][NCCL_NET_HANDLE_MAXSIZE];

static unsigned char pattern(int from, int to, int index, size_t k)
{
  return (unsigned char)(k * 131u + (k >> 9) + (unsigned)from * 17u + (unsigned)to * 29u +
                         (unsigned)index * 7u);
}

static int connect_all(void)
{
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  long long t0;
  int n_left;

  for (int p = 0; p < n_ranks; p++) {
    if (p == rank)
      continue;
    memset(handle, 0, sizeof(handle));
    if (net_listen(handle, &peers[p].lc) != ncclSuccess || (peers[p].lc == NULL)) {
      BAD("listen for rank %d", p);
      return -1;
    }
    if (handle_put(p, handle) != 0) {
      BAD("writing the handle for rank %d in %s", p, dir);
      return -1;
    }
  }
  for (int p = 0; p < n_ranks; p++) {
    if ((p != rank) && (handle_get(p, handles[p]) != 0)) {
      BAD("no handle from rank %d within %d ms", p, DEADLINE_MS);
      return -1;
    }
  }
  t0 = now_ms();
  do {
    n_left = 0;
    for (int p = 0; p < n_ranks; p++) {
      if (p == rank)
        continue;
      if ((peers[p].sc == NULL) && (net_connect(handles[p], &peers[p].sc) != ncclSuccess)) {
        BAD("connect to rank %d", p);
        return -1;
      }
      if ((peers[p].rc == NULL) && (net_accept(peers[p].lc, &peers[p].rc) != ncclSuccess)) {
        BAD("accept from rank %d", p);
        return -1;
      }
      n_left += (peers[p].sc == NULL) + (peers[p].rc == NULL);
    }
    if (n_left > 0)
      nap();
  } while ((n_left > 0) && (now_ms() - t0 < DEADLINE_MS));
  if (n_left > 0) {
    BAD("%d connections not up within %d ms", n_left, DEADLINE_MS);
    return -1;
  }
  OK("connected to and accepted from %d peers in %lld ms", n_ranks - 1, now_ms() - t0);
  return 0;
}

static int register_all(void)
{
  for (int p = 0; p < n_ranks; p++) {
    struct peer *x = &peers[p];
    if (p == rank)
      continue;
    for (int i = 0; i < N_SIZES; i++) {
      x->send_buf[i] = malloc(sizes[i] + 1);
      x->recv_buf[i] = malloc(sizes[i] + RECV_EXTRA);
      if ((x->send_buf[i] == NULL) || (x->recv_buf[i] == NULL)) {
        BAD("out of memory");
        return -1;
      }
      for (size_t k = 0; k < sizes[i]; k++)
        x->send_buf[i][k] = pattern(rank, p, i, k);
      memset(x->recv_buf[i], SENTINEL, sizes[i] + RECV_EXTRA);
      if ((T(8)->regMr(x->sc, x->send_buf[i], sizes[i] + 1, NCCL_PTR_HOST, &x->send_mh[i]) !=
           ncclSuccess) ||
          (T(8)->regMr(x->rc, x->recv_buf[i], sizes[i] + RECV_EXTRA, NCCL_PTR_HOST,
                       &x->recv_mh[i]) != ncclSuccess)) {
        BAD("regMr for rank %d", p);
        return -1;
      }
      x->n_reg = i + 1;
    }
  }
  return 0;
}

static int check_recv(int p, int i, int got)
{
  const unsigned char *b = peers[p].recv_buf[i];

  if ((size_t)got != sizes[i]) {
    BAD("from rank %d: message %d reported %d bytes, %zu sent", p, i, got, sizes[i]);
    return -1;
  }
  for (size_t k = 0; k < sizes[i]; k++) {
    if (b[k] != pattern(p, rank, i, k)) {
      BAD("from rank %d: message %d (%zu bytes) differs at byte %zu", p, i, sizes[i], k);
      return -1;
    }
  }
  for (size_t k = sizes[i]; k < sizes[i] + RECV_EXTRA; k++) {
    if (b[k] != SENTINEL) {
      BAD("from rank %d: message %d wrote past its %zu bytes", p, i, sizes[i]);
      return -1;
    }
  }
  return 0;
}

/* Posts what can be posted, in order, and tests what is outstanding; the
 * number of requests still to finish. */
static int progress(int *err)
{
  int n_left = 0;

  for (int p = 0; p < n_ranks; p++) {
    struct peer *x = &peers[p];
    if (p == rank)
      continue;
    while (x->n_recv_posted < N_SIZES) {
      int i = x->n_recv_posted;
      if (net_irecv(x->rc, x->recv_buf[i], sizes[i] + RECV_EXTRA, x->recv_mh[i], &x->recv_req[i]) !=
          ncclSuccess) {
        BAD("irecv %d from rank %d", i, p);
        *err = 1;
        return 0;
      }
      if (x->recv_req[i] == NULL)
        break; /* would block: again later, as NCCL does */
      x->n_recv_posted++;
    }
    while (x->n_send_posted < N_SIZES) {
      int i = x->n_send_posted;
      if (net_isend(x->sc, x->send_buf[i], sizes[i], x->send_mh[i], &x->send_req[i]) !=
          ncclSuccess) {
        BAD("isend %d to rank %d", i, p);
        *err = 1;
        return 0;
      }
      if (x->send_req[i] == NULL)
        break;
      x->n_send_posted++;
    }
    while (x->n_send_done < x->n_send_posted) {
      int done = 0;
      int got = -1;
      int i = x->n_send_done;
      if (T(8)->test(x->send_req[i], &done, &got) != ncclSuccess) {
        BAD("test of send %d to rank %d", i, p);
        *err = 1;
        return 0;
      }
      if (!done)
        break;
      if ((size_t)got != sizes[i]) {
        BAD("send %d to rank %d reported %d bytes, %zu posted", i, p, got, sizes[i]);
        *err = 1;
      }
      x->n_send_done++;
    }
    while (x->n_recv_done < x->n_recv_posted) {
      int done = 0;
      int got = -1;
      int i = x->n_recv_done;
      if (T(8)->test(x->recv_req[i], &done, &got) != ncclSuccess) {
        BAD("test of receive %d from rank %d", i, p);
        *err = 1;
        return 0;
      }
      if (!done)
        break;
      if (check_recv(p, i, got) != 0)
        *err = 1;
      x->n_recv_done++;
    }
    n_left += 2 * N_SIZES - x->n_send_done - x->n_recv_done;
  }
  return n_left;
}

static void exchange(void)
{
  long long t0 = now_ms();
  int err = 0;
  int n_left;

  do {
    n_left = progress(&err);
    if ((n_left > 0) && !err)
      nap();
  } while ((n_left > 0) && !err && (now_ms() - t0 < DEADLINE_MS));
  if (err)
    return;
  if (n_left > 0) {
    BAD("%d requests not done within %d ms", n_left, DEADLINE_MS);
    return;
  }
  OK("%d sizes (0 B .. 8 MiB) both ways with %d peers, bit-exact, receives %d bytes larger, in "
     "%lld "
     "ms",
     N_SIZES, n_ranks - 1, RECV_EXTRA, now_ms() - t0);
}

/* Calls that must be refused or complete at once. */
static void check_edges(void)
{
  int p = (rank == 0) ? 1 : 0;
  struct peer *x = &peers[p];
  void *req = NULL;
  void *mh = NULL;
  int done = 0;
  int size = 0;

  if (T(8)->regMrDmaBuf(x->sc, x->send_buf[0], 4096, NCCL_PTR_DMABUF, 0, 0, &mh) == ncclSuccess)
    BAD("regMrDmaBuf accepted");
  else
    OK("regMrDmaBuf refused (host memory only)");
  if (T(8)->regMr(x->sc, x->send_buf[0], 16, NCCL_PTR_CUDA, &mh) == ncclSuccess)
    BAD("regMr of CUDA memory accepted");
  if (version >= 9) {
    if (net_isend(x->sc, x->send_buf[0], (size_t)INT_MAX + 1, x->send_mh[0], &req) == ncclSuccess)
      BAD("isend of INT_MAX + 1 bytes accepted (test() reports an int)");
    else
      OK("isend above INT_MAX refused");
  } else {
    if (T(8)->isend(x->sc, x->send_buf[0], -1, 0, x->send_mh[0], &req) == ncclSuccess)
      BAD("isend of -1 bytes accepted");
    else
      OK("isend of a negative size refused");
  }
  req = NULL;
  if ((T(8)->iflush(x->rc, 1, (void **)&x->recv_buf[0], &size, &x->recv_mh[0], &req) !=
       ncclSuccess) ||
      ((req != NULL) && ((T(8)->test(req, &done, NULL) != ncclSuccess) || !done)))
    BAD("iflush does not complete at once");
  else
    OK("iflush completes at once");
  if (version >= 11) {
    ncclNetAttr_v11_t attr;
    memset(&attr, 0, sizeof(attr));
    if (T(11)->setNetAttr(ctx, &attr) != ncclSuccess)
      BAD("setNetAttr");
  }
}

static void close_all(void)
{
  int bad = 0;

  for (int p = 0; p < n_ranks; p++) {
    struct peer *x = &peers[p];
    if (p == rank)
      continue;
    for (int i = 0; i < N_SIZES; i++) {
      if (i < x->n_reg) {
        bad |= (T(8)->deregMr(x->sc, x->send_mh[i]) != ncclSuccess);
        bad |= (T(8)->deregMr(x->rc, x->recv_mh[i]) != ncclSuccess);
      }
      free(x->send_buf[i]);
      free(x->recv_buf[i]);
    }
    if (x->sc != NULL)
      bad |= (T(8)->closeSend(x->sc) != ncclSuccess);
    if (x->rc != NULL)
      bad |= (T(8)->closeRecv(x->rc) != ncclSuccess);
    if (x->lc != NULL)
      bad |= (T(8)->closeListen(x->lc) != ncclSuccess);
  }
  if (bad)
    BAD("deregMr / closeSend / closeRecv / closeListen");
  else
    OK("closed every comm");
}

/* ---------- refusal ---------- */

static void refuse_listen(void)
{
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  long long t0;
  void *rc = NULL;

  memset(handle, 0, sizeof(handle));
  if ((net_listen(handle, &peers[1].lc) != ncclSuccess) || (handle_put(1, handle) != 0)) {
    BAD("listen for rank 1");
    return;
  }
  t0 = now_ms();
  while ((rc == NULL) && (now_ms() - t0 < REFUSE_MS)) {
    if (net_accept(peers[1].lc, &rc) != ncclSuccess)
      break;
    usleep(1000);
  }
  if (rc != NULL) {
    BAD("accepted a connection from a process with another secret");
    T(8)->closeRecv(rc);
  } else {
    OK("nothing accepted from a process with another secret in %d ms", REFUSE_MS);
  }
}

static void refuse_connect(void)
{
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  long long t0;
  ncclResult_t res = ncclSuccess;

  if (handle_get(0, handle) != 0) {
    BAD("no handle from rank 0");
    return;
  }
  t0 = now_ms();
  while ((peers[0].sc == NULL) && (now_ms() - t0 < REFUSE_MS)) {
    res = net_connect(handle, &peers[0].sc);
    if (res != ncclSuccess)
      break;
    usleep(1000);
  }
  if (res != ncclSuccess)
    OK("connect refused: error %d", (int)res);
  else if (peers[0].sc == NULL)
    OK("connect never completed in %d ms", REFUSE_MS);
  else
    BAD("connected to a process with another secret");
}

/* ---------- main ---------- */

int main(int argc, char **argv)
{
  const char *mode = (argc > 6) ? argv[6] : "";
  char sym[32];
  void *lib;
  int fds0;
  int threads0;

  if (argc < 6) {
    fprintf(stderr, "usage: %s LIB VERSION RANK NRANKS DIR [refuse-listen|refuse-connect]\n",
            argv[0]);
    return 2;
  }
  version = atoi(argv[2]);
  rank = atoi(argv[3]);
  n_ranks = atoi(argv[4]);
  dir = argv[5];
  if ((version < 8) || (version > 12) || (n_ranks < 2) || (n_ranks > MAX_RANKS) || (rank < 0) ||
      (rank >= n_ranks)) {
    fprintf(stderr, "%s: version 8..12, 2..%d ranks\n", argv[0], MAX_RANKS);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  log_fn = ((getenv("MESH_DRIVER_LOGGER") != NULL) &&
            (strcmp(getenv("MESH_DRIVER_LOGGER"), "none") == 0))
               ? NULL
               : logger;
  fds0 = count_entries("/proc/self/fd");
  threads0 = count_entries("/proc/self/task");
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    BAD("dlopen: %s", dlerror());
    return 1;
  }
  snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", version);
  table = dlsym(lib, sym);
  if (table == NULL) {
    BAD("no %s: %s", sym, dlerror());
    dlclose(lib);
    return 1;
  }
  if ((T(8)->name == NULL) || (strcmp(T(8)->name, "Mesh") != 0))
    BAD("name %s", (T(8)->name != NULL) ? T(8)->name : "NULL");
  if (net_init() != ncclSuccess) {
    BAD("init");
    dlclose(lib);
    return 1;
  }
  OK("%s: init", sym);
  check_properties();
  if (strcmp(mode, "refuse-listen") == 0) {
    refuse_listen();
  } else if (strcmp(mode, "refuse-connect") == 0) {
    refuse_connect();
  } else if ((connect_all() == 0) && (register_all() == 0)) {
    exchange();
    check_edges();
  }
  close_all();
  if ((version >= 11) && (T(11)->finalize(ctx) != ncclSuccess))
    BAD("finalize");
  if (dlclose(lib) != 0)
    BAD("dlclose: %s", dlerror());
  /* The helper threads and sockets of the plugin are gone after close,
   * finalize (v11+) or the library's destructor (v8..v10, at dlclose). */
  if ((count_entries("/proc/self/fd") != fds0) || (count_entries("/proc/self/task") != threads0))
    BAD("leaked: %d fds and %d threads before, %d and %d after", fds0, threads0,
        count_entries("/proc/self/fd"), count_entries("/proc/self/task"));
  else
    OK("no fd or thread left after dlclose");
  say("%s - v%d rank %d: done\n", failed ? "not ok" : "ok", version, rank);
  return failed;
}

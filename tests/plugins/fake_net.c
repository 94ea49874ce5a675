/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A third-party NCCL net plugin for tests, built apart from meshccl: it
 * includes only include/nccl_net.h and system headers. Compiled once per
 * ABI version (-DFAKE_NET_VERSION=6..12) into libnccl-net-fake<N>.so, which
 * exports only ncclNetPlugin_v<N>; FAKE_NET_VERSION=0 builds a library that
 * exports no plugin symbol at all.
 *
 * A real net over TCP: one device (FAKE_NET_ADDR, default 127.0.0.1), one
 * non-blocking socket per comm, each message an 8-byte size then the
 * payload, matched in posting order. listen never blocks; connect and
 * accept return a NULL comm until the socket is connected; every third
 * isend/irecv returns a NULL request (the caller must retry); test moves
 * bytes and reports the real sizes. Environment knobs (read at init):
 *   FAKE_NET_NO_SIZES=1   test() never writes sizes (some plugins do not)
 *   FAKE_NET_HANDSHAKE=1  connect and accept each need the other side to call
 *                         in (as plugins with their own handshake, like
 *                         nccl-fastsocket): the connector sends a hello once
 *                         its socket is up, accept returns the comm only
 *                         after reading it and sending an ack, and connect
 *                         returns its comm only once it reads the ack
 *   FAKE_NET_BLOCKING=1   as google's nccl-fastsocket: connect returns its
 *                         comm at once while the connection is still being
 *                         made, accept blocks (up to 60 s) until a connector
 *                         arrives and acks it, and the first test() of a
 *                         send comm blocks (up to 60 s) until that ack came:
 *                         a caller that blocks in accept before it has
 *                         called connect for its own sends deadlocks with a
 *                         peer that does the same (a group whose receive
 *                         comes before its send: mp_coll's recvsend). Its
 *                         requests also follow fastsocket's rules: at most
 *                         16 outstanding per comm (else isend/irecv fail,
 *                         "unable to allocate requests") and test() only on
 *                         the oldest one not yet reported done (else it
 *                         fails, "test called with invalid request")
 *   FAKE_NET_HANG_TEST=1  the first test() of each send comm blocks for
 *                         FAKE_BLOCK_MS * 2 (120 s), as nccl-fastsocket's
 *                         does forever when its connection is never accepted
 *   FAKE_NET_INIT_FAIL=N  the version-N build's init() fails with ncclSystemError
 *   FAKE_NET_NDEVS=N      N physical devices (1..4, default 1) fake0..fake<N-1>,
 *                         all on the same address; device d's speed is
 *                         12345 + 1000 * d
 *   FAKE_NET_PCI=P0,P1..  device d's pciPath is Pd ("" for none; default
 *                         /sys/devices/pci0000:00/0000:00:0f.0 for every one)
 * makeVDevice (v10, v12) appends a device named "<a>+<b>..." whose speed is
 * the sum of its devices'. Its logger lines start with "FAKE/Plugin".
 */
#include "nccl_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FAKE_CAT2(_a, _b, _c) _a##_b##_c
#define FAKE_CAT(_a, _b, _c)  FAKE_CAT2(_a, _b, _c)

#if FAKE_NET_VERSION > 0

#define FAKE_MAGIC    0xfa4e4e7du
#define FAKE_MAX_REQS NCCL_NET_MAX_REQUESTS
#define FAKE_MAX_VDEV 4
#define FAKE_MAX_PHYS 4
#define FAKE_MAX_DEVS (FAKE_MAX_PHYS + FAKE_MAX_VDEV)
#define FAKE_STR      256

typedef FAKE_CAT(ncclNet_v, FAKE_NET_VERSION, _t) fake_net_t;
typedef FAKE_CAT(ncclNetProperties_v, FAKE_NET_VERSION, _t) fake_props_t;
#if FAKE_NET_VERSION <= 8
typedef int fake_size_t; /* isend / irecv sizes */
#else
typedef size_t fake_size_t;
#endif
#if FAKE_NET_VERSION <= 7
typedef int fake_reg_size_t;
#else
typedef size_t fake_reg_size_t;
#endif

struct fake_handle {
  uint32_t magic;
  uint32_t stage; /* connect: 0 nothing yet, 1 connecting (fd valid) */
  int fd;
  struct sockaddr_in addr;
};

#define FAKE_HELLO 'h'
#define FAKE_ACK   'a'

struct fake_listen {
  int fd;
  int pending[16]; /* accepted sockets whose hello has not come (handshake mode) */
  int n_pending;
};

struct fake_comm;

struct fake_req {
  struct fake_comm *comm;
  int used;
  int is_send;
  char *data;
  size_t size; /* posted */
  uint64_t hdr;
  size_t hdr_done;
  size_t done;
  int complete;
};

struct fake_comm {
  int fd;
  int is_send;
  int awaits_ack; /* blocking mode: the acceptor's ack has not been read */
  unsigned calls;
  struct fake_req reqs[FAKE_MAX_REQS];
  unsigned head; /* FIFO of posted requests, in posting order */
  unsigned tail;
  unsigned tested; /* requests test() reported done (blocking mode: in order) */
  int hung;        /* FAKE_NET_HANG_TEST: its first test() blocked */
  struct fake_req *fifo[FAKE_MAX_REQS];
};

static ncclDebugLogger_t logger;
static int no_sizes;
static int handshake;
static int blocking;
static int hang_test;

#define FAKE_BLOCK_MS       60000
#define FAKE_BLOCK_MAX_REQS 16 /* nccl-fastsocket's MAX_REQUESTS */
static struct in_addr dev_addr;
static int n_vdevs;
static int n_phys = 1;
/* Per device: name, pciPath, speed, and for virtual ones the fused devices. */
static char dev_names[FAKE_MAX_DEVS][FAKE_STR];
static char dev_pci[FAKE_MAX_DEVS][FAKE_STR];
static int dev_speed[FAKE_MAX_DEVS];
static int dev_nfused[FAKE_MAX_DEVS];
static int dev_fused[FAKE_MAX_DEVS][FAKE_MAX_PHYS];

#define FAKE_LOG(_lvl, ...)                                                                        \
  do {                                                                                             \
    if (logger != NULL)                                                                            \
      logger((_lvl), NCCL_NET, __FILE__, __LINE__, __VA_ARGS__);                                   \
  } while (0)

static int env_is(const char *name)
{
  const char *v = getenv(name);
  return (v != NULL) && (strcmp(v, "1") == 0);
}

/* The physical devices, from FAKE_NET_NDEVS and FAKE_NET_PCI. */
static void fake_devs_init(void)
{
  const char *nd = getenv("FAKE_NET_NDEVS");
  const char *pci = getenv("FAKE_NET_PCI");

  n_phys = (nd != NULL) ? atoi(nd) : 1;
  if ((n_phys < 1) || (n_phys > FAKE_MAX_PHYS))
    n_phys = 1;
  for (int d = 0; d < n_phys; d++) {
    snprintf(dev_names[d], FAKE_STR, "fake%d", d);
    snprintf(dev_pci[d], FAKE_STR, "/sys/devices/pci0000:00/0000:00:0f.0");
    dev_speed[d] = 12345 + 1000 * d;
    dev_nfused[d] = 1;
    dev_fused[d][0] = d;
  }
  for (int d = 0; (pci != NULL) && (d < n_phys); d++) {
    size_t len = strcspn(pci, ",");
    if (len >= FAKE_STR)
      len = FAKE_STR - 1;
    memcpy(dev_pci[d], pci, len);
    dev_pci[d][len] = '\0';
    pci = (pci[len] == ',') ? pci + len + 1 : NULL;
  }
}

static ncclResult_t fake_init_common(ncclDebugLogger_t log_fn)
{
  const char *addr = getenv("FAKE_NET_ADDR");

  logger = log_fn;
  no_sizes = env_is("FAKE_NET_NO_SIZES");
  handshake = env_is("FAKE_NET_HANDSHAKE");
  blocking = env_is("FAKE_NET_BLOCKING");
  hang_test = env_is("FAKE_NET_HANG_TEST");
  if ((getenv("FAKE_NET_INIT_FAIL") != NULL) &&
      (atoi(getenv("FAKE_NET_INIT_FAIL")) == FAKE_NET_VERSION)) {
    FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: init fails as FAKE_NET_INIT_FAIL asks");
    return ncclSystemError;
  }
  if (inet_pton(AF_INET, (addr != NULL) ? addr : "127.0.0.1", &dev_addr) != 1)
    return ncclInvalidUsage;
  if (n_vdevs == 0) /* the devices stay as they are once fused */
    fake_devs_init();
  FAKE_LOG(NCCL_LOG_INFO, "FAKE/Plugin: v%d initialised%s", FAKE_NET_VERSION,
           no_sizes ? " (sizes not reported)" : "");
  return ncclSuccess;
}

#if FAKE_NET_VERSION >= 11
static ncclResult_t fake_init(void **ctx, uint64_t comm_id,
                              FAKE_CAT(ncclNetCommConfig_v, FAKE_NET_VERSION, _t) * config,
                              ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn)
{
  uint64_t *c;
  ncclResult_t res;

  (void)config;
  (void)prof_fn;
  res = fake_init_common(log_fn);
  if (res != ncclSuccess)
    return res;
  c = malloc(sizeof(*c));
  if (c == NULL)
    return ncclSystemError;
  *c = comm_id;
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t fake_finalize(void *ctx)
{
  free(ctx);
  return ncclSuccess;
}
#elif FAKE_NET_VERSION == 10
static ncclResult_t fake_init(ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn)
{
  (void)prof_fn;
  return fake_init_common(log_fn);
}
#else
static ncclResult_t fake_init(ncclDebugLogger_t log_fn)
{
  return fake_init_common(log_fn);
}
#endif

static ncclResult_t fake_devices(int *ndev)
{
  *ndev = n_phys + n_vdevs;
  return ncclSuccess;
}

static ncclResult_t fake_get_properties(int dev, fake_props_t *props)
{
  if ((dev < 0) || (dev >= n_phys + n_vdevs))
    return ncclInvalidArgument;
  memset(props, 0, sizeof(*props));
  props->name = dev_names[dev];
  props->pciPath = dev_pci[dev];
  props->guid = 0xfa4e0000ull + (uint64_t)dev;
  props->ptrSupport = NCCL_PTR_HOST;
  props->speed = dev_speed[dev];
  props->port = 1;
  props->latency = 1.5f;
  props->maxComms = 4096;
  props->maxRecvs = 1;
#if FAKE_NET_VERSION >= 8
  props->regIsGlobal = 1;
#endif
#if FAKE_NET_VERSION >= 9
  props->forceFlush = 0;
  props->vProps.ndevs = dev_nfused[dev];
  for (int i = 0; i < dev_nfused[dev]; i++)
    props->vProps.devs[i] = dev_fused[dev][i];
  props->maxP2pBytes = (size_t)3 << 28;
  props->maxCollBytes = 0;
#endif
#if FAKE_NET_VERSION >= 11
  props->maxMultiRequestSize = 4;
#endif
#if FAKE_NET_VERSION >= 12
  props->railId = 2;
  props->planeId = 3;
#endif
  return ncclSuccess;
}

#if (FAKE_NET_VERSION == 10) || (FAKE_NET_VERSION == 12)
/* Only v10 and v12 implement makeVDevice; v9 and v11 leave it NULL. */
static ncclResult_t fake_make_vdevice(int *d,
                                      FAKE_CAT(ncclNetVDeviceProps_v, FAKE_NET_VERSION, _t) * props)
{
  int v = n_phys + n_vdevs;
  char name[FAKE_STR];
  size_t len = 0;

  if ((props->ndevs < 1) || (props->ndevs > FAKE_MAX_PHYS) || (n_vdevs == FAKE_MAX_VDEV))
    return ncclInvalidUsage;
  name[0] = '\0';
  dev_pci[v][0] = '\0';
  dev_speed[v] = 0;
  for (int i = 0; i < props->ndevs; i++) {
    int p = props->devs[i];
    if ((p < 0) || (p >= n_phys))
      return ncclInvalidArgument;
    len += (size_t)snprintf(name + len, FAKE_STR - len, "%s%s", (i > 0) ? "+" : "", dev_names[p]);
    if (len >= FAKE_STR)
      return ncclInvalidUsage;
    dev_speed[v] += dev_speed[p];
    dev_fused[v][i] = p;
  }
  if (props->ndevs == 1)
    snprintf(name, FAKE_STR, "%s+v", dev_names[props->devs[0]]);
  memcpy(dev_names[v], name, FAKE_STR);
  dev_nfused[v] = props->ndevs;
  *d = v;
  n_vdevs++;
  FAKE_LOG(NCCL_LOG_INFO, "FAKE/Plugin: made virtual device %d %s of %d devices", v, dev_names[v],
           props->ndevs);
  return ncclSuccess;
}
#endif

static int set_nonblock(int fd)
{
  int one = 1;
  int fl = fcntl(fd, F_GETFL);

  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return ((fl < 0) || (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)) ? -1 : 0;
}

static ncclResult_t fake_listen_common(int dev, void *opaque, void **listen_comm)
{
  struct fake_handle *h = opaque;
  struct fake_listen *l;
  struct sockaddr_in sa;
  socklen_t len = sizeof(sa);
  int fd;

  if ((dev < 0) || (dev >= n_phys + n_vdevs))
    return ncclInvalidArgument;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return ncclSystemError;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr = dev_addr;
  if ((bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) || (listen(fd, 16) != 0) ||
      (getsockname(fd, (struct sockaddr *)&sa, &len) != 0) || (set_nonblock(fd) != 0)) {
    FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: listen failed: %s", strerror(errno));
    close(fd);
    return ncclSystemError;
  }
  l = calloc(1, sizeof(*l));
  if (l == NULL) {
    close(fd);
    return ncclSystemError;
  }
  l->fd = fd;
  memset(h, 0, NCCL_NET_HANDLE_MAXSIZE);
  h->magic = FAKE_MAGIC;
  h->fd = -1;
  h->addr = sa;
  *listen_comm = l;
  return ncclSuccess;
}

static ncclResult_t new_comm(int fd, int is_send, void **comm)
{
  struct fake_comm *c = calloc(1, sizeof(*c));

  if (c == NULL) {
    close(fd);
    return ncclSystemError;
  }
  c->fd = fd;
  c->is_send = is_send;
  *comm = c;
  return ncclSuccess;
}

/* The connect stage lives in the handle, as NCCL's IB plugin keeps it. */
static ncclResult_t fake_connect_common(int dev, void *opaque, void **send_comm)
{
  struct fake_handle *h = opaque;
  struct pollfd pfd;
  int err = 0;
  socklen_t len = sizeof(err);

  (void)dev;
  *send_comm = NULL;
  if (h->magic != FAKE_MAGIC)
    return ncclInvalidArgument;
  if (h->stage == 0) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if ((fd < 0) || (set_nonblock(fd) != 0)) {
      if (fd >= 0)
        close(fd);
      return ncclSystemError;
    }
    if ((connect(fd, (struct sockaddr *)&h->addr, sizeof(h->addr)) != 0) &&
        (errno != EINPROGRESS)) {
      FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: connect failed: %s", strerror(errno));
      close(fd);
      return ncclRemoteError;
    }
    h->fd = fd;
    h->stage = 1;
    if (blocking) { /* the comm at once; the connection completes later */
      ncclResult_t res = new_comm(fd, 1, send_comm);
      h->stage = 2;
      if (res == ncclSuccess)
        ((struct fake_comm *)*send_comm)->awaits_ack = 1;
      return res;
    }
    return ncclSuccess; /* never done on the first call: the caller must come back */
  }
  pfd.fd = h->fd;
  pfd.events = POLLOUT;
  if (poll(&pfd, 1, 0) <= 0)
    return ncclSuccess;
  if ((getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) || (err != 0)) {
    FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: connect failed: %s", strerror(err));
    close(h->fd);
    h->fd = -1;
    h->stage = 0;
    return ncclRemoteError;
  }
  if (!handshake) {
    h->stage = 2;
    return new_comm(h->fd, 1, send_comm);
  }
  if (h->stage == 1) { /* up: say hello, then wait for the acceptor's ack */
    char hello = FAKE_HELLO;
    if (send(h->fd, &hello, 1, MSG_NOSIGNAL) != 1)
      return ncclSuccess;
    h->stage = 3;
  }
  {
    char ack = 0;
    ssize_t n = recv(h->fd, &ack, 1, MSG_DONTWAIT);
    if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
      return ncclSuccess;
    if ((n != 1) || (ack != FAKE_ACK)) {
      FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: no ack from the acceptor");
      return ncclRemoteError;
    }
  }
  h->stage = 2;
  return new_comm(h->fd, 1, send_comm);
}

static ncclResult_t fake_accept_hello(struct fake_listen *l, void **recv_comm);

static ncclResult_t fake_accept_common(void *listen_comm, void **recv_comm)
{
  struct fake_listen *l = listen_comm;
  int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);

  *recv_comm = NULL;
  if ((fd < 0) && blocking) {
    struct pollfd pfd = {.fd = l->fd, .events = POLLIN, .revents = 0};
    if (poll(&pfd, 1, FAKE_BLOCK_MS) <= 0) {
      FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: accept: no connector within %d ms", FAKE_BLOCK_MS);
      return ncclSystemError;
    }
    fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
  }
  if ((fd >= 0) && blocking) {
    char ack = FAKE_ACK;
    if (send(fd, &ack, 1, MSG_NOSIGNAL) != 1) {
      close(fd);
      return ncclSystemError;
    }
  }
  if ((fd < 0) && handshake && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
    return fake_accept_hello(l, recv_comm);
  if (fd < 0)
    return ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)) ? ncclSuccess
                                                                             : ncclSystemError;
  if (set_nonblock(fd) != 0) {
    close(fd);
    return ncclSystemError;
  }
  if (!handshake)
    return new_comm(fd, 0, recv_comm);
  if (l->n_pending == 16) {
    close(fd);
    return ncclSystemError;
  }
  l->pending[l->n_pending++] = fd;
  return ncclSuccess;
}

/* Handshake mode: the first accepted socket whose hello came is acked and
 * becomes the comm. */
static ncclResult_t fake_accept_hello(struct fake_listen *l, void **recv_comm)
{
  for (int i = 0; i < l->n_pending; i++) {
    char c = 0;
    ssize_t n = recv(l->pending[i], &c, 1, MSG_DONTWAIT);
    int fd = l->pending[i];

    if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
      continue;
    l->pending[i] = l->pending[--l->n_pending];
    if ((n != 1) || (c != FAKE_HELLO)) {
      close(fd);
      return ncclRemoteError;
    }
    c = FAKE_ACK;
    if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
      close(fd);
      return ncclRemoteError;
    }
    return new_comm(fd, 0, recv_comm);
  }
  return ncclSuccess;
}

#if FAKE_NET_VERSION >= 11
static ncclResult_t fake_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
  (void)ctx;
  return fake_listen_common(dev, handle, listen_comm);
}
static ncclResult_t fake_connect(void *ctx, int dev, void *handle, void **send_comm,
                                 ncclNetDeviceHandle_v11_t **dev_comm)
{
  (void)ctx;
  (void)dev_comm;
  return fake_connect_common(dev, handle, send_comm);
}
#elif FAKE_NET_VERSION == 10
static ncclResult_t fake_listen(int dev, void *handle, void **listen_comm)
{
  return fake_listen_common(dev, handle, listen_comm);
}
static ncclResult_t fake_connect(int dev, ncclNetCommConfig_v10_t *config, void *handle,
                                 void **send_comm, ncclNetDeviceHandle_v10_t **dev_comm)
{
  (void)config;
  (void)dev_comm;
  return fake_connect_common(dev, handle, send_comm);
}
#elif FAKE_NET_VERSION >= 7
static ncclResult_t fake_listen(int dev, void *handle, void **listen_comm)
{
  return fake_listen_common(dev, handle, listen_comm);
}
static ncclResult_t fake_connect(int dev, void *handle, void **send_comm,
                                 ncclNetDeviceHandle_v7_t **dev_comm)
{
  (void)dev_comm;
  return fake_connect_common(dev, handle, send_comm);
}
#else
static ncclResult_t fake_listen(int dev, void *handle, void **listen_comm)
{
  return fake_listen_common(dev, handle, listen_comm);
}
static ncclResult_t fake_connect(int dev, void *handle, void **send_comm)
{
  return fake_connect_common(dev, handle, send_comm);
}
#endif

#if FAKE_NET_VERSION >= 7
static ncclResult_t fake_accept(void *listen_comm, void **recv_comm,
                                ncclNetDeviceHandle_v7_t **dev_comm)
{
  (void)dev_comm;
  return fake_accept_common(listen_comm, recv_comm);
}
#else
static ncclResult_t fake_accept(void *listen_comm, void **recv_comm)
{
  return fake_accept_common(listen_comm, recv_comm);
}
#endif

/* Registration: a handle that remembers the range, checked at isend/irecv. */
struct fake_mr {
  char *base;
  size_t size;
};

static ncclResult_t fake_reg_mr(void *comm, void *data, fake_reg_size_t size, int type,
                                void **mhandle)
{
  struct fake_mr *mr;

  (void)comm;
  if ((type != NCCL_PTR_HOST) || ((long long)size < 0))
    return ncclInvalidArgument;
  mr = malloc(sizeof(*mr));
  if (mr == NULL)
    return ncclSystemError;
  mr->base = data;
  mr->size = (size_t)size;
  *mhandle = mr;
  return ncclSuccess;
}

static ncclResult_t fake_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                       uint64_t offset, int fd, void **mhandle)
{
  (void)comm;
  (void)data;
  (void)size;
  (void)type;
  (void)offset;
  (void)fd;
  (void)mhandle;
  return ncclInvalidUsage;
}

static ncclResult_t fake_dereg_mr(void *comm, void *mhandle)
{
  (void)comm;
  free(mhandle);
  return ncclSuccess;
}

/* Data must lie inside its registration, as RDMA would require. */
static int in_mr(const void *mhandle, const void *data, size_t size)
{
  const struct fake_mr *mr = mhandle;
  const char *p = data;

  return (mr != NULL) && (p >= mr->base) && (p + size <= mr->base + mr->size);
}

static ncclResult_t post(struct fake_comm *c, int is_send, void *data, size_t size, void **request)
{
  struct fake_req *r = NULL;

  *request = NULL;
  if (blocking && (c->tail - c->tested >= FAKE_BLOCK_MAX_REQS)) {
    FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: unable to allocate requests (%d outstanding)",
             FAKE_BLOCK_MAX_REQS);
    return ncclInternalError;
  }
  if ((++c->calls % 3) == 0)
    return ncclSuccess; /* "cannot post now": the caller retries */
  if (c->tail - c->head >= FAKE_MAX_REQS)
    return ncclSuccess;
  for (int i = 0; (i < FAKE_MAX_REQS) && (r == NULL); i++) {
    if (!c->reqs[i].used)
      r = &c->reqs[i];
  }
  if (r == NULL)
    return ncclSuccess;
  memset(r, 0, sizeof(*r));
  r->comm = c;
  r->used = 1;
  r->is_send = is_send;
  r->data = data;
  r->size = size;
  r->hdr = size;
  c->fifo[c->tail++ % FAKE_MAX_REQS] = r;
  *request = r;
  return ncclSuccess;
}

static ncclResult_t fake_isend(void *send_comm, void *data, fake_size_t size, int tag,
                               void *mhandle,
#if FAKE_NET_VERSION >= 10
                               void *phandle,
#endif
                               void **request)
{
  struct fake_comm *c = send_comm;

  (void)tag;
#if FAKE_NET_VERSION >= 10
  (void)phandle;
#endif
  if (((long long)size < 0) || ((size > 0) && !in_mr(mhandle, data, (size_t)size))) {
    FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: isend of unregistered memory");
    return ncclInvalidArgument;
  }
  return post(c, 1, data, (size_t)size, request);
}

static ncclResult_t fake_irecv(void *recv_comm, int n, void **data, fake_size_t *sizes, int *tags,
                               void **mhandles,
#if FAKE_NET_VERSION >= 10
                               void **phandles,
#endif
                               void **request)
{
  struct fake_comm *c = recv_comm;

  (void)tags;
#if FAKE_NET_VERSION >= 10
  (void)phandles;
#endif
  if ((n != 1) || ((long long)sizes[0] < 0) ||
      ((sizes[0] > 0) && !in_mr(mhandles[0], data[0], (size_t)sizes[0]))) {
    FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: bad irecv (n %d)", n);
    return ncclInvalidArgument;
  }
  return post(c, 0, data[0], (size_t)sizes[0], request);
}

static ncclResult_t fake_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                                void **request)
{
  (void)recv_comm;
  (void)n;
  (void)data;
  (void)sizes;
  (void)mhandles;
  *request = NULL;
  return ncclSuccess;
}

/* Moves the oldest request of the comm as far as the socket allows. */
static ncclResult_t progress(struct fake_comm *c)
{
  while (c->head != c->tail) {
    struct fake_req *r = c->fifo[c->head % FAKE_MAX_REQS];
    while (r->hdr_done < sizeof(r->hdr)) {
      ssize_t n = r->is_send
                      ? send(c->fd, (char *)&r->hdr + r->hdr_done, sizeof(r->hdr) - r->hdr_done,
                             MSG_NOSIGNAL)
                      : recv(c->fd, (char *)&r->hdr + r->hdr_done, sizeof(r->hdr) - r->hdr_done, 0);
      if (n > 0) {
        r->hdr_done += (size_t)n;
        continue;
      }
      if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
        return ncclSuccess;
      FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: connection lost");
      return ncclRemoteError;
    }
    if (!r->is_send && (r->hdr > r->size)) {
      FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: message truncated (%llu > %zu bytes)",
               (unsigned long long)r->hdr, r->size);
      return ncclRemoteError;
    }
    while (r->done < r->hdr) {
      ssize_t n = r->is_send ? send(c->fd, r->data + r->done, r->hdr - r->done, MSG_NOSIGNAL)
                             : recv(c->fd, r->data + r->done, r->hdr - r->done, 0);
      if (n > 0) {
        r->done += (size_t)n;
        continue;
      }
      if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
        return ncclSuccess;
      FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: connection lost");
      return ncclRemoteError;
    }
    r->complete = 1;
    c->head++;
  }
  return ncclSuccess;
}

/* Blocking mode: a send comm waits for the acceptor's ack before moving. */
static ncclResult_t wait_ack(struct fake_comm *c)
{
  struct pollfd pfd = {.fd = c->fd, .events = POLLIN, .revents = 0};
  char ack = 0;

  if (!c->awaits_ack)
    return ncclSuccess;
  if ((poll(&pfd, 1, FAKE_BLOCK_MS) <= 0) || (recv(c->fd, &ack, 1, 0) != 1) || (ack != FAKE_ACK)) {
    FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: no ack from the acceptor within %d ms", FAKE_BLOCK_MS);
    return ncclRemoteError;
  }
  c->awaits_ack = 0;
  return ncclSuccess;
}

static ncclResult_t fake_test(void *request, int *done, int *sizes)
{
  struct fake_req *r = request;
  ncclResult_t res;

  if (blocking && (r != r->comm->fifo[r->comm->tested % FAKE_MAX_REQS])) {
    FAKE_LOG(NCCL_LOG_WARN, "FAKE/Plugin: test called with invalid request");
    return ncclInternalError;
  }
  if (hang_test && r->is_send && !r->comm->hung) {
    r->comm->hung = 1;
    FAKE_LOG(NCCL_LOG_INFO, "FAKE/Plugin: test() blocks for %d ms", 2 * FAKE_BLOCK_MS);
    (void)poll(NULL, 0, 2 * FAKE_BLOCK_MS);
  }
  res = wait_ack(r->comm);

  if (res == ncclSuccess)
    res = progress(r->comm);

  *done = 0;
  if (res != ncclSuccess)
    return res;
  if (r->complete) {
    *done = 1;
    if (!no_sizes && (sizes != NULL))
      sizes[0] = (int)r->hdr;
    r->used = 0;
    r->comm->tested++;
  }
  return ncclSuccess;
}

static ncclResult_t fake_close(void *comm)
{
  struct fake_comm *c = comm;

  if (c != NULL) {
    close(c->fd);
    free(c);
  }
  return ncclSuccess;
}

static ncclResult_t fake_close_listen(void *listen_comm)
{
  struct fake_listen *l = listen_comm;

  for (int i = 0; i < l->n_pending; i++)
    close(l->pending[i]);
  close(l->fd);
  free(l);
  return ncclSuccess;
}

#if FAKE_NET_VERSION >= 7
static ncclResult_t fake_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle)
{
  (void)comm;
  (void)mhandle;
  (void)dptr_mhandle;
  return ncclInternalError;
}

static ncclResult_t fake_irecv_consumed(void *recv_comm, int n, void *request)
{
  (void)recv_comm;
  (void)n;
  (void)request;
  return ncclSuccess;
}
#endif

__attribute__((visibility("default")))
const fake_net_t FAKE_CAT(ncclNetPlugin_v, FAKE_NET_VERSION, ) = {
    .name = "Fake",
    .init = fake_init,
    .devices = fake_devices,
    .getProperties = fake_get_properties,
    .listen = fake_listen,
    .connect = fake_connect,
    .accept = fake_accept,
    .regMr = fake_reg_mr,
    .regMrDmaBuf = fake_reg_mr_dmabuf,
    .deregMr = fake_dereg_mr,
    .isend = fake_isend,
    .irecv = fake_irecv,
    .iflush = fake_iflush,
    .test = fake_test,
    .closeSend = fake_close,
    .closeRecv = fake_close,
    .closeListen = fake_close_listen,
#if FAKE_NET_VERSION >= 7
    .getDeviceMr = fake_get_device_mr,
    .irecvConsumed = fake_irecv_consumed,
#endif
#if (FAKE_NET_VERSION == 10) || (FAKE_NET_VERSION == 12)
    .makeVDevice = fake_make_vdevice,
#endif
#if FAKE_NET_VERSION >= 11
    .finalize = fake_finalize,
    .setNetAttr = NULL,
#endif
};

#else /* FAKE_NET_VERSION == 0: a library that is no net plugin */

__attribute__((visibility("default"))) int fake_net_not_a_plugin;

#endif

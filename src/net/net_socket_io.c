/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket net's data path: requests, the control stream, tasks on the data
 * sockets and the helper threads that move them. Mirrors the message
 * protocol of NCCL's transport/net_socket.cc (size on the control socket,
 * small payloads inline, large ones cut into tasks round-robin over the data
 * sockets, "message truncated" when the sender's size exceeds the posted
 * receive); the code is written from net_socket_int.h's description.
 *
 * Threads: the caller's thread moves the control socket in isend / irecv /
 * test; each helper thread owns the data sockets i with i % n_threads == id
 * and sleeps on its condition variable while it has no task. A worker moves
 * a task with non-blocking send/recv until the kernel says EAGAIN, then the
 * next socket's; when no socket moved it polls them (at most POLL_MS, so
 * that it notices the abort flag and close). With no helper threads the
 * caller's test() runs the same code without polling.
 *
 * Errors found by any thread are stored once per comm (the first wins) and
 * reported with MC_FAIL by the caller's next call that cannot complete, so
 * that the WARN and ncclGetLastError belong to the caller's thread. An
 * error of the control stream (the peer closed it, a message too large for
 * its receive) loses the requests whose size was not through yet; those
 * before it still complete on the data sockets. So a receiver that posted
 * receives ahead gets every message the peer sent before it closed.
 */
#include "net_socket_int.h"

#include "check.h"
#include "log.h"
#include "params.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define POLL_MS 50 /* a busy helper looks at abort and close this often */
#define QLEN    MC_NET_MAX_REQUESTS

/* ---------- errors ---------- */

/* Records an error (the first one only); all: it loses every unfinished
 * request (else only those whose control part is unfinished); kind: the
 * comm's err_kind for it. */
static void comm_set_err_v(struct mc_net_sock_comm *comm, ncclResult_t res, bool all, int kind,
                           const char *fmt, va_list ap)
{
  if (all)
    __atomic_store_n(&comm->err_all, 1, __ATOMIC_RELEASE);
  pthread_mutex_lock(&comm->err_mu);
  if (comm->err == ncclSuccess) {
    vsnprintf(comm->err_text, sizeof(comm->err_text), fmt, ap);
    comm->err = res;
    comm->err_kind = kind;
    __atomic_store_n(&comm->has_err, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&comm->err_mu);
}

static void comm_set_err(struct mc_net_sock_comm *comm, ncclResult_t res, bool all, const char *fmt,
                         ...) __attribute__((format(printf, 4, 5)));
static void comm_set_err(struct mc_net_sock_comm *comm, ncclResult_t res, bool all, const char *fmt,
                         ...)
{
  va_list ap;

  va_start(ap, fmt);
  comm_set_err_v(comm, res, all, 0, fmt, ap);
  va_end(ap);
}

/* The peer closed or reset the connection (MC_NET_SOCK_CLOSED_BY_PEER). */
static void comm_set_closed(struct mc_net_sock_comm *comm, bool all, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void comm_set_closed(struct mc_net_sock_comm *comm, bool all, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  comm_set_err_v(comm, ncclRemoteError, all, MC_NET_SOCK_CLOSED_BY_PEER, fmt, ap);
  va_end(ap);
}

/* The comm's error for the caller: WARN the first time, then only the code. */
static ncclResult_t comm_report_err(struct mc_net_sock_comm *comm)
{
  ncclResult_t res;
  bool first;

  pthread_mutex_lock(&comm->err_mu);
  res = comm->err;
  first = !comm->err_reported;
  comm->err_reported = true;
  pthread_mutex_unlock(&comm->err_mu);
  if (first && comm->is_quiet)
    MC_INFO(MC_SUB_NET, "NET/Socket: %s", comm->err_text);
  else if (first)
    return MC_FAIL(res, "NET/Socket: %s", comm->err_text);
  return res;
}

static bool is_aborted(const struct mc_net_sock_comm *comm)
{
  return (comm->abort_flag != NULL) && (__atomic_load_n(comm->abort_flag, __ATOMIC_ACQUIRE) != 0);
}

/* Error of a failed send/recv on one of the comm's sockets. */
static void io_err(struct mc_net_sock_comm *comm, const char *which, bool is_send, ssize_t n, int e,
                   size_t done, size_t bytes)
{
  /* The peer closing the control stream loses only what follows in it; a
   * dead link (keepalive) loses the data sockets' messages too. */
  bool all = (strcmp(which, "control") != 0) || ((n < 0) && (e == ETIMEDOUT));

  if ((n < 0) && (e == ETIMEDOUT) && (comm->liveness_ms > 0))
    comm_set_err(comm, ncclRemoteError, all,
                 "link %s: the peer acknowledged nothing for %lld ms (%s socket, TCP keepalive "
                 "and TCP_USER_TIMEOUT from MESHCCL_NET_TIMEOUT): the link or the peer's host "
                 "is down",
                 comm->link_str, (long long)comm->liveness_ms, which);
  else if ((n == 0) || (e == EPIPE) || (e == ECONNRESET))
    comm_set_closed(comm, all,
                    "%s closed the connection (%s socket, %s %zu of %zu bytes of a message%s%s)",
                    comm->peer_str, which, is_send ? "sent" : "received", done, bytes,
                    (n == 0) ? "" : ": ", (n == 0) ? "" : strerror(e));
  else
    comm_set_err(comm, ncclRemoteError, all, "%s %s failed (%s socket): %s",
                 is_send ? "send to" : "recv from", comm->peer_str, which, strerror(e));
}

/* Moves bytes of one buffer without waiting. Returns bytes moved (0: would
 * block), or -1 after recording the error. */
static ssize_t move(struct mc_net_sock_comm *comm, int fd, const char *which, char *buf,
                    size_t bytes, size_t done_before, size_t total)
{
  size_t done = 0;

  while (done < bytes) {
    ssize_t n;

    if (comm->is_send)
      n = send(fd, buf + done, bytes - done, MSG_DONTWAIT | MSG_NOSIGNAL);
    else
      n = recv(fd, buf + done, bytes - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if ((n < 0) && (errno == EINTR))
      continue;
    if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK)))
      break;
    io_err(comm, which, comm->is_send, n, (n < 0) ? errno : 0, done_before + done, total);
    return -1;
  }
  if (done > 0)
    __atomic_add_fetch(&comm->moved_bytes, (uint64_t)done, __ATOMIC_RELAXED);
  return (ssize_t)done;
}

/* ---------- tasks and workers ---------- */

/* Moves the head task of each of the worker's sockets as far as the kernel
 * lets it. Returns 1 when any byte moved, 0 when none, -1 on error. With
 * pfd != NULL, fills the poll set of the sockets that wait (n_pfd_out). */
static int worker_progress(struct mc_net_sock_worker *w, struct pollfd *pfd, int *n_pfd_out)
{
  struct mc_net_sock_comm *comm = w->comm;
  int moved = 0;
  int n_pfd = 0;

  for (int s = w->id; s < comm->n_socks; s += comm->n_workers) {
    struct mc_net_sock_data *d = &comm->data[s];
    struct mc_net_sock_task *t = NULL;
    ssize_t n;

    pthread_mutex_lock(&w->mu);
    if (d->head != d->tail)
      t = &d->q[d->head % QLEN];
    pthread_mutex_unlock(&w->mu);
    if (t == NULL)
      continue;
    n = move(comm, d->sock.fd, "data", t->data + t->done, t->bytes - t->done, t->done, t->bytes);
    if (n < 0)
      return -1;
    t->done += (size_t)n;
    if (n > 0)
      moved = 1;
    if (t->done == t->bytes) {
      struct mc_net_sock_req *r = t->req;

      pthread_mutex_lock(&w->mu);
      d->head++;
      w->pending--;
      pthread_mutex_unlock(&w->mu);
      __atomic_add_fetch(&r->tasks_done, 1, __ATOMIC_RELEASE);
      moved = 1;
      /* Its next task may be startable at once: come back to this socket. */
      s -= comm->n_workers;
      continue;
    }
    if (pfd != NULL) {
      pfd[n_pfd].fd = d->sock.fd;
      pfd[n_pfd].events = comm->is_send ? POLLOUT : POLLIN;
      pfd[n_pfd].revents = 0;
      n_pfd++;
    }
  }
  if (n_pfd_out != NULL)
    *n_pfd_out = n_pfd;
  return moved;
}

static void *worker_main(void *arg)
{
  struct mc_net_sock_worker *w = arg;
  struct mc_net_sock_comm *comm = w->comm;
  struct pollfd pfd[MC_NET_SOCK_MAX_SOCKS];

  mc_thread_set_name("NCCL NetSock");
  pthread_mutex_lock(&w->mu);
  for (;;) {
    int st;
    int n_pfd = 0;

    while (!w->stop && (w->pending == 0))
      pthread_cond_wait(&w->cv, &w->mu);
    if (w->stop)
      break;
    pthread_mutex_unlock(&w->mu);
    st = worker_progress(w, pfd, &n_pfd);
    if ((st == 0) && (n_pfd > 0))
      (void)poll(pfd, (nfds_t)n_pfd, POLL_MS);
    if ((st < 0) || is_aborted(comm)) {
      /* Nothing more moves on this comm: sleep until close. */
      pthread_mutex_lock(&w->mu);
      while (!w->stop)
        pthread_cond_wait(&w->cv, &w->mu);
      break;
    }
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* Cuts a message of `bytes` (beyond inline) into tasks on the data sockets.
 * Both sides run it in message order with the same cursor. */
static void post_tasks(struct mc_net_sock_comm *comm, struct mc_net_sock_req *r)
{
  size_t task = (r->bytes + (size_t)comm->n_socks - 1) / (size_t)comm->n_socks;
  size_t off = 0;

  if (task < comm->min_task_bytes)
    task = comm->min_task_bytes;
  r->n_tasks = (int)((r->bytes + task - 1) / task);
  for (int i = 0; i < r->n_tasks; i++) {
    int s = comm->next_sock;
    struct mc_net_sock_data *d = &comm->data[s];
    struct mc_net_sock_worker *w = &comm->workers[s % comm->n_workers];
    struct mc_net_sock_task *t;
    size_t len = (r->bytes - off < task) ? r->bytes - off : task;

    comm->next_sock = (s + 1) % comm->n_socks;
    pthread_mutex_lock(&w->mu);
    t = &d->q[d->tail % QLEN];
    t->req = r;
    t->data = r->data + off;
    t->bytes = len;
    t->done = 0;
    d->tail++;
    if (w->pending++ == 0)
      pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    off += len;
  }
}

/* ---------- control stream (caller's thread) ---------- */

static bool payload_on_ctrl(const struct mc_net_sock_comm *comm, size_t bytes)
{
  return (bytes <= comm->inline_bytes) || (comm->n_socks == 0);
}

/* Sender: header + inline payload of the requests in posting order. */
static ncclResult_t ctrl_progress_send(struct mc_net_sock_comm *comm)
{
  while (comm->fifo_head != comm->fifo_tail) {
    struct mc_net_sock_req *r = comm->fifo[comm->fifo_head % QLEN];
    size_t pay = r->payload_on_ctrl ? r->bytes : 0;
    size_t total = sizeof(r->hdr) + pay;

    while (r->ctrl_done < total) {
      struct iovec iov[2];
      struct msghdr msg;
      int n_iov = 0;
      ssize_t n;

      if (r->ctrl_done < sizeof(r->hdr)) {
        iov[n_iov].iov_base = (char *)&r->hdr + r->ctrl_done;
        iov[n_iov].iov_len = sizeof(r->hdr) - r->ctrl_done;
        n_iov++;
        if (pay > 0) {
          iov[n_iov].iov_base = r->data;
          iov[n_iov].iov_len = pay;
          n_iov++;
        }
      } else {
        iov[n_iov].iov_base = r->data + (r->ctrl_done - sizeof(r->hdr));
        iov[n_iov].iov_len = total - r->ctrl_done;
        n_iov++;
      }
      memset(&msg, 0, sizeof(msg));
      msg.msg_iov = iov;
      msg.msg_iovlen = (size_t)n_iov;
      n = sendmsg(comm->ctrl.fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        r->ctrl_done += (size_t)n;
        __atomic_add_fetch(&comm->moved_bytes, (uint64_t)n, __ATOMIC_RELAXED);
        continue;
      }
      if ((n < 0) && (errno == EINTR))
        continue;
      if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK)))
        return ncclSuccess;
      io_err(comm, "control", true, n, (n < 0) ? errno : 0,
             (r->ctrl_done > sizeof(r->hdr)) ? r->ctrl_done - sizeof(r->hdr) : 0, r->bytes);
      return ncclRemoteError;
    }
    r->state = MC_NET_SOCK_REQ_TASKS;
    comm->fifo_head++;
  }
  return ncclSuccess;
}

/* Receiver: reads the size of the oldest posted receive, then its inline
 * payload or its tasks. Only posted receives read: what follows stays in the
 * socket. */
static ncclResult_t ctrl_progress_recv(struct mc_net_sock_comm *comm)
{
  while (comm->fifo_head != comm->fifo_tail) {
    struct mc_net_sock_req *r = comm->fifo[comm->fifo_head % QLEN];
    ssize_t n;

    if (r->ctrl_done < sizeof(r->hdr)) {
      n = move(comm, comm->ctrl.fd, "control", (char *)&r->hdr + r->ctrl_done,
               sizeof(r->hdr) - r->ctrl_done, 0, r->posted_bytes);
      if (n < 0)
        return ncclRemoteError;
      r->ctrl_done += (size_t)n;
      if (r->ctrl_done < sizeof(r->hdr))
        return ncclSuccess;
      r->bytes = r->hdr;
      if (r->bytes > r->posted_bytes) {
        comm_set_err(comm, ncclInvalidUsage, false,
                     "message truncated: %s sent %zu bytes, but the receive was posted for %zu "
                     "bytes (receives must be at least as large as the matching send)",
                     comm->peer_str, r->bytes, r->posted_bytes);
        return ncclInvalidUsage;
      }
      if (r->bytes > MC_NET_SOCK_MAX_BYTES) {
        comm_set_err(comm, ncclRemoteError, false,
                     "protocol error: %s announced a message of %zu bytes (at most %llu)",
                     comm->peer_str, r->bytes, (unsigned long long)MC_NET_SOCK_MAX_BYTES);
        return ncclRemoteError;
      }
      r->payload_on_ctrl = payload_on_ctrl(comm, r->bytes);
      if (!r->payload_on_ctrl && (r->bytes > 0))
        post_tasks(comm, r);
    }
    if (r->payload_on_ctrl) {
      size_t got = r->ctrl_done - sizeof(r->hdr);

      n = move(comm, comm->ctrl.fd, "control", r->data + got, r->bytes - got, got, r->bytes);
      if (n < 0)
        return ncclRemoteError;
      r->ctrl_done += (size_t)n;
      if (r->ctrl_done < sizeof(r->hdr) + r->bytes)
        return ncclSuccess;
    }
    r->state = MC_NET_SOCK_REQ_TASKS;
    comm->fifo_head++;
  }
  return ncclSuccess;
}

/* Everything the caller's thread drives: the control stream until it
 * failed, the inline worker's data sockets until they did. */
static void comm_progress(struct mc_net_sock_comm *comm)
{
  if (__atomic_load_n(&comm->has_err, __ATOMIC_ACQUIRE) == 0) {
    if (comm->is_send)
      (void)ctrl_progress_send(comm);
    else
      (void)ctrl_progress_recv(comm);
  }
  if ((comm->n_threads == 0) && (comm->n_workers > 0) &&
      (__atomic_load_n(&comm->err_all, __ATOMIC_ACQUIRE) == 0))
    (void)worker_progress(&comm->workers[0], NULL, NULL);
}

/* r (unfinished) can no longer complete. */
static bool req_lost(const struct mc_net_sock_req *r)
{
  const struct mc_net_sock_comm *comm = r->comm;

  return (__atomic_load_n(&comm->has_err, __ATOMIC_ACQUIRE) != 0) &&
         ((__atomic_load_n(&comm->err_all, __ATOMIC_ACQUIRE) != 0) ||
          (r->state == MC_NET_SOCK_REQ_CTRL));
}

/* ---------- the ops ---------- */

static struct mc_net_sock_req *req_alloc(struct mc_net_sock_comm *comm)
{
  if (comm->fifo_tail - comm->fifo_head >= QLEN)
    return NULL;
  for (int i = 0; i < MC_NET_MAX_REQUESTS; i++) {
    if (comm->reqs[i].state == MC_NET_SOCK_REQ_FREE) {
      struct mc_net_sock_req *r = &comm->reqs[i];
      memset(r, 0, sizeof(*r));
      r->comm = comm;
      return r;
    }
  }
  return NULL;
}

/* Entry checks of isend / irecv: abort, an earlier failure that loses
 * everything. After a failure of the control stream alone a request is
 * still taken: its test reports the failure, once the earlier ones are
 * delivered. */
static ncclResult_t comm_entry(struct mc_net_sock_comm *comm)
{
  if (is_aborted(comm))
    return ncclInternalError; /* aborted by the user (NCCL returns this too): no WARN */
  if (__atomic_load_n(&comm->err_all, __ATOMIC_ACQUIRE) != 0)
    return comm_report_err(comm);
  return ncclSuccess;
}

ncclResult_t mc_net_sock_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                               void **request)
{
  struct mc_net_sock_comm *comm = send_comm;
  struct mc_net_sock_req *r;

  (void)tag;
  (void)mhandle;
  if ((comm == NULL) || !comm->is_send || (request == NULL) || ((data == NULL) && (size > 0)))
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Socket: isend(comm %p, data %p, %zu bytes): bad "
                   "argument",
                   send_comm, data, size);
  if (size > MC_NET_SOCK_MAX_BYTES)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Socket: isend of %zu bytes to %s: at most %llu bytes per request "
                   "(max_p2p_bytes)",
                   size, comm->peer_str, (unsigned long long)MC_NET_SOCK_MAX_BYTES);
  MC_CHECK(comm_entry(comm));
  r = req_alloc(comm);
  if (r == NULL) {
    *request = NULL; /* all MC_NET_MAX_REQUESTS in flight: try later */
    return ncclSuccess;
  }
  r->data = data;
  r->bytes = size;
  r->posted_bytes = size;
  r->hdr = (uint32_t)size;
  r->payload_on_ctrl = payload_on_ctrl(comm, size);
  r->state = MC_NET_SOCK_REQ_CTRL;
  comm->fifo[comm->fifo_tail % QLEN] = r;
  comm->fifo_tail++;
  if (!r->payload_on_ctrl && (size > 0))
    post_tasks(comm, r);
  comm_progress(comm);
  *request = r;
  return ncclSuccess;
}

ncclResult_t mc_net_sock_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                               void **mhandles, void **request)
{
  struct mc_net_sock_comm *comm = recv_comm;
  struct mc_net_sock_req *r;

  (void)tags;
  (void)mhandles;
  if ((comm == NULL) || comm->is_send || (request == NULL) || (data == NULL) || (sizes == NULL))
    return MC_FAIL(ncclInvalidArgument, "NET/Socket: irecv(comm %p): bad argument", recv_comm);
  if (n != 1)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Socket: irecv of %d buffers from %s: the socket net receives one "
                   "buffer per request (max_recvs 1)",
                   n, comm->peer_str);
  if (sizes[0] > MC_NET_SOCK_MAX_BYTES)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Socket: irecv of %zu bytes from %s: at most %llu bytes per request "
                   "(max_p2p_bytes)",
                   sizes[0], comm->peer_str, (unsigned long long)MC_NET_SOCK_MAX_BYTES);
  if ((data[0] == NULL) && (sizes[0] > 0))
    return MC_FAIL(ncclInvalidArgument, "NET/Socket: irecv of %zu bytes into NULL", sizes[0]);
  MC_CHECK(comm_entry(comm));
  r = req_alloc(comm);
  if (r == NULL) {
    *request = NULL;
    return ncclSuccess;
  }
  r->data = data[0];
  r->posted_bytes = sizes[0];
  r->state = MC_NET_SOCK_REQ_CTRL;
  comm->fifo[comm->fifo_tail % QLEN] = r;
  comm->fifo_tail++;
  comm_progress(comm);
  *request = r;
  return ncclSuccess;
}

static bool req_complete(const struct mc_net_sock_req *r)
{
  return (r->state == MC_NET_SOCK_REQ_TASKS) &&
         (__atomic_load_n(&r->tasks_done, __ATOMIC_ACQUIRE) == r->n_tasks);
}

ncclResult_t mc_net_sock_test(void *request, int *done, size_t *sizes)
{
  struct mc_net_sock_req *r = request;
  struct mc_net_sock_comm *comm;

  if ((r == NULL) || (done == NULL) || (r->state == MC_NET_SOCK_REQ_FREE))
    return MC_FAIL(ncclInvalidArgument, "NET/Socket: test(%p): not a pending request", request);
  comm = r->comm;
  *done = 0;
  if (!req_complete(r)) {
    if (is_aborted(comm))
      return ncclInternalError;
    comm_progress(comm);
  }
  /* A message whose size went through before the peer closed (a failure
   * notice, say) is delivered; the failure counts for the requests after it. */
  if (!req_complete(r))
    return req_lost(r) ? comm_report_err(comm) : ncclSuccess;
  if (sizes != NULL)
    sizes[0] = r->bytes;
  r->state = MC_NET_SOCK_REQ_FREE;
  *done = 1;
  return ncclSuccess;
}

/* ---------- life cycle ---------- */

/* comm->link_str from the control socket's local address and the peer's. */
static void link_describe(struct mc_net_sock_comm *comm, int fd)
{
  union mc_sockaddr local;
  socklen_t len = sizeof(local);
  char here[MC_SOCKADDR_STRLEN];

  memset(&local, 0, sizeof(local));
  if ((fd < 0) || (getsockname(fd, &local.sa, &len) != 0))
    snprintf(here, sizeof(here), "this host");
  else
    mc_sockaddr_str(&local, here, sizeof(here));
  if (comm->is_send)
    snprintf(comm->link_str, sizeof(comm->link_str), "%s -> %s", here, comm->peer_str);
  else
    snprintf(comm->link_str, sizeof(comm->link_str), "%s -> %s", comm->peer_str, here);
}

ncclResult_t mc_net_sock_comm_set_liveness(struct mc_net_sock_comm *comm, int64_t timeout_ms)
{
  for (int i = -1; i < comm->n_socks; i++) {
    struct mc_sock *s = (i < 0) ? &comm->ctrl : &comm->data[i].sock;

    if (mc_sock_set_liveness(s, timeout_ms) != ncclSuccess)
      return MC_FAIL(ncclSystemError, "NET/Socket: link %s: %s socket: %s", comm->link_str,
                     (i < 0) ? "control" : "data", s->err);
  }
  comm->liveness_ms = timeout_ms;
  return ncclSuccess;
}

ncclResult_t mc_net_sock_get_progress(void *vcomm, uint64_t *bytes_out, char *link,
                                      size_t link_bytes)
{
  struct mc_net_sock_comm *comm = vcomm;

  if ((comm == NULL) || (bytes_out == NULL))
    return MC_FAIL(ncclInvalidArgument, "NET/Socket: get_progress(comm %p): bad argument", vcomm);
  *bytes_out = __atomic_load_n(&comm->moved_bytes, __ATOMIC_RELAXED);
  if ((link != NULL) && (link_bytes > 0))
    snprintf(link, link_bytes, "%s", comm->link_str);
  return ncclSuccess;
}

static void comm_stop_workers(struct mc_net_sock_comm *comm, int n_started)
{
  for (int i = 0; i < n_started; i++) {
    struct mc_net_sock_worker *w = &comm->workers[i];

    if (!w->has_thread)
      continue;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->has_thread = false;
  }
}

void mc_net_sock_comm_destroy(struct mc_net_sock_comm *comm)
{
  if (comm == NULL)
    return;
  if (comm->workers != NULL) {
    comm_stop_workers(comm, comm->n_workers);
    for (int i = 0; i < comm->n_workers; i++) {
      pthread_mutex_destroy(&comm->workers[i].mu);
      pthread_cond_destroy(&comm->workers[i].cv);
    }
  }
  for (int i = 0; (comm->data != NULL) && (i < comm->n_socks); i++)
    mc_sock_close(&comm->data[i].sock);
  mc_sock_close(&comm->ctrl);
  pthread_mutex_destroy(&comm->err_mu);
  free(comm->workers);
  free(comm->data);
  free(comm);
}

ncclResult_t mc_net_sock_comm_create(bool is_send, const volatile uint32_t *abort_flag,
                                     struct mc_sock *socks, int n_socks, int n_threads,
                                     uint32_t inline_bytes, uint32_t min_task_bytes,
                                     struct mc_net_sock_comm **comm_out)
{
  ncclResult_t res = ncclSuccess;
  struct mc_net_sock_comm *comm = NULL;
  int n_workers = (n_threads > 0) ? n_threads : ((n_socks > 0) ? 1 : 0);

  MC_CHECK(mc_calloc(&comm, 1));
  pthread_mutex_init(&comm->err_mu, NULL);
  comm->is_send = is_send;
  comm->abort_flag = abort_flag;
  comm->n_socks = n_socks;
  comm->n_threads = n_threads;
  comm->n_workers = 0;
  comm->inline_bytes = inline_bytes;
  comm->min_task_bytes = min_task_bytes;
  mc_sock_init(&comm->ctrl);
  mc_sockaddr_str(&socks[0].addr, comm->peer_str, sizeof(comm->peer_str));
  link_describe(comm, socks[0].fd);
  if (n_socks > 0)
    MC_CHECK_GOTO(mc_calloc(&comm->data, (size_t)n_socks), res, err);
  if (n_workers > 0)
    MC_CHECK_GOTO(mc_calloc(&comm->workers, (size_t)n_workers), res, err);
  /* Take the sockets first: from here destroy closes them. */
  comm->ctrl = socks[0];
  socks[0].fd = -1;
  for (int i = 0; i < n_socks; i++) {
    comm->data[i].sock = socks[i + 1];
    socks[i + 1].fd = -1;
  }
  for (int i = 0; i < n_workers; i++) {
    struct mc_net_sock_worker *w = &comm->workers[i];

    w->comm = comm;
    w->id = i;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    comm->n_workers = i + 1;
  }
  for (int i = 0; i < n_threads; i++) {
    struct mc_net_sock_worker *w = &comm->workers[i];
    int e = pthread_create(&w->thread, NULL, worker_main, w);

    if (e != 0) {
      res = MC_FAIL(ncclSystemError,
                    "NET/Socket: cannot start helper thread %d of %d for the connection with "
                    "%s: %s (try NCCL_SOCKET_NTHREADS=0)",
                    i, n_threads, comm->peer_str, strerror(e));
      goto err;
    }
    w->has_thread = true;
  }
  *comm_out = comm;
  return ncclSuccess;

err:
  mc_net_sock_comm_destroy(comm);
  return res;
}

/* ---------- shared by the nets over these comms ---------- */

void mc_net_sock_props_init(int dev, struct mc_net_props *props_out)
{
  memset(props_out, 0, sizeof(*props_out));
  props_out->ptr_support = MC_NET_PTR_HOST;
  props_out->max_comms = 65536;
  props_out->max_recvs = 1;
  props_out->vprops.n_devs = 1;
  props_out->vprops.devs[0] = dev;
  props_out->max_p2p_bytes = MC_NET_SOCK_MAX_BYTES;
  props_out->rail_id = -1;
  props_out->plane_id = -1;
}

ncclResult_t mc_net_sock_reg_host(const char *tag, int type, void **mhandle_out)
{
  if (type != MC_NET_PTR_HOST)
    return MC_FAIL(ncclInvalidArgument, "%s: cannot register memory of type %d (host memory only)",
                   tag, type);
  *mhandle_out = NULL;
  return ncclSuccess;
}

ncclResult_t mc_net_sock_dereg_mr(void *comm, void *mhandle)
{
  (void)comm;
  (void)mhandle;
  return ncclSuccess;
}

/* Automatic NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD (-2): NCCL's (no
 * helper threads off AWS/GCP). With the NET transport's proxy thread driving
 * test() and yielding while idle, 0 threads measured fastest on veth pairs
 * between namespaces (2.9 vs 1.8 GB/s all-reduce busbw with 2 threads; on 2
 * cores the extra threads compete with the proxy and the rank). */
#define AUTO_NTHREADS 0
#define AUTO_NSOCKS   1

void mc_net_sock_threads(const char *tag, int *n_threads_out, int *n_socks_out)
{
  int nt = (int)mc_param_int(MC_P_SOCKET_NTHREADS);
  int ns = (int)mc_param_int(MC_P_NSOCKS_PERTHREAD);

  if (nt < 0)
    nt = AUTO_NTHREADS;
  if (ns < 0)
    ns = AUTO_NSOCKS;
  if ((nt > 0) && (nt * ns > MC_NET_SOCK_MAX_SOCKS)) {
    MC_WARN_ONCE("%s: NCCL_SOCKET_NTHREADS=%d x NCCL_NSOCKS_PERTHREAD=%d exceeds %d "
                 "sockets; using %d sockets per thread",
                 tag, nt, ns, MC_NET_SOCK_MAX_SOCKS, MC_NET_SOCK_MAX_SOCKS / nt);
    ns = MC_NET_SOCK_MAX_SOCKS / nt;
  }
  if (ns == 0)
    nt = 0; /* no data sockets: nothing for threads to do */
  *n_threads_out = nt;
  *n_socks_out = (nt > 0) ? nt * ns : ns;
}

void mc_net_sock_secret(const struct mc_net_init_args *args, const void **secret_out,
                        size_t *bytes_out)
{
  const char *env = mc_param_str(MC_P_SECRET);

  *secret_out = NULL;
  *bytes_out = 0;
  if ((args != NULL) && (args->secret != NULL)) {
    *secret_out = args->secret;
    *bytes_out = MC_NET_SECRET_BYTES;
  } else if ((env != NULL) && (env[0] != '\0')) {
    *secret_out = env;
    *bytes_out = strlen(env);
  }
}

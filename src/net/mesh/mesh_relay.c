/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mesh net's relay service (contract in mesh_relay.h): one thread, one
 * epoll set, pipes of two sockets forwarded both ways.
 *
 * Each direction of a pipe holds at most `limit` bytes: in a kernel pipe
 * (splice socket -> pipe, then pipe -> socket; the bytes never come to user
 * space) or, when splice is not possible or is refused by the options, in a
 * ring buffer of `limit` bytes (readv, then sendmsg). A direction reads from
 * its source only while it holds less than `limit`, and asks for EPOLLOUT on
 * its destination only while it holds something, so a slow receiver stops
 * the relay from reading, which fills the sender's socket buffers and stops
 * the sender: TCP's flow control, end to end. Each wake-up moves at most
 * RELAY_ROUND_BYTES per direction, so one busy pipe cannot starve the
 * others; epoll is level-triggered, what is left is reported again.
 *
 * Ends of pipes: an EOF from the source, once every byte before it is
 * delivered, becomes shutdown(SHUT_WR) on the destination; a pipe is
 * finished when both directions are. Any socket error closes both sockets
 * with SO_LINGER 0 (a reset), so that each end learns of the failure instead
 * of seeing what could pass for an orderly close.
 *
 * Threads: mc_mesh_relay_add (any thread) only queues a prepared pipe and
 * wakes the service through an eventfd; everything else about pipes happens
 * on the service thread. `mu` guards the queue, the flags and the counters.
 */
#include "mesh_relay.h"
#include "check.h"
#include "log.h"
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RELAY_MAX_EVENTS 64
/* Bytes one direction may move per wake-up before the loop serves other
 * pipes: a few pipe-fulls, enough to amortise the epoll_wait. */
#define RELAY_ROUND_BYTES  (4u << 20)
#define RELAY_SPLICE_FLAGS (SPLICE_F_MOVE | SPLICE_F_NONBLOCK)

enum { SIDE_A = 0, SIDE_B = 1 };

/* One direction: bytes from end[src] to end[dst]. */
struct relay_dir {
  int src;
  int dst;
  bool is_copy;
  int pipe_fd[2]; /* splice: [0] read end, [1] write end */
  char *buf;      /* copy: ring of `limit` bytes, `pending` of them from `head` */
  size_t head;
  size_t pending; /* bytes read from src and not yet written to dst */
  size_t limit;
  bool is_eof;        /* src returned end-of-file */
  bool is_shut;       /* dst was shut down for writing */
  bool is_in_blocked; /* the kernel pipe is full: wait for dst before reading again */
};

struct relay_end {
  struct relay_pipe *pipe;
  int fd;
  uint32_t events;    /* interest registered with epoll */
  bool is_registered; /* false before registration and while parked (see end_update) */
};

struct relay_pipe {
  struct relay_pipe *next;
  struct relay_pipe *prev;
  struct relay_end end[2];
  struct relay_dir dir[2]; /* [0]: a -> b, [1]: b -> a */
  bool is_dead;            /* closed during this round, freed after it */
  char label[MC_MESH_RELAY_LABEL_BYTES];
};

struct mc_mesh_relay {
  char name[32];
  int max_pipes;
  size_t dir_bytes; /* 0: the kernel pipe's capacity */
  int poll_ms;
  bool force_copy;
  const volatile uint32_t *abort_flag;
  int epoll_fd;
  int wake_fd;
  pthread_t thread;
  bool has_thread;
  bool has_logged_pipe_size; /* service thread only */
  bool has_logged_copy;      /* service thread only */

  pthread_mutex_t mu;
  struct relay_pipe *incoming;      /* added, not yet registered; under mu */
  bool is_stopping;                 /* under mu */
  bool is_aborted;                  /* under mu */
  struct mc_mesh_relay_stats stats; /* n_* fields under mu; bytes and peak atomic */
  /* Local addresses whose interface went down (mc_mesh_relay_fail_local); under mu. */
  struct sockaddr_storage fails[MC_MESH_RELAY_MAX_FAILS];
  char fail_why[MC_MESH_RELAY_MAX_FAILS][64];
  int n_fails;

  struct relay_pipe *pipes; /* registered pipes: service thread only */
  struct relay_pipe *dead;  /* closed this round: service thread only */
};

/* Why a pipe failed. */
struct relay_fail {
  int err;
  int side;
  const char *op;
};

static void list_push(struct relay_pipe **head, struct relay_pipe *p)
{
  p->prev = NULL;
  p->next = *head;
  if (*head != NULL)
    (*head)->prev = p;
  *head = p;
}

static void list_unlink(struct relay_pipe **head, struct relay_pipe *p)
{
  if (p->prev != NULL)
    p->prev->next = p->next;
  else
    *head = p->next;
  if (p->next != NULL)
    p->next->prev = p->prev;
  p->next = NULL;
  p->prev = NULL;
}

static void close_fd(int *fd)
{
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* ---------- directions: set-up and the two ways of moving bytes ---------- */

/* A kernel pipe of (about) want bytes; returns the bound to use, 0 when no
 * pipe could be made (errno set). */
static size_t dir_open_pipe(struct mc_mesh_relay *relay, struct relay_dir *dir)
{
  size_t want = (relay->dir_bytes != 0) ? relay->dir_bytes : MC_MESH_RELAY_DEFAULT_DIR_BYTES;
  int cap;

  if (pipe2(dir->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0)
    return 0;
  cap = fcntl(dir->pipe_fd[1], F_SETPIPE_SZ, (int)want);
  if (cap < 0) {
    int err = errno;

    cap = fcntl(dir->pipe_fd[1], F_GETPIPE_SZ);
    if (!__atomic_exchange_n(&relay->has_logged_pipe_size, true, __ATOMIC_RELAXED))
      MC_INFO(MC_SUB_NET,
              "NET/Mesh: %s: kernel pipes keep %d bytes, %zu refused (%s; see "
              "fs.pipe-max-size and fs.pipe-user-pages-soft)",
              relay->name, cap, want, strerror(err));
  }
  if (cap <= 0)
    cap = 4096; /* F_GETPIPE_SZ cannot fail on a pipe; a page is the minimum */
  return (relay->dir_bytes != 0) ? relay->dir_bytes : (size_t)cap;
}

static ncclResult_t dir_init(struct mc_mesh_relay *relay, struct relay_pipe *p, int d)
{
  struct relay_dir *dir = &p->dir[d];

  dir->src = (d == 0) ? SIDE_A : SIDE_B;
  dir->dst = (d == 0) ? SIDE_B : SIDE_A;
  dir->pipe_fd[0] = -1;
  dir->pipe_fd[1] = -1;
  if (!relay->force_copy) {
    dir->limit = dir_open_pipe(relay, dir);
    if (dir->limit != 0)
      return ncclSuccess;
    /* Out of descriptors or pipe memory: forwarding still works by copying. */
    MC_INFO(MC_SUB_NET, "NET/Mesh: %s: %s: no kernel pipe (%s), forwarding with read/write",
            relay->name, p->label, strerror(errno));
  }
  dir->is_copy = true;
  dir->limit = (relay->dir_bytes != 0) ? relay->dir_bytes : MC_MESH_RELAY_DEFAULT_DIR_BYTES;
  MC_CHECK(mc_calloc(&dir->buf, dir->limit));
  return ncclSuccess;
}

static void dir_fini(struct relay_dir *dir)
{
  close_fd(&dir->pipe_fd[0]);
  close_fd(&dir->pipe_fd[1]);
  free(dir->buf);
  dir->buf = NULL;
}

/* splice said EINVAL (these sockets cannot splice): move what the kernel pipe
 * holds into a ring buffer and go on with read/write. 0 or an errno. */
static int dir_switch_to_copy(struct mc_mesh_relay *relay, struct relay_pipe *p, int d, int why)
{
  struct relay_dir *dir = &p->dir[d];
  size_t got = 0;

  dir->buf = calloc(1, dir->limit);
  if (dir->buf == NULL)
    return ENOMEM;
  while (got < dir->pending) {
    ssize_t n = read(dir->pipe_fd[0], dir->buf + got, dir->pending - got);

    if (n <= 0) {
      if ((n < 0) && (errno == EINTR))
        continue;
      return (n < 0) ? errno : EIO; /* the pipe holds `pending` bytes: cannot happen */
    }
    got += (size_t)n;
  }
  dir->head = 0;
  close_fd(&dir->pipe_fd[0]);
  close_fd(&dir->pipe_fd[1]);
  dir->is_copy = true;
  dir->is_in_blocked = false;
  pthread_mutex_lock(&relay->mu);
  relay->stats.n_copy_dirs++;
  pthread_mutex_unlock(&relay->mu);
  if (!relay->has_logged_copy) {
    relay->has_logged_copy = true;
    MC_INFO(MC_SUB_NET, "NET/Mesh: %s: %s: splice not possible (%s), forwarding with read/write",
            relay->name, p->label, strerror(why));
  }
  return 0;
}

/* Reads at most `room` bytes from fd into the direction. */
static ssize_t dir_read(struct relay_dir *dir, int fd, size_t room)
{
  size_t tail;
  struct iovec iov[2];

  if (!dir->is_copy)
    return splice(fd, NULL, dir->pipe_fd[1], NULL, room, RELAY_SPLICE_FLAGS);
  tail = (dir->head + dir->pending) % dir->limit;
  iov[0].iov_base = dir->buf + tail;
  iov[0].iov_len = (room < dir->limit - tail) ? room : dir->limit - tail;
  iov[1].iov_base = dir->buf;
  iov[1].iov_len = room - iov[0].iov_len;
  return readv(fd, iov, (iov[1].iov_len != 0) ? 2 : 1);
}

/* Writes from the direction to fd (what is pending, or part of it). */
static ssize_t dir_write(struct relay_dir *dir, int fd)
{
  struct iovec iov[2];
  struct msghdr msg;

  if (!dir->is_copy)
    return splice(dir->pipe_fd[0], NULL, fd, NULL, dir->pending, RELAY_SPLICE_FLAGS);
  iov[0].iov_base = dir->buf + dir->head;
  iov[0].iov_len = (dir->pending < dir->limit - dir->head) ? dir->pending : dir->limit - dir->head;
  iov[1].iov_base = dir->buf;
  iov[1].iov_len = dir->pending - iov[0].iov_len;
  memset(&msg, 0, sizeof(msg));
  msg.msg_iov = iov;
  msg.msg_iovlen = (iov[1].iov_len != 0) ? 2 : 1;
  return sendmsg(fd, &msg, MSG_NOSIGNAL);
}

/* A write that failed with EPIPE raised SIGPIPE for this thread when it went
 * through splice (which has no MSG_NOSIGNAL); it is blocked here, take it. */
static void consume_sigpipe(void)
{
  sigset_t set;
  struct timespec zero = {0, 0};

  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  while (sigtimedwait(&set, NULL, &zero) == SIGPIPE) {
  }
}

static int set_fail(struct relay_fail *fail, int err, int side, const char *op)
{
  fail->err = err;
  fail->side = side;
  fail->op = op;
  return -1;
}

/* Moves bytes of one direction until nothing more can move now or the
 * round's budget is spent. 0, or -1 with *fail filled. */
static int dir_pump(struct mc_mesh_relay *relay, struct relay_pipe *p, int d,
                    struct relay_fail *fail)
{
  struct relay_dir *dir = &p->dir[d];
  int src_fd = p->end[dir->src].fd;
  int dst_fd = p->end[dir->dst].fd;
  size_t moved = 0;
  uint64_t delivered = 0;
  int rc = 0;

  while (moved < RELAY_ROUND_BYTES) {
    bool has_progress = false;

    if (dir->pending > 0) {
      ssize_t n = dir_write(dir, dst_fd);

      if (n > 0) {
        dir->pending -= (size_t)n;
        if (dir->is_copy)
          dir->head = (dir->pending == 0) ? 0 : (dir->head + (size_t)n) % dir->limit;
        delivered += (uint64_t)n;
        moved += (size_t)n;
        dir->is_in_blocked = false;
        has_progress = true;
      } else if (n == 0) {
        /* Nothing taken though the socket was not full: try again on EPOLLOUT. */
      } else if ((errno == EINVAL) && !dir->is_copy) {
        int err = dir_switch_to_copy(relay, p, d, errno);

        if (err != 0) {
          rc = set_fail(fail, err, dir->dst, "switch to read/write");
          break;
        }
        continue;
      } else if ((errno != EAGAIN) && (errno != EINTR)) {
        if (errno == EPIPE)
          consume_sigpipe();
        rc = set_fail(fail, errno, dir->dst, "send");
        break;
      }
    }
    if (!dir->is_eof && !dir->is_in_blocked && (dir->pending < dir->limit)) {
      ssize_t n = dir_read(dir, src_fd, dir->limit - dir->pending);

      if (n > 0) {
        dir->pending += (size_t)n;
        if (dir->pending > __atomic_load_n(&relay->stats.peak_dir_bytes, __ATOMIC_RELAXED))
          __atomic_store_n(&relay->stats.peak_dir_bytes, dir->pending, __ATOMIC_RELAXED);
        moved += (size_t)n;
        has_progress = true;
      } else if (n == 0) {
        dir->is_eof = true;
        has_progress = true;
      } else if ((errno == EINVAL) && !dir->is_copy) {
        int err = dir_switch_to_copy(relay, p, d, errno);

        if (err != 0) {
          rc = set_fail(fail, err, dir->src, "switch to read/write");
          break;
        }
        continue;
      } else if (errno == EAGAIN) {
        int queued = 0;

        /* splice says EAGAIN both when the socket is empty and when the
         * kernel pipe has no free slot (partly filled pages can fill its
         * slots before `limit` bytes); only the second must stop EPOLLIN,
         * or level-triggered epoll would spin on the readable socket. */
        if (!dir->is_copy && (dir->pending > 0) && (ioctl(src_fd, FIONREAD, &queued) == 0) &&
            (queued > 0))
          dir->is_in_blocked = true;
      } else if (errno != EINTR) {
        rc = set_fail(fail, errno, dir->src, "recv");
        break;
      }
    }
    if (dir->is_eof && (dir->pending == 0) && !dir->is_shut) {
      if (shutdown(dst_fd, SHUT_WR) != 0) {
        rc = set_fail(fail, errno, dir->dst, "shutdown");
        break;
      }
      dir->is_shut = true;
    }
    if (!has_progress)
      break;
  }
  if (delivered != 0)
    __atomic_fetch_add((d == 0) ? &relay->stats.bytes_a_to_b : &relay->stats.bytes_b_to_a,
                       delivered, __ATOMIC_RELAXED);
  return rc;
}

static bool dir_wants_read(const struct relay_dir *dir)
{
  return !dir->is_eof && !dir->is_in_blocked && (dir->pending < dir->limit);
}

/* ---------- pipes ---------- */

enum relay_end_kind { RELAY_FINISHED, RELAY_FAILED, RELAY_CLOSED };

/* Closes the pipe's sockets and kernel pipes and moves it to the dead list
 * (freed after the round: later events of this round may still point at it). */
static void pipe_close(struct mc_mesh_relay *relay, struct relay_pipe *p, enum relay_end_kind kind)
{
  for (int s = 0; s < 2; s++) {
    struct relay_end *end = &p->end[s];

    if (end->is_registered)
      (void)epoll_ctl(relay->epoll_fd, EPOLL_CTL_DEL, end->fd, NULL);
    end->is_registered = false;
    if (kind != RELAY_FINISHED) {
      /* A reset, not a FIN: the far end must not take this for an orderly end. */
      struct linger lg = {.l_onoff = 1, .l_linger = 0};

      (void)setsockopt(end->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close_fd(&end->fd);
  }
  for (int d = 0; d < 2; d++)
    dir_fini(&p->dir[d]);
  p->is_dead = true;
  list_unlink(&relay->pipes, p);
  list_push(&relay->dead, p);
  pthread_mutex_lock(&relay->mu);
  relay->stats.n_active--;
  if (kind == RELAY_FINISHED)
    relay->stats.n_finished++;
  else if (kind == RELAY_FAILED)
    relay->stats.n_failed++;
  else
    relay->stats.n_closed++;
  pthread_mutex_unlock(&relay->mu);
}

static void pipe_fail(struct mc_mesh_relay *relay, struct relay_pipe *p,
                      const struct relay_fail *fail)
{
  MC_INFO(MC_SUB_NET,
          "NET/Mesh: %s: %s: %s on the %s side failed: %s; closing both sockets "
          "(%zu/%zu bytes held a->b/b->a)",
          relay->name, p->label, fail->op, (fail->side == SIDE_A) ? "a" : "b", strerror(fail->err),
          p->dir[0].pending, p->dir[1].pending);
  pipe_close(relay, p, RELAY_FAILED);
}

/* Registers the interest each end needs now. An end that needs nothing and
 * reported EPOLLHUP (both of its directions shut, without error) is parked:
 * removed from epoll, which would otherwise report the hang-up on every
 * wait; it comes back when it needs something. 0 or an errno. */
static int end_update(struct mc_mesh_relay *relay, struct relay_end *end, int side, bool is_hup)
{
  struct relay_pipe *p = end->pipe;
  const struct relay_dir *out = &p->dir[(side == SIDE_A) ? 0 : 1]; /* this end is its src */
  const struct relay_dir *in = &p->dir[(side == SIDE_A) ? 1 : 0];  /* this end is its dst */
  uint32_t events = 0;
  struct epoll_event ev;

  if (dir_wants_read(out))
    events |= EPOLLIN;
  if (in->pending > 0)
    events |= EPOLLOUT;
  memset(&ev, 0, sizeof(ev));
  ev.events = events;
  ev.data.ptr = end;
  if ((events == 0) && is_hup) {
    if (end->is_registered && (epoll_ctl(relay->epoll_fd, EPOLL_CTL_DEL, end->fd, NULL) != 0))
      return errno;
    end->is_registered = false;
  } else if (!end->is_registered) {
    if (epoll_ctl(relay->epoll_fd, EPOLL_CTL_ADD, end->fd, &ev) != 0)
      return errno;
    end->is_registered = true;
  } else if (events != end->events) {
    if (epoll_ctl(relay->epoll_fd, EPOLL_CTL_MOD, end->fd, &ev) != 0)
      return errno;
  }
  end->events = events;
  return 0;
}

/* Forwards what it can in both directions, then ends the pipe or updates
 * its epoll interest. hup_side: the side that reported EPOLLHUP, or -1. */
static void pipe_progress(struct mc_mesh_relay *relay, struct relay_pipe *p, int hup_side)
{
  struct relay_fail fail;

  for (int d = 0; d < 2; d++) {
    if (dir_pump(relay, p, d, &fail) != 0) {
      pipe_fail(relay, p, &fail);
      return;
    }
  }
  if (p->dir[0].is_shut && p->dir[1].is_shut) {
    pipe_close(relay, p, RELAY_FINISHED);
    return;
  }
  for (int s = 0; s < 2; s++) {
    int err = end_update(relay, &p->end[s], s, s == hup_side);

    if (err != 0) {
      set_fail(&fail, err, s, "epoll_ctl");
      pipe_fail(relay, p, &fail);
      return;
    }
  }
}

static void pipe_event(struct mc_mesh_relay *relay, struct relay_end *end, uint32_t events)
{
  struct relay_pipe *p = end->pipe;
  int side = (end == &p->end[SIDE_A]) ? SIDE_A : SIDE_B;

  if ((events & EPOLLERR) != 0) {
    int err = 0;
    socklen_t len = sizeof(err);

    if ((getsockopt(end->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0) && (err != 0)) {
      struct relay_fail fail;

      set_fail(&fail, err, side, "poll");
      pipe_fail(relay, p, &fail);
      return;
    }
  }
  pipe_progress(relay, p, ((events & EPOLLHUP) != 0) ? side : -1);
}

static void pipe_free(struct relay_pipe *p)
{
  for (int s = 0; s < 2; s++)
    close_fd(&p->end[s].fd);
  for (int d = 0; d < 2; d++)
    dir_fini(&p->dir[d]);
  free(p);
}

/* ---------- the service thread ---------- */

/* Whether a socket is bound to the IP address of `local`. */
static bool is_bound_to(int fd, const struct sockaddr_storage *local)
{
  struct sockaddr_storage sa;
  socklen_t len = sizeof(sa);

  if ((getsockname(fd, (struct sockaddr *)&sa, &len) != 0) || (sa.ss_family != local->ss_family))
    return false;
  if (sa.ss_family == AF_INET)
    return memcmp(&((const struct sockaddr_in *)&sa)->sin_addr,
                  &((const struct sockaddr_in *)local)->sin_addr, sizeof(struct in_addr)) == 0;
  if (sa.ss_family == AF_INET6)
    return memcmp(&((const struct sockaddr_in6 *)&sa)->sin6_addr,
                  &((const struct sockaddr_in6 *)local)->sin6_addr, sizeof(struct in6_addr)) == 0;
  return false;
}

/* Resets the pipes with a socket on an interface that went down. */
static void take_fails(struct mc_mesh_relay *relay)
{
  struct sockaddr_storage fails[MC_MESH_RELAY_MAX_FAILS];
  char why[MC_MESH_RELAY_MAX_FAILS][64];
  int n;

  pthread_mutex_lock(&relay->mu);
  n = relay->n_fails;
  memcpy(fails, relay->fails, sizeof(fails[0]) * (size_t)n);
  memcpy(why, relay->fail_why, sizeof(why[0]) * (size_t)n);
  relay->n_fails = 0;
  pthread_mutex_unlock(&relay->mu);
  for (int k = 0; k < n; k++) {
    struct relay_pipe *next;

    for (struct relay_pipe *p = relay->pipes; p != NULL; p = next) {
      next = p->next;
      for (int s = 0; (s < 2) && !p->is_dead; s++) {
        if ((p->end[s].fd >= 0) && is_bound_to(p->end[s].fd, &fails[k])) {
          struct relay_fail fail = {.err = ENETDOWN, .side = s, .op = why[k]};

          pipe_fail(relay, p, &fail);
        }
      }
    }
  }
}

/* Moves the queued pipes to the live list; with do_register, a first
 * progress registers both ends of each. */
static void adopt_incoming(struct mc_mesh_relay *relay, bool do_register)
{
  struct relay_pipe *list;

  pthread_mutex_lock(&relay->mu);
  list = relay->incoming;
  relay->incoming = NULL;
  pthread_mutex_unlock(&relay->mu);
  while (list != NULL) {
    struct relay_pipe *p = list;

    list_unlink(&list, p);
    list_push(&relay->pipes, p);
    if (do_register)
      pipe_progress(relay, p, -1);
  }
}

static void take_incoming(struct mc_mesh_relay *relay)
{
  uint64_t count;

  while ((read(relay->wake_fd, &count, sizeof(count)) < 0) && (errno == EINTR)) {
  }
  take_fails(relay);
  adopt_incoming(relay, true);
}

static void free_dead(struct mc_mesh_relay *relay)
{
  while (relay->dead != NULL) {
    struct relay_pipe *p = relay->dead;

    list_unlink(&relay->dead, p);
    free(p);
  }
}

/* Closes every pipe, queued ones included (stop or abort). */
static void close_all(struct mc_mesh_relay *relay)
{
  adopt_incoming(relay, false);
  while (relay->pipes != NULL)
    pipe_close(relay, relay->pipes, RELAY_CLOSED);
  free_dead(relay);
}

static bool is_aborted(const struct mc_mesh_relay *relay)
{
  return (relay->abort_flag != NULL) && (__atomic_load_n(relay->abort_flag, __ATOMIC_ACQUIRE) != 0);
}

static void *relay_main(void *arg)
{
  struct mc_mesh_relay *relay = arg;
  struct epoll_event evs[RELAY_MAX_EVENTS];
  sigset_t set;

  /* splice to a socket whose peer is gone raises SIGPIPE; keep it off this
   * thread (dir_pump takes it back) without touching the process's handlers. */
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  mc_thread_set_name("meshccl-relay");
  for (;;) {
    bool is_stopping;
    int n;

    pthread_mutex_lock(&relay->mu);
    is_stopping = relay->is_stopping;
    pthread_mutex_unlock(&relay->mu);
    if (is_stopping)
      break;
    if (is_aborted(relay)) {
      pthread_mutex_lock(&relay->mu);
      relay->is_aborted = true;
      pthread_mutex_unlock(&relay->mu);
      MC_INFO(MC_SUB_NET, "NET/Mesh: %s: abort flag set, closing every pipe", relay->name);
      break;
    }
    n = epoll_wait(relay->epoll_fd, evs, RELAY_MAX_EVENTS, relay->poll_ms);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      MC_WARN("NET/Mesh: %s: epoll_wait failed: %s; the relay stops and closes every pipe",
              relay->name, strerror(errno));
      break;
    }
    for (int i = 0; i < n; i++) {
      struct relay_end *end = evs[i].data.ptr;

      if (end == NULL)
        take_incoming(relay);
      else if (!end->pipe->is_dead)
        pipe_event(relay, end, evs[i].events);
    }
    free_dead(relay);
  }
  close_all(relay);
  return NULL;
}

/* ---------- API ---------- */

ncclResult_t mc_mesh_relay_create(const struct mc_mesh_relay_opts *opts,
                                  const volatile uint32_t *abort_flag,
                                  struct mc_mesh_relay **relay_out)
{
  ncclResult_t res = ncclSuccess;
  struct mc_mesh_relay_opts o;
  struct mc_mesh_relay *relay = NULL;
  struct epoll_event ev;
  int rc;

  if (relay_out == NULL)
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: relay create: relay_out is NULL");
  memset(&o, 0, sizeof(o));
  if (opts != NULL)
    o = *opts;
  if ((o.max_pipes < 0) || (o.poll_ms < 0))
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: relay create: max_pipes %d, poll_ms %d: "
                   "must be >= 0 (0: default)",
                   o.max_pipes, o.poll_ms);
  MC_CHECK(mc_calloc(&relay, 1));
  snprintf(relay->name, sizeof(relay->name), "%s", (o.name != NULL) ? o.name : "relay");
  relay->max_pipes = (o.max_pipes != 0) ? o.max_pipes : MC_MESH_RELAY_DEFAULT_MAX_PIPES;
  relay->dir_bytes = o.dir_bytes;
  relay->poll_ms = (o.poll_ms != 0) ? o.poll_ms : MC_MESH_RELAY_DEFAULT_POLL_MS;
  relay->force_copy = o.force_copy;
  relay->abort_flag = abort_flag;
  relay->wake_fd = -1;
  relay->stats.dir_limit_bytes = 0;
  pthread_mutex_init(&relay->mu, NULL);

  relay->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (relay->epoll_fd < 0) {
    res = MC_FAIL(ncclSystemError, "NET/Mesh: %s: epoll_create1 failed: %s", relay->name,
                  strerror(errno));
    goto err;
  }
  relay->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (relay->wake_fd < 0) {
    res =
        MC_FAIL(ncclSystemError, "NET/Mesh: %s: eventfd failed: %s", relay->name, strerror(errno));
    goto err;
  }
  memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN;
  ev.data.ptr = NULL; /* the wake-up */
  MC_SYS_CHECK_GOTO(epoll_ctl(relay->epoll_fd, EPOLL_CTL_ADD, relay->wake_fd, &ev),
                    "NET/Mesh: relay epoll_ctl (eventfd)", res, err);
  rc = pthread_create(&relay->thread, NULL, relay_main, relay);
  if (rc != 0) {
    res = MC_FAIL(ncclSystemError, "NET/Mesh: %s: cannot start the service thread: %s", relay->name,
                  strerror(rc));
    goto err;
  }
  relay->has_thread = true;
  MC_INFO(MC_SUB_NET, "NET/Mesh: %s: relay service started (max_pipes %d, %s, %s)", relay->name,
          relay->max_pipes, relay->force_copy ? "read/write" : "splice",
          (relay->dir_bytes != 0) ? "dir_bytes from options" : "dir_bytes: pipe capacity");
  *relay_out = relay;
  return ncclSuccess;

err:
  mc_mesh_relay_destroy(relay);
  return res;
}

void mc_mesh_relay_destroy(struct mc_mesh_relay *relay)
{
  struct mc_mesh_relay_stats st;
  bool was_started;

  if (relay == NULL)
    return;
  was_started = relay->has_thread;
  if (relay->has_thread) {
    uint64_t one = 1;

    pthread_mutex_lock(&relay->mu);
    relay->is_stopping = true;
    pthread_mutex_unlock(&relay->mu);
    if (write(relay->wake_fd, &one, sizeof(one)) < 0) {
      /* The counter is full, so the thread is awake anyway; poll_ms bounds it else. */
    }
    pthread_join(relay->thread, NULL);
    relay->has_thread = false;
  }
  close_all(relay);
  close_fd(&relay->wake_fd);
  close_fd(&relay->epoll_fd);
  mc_mesh_relay_stats(relay, &st);
  if (was_started)
    MC_INFO(MC_SUB_NET,
            "NET/Mesh: %s: relay stopped: %llu pipes finished, %llu failed, %llu closed at stop; "
            "%llu bytes a->b, %llu b->a; at most %zu bytes held per direction (bound %zu); %llu "
            "directions by read/write",
            relay->name, (unsigned long long)st.n_finished, (unsigned long long)st.n_failed,
            (unsigned long long)st.n_closed, (unsigned long long)st.bytes_a_to_b,
            (unsigned long long)st.bytes_b_to_a, st.peak_dir_bytes, st.dir_limit_bytes,
            (unsigned long long)st.n_copy_dirs);
  pthread_mutex_destroy(&relay->mu);
  free(relay);
}

static ncclResult_t check_stream_socket(const struct mc_mesh_relay *relay, int fd,
                                        const char *which, const char *label)
{
  int type = 0;
  socklen_t len = sizeof(type);

  if ((fd < 0) || (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) || (type != SOCK_STREAM))
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: %s: %s: %s (fd %d) is not a stream socket%s%s",
                   relay->name, label, which, fd, (fd < 0) ? "" : ": ",
                   (fd < 0) ? "" : ((type == 0) ? strerror(errno) : "wrong socket type"));
  return ncclSuccess;
}

static ncclResult_t prepare_fd(const struct mc_mesh_relay *relay, int fd, const char *label)
{
  int fl = fcntl(fd, F_GETFL);
  int one = 1;

  if ((fl < 0) || (fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0))
    return MC_FAIL(ncclSystemError, "NET/Mesh: %s: %s: cannot make fd %d non-blocking: %s",
                   relay->name, label, fd, strerror(errno));
  /* Fails on AF_UNIX sockets, which have no Nagle to turn off. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return ncclSuccess;
}

ncclResult_t mc_mesh_relay_add(struct mc_mesh_relay *relay, int fd_a, int fd_b, const char *label)
{
  ncclResult_t res = ncclSuccess;
  struct relay_pipe *p = NULL;
  uint64_t one = 1;
  size_t limit;

  if (relay == NULL)
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: relay add: relay is NULL");
  if (label == NULL)
    label = "pipe";
  MC_CHECK(check_stream_socket(relay, fd_a, "fd_a", label));
  MC_CHECK(check_stream_socket(relay, fd_b, "fd_b", label));
  if (fd_a == fd_b)
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: %s: %s: fd_a and fd_b are the same fd %d",
                   relay->name, label, fd_a);
  MC_CHECK(mc_calloc(&p, 1));
  snprintf(p->label, sizeof(p->label), "%s", label);
  for (int s = 0; s < 2; s++) {
    p->end[s].pipe = p;
    p->end[s].fd = -1;
  }
  for (int d = 0; d < 2; d++)
    MC_CHECK_GOTO(dir_init(relay, p, d), res, err);
  limit = (p->dir[0].limit > p->dir[1].limit) ? p->dir[0].limit : p->dir[1].limit;

  pthread_mutex_lock(&relay->mu);
  if (relay->is_aborted || relay->is_stopping || is_aborted(relay)) {
    pthread_mutex_unlock(&relay->mu);
    res = MC_FAIL(ncclInternalError, "NET/Mesh: %s: %s: relay aborted or stopping, pipe refused",
                  relay->name, label);
    goto err;
  }
  if (relay->stats.n_active >= relay->max_pipes) {
    int n = relay->stats.n_active;

    pthread_mutex_unlock(&relay->mu);
    res = MC_FAIL(ncclSystemError,
                  "NET/Mesh: %s: %s: %d pipes already relayed, the limit (max_pipes %d); pipe "
                  "refused",
                  relay->name, label, n, relay->max_pipes);
    goto err;
  }
  /* Under the lock so that a refused pair is left as it came. */
  res = prepare_fd(relay, fd_a, label);
  if (res == ncclSuccess)
    res = prepare_fd(relay, fd_b, label);
  if (res != ncclSuccess) {
    pthread_mutex_unlock(&relay->mu);
    goto err;
  }
  /* From here the relay owns the descriptors. */
  p->end[SIDE_A].fd = fd_a;
  p->end[SIDE_B].fd = fd_b;
  list_push(&relay->incoming, p);
  relay->stats.n_active++;
  relay->stats.n_copy_dirs += (uint64_t)p->dir[0].is_copy + (uint64_t)p->dir[1].is_copy;
  if (limit > relay->stats.dir_limit_bytes)
    relay->stats.dir_limit_bytes = limit;
  pthread_mutex_unlock(&relay->mu);
  if (write(relay->wake_fd, &one, sizeof(one)) < 0) {
    /* EAGAIN: the counter is full, a wake-up is pending anyway. */
  }
  return ncclSuccess;

err:
  pipe_free(p);
  return res;
}

void mc_mesh_relay_fail_local(struct mc_mesh_relay *relay, const struct sockaddr *local,
                              const char *why)
{
  uint64_t one = 1;
  size_t len =
      (local->sa_family == AF_INET6) ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);

  if (relay == NULL)
    return;
  pthread_mutex_lock(&relay->mu);
  if (relay->n_fails < MC_MESH_RELAY_MAX_FAILS) {
    memset(&relay->fails[relay->n_fails], 0, sizeof(relay->fails[0]));
    memcpy(&relay->fails[relay->n_fails], local, len);
    snprintf(relay->fail_why[relay->n_fails], sizeof(relay->fail_why[0]), "%s", why);
    relay->n_fails++;
  }
  pthread_mutex_unlock(&relay->mu);
  if (write(relay->wake_fd, &one, sizeof(one)) < 0) {
    /* EAGAIN: the counter is full, a wake-up is pending anyway. */
  }
}

void mc_mesh_relay_stats(struct mc_mesh_relay *relay, struct mc_mesh_relay_stats *stats_out)
{
  struct mc_mesh_relay_stats st;

  memset(&st, 0, sizeof(st));
  if (relay == NULL) {
    *stats_out = st;
    return;
  }
  pthread_mutex_lock(&relay->mu);
  st.n_active = relay->stats.n_active;
  st.n_finished = relay->stats.n_finished;
  st.n_failed = relay->stats.n_failed;
  st.n_closed = relay->stats.n_closed;
  st.n_copy_dirs = relay->stats.n_copy_dirs;
  st.dir_limit_bytes = relay->stats.dir_limit_bytes;
  pthread_mutex_unlock(&relay->mu);
  *stats_out = st;
  stats_out->bytes_a_to_b = __atomic_load_n(&relay->stats.bytes_a_to_b, __ATOMIC_RELAXED);
  stats_out->bytes_b_to_a = __atomic_load_n(&relay->stats.bytes_b_to_a, __ATOMIC_RELAXED);
  stats_out->peak_dir_bytes = __atomic_load_n(&relay->stats.peak_dir_bytes, __ATOMIC_RELAXED);
}

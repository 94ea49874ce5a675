/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ranks' output: read from their pipes and written line by line to the
 * launcher's stdout and stderr, each line tagged with its rank as
 * --tag-output (Open MPI), --label (srun) or MESHCCL_RUN_TAG_OUTPUT=1 ask;
 * longer lines than MAX_LINE are split, a partial last line is written
 * when its stream ends.
 */
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LINE    (64 * 1024) /* longer lines are split */
#define FIRST_BUF   4096
#define PREFIX_MAX  32
#define DRAIN_READS 256 /* bound on reads per drain, against a writer that never stops */

static char out_line[PREFIX_MAX + MAX_LINE + 1];

static void write_all(struct launcher *l, int stream, const char *p, size_t n)
{
  int fd = (stream == STREAM_OUT) ? STDOUT_FILENO : STDERR_FILENO;

  while (n > 0 && !l->out_broken[stream]) {
    ssize_t w = write(fd, p, n);

    if (w >= 0) {
      p += w;
      n -= (size_t)w;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      struct pollfd pf = {.fd = fd, .events = POLLOUT};

      poll(&pf, 1, -1);
    } else if (errno != EINTR) {
      l->out_broken[stream] = true; /* e.g. EPIPE: drop this stream's output */
    }
  }
}

/* Writes one line of rank r, with its prefix and a newline, in one write(). */
static void emit_line(struct launcher *l, int r, int stream, const char *data, size_t n)
{
  size_t len = 0;

  if (l->opt.tag == TAG_RANK)
    len = (size_t)snprintf(out_line, PREFIX_MAX, "[%d] ", r);
  else if (l->opt.tag == TAG_MPI)
    len = (size_t)snprintf(out_line, PREFIX_MAX, "[1,%d]<%s>:", r,
                           (stream == STREAM_OUT) ? "stdout" : "stderr");
  else if (l->opt.tag == TAG_SRUN)
    len = (size_t)snprintf(out_line, PREFIX_MAX, "%d: ", r);
  if (n > MAX_LINE) {
    n = MAX_LINE;
  }
  memcpy(out_line + len, data, n);
  len += n;
  if (n == 0 || data[n - 1] != '\n') {
    out_line[len++] = '\n';
  }
  write_all(l, stream, out_line, len);
}

/* Emits every complete line in b, and a full buffer as a split line; from: bytes already scanned.
 */
static void emit_lines(struct launcher *l, int r, int stream, struct line_buf *b, size_t from)
{
  size_t start = 0;
  char *nl;

  while (from < b->len && (nl = memchr(b->data + from, '\n', b->len - from)) != NULL) {
    size_t end = (size_t)(nl - b->data) + 1;

    emit_line(l, r, stream, b->data + start, end - start);
    start = end;
    from = end;
  }
  if (start > 0) {
    memmove(b->data, b->data + start, b->len - start);
    b->len -= start;
  }
  if (b->len == MAX_LINE) {
    emit_line(l, r, stream, b->data, b->len);
    b->len = 0;
  }
}

/* Makes room for more bytes in b; flushes b as a split line if it cannot grow. */
static void line_buf_room(struct launcher *l, int r, int stream, struct line_buf *b)
{
  size_t cap;
  char *p;

  if (b->len < b->cap) {
    return;
  }
  cap = (b->cap == 0) ? FIRST_BUF : b->cap * 2;
  if (cap > MAX_LINE) {
    cap = MAX_LINE;
  }
  p = (cap > b->cap) ? realloc(b->data, cap) : NULL;
  if (p != NULL) {
    b->data = p;
    b->cap = cap;
  } else if (b->len > 0) {
    emit_line(l, r, stream, b->data, b->len);
    b->len = 0;
  }
}

void run_output_close(struct launcher *l, int r, int stream)
{
  struct rank *rk = &l->ranks[r];
  struct line_buf *b = &rk->line[stream];

  if (b->len > 0) {
    emit_line(l, r, stream, b->data, b->len); /* partial last line */
  }
  free(b->data);
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  close(rk->fd[stream]);
  rk->fd[stream] = -1;
}

/* One read() from a rank's pipe. Returns false when there is nothing more to read now. */
bool run_output_read(struct launcher *l, int r, int stream)
{
  struct rank *rk = &l->ranks[r];
  struct line_buf *b = &rk->line[stream];
  size_t old;
  ssize_t n;

  line_buf_room(l, r, stream, b);
  if (b->cap == 0) {
    char tmp[512]; /* no memory at all: forward what comes, as is */

    n = read(rk->fd[stream], tmp, sizeof(tmp));
    if (n > 0) {
      write_all(l, stream, tmp, (size_t)n);
      return true;
    }
  } else {
    n = read(rk->fd[stream], b->data + b->len, b->cap - b->len);
  }
  if (n < 0 && errno == EINTR) {
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    return false;
  }
  if (n <= 0) {
    run_output_close(l, r, stream); /* EOF, or a read error we cannot recover from */
    return false;
  }
  old = b->len;
  b->len += (size_t)n;
  emit_lines(l, r, stream, b, old);
  return true;
}

/* Reads whatever a rank's pipes hold now, without waiting. */
void run_output_drain(struct launcher *l, int r)
{
  for (int s = 0; s < N_STREAMS; s++) {
    for (int i = 0; i < DRAIN_READS && l->ranks[r].fd[s] >= 0; i++) {
      if (!run_output_read(l, r, s)) {
        break;
      }
    }
  }
}

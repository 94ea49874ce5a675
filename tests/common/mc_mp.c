/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for multi-process test programs (see mc_mp.h). */
#include "mc_mp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

static const char *g_prog = "mp";
static int g_rank = -1;

void mc_mp_set_name(const char *prog, int rank)
{
  g_prog = prog;
  g_rank = rank;
}

void mc_mp_set_rank(int rank)
{
  g_rank = rank;
}

void mc_mp_fail(const char *fmt, ...)
{
  va_list ap;

  if (g_rank == MC_MP_NO_RANK)
    fprintf(stderr, "%s: ", g_prog);
  else
    fprintf(stderr, "%s rank %d: ", g_prog, g_rank);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  exit(1);
}

void mc_mp_expect_count_rank(ncclComm_t comm, int nranks, int rank)
{
  int v = -1;

  MC_MP_CHECK(ncclCommCount(comm, &v));
  if (v != nranks)
    MC_MP_FAIL("ncclCommCount is %d, expected %d", v, nranks);
  MC_MP_CHECK(ncclCommUserRank(comm, &v));
  if (v != rank)
    MC_MP_FAIL("ncclCommUserRank is %d, expected %d", v, rank);
}

double mc_mp_now_sec(void)
{
  return mc_clock_sec(CLOCK_MONOTONIC);
}

int mc_mp_env_int(const char *name, int def)
{
  const char *v = getenv(name);

  return ((v != NULL) && (v[0] != '\0')) ? atoi(v) : def;
}

bool mc_mp_wait_path(const char *path, int limit_s)
{
  for (int i = 0; i < limit_s * 100; i++) {
    if (access(path, F_OK) == 0)
      return true;
    usleep(10000);
  }
  return false;
}

void mc_mp_touch(const char *path)
{
  int fd = open(path, O_CREAT | O_WRONLY, 0644);

  if (fd < 0)
    MC_MP_FAIL("cannot create %s: %s", path, strerror(errno));
  close(fd);
}

int mc_mp_write_id(const char *path, const ncclUniqueId *id)
{
  char tmp[4096];
  FILE *f;

  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  f = fopen(tmp, "wb");
  if (f == NULL)
    return -1;
  if (fwrite(id, 1, sizeof(*id), f) != sizeof(*id)) {
    int e = errno;
    fclose(f);
    errno = e;
    return -1;
  }
  if ((fclose(f) != 0) || (rename(tmp, path) != 0))
    return -1;
  return 0;
}

size_t mc_mp_read_id(const char *path, ncclUniqueId *id)
{
  FILE *f = fopen(path, "rb");
  size_t n;

  if (f == NULL)
    return 0;
  n = fread(id, 1, sizeof(*id), f);
  fclose(f);
  return n;
}

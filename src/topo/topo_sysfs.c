/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every read of /sys and /proc done by topology detection goes through these
 * helpers, under one root (MESHCCL_SYSFS_ROOT; hwloc's HWLOC_FSROOT) so that
 * recorded machines (directories of files and relative symlinks under
 * tests/data/sysfs/) replay in tests.
 */
#include "topo/topo_int.h"

#include "check.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ncclResult_t mc_sysfs_path(const char *root, const char *rel, char *path, size_t path_bytes)
{
  size_t root_len = strlen(root);
  int n;

  /* "/" and "dir/" must not double the slash. */
  while ((root_len > 0) && (root[root_len - 1] == '/')) {
    root_len--;
  }
  n = snprintf(path, path_bytes, "%.*s%s%s", (int)root_len, root, (rel[0] == '/') ? "" : "/", rel);
  if ((n < 0) || ((size_t)n >= path_bytes)) {
    return MC_FAIL(ncclInternalError, "Topo: sysfs path %s%s longer than %zu bytes", root, rel,
                   path_bytes);
  }
  return ncclSuccess;
}

int mc_sysfs_open(const char *root, const char *rel, int flags)
{
  char path[PATH_MAX];
  int fd;

  if (mc_sysfs_path(root, rel, path, sizeof(path)) != ncclSuccess) {
    errno = ENAMETOOLONG;
    return -1;
  }
  do {
    fd = open(path, flags | O_CLOEXEC);
  } while ((fd == -1) && (errno == EINTR));
  return fd;
}

/* Reads up to buf_bytes - 1 bytes; -1 with errno on failure. */
static ssize_t read_all(int fd, char *buf, size_t buf_bytes)
{
  size_t got = 0;

  while (got + 1 < buf_bytes) {
    ssize_t r = read(fd, buf + got, buf_bytes - 1 - got);
    if (r == -1) {
      if (errno == EINTR) {
        continue;
      }
      return -1;
    }
    if (r == 0) {
      break;
    }
    got += (size_t)r;
  }
  buf[got] = '\0';
  while ((got > 0) && ((buf[got - 1] == '\n') || (buf[got - 1] == ' ') || (buf[got - 1] == '\t') ||
                       (buf[got - 1] == '\r'))) {
    buf[--got] = '\0';
  }
  return (ssize_t)got;
}

ncclResult_t mc_sysfs_read(const char *root, const char *rel, char *buf, size_t buf_bytes,
                           bool *found_out)
{
  char path[PATH_MAX];
  char tmp[4096];
  int fd;
  int err;

  MC_CHECK(mc_sysfs_path(root, rel, path, sizeof(path)));
  fd = mc_sysfs_open(root, rel, O_RDONLY);
  if (fd == -1) {
    if ((errno == ENOENT) || (errno == ENOTDIR)) {
      buf[0] = '\0';
      *found_out = false;
      return ncclSuccess;
    }
    return MC_FAIL(ncclSystemError,
                   "Topo: cannot open %s: %s (check its permissions, or MESHCCL_SYSFS_ROOT)", path,
                   strerror(errno));
  }
  if (read_all(fd, tmp, (buf_bytes < sizeof(tmp)) ? buf_bytes : sizeof(tmp)) == -1) {
    err = errno;
    close(fd);
    return MC_FAIL(ncclSystemError,
                   "Topo: cannot read %s: %s (check its permissions, or MESHCCL_SYSFS_ROOT)", path,
                   strerror(err));
  }
  close(fd);
  snprintf(buf, buf_bytes, "%s", tmp);
  *found_out = true;
  return ncclSuccess;
}

bool mc_sysfs_read_opt(const char *root, const char *rel, char *buf, size_t buf_bytes)
{
  int fd = mc_sysfs_open(root, rel, O_RDONLY);
  bool ok;

  buf[0] = '\0';
  if (fd == -1) {
    return false;
  }
  ok = (read_all(fd, buf, buf_bytes) != -1);
  close(fd);
  if (!ok) {
    buf[0] = '\0';
  }
  return ok;
}

bool mc_sysfs_realpath(const char *root, const char *rel, char *out, size_t out_bytes)
{
  char path[PATH_MAX];
  char real[PATH_MAX];
  char real_root[PATH_MAX];
  size_t root_len;

  if ((mc_sysfs_path(root, rel, path, sizeof(path)) != ncclSuccess) ||
      (realpath(path, real) == NULL) || (realpath(root, real_root) == NULL)) {
    return false;
  }
  root_len = strlen(real_root);
  if ((root_len == 1) && (real_root[0] == '/')) {
    root_len = 0;
  }
  if ((strncmp(real, real_root, root_len) != 0) ||
      ((real[root_len] != '/') && (real[root_len] != '\0'))) {
    return false;
  }
  if ((size_t)snprintf(out, out_bytes, "%s", real + root_len) >= out_bytes) {
    return false;
  }
  return true;
}

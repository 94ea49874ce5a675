/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for multi-process test programs (see mc_mp.h). */
#include "mc_mp.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static int count_dir(const char *path)
{
  DIR *d = opendir(path);
  struct dirent *e;
  int n = 0;

  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] != '.')
      n++;
  }
  closedir(d);
  return n;
}

int mc_mp_count_fds(void)
{
  return count_dir("/proc/self/fd") - 1; /* the directory stream's own fd */
}

int mc_mp_count_threads(void)
{
  return count_dir("/proc/self/task");
}

int mc_mp_env_int(const char *name, int def)
{
  const char *v = getenv(name);

  return ((v != NULL) && (v[0] != '\0')) ? atoi(v) : def;
}

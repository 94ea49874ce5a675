/* SPDX-License-Identifier: Apache-2.0 */
/* The unit test harness (see mc_test.h). */
#include "mc_test.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

jmp_buf mc_t_jmp;
int mc_t_case_failed;
int mc_t_case_skipped;

static char test_name[64] = "test"; /* file name of the test without .c */
static char tmp_dir[256];

static int tmp_remove(void);

void mc_t_fail(const char *file, int line, const char *fmt, ...)
{
  va_list ap;

  printf("# %s:%d: ", file, line);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
  mc_t_case_failed = 1;
  longjmp(mc_t_jmp, 1);
}

void mc_t_skip(const char *file, int line, const char *why)
{
  const char *ci = getenv("CI");

  if ((ci != NULL) && (strcmp(ci, "true") == 0))
    mc_t_fail(file, line, "cannot run under CI=true: %s", why);
  printf("# %s:%d: skip: %s\n", file, line, why);
  mc_t_case_skipped = 1;
  longjmp(mc_t_jmp, 1);
}

int mc_t_run(const char *file, int n, void (*const *fns)(void), const char *names)
{
  volatile int failed = 0;
  volatile int skipped = 0;
  const char *volatile p = names;

  const char *base = strrchr(file, '/');

  base = (base != NULL) ? base + 1 : file;
  snprintf(test_name, sizeof(test_name), "%.*s", (int)strcspn(base, "."), base);
  printf("1..%d\n", n);
  for (int i = 0; i < n; i++) {
    char name[128];
    size_t len;

    const char *q = p;
    while ((*q == ' ') || (*q == ',') || (*q == '\n'))
      q++;
    len = strcspn(q, ", \n");
    snprintf(name, sizeof(name), "%.*s", (int)len, q);
    p = q + len;
    mc_t_case_failed = 0;
    mc_t_case_skipped = 0;
    if (setjmp(mc_t_jmp) == 0)
      fns[i]();
    if (mc_t_case_failed) {
      printf("not ok %d - %s\n", i + 1, name);
      failed++;
    } else if (mc_t_case_skipped) {
      printf("ok %d - %s # SKIP\n", i + 1, name);
      skipped++;
    } else {
      printf("ok %d - %s\n", i + 1, name);
    }
    fflush(stdout);
  }
  printf("# %s: %d passed, %d failed, %d skipped\n", file, n - failed - skipped, failed, skipped);
  /* Not a case: the private directory goes after the last one (forked
   * children exit before this point); if it cannot be removed, the test
   * fails. */
  if (tmp_remove() != 0)
    return 1;
  if (failed > 0)
    return 1;
  return (skipped == n) ? 77 : 0;
}

const char *mc_t_last_error(void)
{
  return ncclGetLastError(NULL);
}

const char *mc_t_data(const char *rel)
{
  static char path[4096];

  snprintf(path, sizeof(path), "%s/%s", MC_T_DATA_DIR, rel);
  return path;
}

const char *mc_t_read_file(const char *path)
{
  static char buf[65536];
  FILE *f = fopen(path, "r");
  size_t n = 0;

  buf[0] = '\0';
  if (f == NULL)
    return buf;
  n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

void mc_t_write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");

  MC_T_TRUE(f != NULL);
  fputs(text, f);
  fclose(f);
}

static void make_tmp_dir(void)
{
  if (tmp_dir[0] != '\0')
    return;
  snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/mc_%s.XXXXXX", test_name);
  if (mkdtemp(tmp_dir) == NULL) {
    tmp_dir[0] = '\0';
    MC_T_FAIL("mkdtemp failed");
  }
}

void mc_t_tmp_path(const char *name, char *path, size_t path_bytes)
{
  make_tmp_dir();
  snprintf(path, path_bytes, "%s/%s", tmp_dir, name);
}

/* Removes the private directory and the files in it, if it was made; 0 on
 * success, else -1 with a "# ..." line saying what failed. */
static int tmp_remove(void)
{
  DIR *d;
  struct dirent *e;
  char path[1024];

  if (tmp_dir[0] == '\0')
    return 0;
  d = opendir(tmp_dir);
  if ((d == NULL) && (errno == ENOENT)) {
    tmp_dir[0] = '\0'; /* a forked child removed it */
    return 0;
  }
  if (d == NULL) {
    printf("# cannot open %s: %s\n", tmp_dir, strerror(errno));
    return -1;
  }
  while ((e = readdir(d)) != NULL) {
    if ((strcmp(e->d_name, ".") != 0) && (strcmp(e->d_name, "..") != 0)) {
      snprintf(path, sizeof(path), "%s/%s", tmp_dir, e->d_name);
      unlink(path);
    }
  }
  closedir(d);
  if (rmdir(tmp_dir) != 0) {
    printf("# cannot remove %s: %s\n", tmp_dir, strerror(errno));
    return -1;
  }
  tmp_dir[0] = '\0';
  return 0;
}

void mc_t_tmp_cleanup(void)
{
  MC_T_EQ_INT(tmp_remove(), 0);
}

void mc_t_clean_env(void)
{
  extern char **environ;
  bool again = true;

  while (again) {
    again = false;
    for (char **ep = environ; (ep != NULL) && (*ep != NULL); ep++) {
      if ((strncmp(*ep, "NCCL_", 5) == 0) || (strncmp(*ep, "MESHCCL_", 8) == 0)) {
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(*ep, "="), *ep);
        unsetenv(name);
        again = true;
        break;
      }
    }
  }
  unsetenv("HOME");
}

int mc_t_fork_run(void (*fn)(void))
{
  pid_t pid;
  int status = 0;

  make_tmp_dir();
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  MC_T_TRUE(pid >= 0);
  if (pid == 0) {
    mc_t_clean_env();
    if (setjmp(mc_t_jmp) == 0) {
      fn();
      fflush(stdout);
      exit(0);
    }
    fflush(stdout);
    exit(1);
  }
  MC_T_EQ_INT(waitpid(pid, &status, 0), pid);
  return status;
}

void mc_t_run_in_child(void (*fn)(void))
{
  int status = mc_t_fork_run(fn);

  MC_T_TRUE(WIFEXITED(status));
  MC_T_EQ_INT(WEXITSTATUS(status), 0);
}

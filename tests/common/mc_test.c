/* SPDX-License-Identifier: Apache-2.0 */
/* The unit test harness (see mc_test.h). */
#include "mc_test.h"

#include <stdarg.h>

jmp_buf mc_t_jmp;
int mc_t_case_failed;
int mc_t_case_skipped;

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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Dependency-free unit test harness with TAP output. One main per file:
 *   static void case_a(void) { MC_T_EQ_INT(1 + 1, 2); }
 *   MC_T_MAIN(case_a, case_b)
 * A failed assertion prints "not ok" with file:line and the values and ends
 * the case; the process exits 1 when any case failed, 77 (CTest's skip) when
 * every case skipped.
 */
#ifndef MC_TEST_H
#define MC_TEST_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_proc.h"
#include "nccl.h"

extern jmp_buf mc_t_jmp;
extern int mc_t_case_failed;
extern int mc_t_case_skipped;

void mc_t_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Skips the current case (CI=true turns a skip into a failure). */
void mc_t_skip(const char *file, int line, const char *why);
int mc_t_run(const char *file, int n, void (*const *fns)(void), const char *names);
/* Last error text recorded in this process (ncclGetLastError(NULL)). */
const char *mc_t_last_error(void);
/* Path of a file under tests/data. */
const char *mc_t_data(const char *rel);

/* Text of a whole (small) file, "" when it cannot be read (one static buffer). */
const char *mc_t_read_file(const char *path);
/* Writes text to path (fails the case when it cannot be opened). */
void mc_t_write_file(const char *path, const char *text);

/* Path of name in this test's private directory /tmp/mc_<test>.XXXXXX, made
 * at the first use (make it in the parent before forking: mc_t_fork_run
 * does). */
void mc_t_tmp_path(const char *name, char *path, size_t path_bytes);
/* Removes the private directory and the files in it, if it was made (the
 * harness also does it after the last case; a directory that cannot be
 * removed then fails the test). */
void mc_t_tmp_cleanup(void);

/* Removes every NCCL_* / MESHCCL_* variable and HOME (no ~/.nccl.conf) from
 * the environment of this (child) process. */
void mc_t_clean_env(void);
/* Forks; the child gets a clean environment (mc_t_clean_env) and runs fn,
 * exiting 0 unless an assertion failed there (its messages are printed by
 * the child). Returns the raw wait status. */
int mc_t_fork_run(void (*fn)(void));
/* mc_t_fork_run, and fails the case unless the child exited 0. */
void mc_t_run_in_child(void (*fn)(void));

#define MC_T_FAIL(...)  mc_t_fail(__FILE__, __LINE__, __VA_ARGS__)
#define MC_T_SKIP(_why) mc_t_skip(__FILE__, __LINE__, (_why))

#define MC_T_TRUE(_c)                                                                              \
  do {                                                                                             \
    if (!(_c))                                                                                     \
      MC_T_FAIL("expected true: %s", #_c);                                                         \
  } while (0)

#define MC_T_EQ_INT(_a, _b)                                                                        \
  do {                                                                                             \
    long long mc_a_ = (long long)(_a), mc_b_ = (long long)(_b);                                    \
    if (mc_a_ != mc_b_)                                                                            \
      MC_T_FAIL("%s == %lld, expected %s == %lld", #_a, mc_a_, #_b, mc_b_);                        \
  } while (0)

#define MC_T_EQ_STR(_a, _b)                                                                        \
  do {                                                                                             \
    const char *mc_a_ = (_a), *mc_b_ = (_b);                                                       \
    if ((mc_a_ == NULL) || (mc_b_ == NULL) || (strcmp(mc_a_, mc_b_) != 0))                         \
      MC_T_FAIL("%s == \"%s\", expected \"%s\"", #_a, mc_a_ ? mc_a_ : "(null)",                    \
                mc_b_ ? mc_b_ : "(null)");                                                         \
  } while (0)

#define MC_T_CONTAINS(_hay, _needle)                                                               \
  do {                                                                                             \
    const char *mc_h_ = (_hay), *mc_n_ = (_needle);                                                \
    if ((mc_h_ == NULL) || (strstr(mc_h_, mc_n_) == NULL))                                         \
      MC_T_FAIL("%s == \"%s\" does not contain \"%s\"", #_hay, mc_h_ ? mc_h_ : "(null)", mc_n_);   \
  } while (0)

#define MC_T_OK(_call) MC_T_EQ_INT((_call), ncclSuccess)
#define MC_T_NULL(_p)  MC_T_TRUE((_p) == NULL)

/* Case names come from the stringified argument list, split at run time. */
#define MC_T_MAIN(...)                                                                             \
  int main(void)                                                                                   \
  {                                                                                                \
    static void (*const fns[])(void) = {__VA_ARGS__};                                              \
    return mc_t_run(__FILE__, (int)(sizeof(fns) / sizeof(fns[0])), fns, #__VA_ARGS__);             \
  }

#endif /* MC_TEST_H */

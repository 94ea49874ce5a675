/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging and the last-error record (src/core/core_log.c): NCCL_DEBUG_SUBSYS
 * parsing, NCCL_DEBUG_FILE expansion, NCCL's line format, levels, MC_FAIL.
 * Cases that log run in a forked child with their own environment; the
 * parent never enables logging.
 */
#include "core/check.h"
#include "core/log.h"
#include "core/params.h"
#include "core/utils.h"

#include "mc_test.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------- helpers ---------- */

/* Copies s into out with the characters special to POSIX EREs escaped. */
static void re_escape(const char *s, char *out, size_t out_bytes)
{
  size_t used = 0;

  for (; (*s != '\0') && (used + 3 < out_bytes); s++) {
    if (strchr("\\^$.|?*+()[]{}", *s) != NULL)
      out[used++] = '\\';
    out[used++] = *s;
  }
  out[used] = '\0';
}

/* Offset of the first match of the extended regex in text (lines are
 * separate: ^ and $ match at newlines), or -1. */
static long re_find(const char *re, const char *text)
{
  regex_t rx;
  regmatch_t m;
  int rc = regcomp(&rx, re, REG_EXTENDED | REG_NEWLINE);
  long at = -1;

  if (rc != 0)
    MC_T_FAIL("bad regex %s", re);
  if (regexec(&rx, text, 1, &m, 0) == 0)
    at = (long)m.rm_so;
  regfree(&rx);
  return at;
}

/* "^host:pid:tid " of the calling thread, as a regex. */
static void line_prefix_re(char *out, size_t out_bytes)
{
  char host[256];
  char host_re[512];

  mc_host_name(host, sizeof(host));
  re_escape(host, host_re, sizeof(host_re));
  snprintf(out, out_bytes, "^%s:%d:%d ", host_re, (int)getpid(), mc_gettid());
}

/* Points the log at <tmp>/<name> with the given level and subsystems. */
static void log_to_file(const char *level, const char *subsys, const char *name, char *path,
                        size_t path_bytes)
{
  mc_t_tmp_path(name, path, path_bytes);
  setenv("NCCL_DEBUG", level, 1);
  if (subsys != NULL)
    setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  mc_param_reset_for_tests();
}

/* ---------- pure functions ---------- */

static void parse_subsys(void)
{
  unsigned long mask = 0;
  char bad[64];

  MC_T_TRUE(mc_log_parse_subsys("INIT,NET", &mask, bad, sizeof(bad)));
  MC_T_EQ_INT(mask, 0x11);
  MC_T_TRUE(mc_log_parse_subsys("init,net", &mask, bad, sizeof(bad)));
  MC_T_EQ_INT(mask, 0x11);
  MC_T_TRUE(mc_log_parse_subsys("Bootstrap", &mask, bad, sizeof(bad)));
  MC_T_EQ_INT(mask, MC_SUB_BOOTSTRAP);
  MC_T_TRUE(mc_log_parse_subsys("^NET", &mask, bad, sizeof(bad)));
  MC_T_TRUE(mask == ~0x10ul);
  MC_T_TRUE(mc_log_parse_subsys("^INIT,ENV", &mask, bad, sizeof(bad)));
  MC_T_TRUE(mask == ~0x81ul);
  MC_T_TRUE(mc_log_parse_subsys("ALL", &mask, bad, sizeof(bad)));
  MC_T_TRUE(mask == ~0ul);
  MC_T_TRUE(mc_log_parse_subsys("ALLOC_HOST,ALLOC", &mask, bad, sizeof(bad)));
  MC_T_EQ_INT(mask, MC_SUB_ALLOC_HOST | MC_SUB_ALLOC);
  /* blanks around words are ignored, empty entries too */
  MC_T_TRUE(mc_log_parse_subsys(" INIT , NET ", &mask, bad, sizeof(bad)));
  MC_T_EQ_INT(mask, 0x11);
  MC_T_TRUE(mc_log_parse_subsys("INIT,,NET", &mask, bad, sizeof(bad)));
  MC_T_EQ_INT(mask, 0x11);

  /* an unknown word is rejected, named, and the mask left alone */
  mask = 0x1234;
  bad[0] = '\0';
  MC_T_TRUE(!mc_log_parse_subsys("INIT,NETWORK,COLL", &mask, bad, sizeof(bad)));
  MC_T_EQ_STR(bad, "NETWORK");
  MC_T_EQ_INT(mask, 0x1234);
  MC_T_TRUE(!mc_log_parse_subsys("^BOGUS", &mask, NULL, 0));
  MC_T_EQ_INT(mask, 0x1234);
}

static void expand_filename(void)
{
  char out[256];

  mc_log_expand_filename("/tmp/x.%h.%p", "node1", 42, out, sizeof(out));
  MC_T_EQ_STR(out, "/tmp/x.node1.42");
  mc_log_expand_filename("100%%", "node1", 42, out, sizeof(out));
  MC_T_EQ_STR(out, "100%");
  mc_log_expand_filename("a%%p", "node1", 42, out, sizeof(out));
  MC_T_EQ_STR(out, "a%p");
  mc_log_expand_filename("plain", "node1", 42, out, sizeof(out));
  MC_T_EQ_STR(out, "plain");
  /* unknown escapes and a trailing % stay as they are */
  mc_log_expand_filename("%x%", "node1", 42, out, sizeof(out));
  MC_T_EQ_STR(out, "%x%");
  /* a host name cannot add directories or escapes */
  mc_log_expand_filename("log.%h", "a/b%c", 7, out, sizeof(out));
  MC_T_EQ_STR(out, "log.a-b-c");
  /* truncated, never overflowed */
  mc_log_expand_filename("/tmp/%h/%p", "node1", 12345, out, 10);
  MC_T_EQ_STR(out, "/tmp/node");
}

/* ---------- the line format ---------- */

static void child_line_format(void)
{
  char path[512];
  char prefix[600];
  char re[1024];
  const char *text;
  long at;

  log_to_file("INFO", "ALL", "log.%p", path, sizeof(path));
  MC_INFO(MC_SUB_INIT, "hello %d", 7);
  MC_WARN("bad thing");
  mc_log_set_thread_dev(3);
  MC_INFO(MC_SUB_NET, "on device");

  mc_t_tmp_path("log.", path, sizeof(path));
  snprintf(path + strlen(path), sizeof(path) - strlen(path), "%d", (int)getpid());
  text = mc_t_read_file(path);
  line_prefix_re(prefix, sizeof(prefix));
  snprintf(re, sizeof(re), "%s\\[[0-9]+\\] NCCL INFO hello 7$", prefix);
  if (re_find(re, text) < 0)
    MC_T_FAIL("no INFO line matching %s in:\n%s", re, text);
  snprintf(re, sizeof(re), "%s\\[[0-9]+\\] test_log\\.c:[0-9]+ \\(.*\\) NCCL WARN bad thing$",
           prefix);
  at = re_find(re, text);
  if (at < 0)
    MC_T_FAIL("no WARN line matching %s in:\n%s", re, text);
  /* NCCL puts an empty line before every WARN */
  MC_T_TRUE((at >= 2) && (text[at - 1] == '\n') && (text[at - 2] == '\n'));
  /* the function is named */
  MC_T_CONTAINS(text, "(child_line_format) NCCL WARN bad thing\n");
  snprintf(re, sizeof(re), "%s\\[3\\] NCCL INFO on device$", prefix);
  if (re_find(re, text) < 0)
    MC_T_FAIL("no line matching %s in:\n%s", re, text);
  unlink(path);
}

static void line_format(void)
{
  mc_t_run_in_child(child_line_format);
}

static void child_warn_hides_info(void)
{
  char path[512];
  const char *text;

  log_to_file("WARN", "ALL", "warn.log", path, sizeof(path));
  MC_T_TRUE(mc_log_enabled(MC_LOG_WARN, MC_SUB_ALL));
  MC_T_TRUE(!mc_log_enabled(MC_LOG_INFO, MC_SUB_INIT));
  MC_INFO(MC_SUB_INIT, "info %d", 1);
  MC_WARN("warn %d", 2);
  text = mc_t_read_file(path);
  MC_T_TRUE(strstr(text, "info 1") == NULL);
  MC_T_CONTAINS(text, "NCCL WARN warn 2\n");
  unlink(path);
}

static void warn_hides_info(void)
{
  mc_t_run_in_child(child_warn_hides_info);
}

static void child_subsys_filter(void)
{
  char path[512];
  const char *text;

  log_to_file("info", "NET,ENV", "subsys.log", path, sizeof(path)); /* lower case level too */
  MC_T_TRUE(mc_log_enabled(MC_LOG_INFO, MC_SUB_NET));
  MC_T_TRUE(!mc_log_enabled(MC_LOG_INFO, MC_SUB_INIT));
  MC_INFO(MC_SUB_INIT, "init line");
  MC_INFO(MC_SUB_NET, "net line");
  MC_INFO(MC_SUB_INIT | MC_SUB_ENV, "init or env line");
  MC_WARN("warnings ignore the subsystems");
  text = mc_t_read_file(path);
  MC_T_TRUE(strstr(text, "init line") == NULL);
  MC_T_CONTAINS(text, "NCCL INFO net line\n");
  MC_T_CONTAINS(text, "NCCL INFO init or env line\n");
  MC_T_CONTAINS(text, "NCCL WARN warnings ignore the subsystems\n");
  unlink(path);

  /* "^": everything but */
  log_to_file("INFO", "^NET", "subsys2.log", path, sizeof(path));
  MC_INFO(MC_SUB_NET, "net line");
  MC_INFO(MC_SUB_COLL, "coll line");
  text = mc_t_read_file(path);
  MC_T_TRUE(strstr(text, "net line") == NULL);
  MC_T_CONTAINS(text, "NCCL INFO coll line\n");
  unlink(path);
}

static void subsys_filter(void)
{
  mc_t_run_in_child(child_subsys_filter);
}

/* A bad NCCL_DEBUG_SUBSYS is reported on stderr and the default used. */
static void child_bad_subsys_reported(void)
{
  char err_path[512];
  char path[512];
  int fd;

  mc_t_tmp_path("stderr.txt", err_path, sizeof(err_path));
  fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  MC_T_TRUE(fd >= 0);
  MC_T_TRUE(dup2(fd, 2) == 2);
  close(fd);
  log_to_file("INFO", "INIT,BOGUS", "bad.log", path, sizeof(path));
  MC_T_TRUE(mc_log_enabled(MC_LOG_INFO, MC_SUB_INIT));
  MC_T_TRUE(mc_log_enabled(MC_LOG_INFO, MC_SUB_BOOTSTRAP));
  MC_T_TRUE(!mc_log_enabled(MC_LOG_INFO, MC_SUB_NET));
  MC_T_CONTAINS(mc_t_read_file(err_path),
                "NCCL_DEBUG_SUBSYS='INIT,BOGUS': unknown subsystem 'BOGUS'");
  unlink(path);
  unlink(err_path);
}

static void bad_subsys_reported(void)
{
  mc_t_run_in_child(child_bad_subsys_reported);
}

/* NCCL_DEBUG=ABORT aborts at the first WARN. */
static void child_abort_level(void)
{
  char path[512];
  struct rlimit no_core = {0, 0};

  (void)setrlimit(RLIMIT_CORE, &no_core);
  log_to_file("ABORT", NULL, "abort.log", path, sizeof(path));
  MC_INFO(MC_SUB_INIT, "still alive");
  MC_WARN("fatal");
  exit(0); /* not reached when ABORT works */
}

static void abort_level(void)
{
  char path[512];
  int status = mc_t_fork_run(child_abort_level);

  MC_T_TRUE(WIFSIGNALED(status));
  MC_T_EQ_INT(WTERMSIG(status), SIGABRT);
  mc_t_tmp_path("abort.log", path, sizeof(path));
  MC_T_CONTAINS(mc_t_read_file(path), "NCCL INFO still alive\n");
  MC_T_CONTAINS(mc_t_read_file(path), "NCCL WARN fatal\n");
  unlink(path);
}

static ncclResult_t failing_step(void)
{
  return MC_FAIL(ncclSystemError, "step failed");
}

static int check_line;

static ncclResult_t propagating_step(void)
{
  check_line = __LINE__ + 1;
  MC_CHECK(failing_step());
  return ncclSuccess;
}

/* MC_CHECK adds NCCL's "file:line -> code" INFO line. */
static void child_propagation_line(void)
{
  char path[512];
  char expect[128];

  log_to_file("INFO", "INIT", "prop.log", path, sizeof(path));
  MC_T_EQ_INT(propagating_step(), ncclSystemError);
  snprintf(expect, sizeof(expect), "NCCL INFO test_log.c:%d -> 2\n", check_line);
  MC_T_CONTAINS(mc_t_read_file(path), expect);
  MC_T_CONTAINS(mc_t_read_file(path), "NCCL WARN step failed\n");
  unlink(path);
}

static void propagation_line(void)
{
  mc_t_run_in_child(child_propagation_line);
}

/* The version line is printed once, at VERSION level on stdout. */
static void child_version_once(void)
{
  char out_path[512];
  const char *text;
  const char *first;
  int fd;

  mc_t_tmp_path("stdout.txt", out_path, sizeof(out_path));
  fflush(stdout);
  fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  MC_T_TRUE(fd >= 0);
  MC_T_TRUE(dup2(fd, 1) == 1);
  close(fd);
  setenv("NCCL_DEBUG", "VERSION", 1);
  mc_param_reset_for_tests();
  mc_log_version_once();
  mc_log_version_once();
  MC_INFO(MC_SUB_ALL, "not at VERSION level");
  MC_WARN("nor this");
  fflush(stdout);
  text = mc_t_read_file(out_path);
  first = strstr(text, "NCCL version ");
  MC_T_TRUE(first != NULL);
  MC_T_TRUE(strstr(first + 1, "NCCL version ") == NULL);
  MC_T_CONTAINS(text, "(meshccl, host memory)\n");
  MC_T_TRUE(strstr(text, "not at VERSION level") == NULL);
  MC_T_TRUE(strstr(text, "nor this") == NULL);
  unlink(out_path);
}

static void version_once(void)
{
  mc_t_run_in_child(child_version_once);
}

/* ---------- last error ---------- */

struct thread_err {
  char seen_before[256];
  char seen_after[256];
  char copy[256];
  ncclResult_t res;
};

static void *record_in_thread(void *arg)
{
  struct thread_err *t = arg;

  /* a thread without its own error sees the process's last one */
  snprintf(t->seen_before, sizeof(t->seen_before), "%s", mc_error_last());
  t->res = MC_FAIL(ncclRemoteError, "thread error %d", 2);
  snprintf(t->seen_after, sizeof(t->seen_after), "%s", mc_error_last());
  mc_error_last_copy(t->copy, sizeof(t->copy));
  return NULL;
}

static void fail_records_last_error(void)
{
  struct thread_err t;
  pthread_t th;
  char copy[8];

  MC_T_TRUE(!mc_log_enabled(MC_LOG_WARN, MC_SUB_ALL)); /* this process does not log */
  errno = EBADF;
  MC_T_EQ_INT(MC_FAIL(ncclInvalidUsage, "bad %s value %d", "thing", 5), ncclInvalidUsage);
  MC_T_EQ_INT(errno, EBADF); /* preserved */
  MC_T_EQ_STR(ncclGetLastError(NULL), "bad thing value 5");
  MC_T_EQ_STR(mc_t_last_error(), "bad thing value 5");
  MC_T_EQ_STR(mc_error_last(), "bad thing value 5");

  memset(&t, 0, sizeof(t));
  MC_T_EQ_INT(pthread_create(&th, NULL, record_in_thread, &t), 0);
  MC_T_EQ_INT(pthread_join(th, NULL), 0);
  MC_T_EQ_INT(t.res, ncclRemoteError);
  MC_T_EQ_STR(t.seen_before, "bad thing value 5");
  MC_T_EQ_STR(t.seen_after, "thread error 2");
  MC_T_EQ_STR(t.copy, "thread error 2");

  /* this thread keeps its own error ... */
  MC_T_EQ_STR(mc_error_last(), "bad thing value 5");
  /* ... and, once cleared, sees the process's latest */
  mc_error_clear_thread();
  MC_T_EQ_STR(mc_error_last(), "thread error 2");
  mc_error_last_copy(copy, sizeof(copy));
  MC_T_EQ_STR(copy, "");

  /* truncated copies stay terminated */
  (void)MC_FAIL(ncclInternalError, "0123456789");
  mc_error_last_copy(copy, sizeof(copy));
  MC_T_EQ_STR(copy, "0123456");
}

/* The test seam turns logging on and off again. */
static void set_for_tests_resets_log(void)
{
  char path[512];

  mc_t_tmp_path("seam.log", path, sizeof(path));
  mc_param_set_for_tests(MC_P_DEBUG_FILE, path);
  mc_param_set_for_tests(MC_P_DEBUG, "WARN");
  MC_T_TRUE(mc_log_enabled(MC_LOG_WARN, MC_SUB_ALL));
  mc_param_set_for_tests(MC_P_DEBUG, NULL);
  mc_param_set_for_tests(MC_P_DEBUG_FILE, NULL);
  MC_T_TRUE(!mc_log_enabled(MC_LOG_WARN, MC_SUB_ALL));
  unlink(path);
}

/* A sink receives every line, whatever NCCL_DEBUG says, with level, subsystems,
 * file, line and function; removing it goes back to meshccl's own printing. */
struct sink_seen {
  int n;
  enum mc_log_level level[4];
  unsigned long sub[4];
  char file[4][64];
  int line[4];
  char func[4][64];
  char msg[4][128];
};

static void sink_record(void *arg, enum mc_log_level level, unsigned long sub, const char *file,
                        int line, const char *func, const char *msg)
{
  struct sink_seen *s = arg;

  if (s->n >= 4)
    return;
  s->level[s->n] = level;
  s->sub[s->n] = sub;
  snprintf(s->file[s->n], sizeof(s->file[0]), "%s", file);
  s->line[s->n] = line;
  snprintf(s->func[s->n], sizeof(s->func[0]), "%s", func);
  snprintf(s->msg[s->n], sizeof(s->msg[0]), "%s", msg);
  s->n++;
}

static void child_sink_gets_lines(void)
{
  char path[512];
  struct sink_seen seen;
  const char *text;
  int line;

  memset(&seen, 0, sizeof(seen));
  log_to_file("WARN", "INIT", "sink.log", path, sizeof(path));
  mc_log_set_sink(sink_record, &seen);
  MC_T_TRUE(mc_log_enabled(MC_LOG_INFO, MC_SUB_NET)); /* the sink filters, not NCCL_DEBUG */
  line = __LINE__ + 1;
  MC_INFO(MC_SUB_NET, "net %d", 1);
  errno = EPIPE;
  (void)MC_FAIL(ncclRemoteError, "peer %s gone", "x");
  MC_T_EQ_INT(errno, EPIPE);
  MC_T_EQ_STR(mc_error_last(), "peer x gone");
  mc_log_set_sink(NULL, NULL);
  MC_INFO(MC_SUB_INIT, "not for the sink");
  MC_WARN("printed again");
  MC_T_EQ_INT(seen.n, 2);
  MC_T_EQ_INT(seen.level[0], MC_LOG_INFO);
  MC_T_EQ_INT((long)seen.sub[0], (long)MC_SUB_NET);
  MC_T_EQ_STR(seen.file[0], "test_log.c");
  MC_T_EQ_INT(seen.line[0], line);
  MC_T_EQ_STR(seen.func[0], "child_sink_gets_lines");
  MC_T_EQ_STR(seen.msg[0], "net 1");
  MC_T_EQ_INT(seen.level[1], MC_LOG_WARN);
  MC_T_EQ_STR(seen.msg[1], "peer x gone");
  text = mc_t_read_file(path);
  MC_T_TRUE(strstr(text, "net 1") == NULL);
  MC_T_TRUE(strstr(text, "peer x gone") == NULL);
  MC_T_TRUE(strstr(text, "not for the sink") == NULL); /* INFO is off in the file's config */
  MC_T_CONTAINS(text, "NCCL WARN printed again\n");
  unlink(path);
}

static void sink_gets_lines(void)
{
  mc_t_run_in_child(child_sink_gets_lines);
}

MC_T_MAIN(parse_subsys, expand_filename, line_format, warn_hides_info, subsys_filter,
          bad_subsys_reported, abort_level, propagation_line, version_once, fail_records_last_error,
          set_for_tests_resets_log, sink_gets_lines)

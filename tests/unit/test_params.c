/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parameters (src/core/core_params.c): defaults, the test seam, "did you
 * mean", the configuration file and its precedence, and the docs/ENV.md dump.
 * The loader reads the environment once per process, so every case that
 * changes the environment runs in a forked child.
 */
#include "core/params.h"

#include "mc_test.h"

#include <limits.h>
#include <stdint.h>
#include <unistd.h>

/* Every declaration of params.def, straight from the file. */
static const struct {
  const char *env;
  bool is_int;
  long long def;
  long long min;
  long long max;
  const char *help;
} all_params[] = {
#define MC_PARAM_INT(_id, _env, _def, _min, _max, _help)                                           \
  {_env, true, (_def), (_min), (_max), _help},
#define MC_PARAM_STR(_id, _env, _def, _help) {_env, false, 0, 0, 0, _help},
#include "core/params.def"
#undef MC_PARAM_INT
#undef MC_PARAM_STR
};

#define N_NAMES ((int)(sizeof(all_params) / sizeof(all_params[0])))

/* ---------- cases ---------- */

static void child_defaults(void)
{
  mc_param_reset_for_tests();
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 34);
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_SLEEP_MSEC), 100);
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_SNDBUF), -1);
  MC_T_EQ_INT(mc_param_int(MC_P_INIT_TIMEOUT), 300);
  MC_T_EQ_INT(mc_param_int(MC_P_COMM_BLOCKING), INT32_MIN);
  MC_T_EQ_INT(mc_param_int(MC_P_DEVICE), -1);
  MC_T_EQ_STR(mc_param_str(MC_P_DEBUG_SUBSYS), "INIT,BOOTSTRAP,ENV");
  MC_T_NULL(mc_param_str(MC_P_SOCKET_IFNAME));
  MC_T_NULL(mc_param_str(MC_P_DEBUG));
  MC_T_NULL(mc_param_str(MC_P_COMM_ID));
  for (int id = 0; id < MC_P_COUNT; id++)
    MC_T_EQ_INT(mc_param_source((enum mc_param_id)id), MC_PARAM_SRC_DEFAULT);
}

static void defaults(void)
{
  MC_T_EQ_STR(mc_param_name(MC_P_SOCKET_IFNAME), "NCCL_SOCKET_IFNAME");
  MC_T_EQ_STR(mc_param_name(MC_P_INIT_TIMEOUT), "MESHCCL_INIT_TIMEOUT");
  mc_t_run_in_child(child_defaults);
}

/* The declarations themselves: NCCL_* or MESHCCL_* names (the loader warns
 * about unknown names with these prefixes only), each
 * once, with a help string, and integer defaults inside their range (the
 * loader would refuse such a value from the environment). */
static void declarations_valid(void)
{
  for (int i = 0; i < N_NAMES; i++) {
    const char *env = all_params[i].env;

    if ((strncmp(env, "NCCL_", 5) != 0) && (strncmp(env, "MESHCCL_", 8) != 0))
      MC_T_FAIL("params.def: %s is neither NCCL_* nor MESHCCL_*", env);
    for (int j = 0; j < i; j++) {
      if (strcmp(env, all_params[j].env) == 0)
        MC_T_FAIL("params.def: %s is declared twice", env);
    }
    if ((all_params[i].help == NULL) || (strlen(all_params[i].help) < 10))
      MC_T_FAIL("params.def: %s has no help string", env);
    if (all_params[i].is_int && (all_params[i].min > all_params[i].max))
      MC_T_FAIL("params.def: %s has min %lld > max %lld", env, all_params[i].min,
                all_params[i].max);
    if (all_params[i].is_int &&
        ((all_params[i].def < all_params[i].min) || (all_params[i].def > all_params[i].max)))
      MC_T_FAIL("params.def: %s has default %lld outside %lld..%lld", env, all_params[i].def,
                all_params[i].min, all_params[i].max);
  }
}

static void set_for_tests(void)
{
  /* a valid value */
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "5");
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 5);
  MC_T_EQ_INT(mc_param_source(MC_P_SOCKET_RETRY_CNT), MC_PARAM_SRC_TEST);
  /* hex and surrounding blanks after the number are accepted */
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "0x10 ");
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 16);
  /* back to the default */
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, NULL);
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 34);
  MC_T_EQ_INT(mc_param_source(MC_P_SOCKET_RETRY_CNT), MC_PARAM_SRC_DEFAULT);

  /* out of range, not a number, trailing junk, empty: the default stays */
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "1000001");
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 34);
  MC_T_EQ_INT(mc_param_source(MC_P_SOCKET_RETRY_CNT), MC_PARAM_SRC_DEFAULT);
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "-1");
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 34);
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "abc");
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 34);
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "12x");
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 34);
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "");
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 34);
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "99999999999999999999999");
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 34);
  MC_T_EQ_INT(mc_param_source(MC_P_SOCKET_RETRY_CNT), MC_PARAM_SRC_DEFAULT);
  /* the bounds themselves are valid */
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "1000000");
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 1000000);
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "0");
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 0);
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, NULL);

  /* strings, and back to the default (NULL or the declared one) */
  mc_param_set_for_tests(MC_P_SOCKET_IFNAME, "=eth7");
  MC_T_EQ_STR(mc_param_str(MC_P_SOCKET_IFNAME), "=eth7");
  MC_T_EQ_INT(mc_param_source(MC_P_SOCKET_IFNAME), MC_PARAM_SRC_TEST);
  mc_param_set_for_tests(MC_P_SOCKET_IFNAME, NULL);
  MC_T_NULL(mc_param_str(MC_P_SOCKET_IFNAME));
  mc_param_set_for_tests(MC_P_DEBUG_SUBSYS, "NET");
  MC_T_EQ_STR(mc_param_str(MC_P_DEBUG_SUBSYS), "NET");
  mc_param_set_for_tests(MC_P_DEBUG_SUBSYS, NULL);
  MC_T_EQ_STR(mc_param_str(MC_P_DEBUG_SUBSYS), "INIT,BOOTSTRAP,ENV");
  MC_T_EQ_INT(mc_param_source(MC_P_DEBUG_SUBSYS), MC_PARAM_SRC_DEFAULT);
}

static void edit_distance(void)
{
  char long_name[200];

  MC_T_EQ_INT(mc_param_edit_distance("", ""), 0);
  MC_T_EQ_INT(mc_param_edit_distance("", "abc"), 3);
  MC_T_EQ_INT(mc_param_edit_distance("abc", ""), 3);
  MC_T_EQ_INT(mc_param_edit_distance("kitten", "sitting"), 3);
  MC_T_EQ_INT(mc_param_edit_distance("flaw", "lawn"), 2);
  MC_T_EQ_INT(mc_param_edit_distance("NCCL_DEBUG", "NCCL_DEBUG"), 0);
  /* case does not count */
  MC_T_EQ_INT(mc_param_edit_distance("nccl_debug", "NCCL_DEBUG"), 0);
  MC_T_EQ_INT(mc_param_edit_distance("NCCL_SOCKET_IFNAM", "NCCL_SOCKET_IFNAME"), 1);
  MC_T_EQ_INT(mc_param_edit_distance("NCCL_DEBGU", "NCCL_DEBUG"), 2);
  /* symmetric */
  MC_T_EQ_INT(mc_param_edit_distance("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAM"), 1);
  /* names too long to be ours are "infinitely" far */
  memset(long_name, 'A', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = '\0';
  MC_T_EQ_INT(mc_param_edit_distance(long_name, "NCCL_DEBUG"), INT_MAX);
}

static void closest(void)
{
  MC_T_EQ_STR(mc_param_closest("NCCL_SOCKET_IFNAM"), "NCCL_SOCKET_IFNAME");
  MC_T_EQ_STR(mc_param_closest("NCCL_SOCKET_IFNAMES"), "NCCL_SOCKET_IFNAME");
  MC_T_EQ_STR(mc_param_closest("nccl_debug_subsys"), "NCCL_DEBUG_SUBSYS");
  MC_T_EQ_STR(mc_param_closest("MESHCCL_INIT_TIMOUT"), "MESHCCL_INIT_TIMEOUT");
  MC_T_EQ_STR(mc_param_closest("NCCL_DEBUG"), "NCCL_DEBUG");
  MC_T_NULL(mc_param_closest("NCCL_COMPLETELY_DIFFERENT_THING"));
  MC_T_NULL(mc_param_closest("XYZ"));
  MC_T_NULL(mc_param_closest(""));
}

static void child_conf_file(void)
{
  char conf[512];
  char log[512];
  const char *text;
  char expect[600];
  char *dump = NULL;
  size_t dump_len = 0;
  FILE *mem;

  mc_t_tmp_path("nccl.conf", conf, sizeof(conf));
  mc_t_tmp_path("conf.log", log, sizeof(log));
  mc_t_write_file(conf, "# a comment\n"
                        "NCCL_SOCKET_IFNAME=eth9\n"
                        "this line has no equals sign\n"
                        "   \n"
                        "  NCCL_SOCKET_RETRY_CNT =  7  \n"
                        "NCCL_DEBUG_SUBSYS=INIT\n"
                        "NCCL_SOCKET_IFNAM=eth8\n"
                        "NCCL_SOCKET_RCVBUF=lots\n"
                        "MESHCCL_INIT_TIMEOUT=45\n");
  setenv("NCCL_CONF_FILE", conf, 1);
  setenv("NCCL_DEBUG_SUBSYS", "NET", 1); /* the environment wins over the file */
  setenv("MESHCCL_INIT_TIMEOUT", "60", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", log, 1);
  mc_param_reset_for_tests();

  MC_T_EQ_STR(mc_param_str(MC_P_SOCKET_IFNAME), "eth9");
  MC_T_EQ_INT(mc_param_source(MC_P_SOCKET_IFNAME), MC_PARAM_SRC_CONF_FILE);
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 7);
  MC_T_EQ_INT(mc_param_source(MC_P_SOCKET_RETRY_CNT), MC_PARAM_SRC_CONF_FILE);
  MC_T_EQ_STR(mc_param_str(MC_P_DEBUG_SUBSYS), "NET");
  MC_T_EQ_INT(mc_param_source(MC_P_DEBUG_SUBSYS), MC_PARAM_SRC_ENV);
  MC_T_EQ_INT(mc_param_int(MC_P_INIT_TIMEOUT), 60);
  MC_T_EQ_INT(mc_param_source(MC_P_INIT_TIMEOUT), MC_PARAM_SRC_ENV);
  /* an invalid value in the file keeps the default */
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RCVBUF), -1);
  MC_T_EQ_INT(mc_param_source(MC_P_SOCKET_RCVBUF), MC_PARAM_SRC_DEFAULT);

  /* the dump says where each changed value came from */
  mem = open_memstream(&dump, &dump_len);
  MC_T_TRUE(mem != NULL);
  mc_param_dump(mem, false, true);
  fclose(mem);
  snprintf(expect, sizeof(expect), "%s:2;", conf);
  MC_T_CONTAINS(dump, expect);
  snprintf(expect, sizeof(expect), "%s:5;", conf);
  MC_T_CONTAINS(dump, expect);
  MC_T_CONTAINS(dump, "environment");
  MC_T_TRUE(strstr(dump, "NCCL_SOCKET_SNDBUF") == NULL); /* changed_only */
  free(dump);

  /* the loader's complaints are logged once, at WARN */
  mc_param_report_once();
  text = mc_t_read_file(log);
  snprintf(expect, sizeof(expect), "%s:3: expected NAME=value, found 'this line has no equals sign",
           conf);
  MC_T_CONTAINS(text, expect);
  MC_T_CONTAINS(text, "unknown variable NCCL_SOCKET_IFNAM");
  MC_T_CONTAINS(text, "did you mean NCCL_SOCKET_IFNAME?");
  snprintf(expect, sizeof(expect), "NCCL_SOCKET_RCVBUF='lots' (%s:8) is not an integer", conf);
  MC_T_CONTAINS(text, expect);
  /* the comment and the blank line are not complaints */
  MC_T_TRUE(strstr(text, "a comment") == NULL);
  unlink(log);
}

static void conf_file(void)
{
  char conf[512];

  mc_t_run_in_child(child_conf_file);
  mc_t_tmp_path("nccl.conf", conf, sizeof(conf));
  MC_T_EQ_INT(unlink(conf), 0);
}

static void child_conf_file_missing(void)
{
  char log[512];
  char conf[512];

  mc_t_tmp_path("missing.log", log, sizeof(log));
  mc_t_tmp_path("does-not-exist.conf", conf, sizeof(conf));
  setenv("NCCL_CONF_FILE", conf, 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", log, 1);
  setenv("NCCL_SOCKET_IFNAM", "eth0", 1); /* unknown in the environment too */
  setenv("NCCL_IB_HCA", "mlx5", 1);       /* NCCL's, not used: no warning */
  mc_param_reset_for_tests();
  MC_T_NULL(mc_param_str(MC_P_SOCKET_IFNAME));
  mc_param_report_once();
  MC_T_CONTAINS(mc_t_read_file(log), "does-not-exist.conf cannot be opened");
  MC_T_CONTAINS(mc_t_read_file(log),
                "unknown variable NCCL_SOCKET_IFNAM (environment); did you mean "
                "NCCL_SOCKET_IFNAME?");
  MC_T_TRUE(strstr(mc_t_read_file(log), "NCCL_IB_HCA") == NULL);
  unlink(log);
}

static void conf_file_missing(void)
{
  mc_t_run_in_child(child_conf_file_missing);
}

/* "The first source that sets a name wins", also when its value is invalid:
 * the warning promises the default, so a later source must not be used. */
static void child_invalid_env_not_overridden(void)
{
  char conf[512];
  char log[512];
  char expect[600];

  mc_t_tmp_path("override.conf", conf, sizeof(conf));
  mc_t_tmp_path("override.log", log, sizeof(log));
  mc_t_write_file(conf, "NCCL_SOCKET_RETRY_CNT=7\n");
  setenv("NCCL_CONF_FILE", conf, 1);
  setenv("NCCL_SOCKET_RETRY_CNT", "seven", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", log, 1);
  mc_param_reset_for_tests();
  mc_param_report_once();
  snprintf(expect, sizeof(expect),
           "NCCL_SOCKET_RETRY_CNT='seven' (environment) is not an integer in [0, 1000000]; "
           "using the default 34");
  MC_T_CONTAINS(mc_t_read_file(log), expect);
  MC_T_EQ_INT(mc_param_int(MC_P_SOCKET_RETRY_CNT), 34);
  MC_T_EQ_INT(mc_param_source(MC_P_SOCKET_RETRY_CNT), MC_PARAM_SRC_DEFAULT);
  unlink(log);
  unlink(conf);
}

static void invalid_env_not_overridden(void)
{
  mc_t_run_in_child(child_invalid_env_not_overridden);
}

static void dump_markdown(void)
{
  char *dump = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&dump, &len);
  char row[128];

  MC_T_TRUE(mem != NULL);
  mc_param_dump(mem, true, false);
  fclose(mem);
  MC_T_CONTAINS(dump, "| Variable | Default | Meaning |");
  for (int i = 0; i < N_NAMES; i++) {
    snprintf(row, sizeof(row), "| `%s` | `", all_params[i].env);
    if (strstr(dump, row) == NULL) {
      free(dump);
      MC_T_FAIL("markdown dump has no row for %s", all_params[i].env);
    }
  }
  MC_T_CONTAINS(dump, "| `NCCL_SOCKET_IFNAME` | `unset` |");
  MC_T_CONTAINS(dump, "| `MESHCCL_INIT_TIMEOUT` | `300` |");
  MC_T_CONTAINS(dump, "| `NCCL_COMM_BLOCKING` | `unset` |");
  MC_T_CONTAINS(dump, "| `NCCL_DEBUG_SUBSYS` | `INIT,BOOTSTRAP,ENV` |");
  free(dump);
}

/* MESHCCL_SECRET is shown by its length only, in dumps (meshccl-env) as in the log. */
static void secret_never_shown(void)
{
  char *dump = NULL;
  size_t len = 0;
  FILE *mem;

  mc_param_set_for_tests(MC_P_SECRET, "hunter2-job-secret");
  mem = open_memstream(&dump, &len);
  MC_T_TRUE(mem != NULL);
  mc_param_dump(mem, false, true);
  fclose(mem);
  mc_param_set_for_tests(MC_P_SECRET, NULL);
  if (strstr(dump, "hunter2") != NULL) {
    free(dump);
    MC_T_FAIL("the dump shows the secret");
  }
  MC_T_CONTAINS(dump, "(secret, 18 characters)");
  free(dump);
}

MC_T_MAIN(defaults, declarations_valid, set_for_tests, edit_distance, closest, conf_file,
          conf_file_missing, invalid_env_not_overridden, dump_markdown, secret_never_shown)

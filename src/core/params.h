/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Typed access to the parameters declared in params.def. Values are loaded
 * once per process (thread-safe) from the environment, then from
 * NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf; the first source that
 * sets a name wins. Invalid values fall back to the default with a warning.
 */
#ifndef MC_CORE_PARAMS_H
#define MC_CORE_PARAMS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum mc_param_id {
#define MC_PARAM_INT(_id, _env, _def, _min, _max, _help) MC_P_##_id,
#define MC_PARAM_STR(_id, _env, _def, _help)             MC_P_##_id,
#include "params.def"
#undef MC_PARAM_INT
#undef MC_PARAM_STR
  MC_P_COUNT
};

enum mc_param_source {
  MC_PARAM_SRC_DEFAULT,
  MC_PARAM_SRC_ENV,
  MC_PARAM_SRC_CONF_FILE,
  MC_PARAM_SRC_TEST
};

/* Value of an integer parameter. */
int64_t mc_param_int(enum mc_param_id id);
/* Value of a string parameter; NULL when unset and without default. */
const char *mc_param_str(enum mc_param_id id);
/* Where the value came from. */
enum mc_param_source mc_param_source(enum mc_param_id id);
/* Environment name of the parameter ("NCCL_SOCKET_IFNAME"). */
const char *mc_param_name(enum mc_param_id id);

/* Id of the parameter whose environment name is name, or -1 (exact, case-sensitive). */
int mc_param_lookup(const char *name);
/* True for MC_PARAM_INT parameters, false for MC_PARAM_STR ones. */
bool mc_param_is_int(enum mc_param_id id);
/* Number of parameters (MC_P_COUNT), for tables indexed by id. */
int mc_param_count(void);

/* Reads parameter id from the environment again (unset: the default; the
 * configuration files are not read again). Thread-safe with the readers of
 * other parameters; the previous string value stays allocated (retired)
 * so that pointers returned earlier by mc_param_str stay valid. */
void mc_param_reload_env(enum mc_param_id id);

/* Frees every string value (and those mc_param_reload_env retired). Only
 * for a library being unloaded (the mesh plugin's destructor, at dlclose):
 * no reader may remain, and the values are not loaded again. */
void mc_param_unload(void);

/* Logs, once per process, the warnings gathered while loading (unknown or
 * invalid variables) and one INFO(ENV) line per parameter not at its default. */
void mc_param_report_once(void);

/* Prints every parameter: a text table, or docs/ENV.md's markdown. */
void mc_param_dump(FILE *out, bool markdown, bool changed_only);

/* Levenshtein distance, for "did you mean" (exposed for tests). */
int mc_param_edit_distance(const char *a, const char *b);
/* Closest known variable name to `name`, or NULL when nothing is close. */
const char *mc_param_closest(const char *name);

/* Test seams: set a value as if it came from the environment; reset reloads. */
void mc_param_set_for_tests(enum mc_param_id id, const char *value);
void mc_param_reset_for_tests(void);

#endif /* MC_CORE_PARAMS_H */

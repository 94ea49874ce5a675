/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL_ALGO and NCCL_PROTO (topo_algo.h): which algorithms and protocols each collective
 * may use, in NCCL's syntax (src/graph/tuning.cc, parseList and the
 * per-collective "func:list;func:list" form of NCCL 2.24+): a comma list of
 * names, case-insensitive, a leading ^ allowing all but the names; sections
 * separated by ';', each optionally prefixed by a collective ("allreduce:").
 * A section without a prefix applies to every collective; later sections
 * win. Pure: no environment access, no state (tested in
 * tests/unit/test_coll_algos.c; read at init by init_comm.c).
 */
#include "topo/topo_algo.h"

#include <stdbool.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "check.h"
#include "log.h"

#define LIST_BYTES 512

struct name_bit {
  const char *name;
  int bit;
};

/* Every algorithm of the table list that NCCL_ALGO may name (topo_algo.h),
 * then NCCL's algorithm names and numbers (NCCL_ALGO_*) without a host
 * implementation. */
#define ALGO_NAME_X(_id, _name, _num, _ops, _env) {(_env) ? #_name : NULL, _num},
static const struct name_bit algo_names[] = {MC_ALGO_LIST(ALGO_NAME_X){"CollnetDirect", 2},
                                             {"CollnetChain", 3},
                                             {"NVLS", 4},
                                             {"NVLSTree", 5},
                                             {"PAT", 6}};
#undef ALGO_NAME_X

static const struct name_bit proto_names[] = {{"LL", 0}, {"LL128", 1}, {"Simple", 2}};

/* Collective names of the per-collective form (enum mc_coll_kind). */
static const struct name_bit coll_names[] = {
    {"allreduce", MC_COLL_ALLREDUCE},
    {"broadcast", MC_COLL_BROADCAST},
    {"reduce", MC_COLL_REDUCE},
    {"allgather", MC_COLL_ALLGATHER},
    {"reducescatter", MC_COLL_REDUCESCATTER},
};

static char *trim(char *s)
{
  char *e;

  while ((*s == ' ') || (*s == '\t'))
    s++;
  e = s + strlen(s);
  while ((e > s) && ((e[-1] == ' ') || (e[-1] == '\t')))
    *--e = '\0';
  return s;
}

static int find(const struct name_bit *tab, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if ((tab[i].name != NULL) && (strcasecmp(tab[i].name, name) == 0))
      return tab[i].bit;
  return -1;
}

/* One list ("Ring,Tree" or "^Tree") into a mask. */
static ncclResult_t parse_list(const char *var, char *list, const struct name_bit *tab, size_t n,
                               uint32_t *mask_out, uint32_t *named_io)
{
  bool exclude = false;
  uint32_t mask = 0;
  char *save = NULL;

  list = trim(list);
  if (list[0] == '^') {
    exclude = true;
    list++;
  }
  for (char *tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    char *name = trim(tok);
    int bit;
    if (name[0] == '\0')
      continue;
    bit = find(tab, n, name);
    if (bit < 0) {
      char known[LIST_BYTES] = "";
      for (size_t i = 0; i < n; i++)
        if (tab[i].name != NULL)
          snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
                   (known[0] != '\0') ? ", " : "", tab[i].name);
      return MC_FAIL(ncclInvalidUsage, "%s: unknown name '%s' (known: %s)", var, name, known);
    }
    mask |= 1u << bit;
  }
  *mask_out = exclude ? ~mask : mask;
  if (!exclude)
    *named_io |= mask;
  return ncclSuccess;
}

/* A whole variable into per-collective masks (all bits when value is NULL). */
static ncclResult_t parse_var(const char *var, const char *value, const struct name_bit *tab,
                              size_t n, uint32_t masks[MC_COLL_KINDS], uint32_t *named_out)
{
  char buf[LIST_BYTES];
  char *save = NULL;

  for (int k = 0; k <= MC_COLL_RECV; k++)
    masks[k] = MC_ALGO_MASK_ALL;
  *named_out = 0;
  if (value == NULL)
    return ncclSuccess;
  if (strlen(value) >= sizeof(buf))
    return MC_FAIL(ncclInvalidUsage, "%s: value longer than %zu characters", var, sizeof(buf) - 1);
  snprintf(buf, sizeof(buf), "%s", value);
  for (char *sec = strtok_r(buf, ";", &save); sec != NULL; sec = strtok_r(NULL, ";", &save)) {
    char *colon = strchr(sec, ':');
    uint32_t mask = 0;
    int coll = -1;
    if (colon != NULL) {
      *colon = '\0';
      coll = find(coll_names, sizeof(coll_names) / sizeof(coll_names[0]), trim(sec));
      if (coll < 0)
        return MC_FAIL(ncclInvalidUsage,
                       "%s: unknown collective '%s' (known: allreduce, broadcast, reduce, "
                       "allgather, reducescatter)",
                       var, trim(sec));
      sec = colon + 1;
    }
    MC_CHECK(parse_list(var, sec, tab, n, &mask, named_out));
    for (int k = 0; k <= MC_COLL_RECV; k++)
      if ((coll < 0) || (coll == k))
        masks[k] = mask;
  }
  return ncclSuccess;
}

ncclResult_t mc_algo_env_parse(const char *algo, const char *proto, struct mc_algo_env *out)
{
  struct mc_algo_env env;
  uint32_t algos_named = 0;

  MC_CHECK(parse_var("NCCL_ALGO", algo, algo_names, sizeof(algo_names) / sizeof(algo_names[0]),
                     env.allowed, &algos_named));
  MC_CHECK(parse_var("NCCL_PROTO", proto, proto_names, sizeof(proto_names) / sizeof(proto_names[0]),
                     env.protos, &env.protos_named));
  *out = env;
  return ncclSuccess;
}

bool mc_algo_env_wants_gpu_proto(const struct mc_algo_env *env)
{
  const uint32_t gpu_protos = (1u << 0) | (1u << 1); /* NCCL_PROTO_LL, NCCL_PROTO_LL128 */

  for (int k = 0; k < MC_COLL_KINDS; k++)
    if (((env->protos[k] >> MC_PROTO_SIMPLE) & 1u) == 0)
      return true;
  return (env->protos_named & gpu_protos) != 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL 2.30's parameter API (ncclParamBind, ncclParamGet*, ncclParamGet,
 * ncclParamGetParameter, ncclParamGetAllParameterKeys, ncclParamDumpAll)
 * over src/core/params.def: a key is a variable's name ("NCCL_DEBUG") and
 * the value is the one meshccl uses (environment, configuration file or
 * default). Handles are entries of a static table, one per parameter, so
 * they live as long as the library and are never freed. Texts returned
 * by value are per thread, valid until that thread's next call of the same
 * function (NCCL's contract in nccl.h).
 */
#include "comm.h"
#include "init_api.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "params.h"

/* NCCL's handle type, opaque to users: which parameter it names. */
struct ncclParamHandle {
  int id;
};

#define MC_PARAM_TEXT_BYTES 4096

static struct ncclParamHandle handles[MC_P_COUNT];
static const char *key_table[MC_P_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static __thread char str_text[MC_PARAM_TEXT_BYTES];
static __thread char param_text[MC_PARAM_TEXT_BYTES];

static void tables_init(void)
{
  for (int id = 0; id < MC_P_COUNT; id++) {
    handles[id].id = id;
    key_table[id] = mc_param_name((enum mc_param_id)id);
  }
}

static ncclResult_t handle_check(ncclParamHandle_t h, const void *out, const char *call)
{
  pthread_once(&tables_once, tables_init);
  if (h == NULL)
    return MC_FAIL(ncclInvalidArgument, "%s : h argument is NULL", call);
  if (((uintptr_t)h < (uintptr_t)&handles[0]) ||
      ((uintptr_t)h >= (uintptr_t)&handles[MC_P_COUNT]) ||
      (((uintptr_t)h - (uintptr_t)&handles[0]) % sizeof(handles[0]) != 0))
    return MC_FAIL(ncclInvalidArgument, "%s : h %p is not a handle from ncclParamBind", call,
                   (const void *)h);
  if (out == NULL)
    return MC_FAIL(ncclInvalidArgument, "%s : out argument is NULL", call);
  return ncclSuccess;
}

/* The value as text into buf ("" for an unset string parameter). */
static void value_text(int id, char *buf, size_t buf_bytes)
{
  if (mc_param_is_int((enum mc_param_id)id)) {
    snprintf(buf, buf_bytes, "%" PRId64, mc_param_int((enum mc_param_id)id));
  } else {
    const char *s = mc_param_str((enum mc_param_id)id);
    snprintf(buf, buf_bytes, "%s", (s != NULL) ? s : "");
  }
}

NCCL_API(ncclResult_t, ncclParamBind, ncclParamHandle_t *out, const char *key);
ncclResult_t ncclParamBind(ncclParamHandle_t *out, const char *key)
{
  int id;

  pthread_once(&tables_once, tables_init);
  if (out == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclParamBind : out argument is NULL");
  if (key == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclParamBind : key argument is NULL");
  id = mc_param_lookup(key);
  if (id < 0)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclParamBind : no parameter is named '%s' (docs/ENV.md lists them)", key);
  *out = &handles[id];
  return ncclSuccess;
}

/* The value of h as an integer in [lo, hi] (string parameters must hold a whole number). */
static ncclResult_t get_int(ncclParamHandle_t h, const void *out, int64_t lo, uint64_t hi,
                            bool is_unsigned, const char *call, int64_t *val_out)
{
  enum mc_param_id id;
  int64_t v;

  MC_CHECK(handle_check(h, out, call));
  id = (enum mc_param_id)h->id;
  if (mc_param_is_int(id)) {
    v = mc_param_int(id);
  } else {
    const char *s = mc_param_str(id);
    char *end = NULL;
    long long x;

    errno = 0;
    x = (s != NULL) ? strtoll(s, &end, 0) : 0;
    if ((s == NULL) || (errno != 0) || (end == s) || (*end != '\0'))
      return MC_FAIL(ncclInvalidArgument, "%s : %s is '%s', not an integer", call,
                     mc_param_name(id), (s != NULL) ? s : "(unset)");
    v = x;
  }
  if ((v < lo) || (is_unsigned ? ((v < 0) || ((uint64_t)v > hi)) : (v > (int64_t)hi)))
    return MC_FAIL(ncclInvalidArgument, "%s : %s is %" PRId64 ", out of the output type's range",
                   call, mc_param_name(id), v);
  *val_out = v;
  return ncclSuccess;
}

#define PARAM_GET_INT(_suffix, _type, _lo, _hi, _uns)                                              \
  NCCL_API(ncclResult_t, ncclParamGet##_suffix, ncclParamHandle_t h, _type *out);                  \
  ncclResult_t ncclParamGet##_suffix(ncclParamHandle_t h, _type *out)                              \
  {                                                                                                \
    int64_t v = 0;                                                                                 \
    MC_CHECK(get_int(h, out, (_lo), (_hi), (_uns), "ncclParamGet" #_suffix, &v));                  \
    *out = (_type)v;                                                                               \
    return ncclSuccess;                                                                            \
  }

PARAM_GET_INT(I8, int8_t, INT8_MIN, INT8_MAX, false)
PARAM_GET_INT(I16, int16_t, INT16_MIN, INT16_MAX, false)
PARAM_GET_INT(I32, int32_t, INT32_MIN, INT32_MAX, false)
PARAM_GET_INT(I64, int64_t, INT64_MIN, INT64_MAX, false)
PARAM_GET_INT(U8, uint8_t, 0, UINT8_MAX, true)
PARAM_GET_INT(U16, uint16_t, 0, UINT16_MAX, true)
PARAM_GET_INT(U32, uint32_t, 0, UINT32_MAX, true)
PARAM_GET_INT(U64, uint64_t, 0, UINT64_MAX, true)

NCCL_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char **out);
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char **out)
{
  MC_CHECK(handle_check(h, out, "ncclParamGetStr"));
  value_text(h->id, str_text, sizeof(str_text));
  *out = str_text;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void *out, int maxLen, int *len);
ncclResult_t ncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len)
{
  char text[MC_PARAM_TEXT_BYTES];
  int64_t v;
  const void *src;
  size_t n;

  MC_CHECK(handle_check(h, out, "ncclParamGet"));
  if (len == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclParamGet : len argument is NULL");
  if (mc_param_is_int((enum mc_param_id)h->id)) {
    v = mc_param_int((enum mc_param_id)h->id);
    src = &v;
    n = sizeof(v);
  } else {
    value_text(h->id, text, sizeof(text));
    src = text;
    n = strlen(text) + 1;
  }
  if ((maxLen < 0) || ((size_t)maxLen < n))
    return MC_FAIL(ncclInvalidArgument, "ncclParamGet : %s needs %zu bytes, maxLen is %d",
                   mc_param_name((enum mc_param_id)h->id), n, maxLen);
  memcpy(out, src, n);
  *len = (int)n;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetParameter, const char *key, const char **value, int *valueLen);
ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen)
{
  int id;

  if (key == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclParamGetParameter : key argument is NULL");
  if (value == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclParamGetParameter : value argument is NULL");
  if (valueLen == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclParamGetParameter : valueLen argument is NULL");
  id = mc_param_lookup(key);
  if (id < 0)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclParamGetParameter : no parameter is named '%s' (docs/ENV.md lists them)",
                   key);
  value_text(id, param_text, sizeof(param_text));
  *value = param_text;
  *valueLen = (int)strlen(param_text);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetAllParameterKeys, const char ***table, int *tableLen);
ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen)
{
  pthread_once(&tables_once, tables_init);
  if (table == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclParamGetAllParameterKeys : table argument is NULL");
  if (tableLen == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclParamGetAllParameterKeys : tableLen argument is NULL");
  *table = key_table;
  *tableLen = MC_P_COUNT;
  return ncclSuccess;
}

NCCL_API(void, ncclParamDumpAll, void);
void ncclParamDumpAll(void)
{
  char text[MC_PARAM_TEXT_BYTES];

  for (int id = 0; id < MC_P_COUNT; id++) {
    value_text(id, text, sizeof(text));
    MC_INFO(MC_SUB_ENV, "%s=%s", mc_param_name((enum mc_param_id)id), text);
  }
}

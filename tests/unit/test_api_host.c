/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host meaning of NCCL 2.30's memory, lifecycle, simulation and
 * parameter calls, through the public API on two in-process ranks
 * (ncclCommInitAll): ncclMemAlloc/Free, ncclCommRegister/Deregister,
 * windows, ncclCommSuspend/Resume and ncclCommMemStats, ncclCommGetUniqueId,
 * ncclGroupSimulateEnd, the ncclParam* family and ncclResetDebugInit; the
 * device API's resource requirements (GPU only).
 * Every error names the argument or the state in ncclGetLastError.
 */
#include "nccl.h"
#include "core/params.h"

#include "mc_test.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void comms_init(ncclComm_t comms[2])
{
  MC_T_OK(ncclCommInitAll(comms, 2, NULL));
}

static void comms_fini(ncclComm_t comms[2])
{
  for (int i = 0; i < 2; i++)
    MC_T_OK(ncclCommDestroy(comms[i]));
}

static void mem_alloc_is_page_aligned_and_checked(void)
{
  void *p = NULL;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);

  MC_T_OK(ncclMemAlloc(&p, 100));
  MC_T_TRUE(p != NULL);
  MC_T_EQ_INT((int)((uintptr_t)p % page), 0);
  memset(p, 0x5a, page); /* rounded up to a whole page */
  /* Only the start of an allocation frees it, once. */
  MC_T_EQ_INT(ncclMemFree((char *)p + 64), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "is not the start of memory from ncclMemAlloc");
  MC_T_OK(ncclMemFree(p));
  MC_T_EQ_INT(ncclMemFree(p), ncclInvalidArgument);
  MC_T_OK(ncclMemFree(NULL));
  MC_T_EQ_INT(ncclMemAlloc(NULL, 100), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "ptr argument is NULL");
  p = NULL;
  MC_T_EQ_INT(ncclMemAlloc(&p, 0), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "size argument is 0");
  MC_T_NULL(p);
}

static void register_records_and_rejects_unknown_handles(void)
{
  ncclComm_t comms[2];
  char buf[256];
  void *h1 = NULL;
  void *h2 = NULL;
  void *leftover = NULL;

  comms_init(comms);
  MC_T_OK(ncclCommRegister(comms[0], buf, sizeof(buf), &h1));
  MC_T_OK(ncclCommRegister(comms[0], buf + 8, 8, &h2));
  MC_T_TRUE((h1 != NULL) && (h1 != h2));
  MC_T_EQ_INT(ncclCommRegister(comms[0], buf, 8, NULL), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "handle argument is NULL");
  MC_T_EQ_INT(ncclCommRegister(comms[0], NULL, 8, &h1), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "buff argument is NULL");
  /* A handle of another communicator is unknown here. */
  MC_T_EQ_INT(ncclCommDeregister(comms[1], h1), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "is not a registration of comm");
  MC_T_OK(ncclCommDeregister(comms[0], h1));
  MC_T_EQ_INT(ncclCommDeregister(comms[0], h1), ncclInvalidArgument);
  MC_T_OK(ncclCommDeregister(comms[0], h2));
  /* Left registered: freed with the communicator (LSan would see it otherwise). */
  MC_T_OK(ncclCommRegister(comms[1], buf, sizeof(buf), &leftover));
  comms_fini(comms);
}

static void windows_record_buffer_and_check_alignment(void)
{
  ncclComm_t comms[2];
  void *mem = NULL;
  void *user = NULL;
  ncclWindow_t w = NULL;
  ncclWindow_t w2 = NULL;

  comms_init(comms);
  MC_T_OK(ncclMemAlloc(&mem, 2 * NCCL_WIN_REQUIRED_ALIGNMENT));
  MC_T_OK(ncclCommWindowRegister(comms[0], mem, 4096, &w, NCCL_WIN_COLL_SYMMETRIC));
  {
    /* A symmetric window is ncclMemAlloc memory (peers map it), all of it. */
    void *plain = NULL;
    ncclWindow_t w3 = NULL;
    MC_T_EQ_INT(posix_memalign(&plain, NCCL_WIN_REQUIRED_ALIGNMENT, 4096), 0);
    MC_T_EQ_INT(ncclCommWindowRegister(comms[0], plain, 4096, &w3, NCCL_WIN_COLL_SYMMETRIC),
                ncclInvalidArgument);
    MC_T_CONTAINS(ncclGetLastError(NULL), "is not within one allocation of ncclMemAlloc");
    MC_T_EQ_INT(ncclCommWindowRegister(comms[0], mem, 3 * NCCL_WIN_REQUIRED_ALIGNMENT, &w3,
                                       NCCL_WIN_COLL_SYMMETRIC),
                ncclInvalidArgument);
    MC_T_NULL(w3);
    MC_T_OK(ncclCommWindowRegister(comms[0], plain, 4096, &w3, NCCL_WIN_DEFAULT));
    MC_T_OK(ncclCommWindowDeregister(comms[0], w3));
    free(plain);
  }
  MC_T_OK(ncclWinGetUserPtr(comms[0], w, &user));
  MC_T_TRUE(user == mem);
  MC_T_EQ_INT(ncclCommWindowRegister(comms[0], (char *)mem + 8, 64, &w2, NCCL_WIN_COLL_SYMMETRIC),
              ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "NCCL_WIN_REQUIRED_ALIGNMENT");
  MC_T_NULL(w2);
  /* Without the symmetric flag any address will do. */
  MC_T_OK(ncclCommWindowRegister(comms[0], (char *)mem + 8, 64, &w2, NCCL_WIN_DEFAULT));
  MC_T_EQ_INT(ncclCommWindowRegister(comms[0], mem, 64, &w2, 0x40), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "unknown bits");
  MC_T_EQ_INT(ncclCommWindowRegister(comms[0], mem, 64, NULL, 0), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "win argument is NULL");
  MC_T_EQ_INT(ncclWinGetUserPtr(comms[1], w, &user), ncclInvalidArgument);
  MC_T_EQ_INT(ncclCommWindowDeregister(comms[1], w), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "is not a window of comm");
  MC_T_OK(ncclCommWindowDeregister(comms[0], w));
  MC_T_EQ_INT(ncclCommWindowDeregister(comms[0], w), ncclInvalidArgument);
  comms_fini(comms); /* w2 still registered: freed here */
  MC_T_OK(ncclMemFree(mem));
}

static void suspended_comm_refuses_collectives(void)
{
  ncclComm_t comms[2];
  float x[4] = {1, 2, 3, 4};
  float y[2][4] = {{1, 2, 3, 4}, {1, 2, 3, 4}};
  uint64_t v = 99;

  comms_init(comms);
  MC_T_OK(ncclCommMemStats(comms[0], ncclStatGpuMemSuspended, &v));
  MC_T_EQ_INT((int)v, 0);
  MC_T_EQ_INT(ncclCommSuspend(comms[0], 0x8), ncclInvalidArgument);
  MC_T_OK(ncclCommSuspend(comms[0], NCCL_SUSPEND_MEM));
  MC_T_EQ_INT(ncclCommSuspend(comms[0], NCCL_SUSPEND_MEM), ncclInvalidUsage);
  MC_T_OK(ncclCommMemStats(comms[0], ncclStatGpuMemSuspended, &v));
  MC_T_EQ_INT((int)v, 1);
  MC_T_EQ_INT(ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comms[0], NULL), ncclInvalidUsage);
  MC_T_CONTAINS(ncclGetLastError(NULL), "is suspended (ncclCommSuspend)");
  MC_T_EQ_INT(ncclAlltoAll(x, x + 2, 1, ncclFloat, comms[0], NULL), ncclInvalidUsage);
  MC_T_OK(ncclCommResume(comms[0]));
  MC_T_EQ_INT(ncclCommResume(comms[0]), ncclInvalidUsage);
  MC_T_CONTAINS(ncclGetLastError(NULL), "is not suspended");
  /* Usable again: both ranks in one group. */
  MC_T_OK(ncclGroupStart());
  for (int i = 0; i < 2; i++)
    MC_T_OK(ncclAllReduce(y[i], y[i], 4, ncclFloat, ncclSum, comms[i], NULL));
  MC_T_OK(ncclGroupEnd());
  MC_T_TRUE((y[0][0] == 2.0f) && (y[1][3] == 8.0f));
  for (int s = ncclStatGpuMemSuspend; s <= ncclStatGpuMemTotal; s++) {
    MC_T_OK(ncclCommMemStats(comms[1], (ncclCommMemStat_t)s, &v));
    MC_T_EQ_INT((int)v, 0);
  }
  MC_T_EQ_INT(ncclCommMemStats(comms[1], (ncclCommMemStat_t)9, &v), ncclInvalidArgument);
  MC_T_EQ_INT(ncclCommMemStats(comms[1], ncclStatGpuMemTotal, NULL), ncclInvalidArgument);
  comms_fini(comms);
}

static void grow_id_is_one_at_a_time(void)
{
  ncclComm_t comms[2];
  ncclUniqueId a;
  ncclUniqueId b;

  comms_init(comms);
  MC_T_EQ_INT(ncclCommGetUniqueId(comms[0], NULL), ncclInvalidArgument);
  MC_T_OK(ncclCommGetUniqueId(comms[0], &a));
  MC_T_EQ_INT(ncclCommGetUniqueId(comms[0], &b), ncclInvalidUsage);
  MC_T_CONTAINS(ncclGetLastError(NULL), "not consumed by ncclCommGrow");
  comms_fini(comms);
}

static void simulate_end_estimates_and_runs_nothing(void)
{
  ncclComm_t comms[2];
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  float in[2][1024];
  float out[2][1024];

  comms_init(comms);
  MC_T_EQ_INT(ncclGroupSimulateEnd(NULL), ncclInvalidArgument);
  bad.magic = 0;
  MC_T_EQ_INT(ncclGroupSimulateEnd(&bad), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "NCCL_SIM_INFO_INITIALIZER");
  MC_T_EQ_INT(ncclGroupSimulateEnd(&info), ncclInvalidUsage); /* no group open */
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < 1024; i++)
      in[r][i] = 1.0f;
    memset(out[r], 0, sizeof(out[r]));
  }
  MC_T_OK(ncclGroupStart());
  for (int r = 0; r < 2; r++)
    MC_T_OK(ncclAllReduce(in[r], out[r], 1024, ncclFloat, ncclSum, comms[r], NULL));
  MC_T_OK(ncclGroupSimulateEnd(&info));
  MC_T_TRUE(info.estimatedTime > 0.0f);
  MC_T_TRUE(out[0][0] == 0.0f); /* simulated only */
  /* The communicators still work afterwards. */
  MC_T_OK(ncclGroupStart());
  for (int r = 0; r < 2; r++)
    MC_T_OK(ncclAllReduce(in[r], out[r], 1024, ncclFloat, ncclSum, comms[r], NULL));
  MC_T_OK(ncclGroupEnd());
  MC_T_TRUE((out[0][0] == 2.0f) && (out[1][1023] == 2.0f));
  comms_fini(comms);
}

/* In a child: parameters are read once per process, from this environment. */
static void params_child(void)
{
  ncclParamHandle_t h = NULL;
  ncclParamHandle_t hs = NULL;
  int32_t i32 = 0;
  int64_t i64 = 0;
  int8_t i8 = 0;
  const char *s = NULL;
  const char **keys = NULL;
  int n = 0;
  int len = 0;
  char raw[64];
  bool has_debug = false;

  setenv("NCCL_SOCKET_NTHREADS", "3", 1);
  setenv("NCCL_BUFFSIZE", "1048576", 1);
  mc_param_reset_for_tests(); /* the parent loaded them before the fork */
  MC_T_EQ_INT(ncclParamBind(&h, "NCCL_NO_SUCH_THING"), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "no parameter is named 'NCCL_NO_SUCH_THING'");
  MC_T_NULL(h);
  MC_T_OK(ncclParamBind(&h, "NCCL_SOCKET_NTHREADS"));
  MC_T_OK(ncclParamGetI32(h, &i32));
  MC_T_EQ_INT(i32, 3);
  MC_T_OK(ncclParamGetStr(h, &s));
  MC_T_EQ_STR(s, "3");
  MC_T_OK(ncclParamGet(h, raw, sizeof(raw), &len));
  MC_T_EQ_INT(len, 8);
  memcpy(&i64, raw, sizeof(i64));
  MC_T_EQ_INT((int)i64, 3);
  MC_T_EQ_INT(ncclParamGet(h, raw, 4, &len), ncclInvalidArgument);
  MC_T_OK(ncclParamBind(&hs, "NCCL_BUFFSIZE"));
  MC_T_EQ_INT(ncclParamGetI8(hs, &i8), ncclInvalidArgument);
  MC_T_CONTAINS(ncclGetLastError(NULL), "out of the output type's range");
  MC_T_EQ_INT(ncclParamGetI32(NULL, &i32), ncclInvalidArgument);
  MC_T_EQ_INT(ncclParamGetI32(h, NULL), ncclInvalidArgument);
  MC_T_OK(ncclParamGetParameter("NCCL_BUFFSIZE", &s, &len));
  MC_T_EQ_STR(s, "1048576");
  MC_T_EQ_INT(len, 7);
  MC_T_EQ_INT(ncclParamGetParameter("NCCL_BUFSIZE", &s, &len), ncclInvalidArgument);
  MC_T_OK(ncclParamGetAllParameterKeys(&keys, &n));
  MC_T_TRUE(n > 10);
  for (int i = 0; i < n; i++)
    has_debug = has_debug || (strcmp(keys[i], "NCCL_DEBUG") == 0);
  MC_T_TRUE(has_debug);
  MC_T_EQ_INT(ncclParamGetAllParameterKeys(NULL, &n), ncclInvalidArgument);
}

static void params_by_handle_and_by_key(void)
{
  mc_t_run_in_child(params_child);
}

/* In a child: logging starts off, then ncclResetDebugInit picks up NCCL_DEBUG. */
static void reset_debug_init_child(void)
{
  char path[512];
  const char *text;

  mc_t_tmp_path("reset_debug.log", path, sizeof(path));
  unsetenv("NCCL_DEBUG");
  ncclParamDumpAll(); /* logging off: nothing written anywhere */
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "ENV", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  ncclResetDebugInit();
  ncclParamDumpAll();
  text = mc_t_read_file(path);
  MC_T_CONTAINS(text, "NCCL INFO NCCL_DEBUG=INFO");
  MC_T_CONTAINS(text, "NCCL INFO NCCL_DEBUG_SUBSYS=ENV");
}

static void reset_debug_init_rereads_the_environment(void)
{
  char path[512];

  mc_t_tmp_path("reset_debug.log", path, sizeof(path)); /* made before the fork */
  mc_t_run_in_child(reset_debug_init_child);
}

/* The device API's resource requirements need a GPU: each says so, naming
 * itself; the LL all-to-all slot count is NCCL's arithmetic. */
static void device_requirements_need_a_gpu(void)
{
  ncclTeam_t team = {.nRanks = 2, .rank = 0, .stride = 1};

  MC_T_EQ_INT(ncclLLA2ACalcSlots(32, 16), 64);
  MC_T_EQ_INT(ncclLLA2ACalcSlots(5, 1), 5);
  MC_T_EQ_INT(ncclLLA2ACalcSlots(3, 9), 6);
  MC_T_EQ_INT(ncclLsaBarrierCreateRequirement(team, 1, NULL, NULL), ncclInvalidUsage);
  MC_T_CONTAINS(ncclGetLastError(NULL),
                "ncclLsaBarrierCreateRequirement : a device barrier needs a GPU");
  MC_T_EQ_INT(ncclGinBarrierCreateRequirement(NULL, team, 1, NULL, NULL), ncclInvalidUsage);
  MC_T_CONTAINS(ncclGetLastError(NULL), "ncclGinBarrierCreateRequirement : ");
  MC_T_EQ_INT(ncclLLA2ACreateRequirement(1, 64, NULL, NULL), ncclInvalidUsage);
  MC_T_CONTAINS(ncclGetLastError(NULL), "ncclLLA2ACreateRequirement : ");
  MC_T_EQ_INT(ncclGinOutboxCreateRequirement(1, 12, NULL, NULL), ncclInvalidUsage);
  MC_T_CONTAINS(ncclGetLastError(NULL), "ncclGinOutboxCreateRequirement : ");
  MC_T_EQ_INT(ncclGinInboxA2ACreateRequirement(team, 1, 12, NULL, NULL), ncclInvalidUsage);
  MC_T_CONTAINS(ncclGetLastError(NULL), "ncclGinInboxA2ACreateRequirement : ");
}

MC_T_MAIN(mem_alloc_is_page_aligned_and_checked, register_records_and_rejects_unknown_handles,
          windows_record_buffer_and_check_alignment, suspended_comm_refuses_collectives,
          grow_id_is_one_at_a_time, simulate_end_estimates_and_runs_nothing,
          params_by_handle_and_by_key, reset_debug_init_rereads_the_environment,
          device_requirements_need_a_gpu)

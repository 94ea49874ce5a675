/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bootstrap jobs for the unit tests of src/bootstrap (test_boot.c,
 * test_boot_auth.c): ranks are threads of the test over 127.0.0.1, the root
 * lives in the process. Each test keeps its own struct rank; these are the
 * steps every such test takes the same way.
 */
#ifndef MC_BOOT_FIXTURE_H
#define MC_BOOT_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/log.h"
#include "core/params.h"
#include "mc_test.h"

/* Bootstrap over 127.0.0.1: before the first mc_boot_* call of the process. */
static inline void bt_setup(void)
{
  if (mc_param_source(MC_P_SOCKET_IFNAME) != MC_PARAM_SRC_TEST) {
    mc_param_set_for_tests(MC_P_SOCKET_IFNAME, "=lo");
    mc_param_set_for_tests(MC_P_SOCKET_FAMILY, "AF_INET");
  }
}

/* The configuration of rank of n_ranks in the job of id. */
static inline void bt_config(struct mc_boot_config *cfg, int rank, int n_ranks,
                             const ncclUniqueId *id, const volatile uint32_t *abort_flag,
                             int64_t timeout_ms)
{
  memset(cfg, 0, sizeof(*cfg));
  cfg->rank = rank;
  cfg->n_ranks = n_ranks;
  cfg->id = *id;
  cfg->abort_flag = abort_flag;
  cfg->timeout_ms = timeout_ms;
}

/* mc_boot_init on the calling thread; on failure, err holds the error. */
static inline ncclResult_t bt_init(const struct mc_boot_config *cfg, struct mc_boot **b_out,
                                   char *err, size_t err_bytes)
{
  ncclResult_t res;

  mc_error_clear_thread();
  res = mc_boot_init(cfg, b_out);
  if (res != ncclSuccess)
    snprintf(err, err_bytes, "%s", mc_error_last());
  return res;
}

/* A new unique id whose root lives in this process, and a reference on it. */
static inline struct mc_boot_root *bt_job_new(ncclUniqueId *id)
{
  struct mc_boot_root *root;

  MC_T_OK(mc_boot_unique_id(false, id));
  MC_T_TRUE(!mc_boot_id_is_comm_id(id));
  root = mc_boot_root_claim(id);
  MC_T_TRUE(root != NULL);
  return root;
}

#endif /* MC_BOOT_FIXTURE_H */

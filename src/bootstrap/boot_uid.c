/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bootstrap network and unique ids. Mirrors NCCL's bootstrapNetInit and
 * bootstrapGetUniqueId (bootstrap.cc): the interface is chosen once per
 * process; an id is a random magic plus the root's address, or, with
 * NCCL_COMM_ID, NCCL's fixed magic plus that address, computed identically
 * by every rank without starting a root.
 */
#include "bootstrap.h"

#include <pthread.h>
#include <string.h>

#include "bootstrap_int.h"
#include "check.h"
#include "log.h"
#include "params.h"

static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
static bool net_ready;
static struct mc_ifc net_ifc;

ncclResult_t mc_boot_net_init(const union mc_sockaddr *root_hint, struct mc_ifc *ifc_out)
{
  ncclResult_t res = ncclSuccess;
  const char *comm_id = mc_param_str(MC_P_COMM_ID);

  pthread_mutex_lock(&net_lock);
  if (!net_ready) {
    union mc_sockaddr root;
    /* An explicit NCCL_SOCKET_IFNAME wins over a root address that is not NCCL_COMM_ID. */
    if ((root_hint != NULL) && (mc_param_str(MC_P_SOCKET_IFNAME) == NULL)) {
      res = mc_if_find_bootstrap(root_hint, &net_ifc);
    } else if (comm_id != NULL) {
      res = mc_sockaddr_parse(comm_id, "NCCL_COMM_ID", &root);
      if (res == ncclSuccess)
        res = mc_if_find_bootstrap(&root, &net_ifc);
    } else {
      res = mc_if_find_bootstrap(NULL, &net_ifc);
    }
    net_ready = (res == ncclSuccess);
  }
  if (net_ready)
    *ifc_out = net_ifc;
  pthread_mutex_unlock(&net_lock);
  if (res != ncclSuccess)
    MC_TRACE_RES(res);
  return res;
}

ncclResult_t mc_boot_unique_id(bool use_comm_id, ncclUniqueId *id_out)
{
  struct mc_boot_handle h;
  struct mc_ifc ifc;
  const char *comm_id = mc_param_str(MC_P_COMM_ID);
  ncclUniqueId id;

  memset(&h, 0, sizeof(h));
  memset(&id, 0, sizeof(id));
  MC_CHECK(mc_boot_net_init(NULL, &ifc));
  if (use_comm_id && (comm_id != NULL)) {
    MC_CHECK(mc_sockaddr_parse(comm_id, "NCCL_COMM_ID", &h.addr));
    h.magic = MC_BOOT_COMM_ID_MAGIC;
  } else {
    union mc_sockaddr local = ifc.addr;
    mc_sockaddr_set_port(&local, 0);
    MC_CHECK(mc_random_bytes(&h.magic, sizeof(h.magic)));
    if (h.magic == MC_BOOT_COMM_ID_MAGIC)
      h.magic ^= 1;
    MC_CHECK(mc_boot_root_create(&local, h.magic, &h.addr));
  }
  memcpy(id.internal, &h, sizeof(h));
  *id_out = id;
  return ncclSuccess;
}

ncclResult_t mc_boot_unique_id_at(const union mc_sockaddr *addr, ncclUniqueId *id_out)
{
  struct mc_boot_handle h;
  struct mc_ifc ifc;

  MC_CHECK(mc_boot_net_init(addr, &ifc));
  memset(&h, 0, sizeof(h));
  memset(id_out, 0, sizeof(*id_out));
  h.magic = MC_BOOT_COMM_ID_MAGIC;
  h.addr = *addr;
  memcpy(id_out->internal, &h, sizeof(h));
  return ncclSuccess;
}

bool mc_boot_id_is_comm_id(const ncclUniqueId *id)
{
  struct mc_boot_handle h;

  memcpy(&h, id->internal, sizeof(h));
  return h.magic == MC_BOOT_COMM_ID_MAGIC;
}

struct mc_wait mc_boot_wait_make(int64_t ms, const volatile uint32_t *abort_flag)
{
  struct mc_wait w;

  memset(&w, 0, sizeof(w));
  w.dl = mc_deadline_in_ms(ms);
  w.abort_flag = abort_flag;
  return w;
}

int64_t mc_boot_op_timeout_ms(void)
{
  return mc_param_int(MC_P_BOOTSTRAP_TIMEOUT) * 1000;
}

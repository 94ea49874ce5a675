/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/bootstrap/: the rank <-> root control protocol. */
#ifndef MC_BOOTSTRAP_INT_H
#define MC_BOOTSTRAP_INT_H

#include <stdint.h>

#include "bootstrap.h"

#define MC_BOOT_HOST_BYTES 64
#define MC_BOOT_TEXT_BYTES 600

/* Messages of the control connection (one fixed-size framed struct). */
enum mc_boot_ctl_kind {
  MC_BOOT_CTL_REGISTER = 1, /* rank -> root: rank, n_ranks, ring address, host, pid */
  MC_BOOT_CTL_NEXT = 2,     /* root -> rank: the next rank and its ring address */
  MC_BOOT_CTL_FAIL = 3,     /* either way: code and text; the job's init failed */
  MC_BOOT_CTL_DONE = 4      /* rank -> root: init completed */
};

struct mc_boot_ctl {
  uint32_t kind;
  uint32_t version; /* NCCL_VERSION_CODE of the sender */
  int32_t rank;
  int32_t n_ranks;
  int32_t code;
  int32_t pid;
  union mc_sockaddr addr;
  char host[MC_BOOT_HOST_BYTES];
  char text[MC_BOOT_TEXT_BYTES];
};

/* Starts a root listening on addr (port 0: ephemeral) in a thread of this
 * process; bound_out gets the real address. */
ncclResult_t mc_boot_root_create(const union mc_sockaddr *addr, uint64_t magic,
                                 union mc_sockaddr *bound_out);

#endif /* MC_BOOTSTRAP_INT_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the API entry points share (init_api.c): the exported-symbol macro,
 * the handle checks, and a communicator's uses and holder thread.
 */
#ifndef MC_INIT_API_H
#define MC_INIT_API_H

#include <stdbool.h>
#include <stdint.h>

#include "nccl.h"

struct ncclComm;

/* Defines an exported NCCL function and its pnccl profiling alias. */
#define NCCL_API(_ret, _func, ...)                                                                 \
  __attribute__((visibility("default"))) __attribute__((alias(#_func)))                            \
  _ret p##_func(__VA_ARGS__);                                                                      \
  __attribute__((visibility("default"))) _ret _func(__VA_ARGS__)

/* Every API call starts with this: clears the thread's last error, logs the
 * version and the parameters once. */
void mc_api_enter(void);
/* comm is a live communicator: created by an init and not destroyed or
 * aborted since (the registry says so without reading *comm). Otherwise
 * ncclInvalidArgument naming call: "communicator 0x... was destroyed". */
ncclResult_t mc_comm_check(const struct ncclComm *comm, const char *call);
/* The same test, silent. */
bool mc_comm_is_live(const struct ncclComm *comm);
/* How many communicators were destroyed or aborted in this process so far
 * (a checked communicator needs no new check while this stays). */
uint64_t mc_comm_destroyed_count(void);
/* An API call starts using comm: live (mc_comm_check's errors) and not
 * being destroyed or aborted (ncclInvalidArgument). Until mc_comm_leave,
 * ncclCommAbort on another thread does not free comm (it sets the abort
 * flag and waits, a bounded time, for the call to leave). */
ncclResult_t mc_comm_enter(struct ncclComm *comm, const char *call);
/* One more use by a caller that holds one (an operation queued in a group). */
void mc_comm_ref(struct ncclComm *comm);
/* Ends one use; the last use of a communicator that abort stopped waiting
 * for frees it. */
void mc_comm_leave(struct ncclComm *comm);
/* The calling thread starts driving comm (a collective, or one queued in its
 * open group); nests on the same thread. NCCL's communicators are not
 * thread-safe (a second thread corrupts the FIFOs' steps), so another
 * thread's hold is refused: ncclInvalidUsage naming call, comm and that
 * thread, recorded only for the second caller. */
ncclResult_t mc_comm_hold(struct ncclComm *comm, const char *call);
/* Ends one hold of the calling thread. The caller's use of comm
 * (mc_comm_enter, mc_comm_ref) keeps it in memory, aborted or not. */
void mc_comm_release(struct ncclComm *comm);
/* ... whose init completed successfully (NCCL's ncclCommEnsureReady). */
ncclResult_t mc_comm_ready(const struct ncclComm *comm, const char *call);

/* ncclInvalidUsage naming call when comm is suspended or revoked. */
ncclResult_t mc_comm_usable(const struct ncclComm *comm, const char *call);

#endif /* MC_INIT_API_H */

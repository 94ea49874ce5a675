/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Groups (ncclGroupStart/End) and asynchronous init (init_group.c); the
 * device meshcclSetDevice chose for the calling thread.
 */
#ifndef MC_INIT_GROUP_H
#define MC_INIT_GROUP_H

#include <stdbool.h>

#include "nccl.h"

struct ncclComm;

/* Queues an init job when inside a group, else runs it (blocking) or
 * starts it (non-blocking). Returns ncclInProgress for a started
 * non-blocking init. */
ncclResult_t mc_group_launch_init(struct ncclComm *comm);
/* True when the calling thread is inside ncclGroupStart/End. */
bool mc_group_active(void);
/* Forgets comm in its group (called when comm is freed). */
void mc_group_forget(struct ncclComm *comm);

ncclResult_t mc_group_start(void);
ncclResult_t mc_group_end(void);

/* The device meshcclSetDevice chose for this thread (-1 none). */
int mc_thread_device(void);
void mc_thread_set_device(int dev);
/* Depth of ncclGroupStart nesting on this thread. */
int mc_group_depth(void);

#endif /* MC_INIT_GROUP_H */

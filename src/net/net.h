/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The internal net interface: the shape of NCCL's ncclNet_t (v11/v12:
 * per-communicator context, devices, properties, listen / connect / accept,
 * memory registration, isend / irecv / test, close), so that the NET
 * transport drives the built-in socket net, the mesh net and external NCCL
 * net plugins (through an adapter) the same way. Semantics are NCCL's
 * (NCCL src/include/net.h, ncclNet_t and its calls in src/transport/net.cc):
 *   - nothing blocks: connect/accept return ncclSuccess with *comm == NULL
 *     until the connection is ready; isend/irecv return ncclSuccess with
 *     *request == NULL when the request cannot be posted yet;
 *   - sends and receives of one connection match in posting order; a
 *     receive may be posted larger than the matching send (test reports the
 *     sent size), a smaller one is an error ("message truncated");
 *   - every comm supports MC_NET_MAX_REQUESTS outstanding requests;
 *   - after test() reports done the request is never touched again.
 * Errors: ncclSystemError (local failure) or ncclRemoteError (the peer
 * closed or broke the connection), each with a message naming the peer's
 * address, through the logging of src/core (MC_FAIL).
 */
#ifndef MC_NET_NET_H
#define MC_NET_NET_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define MC_NET_HANDLE_BYTES 128 /* NCCL_NET_HANDLE_MAXSIZE */
#define MC_NET_MAX_REQUESTS 32  /* NCCL_NET_MAX_REQUESTS */
#define MC_NET_PTR_HOST     0x1 /* NCCL_PTR_HOST */

struct mc_net_props {
  char name[64];      /* interface or device name ("eth0") */
  char pci_path[256]; /* sysfs PCI path; "" for virtual devices */
  uint64_t guid;
  int ptr_support; /* MC_NET_PTR_HOST */
  int speed;       /* Mb/s */
  int port;
  float latency; /* us */
  int max_comms;
  int max_recvs;        /* largest n of irecv */
  size_t max_p2p_bytes; /* largest single isend/irecv */
};

struct mc_net {
  const char *name; /* "Socket", "Mesh", or the plugin's */
  /* Per communicator: *ctx receives the net's state for it. abort_flag is
   * the communicator's (non-zero: every later call may fail fast). */
  ncclResult_t (*init)(void **ctx, const volatile uint32_t *abort_flag);
  ncclResult_t (*devices)(void *ctx, int *ndev);
  ncclResult_t (*get_properties)(void *ctx, int dev, struct mc_net_props *props);
  /* Writes at most MC_NET_HANDLE_BYTES into handle, for the peer's connect. */
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
  ncclResult_t (*connect)(void *ctx, int dev, const void *handle, void **send_comm);
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm);
  /* type is MC_NET_PTR_HOST. */
  ncclResult_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                        void **request);
  ncclResult_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **request);
  /* sizes may be NULL; else receives the n sizes actually transferred. */
  ncclResult_t (*test)(void *request, int *done, size_t *sizes);
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
  ncclResult_t (*finalize)(void *ctx);
};

/* The built-in socket net (net_socket.c). */
extern const struct mc_net mc_net_socket;

/* The net the NET transport uses (net_default.c); the built-in socket net. */
const struct mc_net *mc_net_default(void);

#endif /* MC_NET_NET_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * include/nccl_net.h against NCCL's layouts: sizeof and offsetof of every
 * member of ncclNetProperties_vN_t and ncclNet_vN_t, N = 6..12, and the
 * small structs. The expected numbers are NCCL's on LP64 (x86_64, aarch64),
 * read off NCCL's headers src/include/plugin/net/net_v6.h ... net_v12.h,
 * nccl_common.h and nccl_device/net_device.h; a plugin built against NCCL's
 * headers must see the same bytes.
 */
#include "nccl_net.h"

#include "mc_test.h"

#include <stddef.h>

#define SIZE(_t, _n)    MC_T_EQ_INT((int)sizeof(_t), (_n))
#define OFF(_t, _m, _n) MC_T_EQ_INT((int)offsetof(_t, _m), (_n))
/* NCCL src/include/plugin/net/net_v6.h */
static void properties_v6(void)
{
  SIZE(ncclNetProperties_v6_t, 48);
  OFF(ncclNetProperties_v6_t, name, 0);
  OFF(ncclNetProperties_v6_t, pciPath, 8);
  OFF(ncclNetProperties_v6_t, guid, 16);
  OFF(ncclNetProperties_v6_t, ptrSupport, 24);
  OFF(ncclNetProperties_v6_t, speed, 28);
  OFF(ncclNetProperties_v6_t, port, 32);
  OFF(ncclNetProperties_v6_t, latency, 36);
  OFF(ncclNetProperties_v6_t, maxComms, 40);
  OFF(ncclNetProperties_v6_t, maxRecvs, 44);
}

/* NCCL src/include/plugin/net/net_v6.h: one pointer per member, in order */
static void functions_v6(void)
{
  SIZE(ncclNet_v6_t, 136);
  OFF(ncclNet_v6_t, name, 0);
  OFF(ncclNet_v6_t, init, 8);
  OFF(ncclNet_v6_t, devices, 16);
  OFF(ncclNet_v6_t, getProperties, 24);
  OFF(ncclNet_v6_t, listen, 32);
  OFF(ncclNet_v6_t, connect, 40);
  OFF(ncclNet_v6_t, accept, 48);
  OFF(ncclNet_v6_t, regMr, 56);
  OFF(ncclNet_v6_t, regMrDmaBuf, 64);
  OFF(ncclNet_v6_t, deregMr, 72);
  OFF(ncclNet_v6_t, isend, 80);
  OFF(ncclNet_v6_t, irecv, 88);
  OFF(ncclNet_v6_t, iflush, 96);
  OFF(ncclNet_v6_t, test, 104);
  OFF(ncclNet_v6_t, closeSend, 112);
  OFF(ncclNet_v6_t, closeRecv, 120);
  OFF(ncclNet_v6_t, closeListen, 128);
}

/* NCCL src/include/plugin/net/net_v7.h */
static void properties_v7(void)
{
  SIZE(ncclNetProperties_v7_t, 56);
  OFF(ncclNetProperties_v7_t, name, 0);
  OFF(ncclNetProperties_v7_t, pciPath, 8);
  OFF(ncclNetProperties_v7_t, guid, 16);
  OFF(ncclNetProperties_v7_t, ptrSupport, 24);
  OFF(ncclNetProperties_v7_t, speed, 28);
  OFF(ncclNetProperties_v7_t, port, 32);
  OFF(ncclNetProperties_v7_t, latency, 36);
  OFF(ncclNetProperties_v7_t, maxComms, 40);
  OFF(ncclNetProperties_v7_t, maxRecvs, 44);
  OFF(ncclNetProperties_v7_t, netDeviceType, 48);
  OFF(ncclNetProperties_v7_t, netDeviceVersion, 52);
}

/* NCCL src/include/plugin/net/net_v7.h: one pointer per member, in order */
static void functions_v7(void)
{
  SIZE(ncclNet_v7_t, 152);
  OFF(ncclNet_v7_t, name, 0);
  OFF(ncclNet_v7_t, init, 8);
  OFF(ncclNet_v7_t, devices, 16);
  OFF(ncclNet_v7_t, getProperties, 24);
  OFF(ncclNet_v7_t, listen, 32);
  OFF(ncclNet_v7_t, connect, 40);
  OFF(ncclNet_v7_t, accept, 48);
  OFF(ncclNet_v7_t, regMr, 56);
  OFF(ncclNet_v7_t, regMrDmaBuf, 64);
  OFF(ncclNet_v7_t, deregMr, 72);
  OFF(ncclNet_v7_t, isend, 80);
  OFF(ncclNet_v7_t, irecv, 88);
  OFF(ncclNet_v7_t, iflush, 96);
  OFF(ncclNet_v7_t, test, 104);
  OFF(ncclNet_v7_t, closeSend, 112);
  OFF(ncclNet_v7_t, closeRecv, 120);
  OFF(ncclNet_v7_t, closeListen, 128);
  OFF(ncclNet_v7_t, getDeviceMr, 136);
  OFF(ncclNet_v7_t, irecvConsumed, 144);
}

/* NCCL src/include/plugin/net/net_v8.h */
static void properties_v8(void)
{
  SIZE(ncclNetProperties_v8_t, 64);
  OFF(ncclNetProperties_v8_t, name, 0);
  OFF(ncclNetProperties_v8_t, pciPath, 8);
  OFF(ncclNetProperties_v8_t, guid, 16);
  OFF(ncclNetProperties_v8_t, ptrSupport, 24);
  OFF(ncclNetProperties_v8_t, regIsGlobal, 28);
  OFF(ncclNetProperties_v8_t, speed, 32);
  OFF(ncclNetProperties_v8_t, port, 36);
  OFF(ncclNetProperties_v8_t, latency, 40);
  OFF(ncclNetProperties_v8_t, maxComms, 44);
  OFF(ncclNetProperties_v8_t, maxRecvs, 48);
  OFF(ncclNetProperties_v8_t, netDeviceType, 52);
  OFF(ncclNetProperties_v8_t, netDeviceVersion, 56);
}

/* NCCL src/include/plugin/net/net_v8.h: one pointer per member, in order */
static void functions_v8(void)
{
  SIZE(ncclNet_v8_t, 152);
  OFF(ncclNet_v8_t, name, 0);
  OFF(ncclNet_v8_t, init, 8);
  OFF(ncclNet_v8_t, devices, 16);
  OFF(ncclNet_v8_t, getProperties, 24);
  OFF(ncclNet_v8_t, listen, 32);
  OFF(ncclNet_v8_t, connect, 40);
  OFF(ncclNet_v8_t, accept, 48);
  OFF(ncclNet_v8_t, regMr, 56);
  OFF(ncclNet_v8_t, regMrDmaBuf, 64);
  OFF(ncclNet_v8_t, deregMr, 72);
  OFF(ncclNet_v8_t, isend, 80);
  OFF(ncclNet_v8_t, irecv, 88);
  OFF(ncclNet_v8_t, iflush, 96);
  OFF(ncclNet_v8_t, test, 104);
  OFF(ncclNet_v8_t, closeSend, 112);
  OFF(ncclNet_v8_t, closeRecv, 120);
  OFF(ncclNet_v8_t, closeListen, 128);
  OFF(ncclNet_v8_t, getDeviceMr, 136);
  OFF(ncclNet_v8_t, irecvConsumed, 144);
}

/* NCCL src/include/plugin/net/net_v9.h */
static void properties_v9(void)
{
  SIZE(ncclNetProperties_v9_t, 104);
  OFF(ncclNetProperties_v9_t, name, 0);
  OFF(ncclNetProperties_v9_t, pciPath, 8);
  OFF(ncclNetProperties_v9_t, guid, 16);
  OFF(ncclNetProperties_v9_t, ptrSupport, 24);
  OFF(ncclNetProperties_v9_t, regIsGlobal, 28);
  OFF(ncclNetProperties_v9_t, forceFlush, 32);
  OFF(ncclNetProperties_v9_t, speed, 36);
  OFF(ncclNetProperties_v9_t, port, 40);
  OFF(ncclNetProperties_v9_t, latency, 44);
  OFF(ncclNetProperties_v9_t, maxComms, 48);
  OFF(ncclNetProperties_v9_t, maxRecvs, 52);
  OFF(ncclNetProperties_v9_t, netDeviceType, 56);
  OFF(ncclNetProperties_v9_t, netDeviceVersion, 60);
  OFF(ncclNetProperties_v9_t, vProps, 64);
  OFF(ncclNetProperties_v9_t, maxP2pBytes, 88);
  OFF(ncclNetProperties_v9_t, maxCollBytes, 96);
}

/* NCCL src/include/plugin/net/net_v9.h: one pointer per member, in order */
static void functions_v9(void)
{
  SIZE(ncclNet_v9_t, 160);
  OFF(ncclNet_v9_t, name, 0);
  OFF(ncclNet_v9_t, init, 8);
  OFF(ncclNet_v9_t, devices, 16);
  OFF(ncclNet_v9_t, getProperties, 24);
  OFF(ncclNet_v9_t, listen, 32);
  OFF(ncclNet_v9_t, connect, 40);
  OFF(ncclNet_v9_t, accept, 48);
  OFF(ncclNet_v9_t, regMr, 56);
  OFF(ncclNet_v9_t, regMrDmaBuf, 64);
  OFF(ncclNet_v9_t, deregMr, 72);
  OFF(ncclNet_v9_t, isend, 80);
  OFF(ncclNet_v9_t, irecv, 88);
  OFF(ncclNet_v9_t, iflush, 96);
  OFF(ncclNet_v9_t, test, 104);
  OFF(ncclNet_v9_t, closeSend, 112);
  OFF(ncclNet_v9_t, closeRecv, 120);
  OFF(ncclNet_v9_t, closeListen, 128);
  OFF(ncclNet_v9_t, getDeviceMr, 136);
  OFF(ncclNet_v9_t, irecvConsumed, 144);
  OFF(ncclNet_v9_t, makeVDevice, 152);
}

/* NCCL src/include/plugin/net/net_v10.h */
static void properties_v10(void)
{
  SIZE(ncclNetProperties_v10_t, 104);
  OFF(ncclNetProperties_v10_t, name, 0);
  OFF(ncclNetProperties_v10_t, pciPath, 8);
  OFF(ncclNetProperties_v10_t, guid, 16);
  OFF(ncclNetProperties_v10_t, ptrSupport, 24);
  OFF(ncclNetProperties_v10_t, regIsGlobal, 28);
  OFF(ncclNetProperties_v10_t, forceFlush, 32);
  OFF(ncclNetProperties_v10_t, speed, 36);
  OFF(ncclNetProperties_v10_t, port, 40);
  OFF(ncclNetProperties_v10_t, latency, 44);
  OFF(ncclNetProperties_v10_t, maxComms, 48);
  OFF(ncclNetProperties_v10_t, maxRecvs, 52);
  OFF(ncclNetProperties_v10_t, netDeviceType, 56);
  OFF(ncclNetProperties_v10_t, netDeviceVersion, 60);
  OFF(ncclNetProperties_v10_t, vProps, 64);
  OFF(ncclNetProperties_v10_t, maxP2pBytes, 88);
  OFF(ncclNetProperties_v10_t, maxCollBytes, 96);
}

/* NCCL src/include/plugin/net/net_v10.h: one pointer per member, in order */
static void functions_v10(void)
{
  SIZE(ncclNet_v10_t, 160);
  OFF(ncclNet_v10_t, name, 0);
  OFF(ncclNet_v10_t, init, 8);
  OFF(ncclNet_v10_t, devices, 16);
  OFF(ncclNet_v10_t, getProperties, 24);
  OFF(ncclNet_v10_t, listen, 32);
  OFF(ncclNet_v10_t, connect, 40);
  OFF(ncclNet_v10_t, accept, 48);
  OFF(ncclNet_v10_t, regMr, 56);
  OFF(ncclNet_v10_t, regMrDmaBuf, 64);
  OFF(ncclNet_v10_t, deregMr, 72);
  OFF(ncclNet_v10_t, isend, 80);
  OFF(ncclNet_v10_t, irecv, 88);
  OFF(ncclNet_v10_t, iflush, 96);
  OFF(ncclNet_v10_t, test, 104);
  OFF(ncclNet_v10_t, closeSend, 112);
  OFF(ncclNet_v10_t, closeRecv, 120);
  OFF(ncclNet_v10_t, closeListen, 128);
  OFF(ncclNet_v10_t, getDeviceMr, 136);
  OFF(ncclNet_v10_t, irecvConsumed, 144);
  OFF(ncclNet_v10_t, makeVDevice, 152);
}

/* NCCL src/include/plugin/net/net_v11.h */
static void properties_v11(void)
{
  SIZE(ncclNetProperties_v11_t, 112);
  OFF(ncclNetProperties_v11_t, name, 0);
  OFF(ncclNetProperties_v11_t, pciPath, 8);
  OFF(ncclNetProperties_v11_t, guid, 16);
  OFF(ncclNetProperties_v11_t, ptrSupport, 24);
  OFF(ncclNetProperties_v11_t, regIsGlobal, 28);
  OFF(ncclNetProperties_v11_t, forceFlush, 32);
  OFF(ncclNetProperties_v11_t, speed, 36);
  OFF(ncclNetProperties_v11_t, port, 40);
  OFF(ncclNetProperties_v11_t, latency, 44);
  OFF(ncclNetProperties_v11_t, maxComms, 48);
  OFF(ncclNetProperties_v11_t, maxRecvs, 52);
  OFF(ncclNetProperties_v11_t, netDeviceType, 56);
  OFF(ncclNetProperties_v11_t, netDeviceVersion, 60);
  OFF(ncclNetProperties_v11_t, vProps, 64);
  OFF(ncclNetProperties_v11_t, maxP2pBytes, 88);
  OFF(ncclNetProperties_v11_t, maxCollBytes, 96);
  OFF(ncclNetProperties_v11_t, maxMultiRequestSize, 104);
}

/* NCCL src/include/plugin/net/net_v11.h: one pointer per member, in order */
static void functions_v11(void)
{
  SIZE(ncclNet_v11_t, 176);
  OFF(ncclNet_v11_t, name, 0);
  OFF(ncclNet_v11_t, init, 8);
  OFF(ncclNet_v11_t, devices, 16);
  OFF(ncclNet_v11_t, getProperties, 24);
  OFF(ncclNet_v11_t, listen, 32);
  OFF(ncclNet_v11_t, connect, 40);
  OFF(ncclNet_v11_t, accept, 48);
  OFF(ncclNet_v11_t, regMr, 56);
  OFF(ncclNet_v11_t, regMrDmaBuf, 64);
  OFF(ncclNet_v11_t, deregMr, 72);
  OFF(ncclNet_v11_t, isend, 80);
  OFF(ncclNet_v11_t, irecv, 88);
  OFF(ncclNet_v11_t, iflush, 96);
  OFF(ncclNet_v11_t, test, 104);
  OFF(ncclNet_v11_t, closeSend, 112);
  OFF(ncclNet_v11_t, closeRecv, 120);
  OFF(ncclNet_v11_t, closeListen, 128);
  OFF(ncclNet_v11_t, getDeviceMr, 136);
  OFF(ncclNet_v11_t, irecvConsumed, 144);
  OFF(ncclNet_v11_t, makeVDevice, 152);
  OFF(ncclNet_v11_t, finalize, 160);
  OFF(ncclNet_v11_t, setNetAttr, 168);
}

/* NCCL src/include/plugin/net/net_v12.h */
static void properties_v12(void)
{
  SIZE(ncclNetProperties_v12_t, 128);
  OFF(ncclNetProperties_v12_t, name, 0);
  OFF(ncclNetProperties_v12_t, pciPath, 8);
  OFF(ncclNetProperties_v12_t, guid, 16);
  OFF(ncclNetProperties_v12_t, ptrSupport, 24);
  OFF(ncclNetProperties_v12_t, regIsGlobal, 28);
  OFF(ncclNetProperties_v12_t, forceFlush, 32);
  OFF(ncclNetProperties_v12_t, speed, 36);
  OFF(ncclNetProperties_v12_t, port, 40);
  OFF(ncclNetProperties_v12_t, latency, 44);
  OFF(ncclNetProperties_v12_t, maxComms, 48);
  OFF(ncclNetProperties_v12_t, maxRecvs, 52);
  OFF(ncclNetProperties_v12_t, netDeviceType, 56);
  OFF(ncclNetProperties_v12_t, netDeviceVersion, 60);
  OFF(ncclNetProperties_v12_t, vProps, 64);
  OFF(ncclNetProperties_v12_t, maxP2pBytes, 104);
  OFF(ncclNetProperties_v12_t, maxCollBytes, 112);
  OFF(ncclNetProperties_v12_t, maxMultiRequestSize, 120);
  OFF(ncclNetProperties_v12_t, railId, 124);
  OFF(ncclNetProperties_v12_t, planeId, 126);
}

/* NCCL src/include/plugin/net/net_v12.h: one pointer per member, in order */
static void functions_v12(void)
{
  SIZE(ncclNet_v12_t, 176);
  OFF(ncclNet_v12_t, name, 0);
  OFF(ncclNet_v12_t, init, 8);
  OFF(ncclNet_v12_t, devices, 16);
  OFF(ncclNet_v12_t, getProperties, 24);
  OFF(ncclNet_v12_t, listen, 32);
  OFF(ncclNet_v12_t, connect, 40);
  OFF(ncclNet_v12_t, accept, 48);
  OFF(ncclNet_v12_t, regMr, 56);
  OFF(ncclNet_v12_t, regMrDmaBuf, 64);
  OFF(ncclNet_v12_t, deregMr, 72);
  OFF(ncclNet_v12_t, isend, 80);
  OFF(ncclNet_v12_t, irecv, 88);
  OFF(ncclNet_v12_t, iflush, 96);
  OFF(ncclNet_v12_t, test, 104);
  OFF(ncclNet_v12_t, closeSend, 112);
  OFF(ncclNet_v12_t, closeRecv, 120);
  OFF(ncclNet_v12_t, closeListen, 128);
  OFF(ncclNet_v12_t, getDeviceMr, 136);
  OFF(ncclNet_v12_t, irecvConsumed, 144);
  OFF(ncclNet_v12_t, makeVDevice, 152);
  OFF(ncclNet_v12_t, finalize, 160);
  OFF(ncclNet_v12_t, setNetAttr, 168);
}

/* vProps (net_v9.h ... net_v12.h), configs, attributes (net_v11.h, net_v12.h),
 * the device handle (nccl_device/net_device.h), constants (nccl_net.h, nccl_common.h) */
static void small_structs(void)
{
  SIZE(ncclNetVDeviceProps_v9_t, 20);
  SIZE(ncclNetVDeviceProps_v10_t, 20);
  SIZE(ncclNetVDeviceProps_v11_t, 20);
  SIZE(ncclNetVDeviceProps_v12_t, 36);
  OFF(ncclNetVDeviceProps_v12_t, devs, 4);
  SIZE(ncclNetCommConfig_v10_t, 4);
  SIZE(ncclNetCommConfig_v11_t, 4);
  SIZE(ncclNetCommConfig_v12_t, 4);
  SIZE(ncclNetCommAttr_v11_t, 16);
  SIZE(ncclNetAttr_v11_t, 44);
  OFF(ncclNetAttr_v11_t, recvCommAttr, 16);
  OFF(ncclNetAttr_v11_t, op, 32);
  OFF(ncclNetAttr_v11_t, proto, 40);
  SIZE(ncclNetAttr_v12_t, 44);
  SIZE(ncclNetDeviceHandle_v7_t, 32);
  OFF(ncclNetDeviceHandle_v7_t, handle, 8);
  OFF(ncclNetDeviceHandle_v7_t, size, 16);
  OFF(ncclNetDeviceHandle_v7_t, needsProxyProgress, 24);
  SIZE(ncclNetDeviceType, 4);
  MC_T_EQ_INT(NCCL_NET_HANDLE_MAXSIZE, 128);
  MC_T_EQ_INT(NCCL_NET_MAX_REQUESTS, 32);
  MC_T_EQ_INT(NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF, 7);
  MC_T_EQ_INT(NCCL_NET | NCCL_INIT, 0x11);
  MC_T_EQ_INT(NCCL_LOG_TRACE, 5);
  MC_T_TRUE(MAX_NET_SIZE == (1LL << 30));
}

MC_T_MAIN(properties_v6, functions_v6, properties_v7, functions_v7, properties_v8, functions_v8,
          properties_v9, functions_v9, properties_v10, functions_v10, properties_v11, functions_v11,
          properties_v12, functions_v12, small_structs)

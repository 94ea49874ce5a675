/* SPDX-License-Identifier: Apache-2.0 */
/*
 * External net plugins (src/net/external/): the fake third-party plugin of
 * every ABI version (tests/plugins/fake_net.c) loaded by path and by name,
 * its INFO line, its properties converted exactly, messages through the
 * adapter (receives larger than sends, sizes reported, also by a plugin that
 * never fills them), int-size refusal, and the failures: a file that does not
 * exist, a library without plugin symbol, an init that fails, each followed
 * by the next choice; "none"; NCCL_NET choosing among plugin and built-ins.
 * Every case runs in a child process: loaded plugins are process-wide.
 */
#include "core/params.h"
#include "net/net.h"
#include "net/external/plugin.h"

#include "mc_test.h"

#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LONG_WAIT_NS (30ull * 1000000000ull)

static int g_version;

static uint64_t now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static char g_log[512];

static void lib_path(const char *name, char *out, size_t out_bytes)
{
  if ((size_t)snprintf(out, out_bytes, "%s/libnccl-net-%.64s.so", MC_T_PLUGIN_DIR, name) >=
      out_bytes)
    MC_T_FAIL("plugin path too long");
}

static void log_to_file(void)
{
  unlink(g_log);
  mc_param_set_for_tests(MC_P_DEBUG_FILE, g_log);
  mc_param_set_for_tests(MC_P_DEBUG, "INFO");
  mc_param_set_for_tests(MC_P_DEBUG_SUBSYS, "INIT,NET,ENV");
}

static void check_props(const struct mc_net_props *p, int v)
{
  MC_T_EQ_STR(p->name, "fake0");
  MC_T_EQ_STR(p->pci_path, "/sys/devices/pci0000:00/0000:00:0f.0");
  MC_T_TRUE(p->guid == 0xfa4e0000ull);
  MC_T_EQ_INT(p->ptr_support, MC_NET_PTR_HOST);
  MC_T_EQ_INT(p->reg_is_global, v >= 8);
  MC_T_EQ_INT(p->force_flush, 0);
  MC_T_EQ_INT(p->speed, 12345);
  MC_T_EQ_INT(p->port, 1);
  MC_T_TRUE(p->latency == 1.5f);
  MC_T_EQ_INT(p->max_comms, 4096);
  MC_T_EQ_INT(p->max_recvs, 1);
  MC_T_EQ_INT(p->vprops.n_devs, 1);
  MC_T_EQ_INT(p->vprops.devs[0], 0);
  MC_T_TRUE(p->max_p2p_bytes == ((v >= 9) ? ((size_t)3 << 28) : ((size_t)1 << 30)));
  MC_T_TRUE(p->max_coll_bytes == 0);
  MC_T_TRUE(p->max_multi_request_bytes == ((v >= 11) ? 4u : 0u));
  MC_T_EQ_INT(p->rail_id, (v >= 12) ? 2 : -1);
  MC_T_EQ_INT(p->plane_id, (v >= 12) ? 3 : -1);
}

static void *wait_req(const struct mc_net_ops *ops, void *req, size_t *size)
{
  int done = 0;
  uint64_t start = now_ns();

  while (!done) {
    MC_T_OK(ops->test(req, &done, size));
    if (now_ns() - start > LONG_WAIT_NS)
      MC_T_FAIL("request not done within 30 s");
  }
  return NULL;
}

/* Three messages through one connection; receives are posted larger than
 * the sends. recv_sizes_exact: the plugin reports sizes. */
static void round_trip(const struct mc_net_ops *ops, bool recv_sizes_exact)
{
  static const size_t lens[] = {1000, 1, 4096};
  char handle[MC_NET_HANDLE_BYTES];
  char sbuf[4096];
  char rbuf[8192];
  void *ctx = NULL;
  void *lc = NULL;
  void *sc = NULL;
  void *rc = NULL;
  void *smh = NULL;
  void *rmh = NULL;
  int n_devs = 0;
  uint64_t start = now_ns();

  MC_T_OK(ops->init(&(struct mc_net_init_args){.comm_id = 0x1234}, &ctx));
  MC_T_OK(ops->devices(ctx, &n_devs));
  MC_T_EQ_INT(n_devs, 1);
  memset(handle, 0, sizeof(handle));
  MC_T_OK(ops->listen(ctx, 0, handle, &lc));
  MC_T_TRUE(lc != NULL);
  while ((sc == NULL) || (rc == NULL)) {
    if (sc == NULL)
      MC_T_OK(ops->connect(ctx, 0, handle, &sc));
    if (rc == NULL)
      MC_T_OK(ops->accept(lc, &rc));
    if (now_ns() - start > LONG_WAIT_NS)
      MC_T_FAIL("connection not set up within 30 s");
  }
  MC_T_OK(ops->reg_mr(sc, sbuf, sizeof(sbuf), MC_NET_PTR_HOST, &smh));
  MC_T_OK(ops->reg_mr(rc, rbuf, sizeof(rbuf), MC_NET_PTR_HOST, &rmh));
  for (size_t m = 0; m < sizeof(lens) / sizeof(lens[0]); m++) {
    void *sreq = NULL;
    void *rreq = NULL;
    void *data = rbuf;
    size_t rsize = sizeof(rbuf);
    size_t got_s = 0;
    size_t got_r = 0;
    int tag = 0;
    for (size_t i = 0; i < lens[m]; i++)
      sbuf[i] = (char)(i * 7 + m);
    while (sreq == NULL)
      MC_T_OK(ops->isend(sc, sbuf, lens[m], 0, smh, &sreq));
    while (rreq == NULL)
      MC_T_OK(ops->irecv(rc, 1, &data, &rsize, &tag, &rmh, &rreq));
    wait_req(ops, sreq, &got_s);
    wait_req(ops, rreq, &got_r);
    MC_T_TRUE(got_s == lens[m]);
    MC_T_TRUE(got_r == (recv_sizes_exact ? lens[m] : MC_NET_SIZE_UNKNOWN));
    MC_T_TRUE(memcmp(sbuf, rbuf, lens[m]) == 0);
  }
  MC_T_OK(ops->dereg_mr(sc, smh));
  MC_T_OK(ops->dereg_mr(rc, rmh));
  MC_T_OK(ops->close_send(sc));
  MC_T_OK(ops->close_recv(rc));
  MC_T_OK(ops->close_listen(lc));
  MC_T_OK(ops->finalize(ctx));
}

/* ---------- cases (each body runs in a child) ---------- */

static void by_path_child(void)
{
  const struct mc_net_ops *ops = NULL;
  struct mc_net_props props;
  char path[512];
  char want[1024];
  void *ctx = NULL;
  int v = g_version;

  log_to_file();
  snprintf(want, sizeof(want), "fake%d", v);
  lib_path(want, path, sizeof(path));
  MC_T_OK(mc_net_plugin_load(path, true, &ops, NULL, 0));
  MC_T_TRUE(ops != NULL);
  MC_T_EQ_STR(ops->name, "Fake");
  MC_T_EQ_INT(mc_net_plugin_version(ops), v);
  MC_T_EQ_STR(mc_net_plugin_path(ops), path);
  MC_T_OK(mc_net_ops_validate(ops, path));
  /* another party's net gets the conservative properties (net.h) */
  MC_T_TRUE(!ops->calls_never_block);
  MC_T_TRUE(!ops->can_send_user_ptr);
  MC_T_TRUE(!ops->is_fallback);
  MC_T_NULL(ops->failover_ms);
  MC_T_NULL(ops->node_orders);
  /* v10 and v12 fakes implement makeVDevice, the others leave it NULL */
  MC_T_EQ_INT(ops->make_vdevice == mc_net_no_make_vdevice, (v != 10) && (v != 12));
  MC_T_OK(ops->init(&(struct mc_net_init_args){.comm_id = 1}, &ctx));
  MC_T_OK(ops->get_properties(ctx, 0, &props));
  check_props(&props, v);
  MC_T_OK(ops->finalize(ctx));
  round_trip(ops, true);
  snprintf(want, sizeof(want),
           "NET/Plugin: Loaded net plugin Fake (v%d) from %s, symbol ncclNetPlugin_v%d", v, path,
           v);
  MC_T_CONTAINS(mc_t_read_file(g_log), want);
  /* the plugin's own log lines come through the logger, with its file */
  snprintf(want, sizeof(want), "FAKE/Plugin: v%d initialised", v);
  MC_T_CONTAINS(mc_t_read_file(g_log), want);
}

static void each_version_by_path(void)
{
  for (g_version = 6; g_version <= 12; g_version++)
    mc_t_run_in_child(by_path_child);
}

static void by_name_child(void)
{
  const struct mc_net_ops *ops = NULL;
  const struct mc_net_ops *chosen = NULL;

  log_to_file();
  mc_param_set_for_tests(MC_P_NET_PLUGIN, "fake9");
  MC_T_OK(mc_net_plugin_get(&ops, NULL));
  MC_T_TRUE(ops != NULL);
  MC_T_EQ_INT(mc_net_plugin_version(ops), 9);
  MC_T_CONTAINS(mc_net_plugin_path(ops), "/libnccl-net-fake9.so");
  /* the name as given is tried first, then NCCL's prefix */
  MC_T_CONTAINS(mc_t_read_file(g_log), "NET/Plugin: Could not find: fake9\n");
  MC_T_CONTAINS(mc_t_read_file(g_log), "NCCL_NET_PLUGIN set by environment to fake9");
  /* plugins come before the built-in nets */
  MC_T_OK(mc_net_select(&chosen));
  MC_T_TRUE(chosen == ops);
  MC_T_CONTAINS(mc_t_read_file(g_log), "Using network Fake (net plugin v9, ");
  /* NCCL_NET chooses by name among all */
  mc_param_set_for_tests(MC_P_NET, "Socket");
  MC_T_OK(mc_net_select(&chosen));
  MC_T_TRUE(chosen == &mc_net_socket_ops);
  mc_param_set_for_tests(MC_P_NET, "fake");
  MC_T_OK(mc_net_select(&chosen));
  MC_T_TRUE(chosen == ops);
}

static void by_name_and_nccl_net(void)
{
  mc_t_run_in_child(by_name_child);
}

static void next_choice_child(void)
{
  const struct mc_net_ops *ops = NULL;
  char nosym[512];
  char spec[2048];
  char why[2048];
  char want[1024];

  log_to_file();
  setenv("FAKE_NET_INIT_FAIL", "11", 1);
  lib_path("nosym", nosym, sizeof(nosym));
  snprintf(spec, sizeof(spec), "/nonexistent/libnccl-net-x.so,%s,fake11,fake7", nosym);
  MC_T_OK(mc_net_plugin_load(spec, true, &ops, why, sizeof(why)));
  MC_T_TRUE(ops != NULL);
  MC_T_EQ_INT(mc_net_plugin_version(ops), 7);
  MC_T_CONTAINS(why, "/nonexistent/libnccl-net-x.so: cannot open shared object file: No such "
                     "file or directory");
  snprintf(want, sizeof(want), "%s: exports none of ncclNetPlugin_v12 ... ncclNetPlugin_v6", nosym);
  MC_T_CONTAINS(why, want);
  MC_T_CONTAINS(why, "/libnccl-net-fake11.so (ncclNetPlugin_v11, plugin Fake): init failed "
                     "(ncclSystemError)");
  /* one line per failed choice, naming the file */
  snprintf(want, sizeof(want), "NET/Plugin: %s exports none of", nosym);
  MC_T_CONTAINS(mc_t_read_file(g_log), want);
  MC_T_CONTAINS(mc_t_read_file(g_log), "FAKE/Plugin: init fails as FAKE_NET_INIT_FAIL asks");
  MC_T_CONTAINS(mc_t_read_file(g_log), "Loaded net plugin Fake (v7)");
}

static void failures_then_next_choice(void)
{
  mc_t_run_in_child(next_choice_child);
}

static void asked_and_nothing_loads_child(void)
{
  const struct mc_net_ops *ops = NULL;

  mc_param_set_for_tests(MC_P_NET_PLUGIN, "nosuch");
  MC_T_EQ_INT(mc_net_plugin_get(&ops, NULL), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "NET/Plugin: NCCL_NET_PLUGIN=nosuch: no plugin could be "
                                   "loaded: nosuch: cannot open shared object file: No such "
                                   "file or directory; libnccl-net-nosuch.so: cannot open");
  MC_T_NULL(ops);
  /* and so does the communicator's net choice, every time it is asked */
  MC_T_EQ_INT(mc_net_select(&ops), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_NET_PLUGIN=nosuch: no plugin could be loaded");
}

static void asked_and_nothing_loads(void)
{
  mc_t_run_in_child(asked_and_nothing_loads_child);
}

static void none_and_unset_child(void)
{
  const struct mc_net_ops *ops = NULL;

  mc_param_set_for_tests(MC_P_NET_PLUGIN, "NONE");
  MC_T_OK(mc_net_plugin_get(&ops, NULL));
  MC_T_NULL(ops);
  MC_T_OK(mc_net_select(&ops));
  MC_T_TRUE(ops == &mc_net_socket_ops);
  /* unset: a missing libnccl-net.so is normal... */
  mc_param_set_for_tests(MC_P_NET_PLUGIN, NULL);
  MC_T_OK(mc_net_select(&ops));
  MC_T_TRUE(ops == &mc_net_socket_ops);
  /* ...unless NCCL_NET names a net only a plugin provides */
  mc_param_set_for_tests(MC_P_NET, "Fake");
  MC_T_EQ_INT(mc_net_select(&ops), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_NET=Fake names no network; the networks are: Socket, Mesh "
                                   "(no net plugin loaded: libnccl-net.so: cannot open shared "
                                   "object file");
}

static void none_and_unset(void)
{
  mc_t_run_in_child(none_and_unset_child);
}

static void sizes_not_reported_child(void)
{
  const struct mc_net_ops *ops = NULL;
  char path[512];

  log_to_file();
  setenv("FAKE_NET_NO_SIZES", "1", 1);
  lib_path("fake12", path, sizeof(path));
  MC_T_OK(mc_net_plugin_load(path, true, &ops, NULL, 0));
  round_trip(ops, false);
  MC_T_CONTAINS(mc_t_read_file(g_log),
                "NET/Plugin: Fake (v12) test() does not report sizes; receivers go by the sizes "
                "they expect");
}

static void sizes_not_reported(void)
{
  mc_t_run_in_child(sizes_not_reported_child);
}

static void int_sizes_child(void)
{
  const struct mc_net_ops *ops = NULL;
  char path[512];
  char byte = 0;
  void *req = NULL;
  void *comm_placeholder[64] = {NULL};

  lib_path("fake8", path, sizeof(path));
  MC_T_OK(mc_net_plugin_load(path, true, &ops, NULL, 0));
  /* refused before the plugin (or the comm) is touched */
  MC_T_EQ_INT(ops->isend(comm_placeholder, &byte, (size_t)INT32_MAX + 1, 0, NULL, &req),
              ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "isend of 2147483648 bytes: the v8 ABI carries sizes as int");
  MC_T_NULL(req);
}

static void int_sizes_refused(void)
{
  mc_t_run_in_child(int_sizes_child);
}

static void setup_log_path(void)
{
  mc_t_tmp_path("plugin.log", g_log, sizeof(g_log));
}

static void each_version_by_path_case(void)
{
  setup_log_path();
  each_version_by_path();
}

MC_T_MAIN(each_version_by_path_case, by_name_and_nccl_net, failures_then_next_choice,
          asked_and_nothing_loads, none_and_unset, sizes_not_reported, int_sizes_refused)

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Mesh net (src/net/mesh/) in one process: the NIC rules on made-up
 * interface lists (default exclusions, fallbacks, lanes, link-local), the
 * handle's byte layout (round trip, too many addresses, corrupt handles),
 * and over loopback (MESHCCL_MESH_IFNAME=lo): non-blocking connect/accept,
 * exact bytes for 0 B .. 1 MiB with receives larger than the send, 32
 * outstanding requests, strangers on the handshake port (garbage, silence,
 * another secret) refused and logged while the real connection completes,
 * more strangers than the pending set holds (the oldest evicted),
 * no common subnet, the abort flag, and fds/threads back to their counts
 * after finalize.
 */
#include "core/log.h"
#include "core/params.h"
#include "net/mesh/mesh_int.h"
#include "net/net.h"

#include "mc_net_pair.h"
#include "mc_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#define MIB (1024 * 1024)

static const struct mc_net_ops *const net = &mc_net_mesh_ops;

static struct np_counts counts_now(void)
{
  /* Between tests only the main thread runs; a thread joined by the test
   * before may linger in /proc for a moment: wait for it to go. */
  struct np_counts c = {mc_count_fds(), mc_count_threads_settled(1, 2000)};
  return c;
}

static void use_loopback(void)
{
  mc_param_reset_for_tests();
  mc_param_set_for_tests(MC_P_MESH_IFNAME, "=lo");
}

static struct mc_net_mesh_nic cand(const char *name, const char *addr, int prefix, int speed)
{
  struct mc_net_mesh_nic c;

  memset(&c, 0, sizeof(c));
  snprintf(c.name, sizeof(c.name), "%s", name);
  if (strchr(addr, ':') != NULL) {
    c.addr.sin6.sin6_family = AF_INET6;
    inet_pton(AF_INET6, addr, &c.addr.sin6.sin6_addr);
  } else {
    c.addr.sin.sin_family = AF_INET;
    inet_pton(AF_INET, addr, &c.addr.sin.sin_addr);
  }
  c.prefix_len = prefix;
  c.speed_mbps = speed;
  return c;
}

/* ---------- pure logic ---------- */

static void nic_rules(void)
{
  struct mc_net_mesh_nic cands[8];
  struct mc_net_mesh_nic nics[8];
  struct mc_net_mesh_nic_rules rules = {NULL, "eth0", NULL, 40000};
  char why[256];
  char s[64];
  int n = 0;

  cands[0] = cand("lo", "127.0.0.1", 8, 10000);
  cands[1] = cand("eth0", "192.168.0.5", 24, 1000);
  cands[2] = cand("ens1", "10.1.12.1", 24, 100000);
  cands[3] = cand("ens1", "fe80::1", 64, 100000);
  cands[4] = cand("ens2", "10.1.13.1", 24, 10000);
  cands[5] = cand("docker0", "172.17.0.1", 16, 10000);
  /* Default: links only, no link-local; ens1 fast (>= 40000), ens2 management. */
  MC_T_OK(mc_net_mesh_nics_select(cands, 6, &rules, nics, 8, &n, why, sizeof(why)));
  MC_T_EQ_INT(n, 2);
  MC_T_EQ_STR(nics[0].name, "ens1");
  MC_T_EQ_INT(nics[0].lane, MC_NET_MESH_LANE_FAST);
  MC_T_TRUE(nics[0].carries_data);
  MC_T_EQ_STR(nics[1].name, "ens2");
  MC_T_EQ_INT(nics[1].lane, MC_NET_MESH_LANE_MGMT);
  MC_T_TRUE(!nics[1].carries_data);
  MC_T_EQ_STR(mc_net_mesh_subnet_str(&nics[0].addr, 24, s, sizeof(s)), "10.1.12.0/24");
  /* Only slow NICs: the management lane carries data. */
  rules.fast_mbps = 200000;
  MC_T_OK(mc_net_mesh_nics_select(cands, 6, &rules, nics, 8, &n, why, sizeof(why)));
  MC_T_TRUE(nics[0].carries_data && nics[1].carries_data);
  MC_T_CONTAINS(why, "management lane carries data");
  /* Explicit lanes win over speed; a name that is not a mesh NIC is an error. */
  rules.lanes = "ens2=fast,ens1=mgmt";
  MC_T_OK(mc_net_mesh_nics_select(cands, 6, &rules, nics, 8, &n, why, sizeof(why)));
  MC_T_EQ_INT(nics[0].lane, MC_NET_MESH_LANE_MGMT);
  MC_T_EQ_INT(nics[1].lane, MC_NET_MESH_LANE_FAST);
  MC_T_TRUE(!nics[0].carries_data && nics[1].carries_data);
  rules.lanes = "eth9=fast";
  MC_T_EQ_INT(mc_net_mesh_nics_select(cands, 6, &rules, nics, 8, &n, why, sizeof(why)),
              ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "MESHCCL_MESH_LANES=eth9=fast");
  rules.lanes = "ens1=turbo";
  MC_T_EQ_INT(mc_net_mesh_nics_select(cands, 6, &rules, nics, 8, &n, why, sizeof(why)),
              ncclInvalidUsage);
  rules.lanes = NULL;
  /* Only the management network: it is the mesh (one subnet). */
  MC_T_OK(mc_net_mesh_nics_select(cands, 2, &rules, nics, 8, &n, why, sizeof(why)));
  MC_T_EQ_INT(n, 1);
  MC_T_EQ_STR(nics[0].name, "eth0");
  /* Only loopback. */
  MC_T_OK(mc_net_mesh_nics_select(cands, 1, &rules, nics, 8, &n, why, sizeof(why)));
  MC_T_EQ_INT(n, 1);
  MC_T_EQ_STR(nics[0].name, "lo");
  /* Link-local only when nothing else is left. */
  rules.mesh_ifname = "ens1";
  MC_T_OK(mc_net_mesh_nics_select(cands + 3, 1, &rules, nics, 8, &n, why, sizeof(why)));
  MC_T_EQ_INT(n, 1);
  MC_T_EQ_INT(nics[0].addr.sa.sa_family, AF_INET6);
  /* MESHCCL_MESH_IFNAME chooses; nothing matching names the variables. */
  rules.mesh_ifname = "=nosuch0";
  MC_T_EQ_INT(mc_net_mesh_nics_select(cands, 6, &rules, nics, 8, &n, why, sizeof(why)),
              ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "MESHCCL_MESH_IFNAME==nosuch0");
  /* Subnets: same prefix and network. */
  cands[6] = cand("x", "10.1.12.2", 24, 0);
  MC_T_TRUE(mc_net_mesh_same_subnet(&cands[2].addr, 24, &cands[6].addr, 24));
  MC_T_TRUE(!mc_net_mesh_same_subnet(&cands[2].addr, 24, &cands[4].addr, 24));
  MC_T_TRUE(!mc_net_mesh_same_subnet(&cands[2].addr, 24, &cands[6].addr, 25));
}

static void handle_round_trip(void)
{
  struct mc_net_mesh_handle h;
  struct mc_net_mesh_handle back;
  uint8_t buf[MC_NET_HANDLE_BYTES];
  char a[MC_SOCKADDR_STRLEN];

  memset(&h, 0, sizeof(h));
  h.host_hash = 0x0123456789abcdefull;
  h.listen_id = 0xfedcba9876543210ull;
  h.n_socks = 2;
  h.n_threads = 1;
  h.inline_bytes = 128;
  h.min_task_bytes = 65536;
  h.n_addrs = 3;
  h.addrs[0].addr = cand("a", "10.1.12.1", 24, 0).addr;
  h.addrs[0].prefix_len = 24;
  h.addrs[0].lane = MC_NET_MESH_LANE_FAST;
  mc_sockaddr_set_port(&h.addrs[0].addr, 40001);
  h.addrs[1].addr = cand("b", "fd00::12:1", 64, 0).addr;
  h.addrs[1].prefix_len = 64;
  mc_sockaddr_set_port(&h.addrs[1].addr, 40002);
  h.addrs[2].addr = cand("c", "192.168.0.5", 16, 0).addr;
  h.addrs[2].prefix_len = 16;
  mc_sockaddr_set_port(&h.addrs[2].addr, 65535);
  MC_T_OK(mc_net_mesh_handle_encode(&h, buf));
  MC_T_EQ_INT(buf[0], 'M'); /* network byte order */
  MC_T_OK(mc_net_mesh_handle_decode(buf, &back));
  MC_T_EQ_INT(back.host_hash, h.host_hash);
  MC_T_EQ_INT(back.listen_id, h.listen_id);
  MC_T_EQ_INT(back.n_socks, 2);
  MC_T_EQ_INT(back.n_threads, 1);
  MC_T_EQ_INT(back.inline_bytes, 128);
  MC_T_EQ_INT(back.min_task_bytes, 65536);
  MC_T_EQ_INT(back.n_addrs, 3);
  for (int i = 0; i < 3; i++) {
    MC_T_TRUE(mc_sockaddr_equal(&back.addrs[i].addr, &h.addrs[i].addr));
    MC_T_EQ_INT(back.addrs[i].prefix_len, h.addrs[i].prefix_len);
    MC_T_EQ_INT(back.addrs[i].lane, h.addrs[i].lane);
  }
  MC_T_EQ_STR(mc_sockaddr_str(&back.addrs[1].addr, a, sizeof(a)), "fd00::12:1<40002>");
  /* 10 IPv4 fit, 11 do not; 4 IPv6 fit, 5 do not. */
  h.n_addrs = 10;
  for (int i = 0; i < 10; i++)
    h.addrs[i] = h.addrs[0];
  MC_T_OK(mc_net_mesh_handle_encode(&h, buf));
  h.n_addrs = 11;
  h.addrs[10] = h.addrs[0];
  MC_T_EQ_INT(mc_net_mesh_handle_encode(&h, buf), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "MESHCCL_MESH_IFNAME");
  h.n_addrs = 5;
  for (int i = 0; i < 5; i++)
    h.addrs[i] = back.addrs[1];
  MC_T_EQ_INT(mc_net_mesh_handle_encode(&h, buf), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "5 IPv6");
  h.n_addrs = 4;
  MC_T_OK(mc_net_mesh_handle_encode(&h, buf));
  /* Not a mesh handle; a corrupt entry. */
  memset(buf, 0, sizeof(buf));
  MC_T_EQ_INT(mc_net_mesh_handle_decode(buf, &back), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_NET=Mesh");
  h.n_addrs = 1;
  MC_T_OK(mc_net_mesh_handle_encode(&h, buf));
  buf[MC_NET_MESH_HDR_BYTES] = 5;
  MC_T_EQ_INT(mc_net_mesh_handle_decode(buf, &back), ncclInvalidArgument);
}

/* ---------- over loopback ---------- */

static void loopback_sizes(void)
{
  struct np_counts before = counts_now();
  struct mc_net_props props;
  struct np_pair p;
  static const size_t sizes[] = {0, 1, 4096, MIB};

  use_loopback();
  np_open(&p, net, &(struct mc_net_init_args){0});
  MC_T_EQ_STR(net->name, "Mesh");
  MC_T_OK(net->get_properties(p.ctx, 0, &props));
  MC_T_EQ_STR(props.name, "mesh0");
  MC_T_EQ_STR(props.pci_path, "");
  MC_T_EQ_INT(props.speed, 10000);
  MC_T_EQ_INT(props.ptr_support, MC_NET_PTR_HOST);
  MC_T_EQ_INT(net->get_properties(p.ctx, 1, &props), ncclInvalidArgument);
  np_connect(&p);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    np_check_xfer(&p, sizes[i], 0, (unsigned)i);
    np_check_xfer(&p, sizes[i], 1000, (unsigned)i + 100); /* receive posted larger */
  }
  np_close(&p);
  np_counts_back(before);
}

static void data_sockets_and_threads(void)
{
  struct np_counts before = counts_now();
  struct np_pair p;

  use_loopback();
  mc_param_set_for_tests(MC_P_SOCKET_NTHREADS, "2");
  mc_param_set_for_tests(MC_P_NSOCKS_PERTHREAD, "2");
  np_open(&p, net, &(struct mc_net_init_args){0});
  np_connect(&p);
  np_check_xfer(&p, 3 * MIB + 17, 5, 7);
  np_check_xfer(&p, 100, 0, 8);
  np_close(&p);
  np_counts_back(before);
  mc_param_reset_for_tests();
}

static void outstanding_32(void)
{
  struct np_pair p;
  enum { N = MC_NET_MAX_REQUESTS, BYTES = 70000 };
  unsigned char *s = malloc((size_t)N * BYTES);
  unsigned char *r = malloc((size_t)N * BYTES);
  void *reqs[2 * N];
  size_t got[2 * N];

  MC_T_TRUE((s != NULL) && (r != NULL));
  use_loopback();
  np_open(&p, net, &(struct mc_net_init_args){0});
  np_connect(&p);
  np_fill(s, (size_t)N * BYTES, 3);
  memset(r, 0, (size_t)N * BYTES);
  for (int i = 0; i < N; i++)
    reqs[N + i] = np_post_recv(&p, r + (size_t)i * BYTES, BYTES);
  for (int i = 0; i < N; i++)
    reqs[i] = np_post_send(&p, s + (size_t)i * BYTES, (size_t)(BYTES - i));
  np_wait(net, reqs, got, 2 * N);
  for (int i = 0; i < N; i++) {
    MC_T_EQ_INT(got[N + i], BYTES - i);
    if (memcmp(s + (size_t)i * BYTES, r + (size_t)i * BYTES, (size_t)(BYTES - i)) != 0)
      MC_T_FAIL("message %d differs", i);
  }
  np_close(&p);
  free(s);
  free(r);
}

/* A plain TCP connection to the handshake port of the handle's first address. */
static int stranger(const char *handle, const void *payload, size_t bytes)
{
  struct mc_net_mesh_handle h;
  int fd;

  MC_T_OK(mc_net_mesh_handle_decode(handle, &h));
  fd = socket(h.addrs[0].addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  MC_T_TRUE(fd >= 0);
  MC_T_EQ_INT(connect(fd, &h.addrs[0].addr.sa, mc_sockaddr_len(&h.addrs[0].addr)), 0);
  if (bytes > 0)
    MC_T_EQ_INT(send(fd, payload, bytes, MSG_NOSIGNAL), (ssize_t)bytes);
  return fd;
}

static void strangers_refused(void)
{
  struct np_counts before = counts_now();
  struct mc_net_mesh_stats st;
  struct np_pair p;
  void *other = NULL;
  void *comm = NULL;
  uint8_t secret_a[MC_NET_SECRET_BYTES];
  uint8_t secret_b[MC_NET_SECRET_BYTES];
  char garbage[200];
  char log_path[256];
  const char *log;
  ncclResult_t res = ncclSuccess;
  struct mc_deadline dl;
  int fds[2];

  use_loopback();
  mc_t_tmp_path("mesh.log", log_path, sizeof(log_path));
  mc_param_set_for_tests(MC_P_DEBUG, "INFO");
  mc_param_set_for_tests(MC_P_DEBUG_SUBSYS, "NET");
  mc_param_set_for_tests(MC_P_DEBUG_FILE, log_path);
  mc_param_set_for_tests(MC_P_MESH_HANDSHAKE_TIMEOUT_MS, "1500");
  mc_log_reset_for_tests();
  memset(secret_a, 1, sizeof(secret_a));
  memset(secret_b, 2, sizeof(secret_b));
  np_open(&p, net, &(struct mc_net_init_args){.comm_id = 7, .secret = secret_a});
  memset(garbage, 'G', sizeof(garbage));
  fds[0] = stranger(p.handle, garbage, sizeof(garbage)); /* garbage */
  fds[1] = stranger(p.handle, NULL, 0);                  /* silence */
  /* Another secret: the listener refuses the MAC, the connector fails. */
  MC_T_OK(net->init(&(struct mc_net_init_args){.comm_id = 7, .secret = secret_b}, &other));
  dl = mc_deadline_in_ms(NP_LONG_WAIT);
  while ((res == ncclSuccess) && (comm == NULL) && !mc_deadline_passed(dl))
    res = net->connect(other, 0, p.handle, &comm);
  MC_T_EQ_INT(res, ncclRemoteError);
  MC_T_NULL(comm);
  MC_T_CONTAINS(mc_t_last_error(), "refused our MAC");
  /* The real connection completes while the silent stranger is still pending. */
  np_connect(&p);
  mc_net_mesh_stats_get(p.ctx, &st);
  MC_T_EQ_INT(st.n_timeouts, 0);
  np_check_xfer(&p, 4096, 0, 1);
  dl = mc_deadline_in_ms(NP_LONG_WAIT);
  do {
    usleep(20000);
    mc_net_mesh_stats_get(p.ctx, &st);
  } while (((st.n_refused < 3) || (st.n_timeouts < 1)) && !mc_deadline_passed(dl));
  /* garbage, silence, and one or both sockets of the other secret's connection */
  MC_T_TRUE((st.n_refused >= 3) && (st.n_refused <= 4));
  MC_T_TRUE(st.n_bad_mac >= 1);
  MC_T_EQ_INT(st.n_timeouts, 1);
  MC_T_EQ_INT(st.n_accepted_socks, 2); /* control + 1 data socket */
  close(fds[0]);
  close(fds[1]);
  MC_T_OK(net->finalize(other));
  np_close(&p);
  log = mc_t_read_file(log_path);
  MC_T_CONTAINS(log, "refused connection from 127.0.0.1<");
  MC_T_CONTAINS(log, "not a Mesh handshake");
  MC_T_CONTAINS(log, "authentication failed");
  MC_T_CONTAINS(log, "no complete handshake within 1500 ms");
  MC_T_CONTAINS(log, "NET/Mesh : Using [0]lo:127.0.0.1<0>(mgmt,10000Mb/s,127.0.0.0/8)");
  mc_param_reset_for_tests();
  mc_log_reset_for_tests();
  np_counts_back(before);
}

static void same_secret_from_env(void)
{
  struct np_pair p;

  use_loopback();
  mc_param_set_for_tests(MC_P_SECRET, "correct horse");
  np_open(&p, net, &(struct mc_net_init_args){0});
  np_connect(&p);
  np_check_xfer(&p, 10, 0, 2);
  np_close(&p);
  mc_param_reset_for_tests();
}

static void no_common_subnet(void)
{
  struct mc_net_mesh_handle h;
  struct np_pair p;
  void *comm = NULL;
  char handle[MC_NET_HANDLE_BYTES];
  ncclResult_t res;
  double t0;

  use_loopback();
  mc_param_set_for_tests(MC_P_MESH_ROUTE_TIMEOUT_MS, "300");
  np_open(&p, net, &(struct mc_net_init_args){0});
  MC_T_OK(mc_net_mesh_handle_decode(p.handle, &h));
  h.n_addrs = 1;
  h.addrs[0].addr = cand("x", "192.0.2.7", 24, 0).addr;
  h.addrs[0].prefix_len = 24;
  MC_T_OK(mc_net_mesh_handle_encode(&h, handle));
  /* No route is known to that host: connect waits for discovery (NULL),
   * then fails naming both hosts' subnets and the mesh known. */
  t0 = mc_clock_sec(CLOCK_MONOTONIC);
  do {
    res = net->connect(p.ctx, 0, handle, &comm);
  } while ((res == ncclSuccess) && (comm == NULL) && (mc_clock_sec(CLOCK_MONOTONIC) - t0 < 10));
  MC_T_EQ_INT(res, ncclRemoteError);
  MC_T_NULL(comm);
  MC_T_TRUE(mc_clock_sec(CLOCK_MONOTONIC) - t0 >= 0.25);
  MC_T_CONTAINS(mc_t_last_error(), "192.0.2.0/24");
  MC_T_CONTAINS(mc_t_last_error(), "127.0.0.0/8");
  MC_T_CONTAINS(mc_t_last_error(), "no route");
  MC_T_CONTAINS(mc_t_last_error(), "MESHCCL_MESH_ROUTE_TIMEOUT_MS=300");
  MC_T_CONTAINS(mc_t_last_error(), "1 hosts");
  np_close(&p);
}

static void abort_flag_fails_fast(void)
{
  struct np_counts before = counts_now();
  volatile uint32_t abort_flag = 0;
  struct np_pair p;
  void *comm = NULL;
  void *req = NULL;
  char buf[16];
  char handle2[MC_NET_HANDLE_BYTES];
  void *listen2 = NULL;
  double t0;

  use_loopback();
  np_open(&p, net, &(struct mc_net_init_args){.abort_flag = &abort_flag});
  np_connect(&p);
  MC_T_OK(net->listen(p.ctx, 0, handle2, &listen2));
  __atomic_store_n(&abort_flag, 1, __ATOMIC_RELEASE);
  t0 = mc_clock_sec(CLOCK_MONOTONIC);
  MC_T_EQ_INT(net->connect(p.ctx, 0, handle2, &comm), ncclInternalError);
  MC_T_EQ_INT(net->accept(listen2, &comm), ncclInternalError);
  MC_T_EQ_INT(net->listen(p.ctx, 0, handle2, &comm), ncclInternalError);
  MC_T_EQ_INT(net->isend(p.send, buf, 1, 0, NULL, &req), ncclInternalError);
  MC_T_NULL(comm);
  MC_T_TRUE(mc_clock_sec(CLOCK_MONOTONIC) - t0 < 1.0);
  MC_T_OK(net->close_listen(listen2));
  np_close(&p); /* the handshake thread has ended already */
  MC_T_TRUE(mc_clock_sec(CLOCK_MONOTONIC) - t0 < 2.0);
  np_counts_back(before);
}

/* More silent strangers than the pending set holds: the oldest are evicted,
 * the real connection (two of them: round-robin over 127.0.0.1 and ::1 when
 * loopback has both) still completes. */
static void many_strangers_evicted(void)
{
  struct np_counts before = counts_now();
  struct mc_net_mesh_stats st;
  struct np_pair p;
  struct np_pair q;
  int fds[MC_NET_MESH_MAX_PENDING + 8];
  int n = (int)(sizeof(fds) / sizeof(fds[0]));

  use_loopback();
  np_open(&p, net, &(struct mc_net_init_args){0});
  for (int i = 0; i < n; i++)
    fds[i] = stranger(p.handle, NULL, 0);
  np_connect(&p);
  np_check_xfer(&p, 5000, 3, 4);
  /* A second listen comm and connection on the same context. */
  q = p;
  q.send = q.recv = NULL;
  MC_T_OK(net->listen(q.ctx, 0, q.handle, &q.listen));
  np_connect(&q);
  np_check_xfer(&q, 70000, 0, 5);
  mc_net_mesh_stats_get(p.ctx, &st);
  /* the strangers beyond the set, then one per socket of the first connection */
  MC_T_EQ_INT(st.n_refused, n + 2 - MC_NET_MESH_MAX_PENDING);
  MC_T_EQ_INT(st.n_accepted_socks, 4);
  for (int i = 0; i < n; i++)
    close(fds[i]);
  MC_T_OK(net->close_send(q.send));
  MC_T_OK(net->close_recv(q.recv));
  MC_T_OK(net->close_listen(q.listen));
  np_close(&p);
  np_counts_back(before);
}

static void no_leaks_many_cycles(void)
{
  struct np_counts before = counts_now();

  for (int i = 0; i < 5; i++) {
    struct np_pair p;

    use_loopback();
    np_open(&p, net, &(struct mc_net_init_args){0});
    np_connect(&p);
    np_check_xfer(&p, 1000, 0, (unsigned)i);
    np_close(&p);
  }
  np_counts_back(before);
}

MC_T_MAIN(nic_rules, handle_round_trip, loopback_sizes, data_sockets_and_threads, outstanding_32,
          strangers_refused, same_secret_from_env, no_common_subnet, abort_flag_fails_fast,
          many_strangers_evicted, no_leaks_many_cycles)

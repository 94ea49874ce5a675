/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Nodes, local ranks and devices from peer infos (mc_comm_nodes_compute), and
 * the peer checks (mc_comm_peers_check), on synthetic peer arrays.
 */
#include "init/comm.h"

#include "mc_test.h"

#define MAX_PEERS 16

static struct mc_peer_info peers[MAX_PEERS];

/* Fills n peers: hosts[i] is rank i's host letter, devs[i] its device (-1 auto). */
static void make_peers(int n, const char *hosts, const int *devs)
{
  memset(peers, 0, sizeof(peers));
  for (int r = 0; r < n; r++) {
    peers[r].rank = r;
    peers[r].dev = (devs != NULL) ? devs[r] : -1;
    peers[r].version = NCCL_VERSION_CODE;
    peers[r].pid = 1000 + r;
    peers[r].host_hash = 0xabc000 + (uint64_t)hosts[r];
    peers[r].pid_hash = 0xdef000 + (uint64_t)r;
    snprintf(peers[r].host, sizeof(peers[r].host), "host%c", hosts[r]);
  }
}

static void expect_ints(const int *got, const int *want, int n, const char *what)
{
  for (int i = 0; i < n; i++) {
    if (got[i] != want[i])
      MC_T_FAIL("%s[%d] == %d, expected %d", what, i, got[i], want[i]);
  }
}

static void one_host(void)
{
  struct mc_comm_nodes nd;
  const int zero_to_three[] = {0, 1, 2, 3};

  make_peers(4, "AAAA", NULL);
  for (int me = 0; me < 4; me++) {
    MC_T_OK(mc_comm_nodes_compute(peers, 4, me, &nd));
    MC_T_EQ_INT(nd.n_nodes, 1);
    MC_T_EQ_INT(nd.local_rank, me);
    MC_T_EQ_INT(nd.local_ranks, 4);
    MC_T_EQ_INT(nd.max_local_ranks, 4);
    MC_T_EQ_INT(nd.node_first_rank[0], 0);
    MC_T_EQ_INT(nd.node_n_ranks[0], 4);
    expect_ints(nd.rank_to_local_rank, zero_to_three, 4, "rank_to_local_rank");
    expect_ints(nd.local_rank_to_rank, zero_to_three, 4, "local_rank_to_rank");
    expect_ints(nd.dev, zero_to_three, 4, "dev"); /* auto: 0..k-1 */
    for (int r = 0; r < 4; r++)
      MC_T_EQ_INT(nd.rank_to_node[r], 0);
    mc_comm_nodes_free(&nd);
    MC_T_NULL(nd.dev);
    MC_T_NULL(nd.local_rank_to_rank);
  }
  mc_comm_nodes_free(&nd); /* twice is fine */
}

static void three_hosts(void)
{
  struct mc_comm_nodes nd;
  /* ranks:           0  1  2  3  4  5 */
  /* hosts:           A  B  A  B  C  A */
  const int node[] = {0, 1, 0, 1, 2, 0};
  const int local[] = {0, 0, 1, 1, 0, 2};
  const int dev[] = {0, 0, 1, 1, 0, 2};
  const int first[] = {0, 1, 4};
  const int count[] = {3, 2, 1};
  const int on_a[] = {0, 2, 5};
  const int on_b[] = {1, 3};
  const int on_c[] = {4};
  const int *const by_node[] = {on_a, on_b, on_c};

  make_peers(6, "ABABCA", NULL);
  for (int me = 0; me < 6; me++) {
    MC_T_OK(mc_comm_nodes_compute(peers, 6, me, &nd));
    MC_T_EQ_INT(nd.n_nodes, 3);
    expect_ints(nd.rank_to_node, node, 6, "rank_to_node");
    expect_ints(nd.rank_to_local_rank, local, 6, "rank_to_local_rank");
    expect_ints(nd.node_first_rank, first, 3, "node_first_rank");
    expect_ints(nd.node_n_ranks, count, 3, "node_n_ranks");
    expect_ints(nd.dev, dev, 6, "dev");
    MC_T_EQ_INT(nd.max_local_ranks, 3);
    MC_T_EQ_INT(nd.local_rank, local[me]);
    MC_T_EQ_INT(nd.local_ranks, count[node[me]]);
    expect_ints(nd.local_rank_to_rank, by_node[node[me]], count[node[me]], "local_rank_to_rank");
    mc_comm_nodes_free(&nd);
  }
}

static void explicit_devices(void)
{
  struct mc_comm_nodes nd;
  const int devs_a[] = {1, -1, -1, -1};
  const int want_a[] = {1, 0, 2, 3};
  const int devs_b[] = {-1, 3, -1, 0, -1};
  const int want_b[] = {1, 3, 2, 0, 4};
  /* two hosts: explicit devices only reserve indices on their own host */
  const int devs_c[] = {0, -1, -1, -1};
  const int want_c[] = {0, 0, 1, 1};

  make_peers(4, "AAAA", devs_a);
  MC_T_OK(mc_comm_nodes_compute(peers, 4, 0, &nd));
  expect_ints(nd.dev, want_a, 4, "dev");
  mc_comm_nodes_free(&nd);

  make_peers(5, "AAAAA", devs_b);
  MC_T_OK(mc_comm_nodes_compute(peers, 5, 4, &nd));
  expect_ints(nd.dev, want_b, 5, "dev");
  mc_comm_nodes_free(&nd);

  make_peers(4, "ABAB", devs_c);
  MC_T_OK(mc_comm_nodes_compute(peers, 4, 1, &nd));
  expect_ints(nd.dev, want_c, 4, "dev");
  mc_comm_nodes_free(&nd);
}

static void single_rank(void)
{
  struct mc_comm_nodes nd;

  make_peers(1, "A", NULL);
  MC_T_OK(mc_comm_nodes_compute(peers, 1, 0, &nd));
  MC_T_EQ_INT(nd.n_nodes, 1);
  MC_T_EQ_INT(nd.local_rank, 0);
  MC_T_EQ_INT(nd.local_ranks, 1);
  MC_T_EQ_INT(nd.local_rank_to_rank[0], 0);
  MC_T_EQ_INT(nd.dev[0], 0);
  mc_comm_nodes_free(&nd);
}

static void check_versions(void)
{
  const int devs[] = {0, 1, 2};

  make_peers(3, "AAA", NULL);
  MC_T_OK(mc_comm_peers_check(peers, devs, 3, false));
  peers[2].version = NCCL_VERSION_CODE + 1;
  MC_T_EQ_INT(mc_comm_peers_check(peers, devs, 3, false), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "rank 0 version");
  MC_T_CONTAINS(mc_t_last_error(), "rank 2 version");
  MC_T_CONTAINS(mc_t_last_error(), "hostA pid 1002");
  /* shared devices allowed or not, versions must agree */
  MC_T_EQ_INT(mc_comm_peers_check(peers, devs, 3, true), ncclInvalidUsage);
}

static void check_shared_device(void)
{
  const int devs[] = {0, 1, 1, 0};

  /* same device on different hosts: fine */
  make_peers(4, "ABAB", NULL);
  {
    const int per_host[] = {0, 0, 1, 1};
    MC_T_OK(mc_comm_peers_check(peers, per_host, 4, false));
  }
  /* ranks 1 and 2 on host A both use device 1 */
  make_peers(4, "AAAB", NULL);
  MC_T_EQ_INT(mc_comm_peers_check(peers, devs, 4, false), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "rank 1 (pid 1001) and rank 2 (pid 1002)");
  MC_T_CONTAINS(mc_t_last_error(), "on host hostA both use device 1");
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_MULTI_RANK_GPU_ENABLE=1");
  /* unless shared devices are allowed */
  MC_T_OK(mc_comm_peers_check(peers, devs, 4, true));
}

MC_T_MAIN(one_host, three_hosts, explicit_devices, single_rank, check_versions, check_shared_device)

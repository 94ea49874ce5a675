/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Nodes, local ranks and devices from peer infos (mc_comm_nodes_compute), and
 * the peer checks (mc_comm_peers_check), on synthetic peer arrays.
 */
#include "init/comm.h"

#include "mc_test.h"

#define MAX_PEERS 64

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

/* The rules as first written, one pair of ranks at a time (O(ranks^2)):
 * the references the linear versions are held to. */
static int ref_dev(int n, int r, const int *node_of)
{
  int next_free = 0;

  if (peers[r].dev >= 0)
    return peers[r].dev;
  for (int p = 0; p <= r; p++) {
    bool taken = true;
    if ((node_of[p] != node_of[r]) || (peers[p].dev >= 0))
      continue;
    while (taken) {
      taken = false;
      for (int q = 0; q < n; q++)
        taken = taken || ((node_of[q] == node_of[r]) && (peers[q].dev == next_free));
      next_free += taken ? 1 : 0;
    }
    if (p == r)
      return next_free;
    next_free++;
  }
  return -1;
}

static bool ref_shared_pair(int n, const int *devs, int *r_out, int *q_out)
{
  for (int r = 0; r < n; r++) {
    for (int q = r + 1; q < n; q++) {
      if ((peers[q].host_hash == peers[r].host_hash) && (devs[q] == devs[r])) {
        *r_out = r;
        *q_out = q;
        return true;
      }
    }
  }
  return false;
}

/* Random hosts and devices (a fixed seed): the devices every rank resolves
 * and the shared device reported are the pairwise rules' answers. */
static void matches_pairwise_rules(void)
{
  unsigned int seed = 12345;

  for (int round = 0; round < 300; round++) {
    int n = 1 + (int)(rand_r(&seed) % MAX_PEERS);
    int n_hosts = 1 + (int)(rand_r(&seed) % 4);
    int explicit_pct = (int)(rand_r(&seed) % 60);
    char hosts[MAX_PEERS + 1] = {0};
    int devs[MAX_PEERS];
    int node_of[MAX_PEERS];
    struct mc_comm_nodes nd;
    int r = -1;
    int q = -1;
    char want[160];

    for (int i = 0; i < n; i++) {
      hosts[i] = (char)('A' + rand_r(&seed) % (unsigned int)n_hosts);
      devs[i] =
          ((int)(rand_r(&seed) % 100) < explicit_pct) ? (int)(rand_r(&seed) % (unsigned int)n) : -1;
    }
    make_peers(n, hosts, devs);
    MC_T_OK(mc_comm_nodes_compute(peers, n, 0, &nd));
    for (int i = 0; i < n; i++)
      node_of[i] = nd.rank_to_node[i];
    for (int i = 0; i < n; i++) {
      if (nd.dev[i] != ref_dev(n, i, node_of))
        MC_T_FAIL("round %d: rank %d of %d resolves device %d, the pairwise rule %d", round, i, n,
                  nd.dev[i], ref_dev(n, i, node_of));
    }
    /* shared devices: the resolved ones, and ones made to collide */
    for (int pass = 0; pass < 2; pass++) {
      int d[MAX_PEERS];
      for (int i = 0; i < n; i++)
        d[i] = (pass == 0) ? nd.dev[i] : (int)(rand_r(&seed) % (unsigned int)(n + 1));
      if (!ref_shared_pair(n, d, &r, &q)) {
        MC_T_OK(mc_comm_peers_check(peers, d, n, false));
        continue;
      }
      MC_T_EQ_INT(mc_comm_peers_check(peers, d, n, false), ncclInvalidUsage);
      snprintf(want, sizeof(want),
               "rank %d (pid %d) and rank %d (pid %d) on host host%c both use "
               "device %d",
               r, 1000 + r, q, 1000 + q, hosts[r], d[r]);
      MC_T_CONTAINS(mc_t_last_error(), want);
    }
    mc_comm_nodes_free(&nd);
  }
}

MC_T_MAIN(one_host, three_hosts, explicit_devices, single_rank, check_versions, check_shared_device,
          matches_pairwise_rules)

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tree shapes over ranks: NCCL's binary tree and double binary tree
 * (src/graph/trees.cc, ncclGetBtree and ncclGetDtree), as pure functions of
 * (n, rank). The channels' trees are filled from them until the graph search
 * provides per-channel trees (init_connect.c, channels_default_trees); the
 * tree algorithm (src/coll/coll_tree.c) only reads the channels.
 *
 * Binary tree: a rank's lowest set bit b says its level; its parent is the
 * rank with that bit cleared and the next one set (or just cleared when that
 * is beyond n), its children are rank -/+ b/2 (the right one halved until it
 * exists). Rank 0 is the root, with one child: the largest power of two
 * below n. Double binary tree: tree 1 is tree 0 mirrored (n even: rank
 * n-1-r) or shifted by one (n odd), so that leaves of one are inner nodes of
 * the other.
 */
#include "comm.h"

void mc_comm_tree_btree(int n, int rank, int *up_out, int *down0_out, int *down1_out)
{
  int bit;
  int up;
  int down0;
  int down1;
  int lowbit;

  for (bit = 1; bit < n; bit <<= 1)
    if ((bit & rank) != 0)
      break;
  if (rank == 0) {
    *up_out = -1;
    *down0_out = -1;
    *down1_out = (n > 1) ? bit >> 1 : -1;
    return;
  }
  up = (rank ^ bit) | (bit << 1);
  if (up >= n)
    up = rank ^ bit;
  lowbit = bit >> 1;
  down0 = (lowbit == 0) ? -1 : rank - lowbit;
  down1 = (lowbit == 0) ? -1 : rank + lowbit;
  while (down1 >= n) {
    down1 = (lowbit == 0) ? -1 : rank + lowbit;
    lowbit >>= 1;
  }
  *up_out = up;
  *down0_out = down0;
  *down1_out = down1;
}

void mc_comm_tree_dtree(int n, int rank, int s0_out[3], int s1_out[3])
{
  int t1[3];

  mc_comm_tree_btree(n, rank, &s0_out[0], &s0_out[1], &s0_out[2]);
  if ((n % 2) == 1) {
    /* Shift: rank r plays rank r-1's role, one rank further. */
    mc_comm_tree_btree(n, (rank - 1 + n) % n, &t1[0], &t1[1], &t1[2]);
    for (int i = 0; i < 3; i++)
      s1_out[i] = (t1[i] < 0) ? -1 : (t1[i] + 1) % n;
  } else {
    /* Mirror: rank r plays rank n-1-r's role. */
    mc_comm_tree_btree(n, n - 1 - rank, &t1[0], &t1[1], &t1[2]);
    for (int i = 0; i < 3; i++)
      s1_out[i] = (t1[i] < 0) ? -1 : n - 1 - t1[i];
  }
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rank -> root mapping of several bootstrap roots (NCCL's
 * rootIdFromRank / firstRankFromRoot): contiguous groups in rank order, the
 * first nranks % nroots groups one rank larger; and the job id every rank
 * derives from the roots' ids.
 */
#include "mc_test.h"

#include <string.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_int.h"

static void groups_are_contiguous_larger_first(void)
{
  /* 10 ranks on 3 roots: 4, 3, 3 */
  static const int want_first[] = {0, 4, 7, 10};
  static const int want_root[] = {0, 0, 0, 0, 1, 1, 1, 2, 2, 2};

  for (int i = 0; i <= 3; i++)
    MC_T_EQ_INT(mc_boot_root_first_rank(i, 10, 3), want_first[i]);
  for (int r = 0; r < 10; r++)
    MC_T_EQ_INT(mc_boot_root_of_rank(r, 10, 3), want_root[r]);
}

static void every_shape_is_consistent(void)
{
  for (int n = 1; n <= 40; n++) {
    for (int k = 1; k <= n; k++) {
      int prev_root = 0;
      MC_T_EQ_INT(mc_boot_root_first_rank(0, n, k), 0);
      MC_T_EQ_INT(mc_boot_root_first_rank(k, n, k), n);
      for (int r = 0; r < n; r++) {
        int root = mc_boot_root_of_rank(r, n, k);
        int first = mc_boot_root_first_rank(root, n, k);
        int size = mc_boot_root_first_rank(root + 1, n, k) - first;
        MC_T_TRUE((root == prev_root) || (root == prev_root + 1));
        MC_T_TRUE((r >= first) && (r < first + size));
        MC_T_TRUE((size == n / k) || (size == n / k + 1));
        prev_root = root;
      }
      MC_T_EQ_INT(prev_root, k - 1);
    }
  }
}

static ncclUniqueId fake_id(uint64_t magic, int port, uint8_t fill)
{
  struct mc_boot_handle h;
  ncclUniqueId id;

  memset(&h, 0, sizeof(h));
  memset(&id, 0, sizeof(id));
  h.magic = magic;
  MC_T_OK(mc_sockaddr_parse("127.0.0.1:1", "test", &h.addr));
  mc_sockaddr_set_port(&h.addr, port);
  memset(h.secret, fill, sizeof(h.secret));
  h.secret_source = MC_BOOT_SECRET_RANDOM;
  memcpy(id.internal, &h, sizeof(h));
  return id;
}

static void job_id_depends_on_every_id_in_order(void)
{
  ncclUniqueId ids[3] = {fake_id(11, 1001, 1), fake_id(12, 1002, 2), fake_id(13, 1003, 3)};
  ncclUniqueId swapped[3] = {ids[0], ids[2], ids[1]};
  ncclUniqueId same[2] = {ids[1], ids[1]};
  ncclUniqueId a;
  ncclUniqueId b;
  ncclUniqueId one;
  struct mc_boot_handle ha;
  struct mc_boot_handle hb;

  MC_T_OK(mc_boot_job_id(ids, 3, "test", &a));
  MC_T_OK(mc_boot_job_id(ids, 3, "test", &b));
  MC_T_TRUE(memcmp(&a, &b, sizeof(a)) == 0);
  memcpy(&ha, a.internal, sizeof(ha));
  /* the magic and address of the first id, a secret of all of them */
  MC_T_TRUE(ha.magic == 11);
  MC_T_EQ_INT(mc_sockaddr_port(&ha.addr), 1001);
  MC_T_TRUE(memcmp(ha.secret, ((struct mc_boot_handle *)(void *)ids[0].internal)->secret,
                   sizeof(ha.secret)) != 0);
  MC_T_OK(mc_boot_job_id(swapped, 3, "test", &b));
  memcpy(&hb, b.internal, sizeof(hb));
  MC_T_TRUE(memcmp(ha.secret, hb.secret, sizeof(ha.secret)) != 0);
  /* one id: itself */
  MC_T_OK(mc_boot_job_id(ids, 1, "test", &one));
  MC_T_TRUE(memcmp(&one, &ids[0], sizeof(one)) == 0);
  /* the same id twice, an NCCL_COMM_ID id, an empty id */
  MC_T_EQ_INT(mc_boot_job_id(same, 2, "test", &b), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "commIds[0] and commIds[1] are the same id");
  same[0] = fake_id(MC_BOOT_COMM_ID_MAGIC, 1004, 4);
  MC_T_EQ_INT(mc_boot_job_id(same, 2, "test", &b), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "commIds[0] was made with NCCL_COMM_ID set");
  memset(&same[0], 0, sizeof(same[0]));
  MC_T_EQ_INT(mc_boot_job_id(same, 2, "test", &b), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "commIds[0] is not an id of ncclGetUniqueId");
}

MC_T_MAIN(groups_are_contiguous_larger_first, every_shape_is_consistent,
          job_id_depends_on_every_id_in_order)

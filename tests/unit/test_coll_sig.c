/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operation signatures (src/coll/coll_sig.c) without a communicator: how a
 * call is named, which differences are mismatches and their exact texts
 * (count, type, collective, reduction, root, operation number, algorithm),
 * the send/recv size rule (a receive may be larger, never smaller), and the
 * notices a failed rank sends on: their parsing and the call each receiving
 * rank names.
 */
#include "coll/coll.h"

#include "mc_test.h"

#include <string.h>

static struct mc_coll_sig sig(enum mc_coll_kind kind, int rank, uint64_t seq, uint64_t count,
                              ncclDataType_t type, int op, int root)
{
  struct mc_coll_sig s;

  memset(&s, 0, sizeof(s));
  s.magic = MC_SIG_MAGIC;
  s.kind = (uint8_t)kind;
  s.type = (uint8_t)type;
  s.op = (uint8_t)op;
  s.algo = MC_ALGO_RING;
  s.n_channels = 2;
  s.root = root;
  s.rank = rank;
  s.seq = seq;
  s.count = count;
  return s;
}

static struct mc_coll_sig allreduce(int rank, uint64_t count, ncclDataType_t type, int op)
{
  return sig(MC_COLL_ALLREDUCE, rank, 7, count, type, op, -1);
}

static void names(void)
{
  char buf[160];
  struct mc_coll_sig s = allreduce(0, 10, ncclFloat, ncclSum);

  mc_coll_sig_str(&s, buf, sizeof(buf));
  MC_T_EQ_STR(buf, "AllReduce(count 10, float, sum)");
  s = sig(MC_COLL_BROADCAST, 0, 1, 4, ncclInt8, MC_SIG_OP_NONE, 1);
  mc_coll_sig_str(&s, buf, sizeof(buf));
  MC_T_EQ_STR(buf, "Broadcast(count 4, int8, root 1)");
  s = sig(MC_COLL_REDUCE, 0, 1, 4, ncclBfloat16, MC_SIG_OP_PREMULSUM, 2);
  mc_coll_sig_str(&s, buf, sizeof(buf));
  MC_T_EQ_STR(buf, "Reduce(count 4, bfloat16, premulsum, root 2)");
  s = sig(MC_COLL_ALLGATHER, 0, 1, 3, ncclFloat64, MC_SIG_OP_NONE, -1);
  mc_coll_sig_str(&s, buf, sizeof(buf));
  MC_T_EQ_STR(buf, "AllGather(count 3, double)");
  s = sig(MC_COLL_REDUCESCATTER, 0, 1, 3, ncclUint8, ncclAvg, -1);
  mc_coll_sig_str(&s, buf, sizeof(buf));
  MC_T_EQ_STR(buf, "ReduceScatter(count 3, uint8, avg)");
  s = sig(MC_COLL_SEND, 0, 1, 3, ncclFloat, MC_SIG_OP_NONE, 2);
  mc_coll_sig_str(&s, buf, sizeof(buf));
  MC_T_EQ_STR(buf, "Send(count 3, float, to rank 2)");
  s = sig(MC_COLL_RECV, 2, 1, 5, ncclInt64, MC_SIG_OP_NONE, 0);
  mc_coll_sig_str(&s, buf, sizeof(buf));
  MC_T_EQ_STR(buf, "Recv(count 5, int64, from rank 0)");
}

static void mismatches(void)
{
  struct mc_coll_sig a = allreduce(0, 1048576, ncclFloat, ncclSum);
  struct mc_coll_sig b = allreduce(1, 1048576, ncclFloat, ncclSum);
  size_t sent = 0;

  MC_T_OK(mc_coll_sig_check(&a, &b, &sent));
  MC_T_EQ_INT(sent, 4 * 1048576);
  b.count = 10;
  MC_T_EQ_INT(mc_coll_sig_check(&b, &a, &sent), ncclInvalidUsage);
  MC_T_EQ_STR(mc_t_last_error(), "Mismatched collectives: rank 1 called AllReduce(count 10, float, "
                                 "sum) where rank 0 called AllReduce(count 1048576, float, sum)");
  b = allreduce(1, 1048576, ncclFloat64, ncclSum);
  MC_T_EQ_INT(mc_coll_sig_check(&a, &b, &sent), ncclInvalidUsage);
  MC_T_EQ_STR(mc_t_last_error(), "Mismatched collectives: rank 0 called AllReduce(count 1048576, "
                                 "float, sum) where rank 1 called AllReduce(count 1048576, double, "
                                 "sum)");
  b = allreduce(1, 1048576, ncclFloat, ncclMax);
  MC_T_EQ_INT(mc_coll_sig_check(&a, &b, &sent), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "where rank 1 called AllReduce(count 1048576, float, max)");
  b = sig(MC_COLL_BROADCAST, 1, 7, 1048576, ncclFloat, MC_SIG_OP_NONE, 0);
  MC_T_EQ_INT(mc_coll_sig_check(&a, &b, &sent), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "where rank 1 called Broadcast(count 1048576, float, root 0)");
  a = sig(MC_COLL_BROADCAST, 0, 7, 1048576, ncclFloat, MC_SIG_OP_NONE, 1);
  MC_T_EQ_INT(mc_coll_sig_check(&a, &b, &sent), ncclInvalidUsage);
  MC_T_EQ_STR(mc_t_last_error(), "Mismatched collectives: rank 0 called Broadcast(count 1048576, "
                                 "float, root 1) where rank 1 called Broadcast(count 1048576, "
                                 "float, root 0)");
  /* Another operation number: a rank skipped or added a call. */
  a = allreduce(0, 8, ncclInt32, ncclSum);
  b = allreduce(1, 8, ncclInt32, ncclSum);
  b.seq = 8;
  MC_T_EQ_INT(mc_coll_sig_check(&a, &b, &sent), ncclInvalidUsage);
  MC_T_EQ_STR(mc_t_last_error(), "Mismatched collectives: rank 0 called AllReduce(count 8, int32, "
                                 "sum) as its operation 7 where rank 1 called AllReduce(count 8, "
                                 "int32, sum) as its operation 8");
  /* The same call run another way. */
  b = a;
  b.rank = 1;
  b.algo = MC_ALGO_ONESHOT;
  b.n_channels = 1;
  MC_T_EQ_INT(mc_coll_sig_check(&a, &b, &sent), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "rank 0 runs AllReduce(count 8, int32, sum) with Ring on 2 "
                                   "channels where rank 1 runs it with OneShot on 1 channels: "
                                   "NCCL_ALGO");
}

static void send_recv(void)
{
  struct mc_coll_sig send = sig(MC_COLL_SEND, 0, 3, 10, ncclFloat, MC_SIG_OP_NONE, 1);
  struct mc_coll_sig recv = sig(MC_COLL_RECV, 1, 3, 3, ncclFloat, MC_SIG_OP_NONE, 0);
  size_t sent = 0;

  MC_T_EQ_INT(mc_coll_sig_check(&recv, &send, &sent), ncclInvalidUsage);
  MC_T_EQ_STR(mc_t_last_error(),
              "Mismatched send/recv: rank 1 called Recv(count 3, float, from rank 0) where rank 0 "
              "called Send(count 10, float, to rank 1): the receive (12 bytes) is smaller than "
              "the send (40 bytes)");
  /* Bytes count, not types: 40 bytes of int8 fit 10 floats. */
  recv.count = 10;
  send.type = ncclInt8;
  send.count = 40;
  MC_T_OK(mc_coll_sig_check(&recv, &send, &sent));
  MC_T_EQ_INT(sent, 40);
  send.count = 12; /* larger receive: takes the send */
  MC_T_OK(mc_coll_sig_check(&recv, &send, &sent));
  MC_T_EQ_INT(sent, 12);
  send.seq = 4;
  MC_T_EQ_INT(mc_coll_sig_check(&recv, &send, &sent), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "as its operation 3 where rank 0 called Send(count 12, int8, "
                                   "to rank 1) as its operation 4");
}

static void notices(void)
{
  struct mc_coll_notice n;
  struct mc_coll_notice got;
  struct mc_coll_sig named;
  struct mc_coll_sig mine;
  char buf[MC_NOTICE_BYTES_ALT] = {0};

  /* Rank 2 called A, found rank 1's B. */
  n.failed = allreduce(2, 1000, ncclFloat, ncclSum);
  n.failed.flags = MC_SIG_FAILED;
  n.other = allreduce(1, 1000, ncclFloat64, ncclSum);
  memcpy(buf, &n, sizeof(n));
  MC_T_TRUE(mc_coll_notice_parse(buf, MC_NOTICE_BYTES, &got));
  MC_T_TRUE(mc_coll_notice_parse(buf, MC_NOTICE_BYTES_ALT, &got));
  MC_T_TRUE(!mc_coll_notice_parse(buf, 48, &got));
  got.failed.flags = 0;
  memcpy(buf, &got, sizeof(got));
  MC_T_TRUE(!mc_coll_notice_parse(buf, MC_NOTICE_BYTES, &got)); /* not flagged: data */
  /* Rank 0 called A too: it names rank 1's B. */
  mine = allreduce(0, 1000, ncclFloat, ncclSum);
  MC_T_EQ_INT(mc_coll_notice_fail(&mine, &n, &named), ncclInvalidUsage);
  MC_T_EQ_STR(mc_t_last_error(), "Mismatched collectives: rank 0 called AllReduce(count 1000, "
                                 "float, sum) where rank 1 called AllReduce(count 1000, double, "
                                 "sum)");
  MC_T_EQ_INT(named.rank, 1);
  MC_T_EQ_INT(named.flags, 0);
  /* Rank 3 called B: it names rank 2's A. */
  mine = allreduce(3, 1000, ncclFloat64, ncclSum);
  MC_T_EQ_INT(mc_coll_notice_fail(&mine, &n, &named), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "rank 3 called AllReduce(count 1000, double, sum) where rank 2 "
                                   "called AllReduce(count 1000, float, sum)");
  /* A sender that returned early learns at its next call: the pair as the receiver saw it. */
  n.failed = sig(MC_COLL_RECV, 1, 1, 3, ncclFloat, MC_SIG_OP_NONE, 0);
  n.failed.flags = MC_SIG_FAILED;
  n.other = sig(MC_COLL_SEND, 0, 1, 10, ncclFloat, MC_SIG_OP_NONE, 1);
  mine = allreduce(0, 4, ncclFloat, ncclSum);
  MC_T_EQ_INT(mc_coll_notice_fail(&mine, &n, &named), ncclInvalidUsage);
  MC_T_EQ_STR(mc_t_last_error(),
              "Mismatched send/recv: rank 1 called Recv(count 3, float, from rank 0) where rank 0 "
              "called Send(count 10, float, to rank 1): the receive (12 bytes) is smaller than "
              "the send (40 bytes)");
}

MC_T_MAIN(names, mismatches, send_recv, notices)

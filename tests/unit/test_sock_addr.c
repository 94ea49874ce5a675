/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket addresses (src/socket/sock_addr.c): NCCL_COMM_ID parsing, NCCL's
 * "addr<port>" formatting, and the small accessors.
 */
#include "socket/socket.h"

#include "mc_test.h"

#include <arpa/inet.h>
#include <net/if.h>

static void expect_bad(const char *str)
{
  union mc_sockaddr a;

  memset(&a, 0x5a, sizeof(a));
  MC_T_EQ_INT(mc_sockaddr_parse(str, "NCCL_COMM_ID", &a), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_COMM_ID");
  MC_T_CONTAINS(mc_t_last_error(), str);
  /* the output is left alone on failure */
  MC_T_EQ_INT(a.sa.sa_family, 0x5a5a);
}

static void parse_ipv4(void)
{
  union mc_sockaddr a;
  char buf[MC_SOCKADDR_STRLEN];

  MC_T_OK(mc_sockaddr_parse("10.0.0.1:5000", "NCCL_COMM_ID", &a));
  MC_T_EQ_INT(a.sa.sa_family, AF_INET);
  MC_T_EQ_INT(mc_sockaddr_port(&a), 5000);
  MC_T_EQ_INT(mc_sockaddr_len(&a), sizeof(struct sockaddr_in));
  MC_T_EQ_STR(mc_sockaddr_str(&a, buf, sizeof(buf)), "10.0.0.1<5000>");
  MC_T_TRUE(!mc_sockaddr_is_loopback(&a));
  MC_T_OK(mc_sockaddr_parse("127.0.0.1:65535", "NCCL_COMM_ID", &a));
  MC_T_EQ_INT(mc_sockaddr_port(&a), 65535);
  MC_T_TRUE(mc_sockaddr_is_loopback(&a));
}

static void parse_ipv6(void)
{
  union mc_sockaddr a;
  char buf[MC_SOCKADDR_STRLEN];

  MC_T_OK(mc_sockaddr_parse("[::1]:1234", "NCCL_COMM_ID", &a));
  MC_T_EQ_INT(a.sa.sa_family, AF_INET6);
  MC_T_EQ_INT(mc_sockaddr_port(&a), 1234);
  MC_T_EQ_INT(a.sin6.sin6_scope_id, 0);
  MC_T_EQ_INT(mc_sockaddr_len(&a), sizeof(struct sockaddr_in6));
  MC_T_TRUE(mc_sockaddr_is_loopback(&a));
  MC_T_EQ_STR(mc_sockaddr_str(&a, buf, sizeof(buf)), "::1<1234>");

  MC_T_OK(mc_sockaddr_parse("[fd00::2]:80", "NCCL_COMM_ID", &a));
  MC_T_EQ_STR(mc_sockaddr_str(&a, buf, sizeof(buf)), "fd00::2<80>");
  MC_T_TRUE(!mc_sockaddr_is_loopback(&a));
}

static void parse_ipv6_scope(void)
{
  union mc_sockaddr a;
  char buf[MC_SOCKADDR_STRLEN];
  unsigned lo = if_nametoindex("lo");

  if (lo == 0)
    MC_T_SKIP("no interface named lo");
  MC_T_OK(mc_sockaddr_parse("[fe80::1%lo]:5000", "NCCL_COMM_ID", &a));
  MC_T_EQ_INT(a.sin6.sin6_scope_id, lo);
  MC_T_EQ_INT(mc_sockaddr_port(&a), 5000);
  MC_T_EQ_STR(mc_sockaddr_str(&a, buf, sizeof(buf)), "fe80::1%lo<5000>");

  MC_T_EQ_INT(mc_sockaddr_parse("[fe80::1%nosuchif9]:5000", "NCCL_COMM_ID", &a),
              ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "nosuchif9");
}

static void parse_hostname(void)
{
  union mc_sockaddr a;

  MC_T_OK(mc_sockaddr_parse("localhost:1234", "NCCL_COMM_ID", &a));
  MC_T_TRUE((a.sa.sa_family == AF_INET) || (a.sa.sa_family == AF_INET6));
  MC_T_EQ_INT(mc_sockaddr_port(&a), 1234);
  MC_T_TRUE(mc_sockaddr_is_loopback(&a));
}

static void parse_bad(void)
{
  union mc_sockaddr a;

  expect_bad("10.0.0.1");
  MC_T_CONTAINS(mc_t_last_error(), "<ipv4>:<port>");
  MC_T_CONTAINS(mc_t_last_error(), "[<ipv6>]:<port>");
  expect_bad("10.0.0.1:0");
  expect_bad("10.0.0.1:70000");
  expect_bad("10.0.0.1:12ab");
  expect_bad("10.0.0.1:");
  expect_bad(":5000");
  expect_bad("[::1");
  expect_bad("[::1]");
  expect_bad("[::1]5000");
  expect_bad("[]:5000");
  expect_bad("[not-an-ip]:5000");
  expect_bad("fe80::1:5000");
  expect_bad("no-such-host.invalid:5000");

  MC_T_EQ_INT(mc_sockaddr_parse("", "NCCL_COMM_ID", &a), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_COMM_ID=''");
  MC_T_EQ_INT(mc_sockaddr_parse(NULL, "NCCL_COMM_ID", &a), ncclInvalidArgument);
}

static void accessors(void)
{
  union mc_sockaddr a;
  union mc_sockaddr b;
  char buf[MC_SOCKADDR_STRLEN];
  char tiny[6];

  MC_T_OK(mc_sockaddr_parse("192.0.2.2:1", "x", &a));
  b = a;
  MC_T_TRUE(mc_sockaddr_equal(&a, &b));
  mc_sockaddr_set_port(&b, 2);
  MC_T_EQ_INT(mc_sockaddr_port(&b), 2);
  MC_T_TRUE(!mc_sockaddr_equal(&a, &b));
  MC_T_OK(mc_sockaddr_parse("[::ffff:192.0.2.2]:1", "x", &b));
  MC_T_TRUE(!mc_sockaddr_equal(&a, &b)); /* different families */

  /* formatting never overflows */
  MC_T_EQ_STR(mc_sockaddr_str(&a, tiny, sizeof(tiny)), "192.0");

  memset(&b, 0, sizeof(b));
  MC_T_EQ_INT(mc_sockaddr_len(&b), 0);
  MC_T_EQ_INT(mc_sockaddr_port(&b), 0);
  MC_T_TRUE(!mc_sockaddr_is_loopback(&b));
  MC_T_CONTAINS(mc_sockaddr_str(&b, buf, sizeof(buf)), "family 0");

  /* ::ffff:127.0.0.1 is loopback seen through an IPv6 socket */
  MC_T_OK(mc_sockaddr_parse("[::ffff:127.0.0.1]:1", "x", &b));
  MC_T_TRUE(mc_sockaddr_is_loopback(&b));
}

MC_T_MAIN(parse_ipv4, parse_ipv6, parse_ipv6_scope, parse_hostname, parse_bad, accessors)

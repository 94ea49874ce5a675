/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interfaces (src/socket/sock_ifaces.c): NCCL_SOCKET_IFNAME patterns, the
 * bootstrap interface choice on synthetic machines (NCCL's automatic order,
 * NCCL_SOCKET_IFNAME, NCCL_COMM_ID subnet and route), and the listing on
 * this machine.
 */
#include "socket/socket.h"

#include "mc_test.h"
#include "params.h"

#include <arpa/inet.h>
#include <net/if.h>

/* ---------- helpers ---------- */

static struct mc_ifc mk_if(const char *name, const char *addr, int prefix)
{
  struct mc_ifc ifc;

  memset(&ifc, 0, sizeof(ifc));
  snprintf(ifc.name, sizeof(ifc.name), "%s", name);
  if (strchr(addr, ':') != NULL) {
    ifc.addr.sin6.sin6_family = AF_INET6;
    ifc.mask.sin6.sin6_family = AF_INET6;
    if (inet_pton(AF_INET6, addr, &ifc.addr.sin6.sin6_addr) != 1)
      MC_T_FAIL("bad test address %s", addr);
    for (int i = 0; i < prefix; i++)
      ifc.mask.sin6.sin6_addr.s6_addr[i / 8] |= (uint8_t)(0x80u >> (i % 8));
  } else {
    ifc.addr.sin.sin_family = AF_INET;
    ifc.mask.sin.sin_family = AF_INET;
    if (inet_pton(AF_INET, addr, &ifc.addr.sin.sin_addr) != 1)
      MC_T_FAIL("bad test address %s", addr);
    ifc.mask.sin.sin_addr.s_addr = htonl((prefix == 0) ? 0 : (0xffffffffu << (32 - prefix)));
  }
  return ifc;
}

static union mc_sockaddr mk_addr(const char *str)
{
  union mc_sockaddr a;

  if (mc_sockaddr_parse(str, "test", &a) != ncclSuccess)
    MC_T_FAIL("bad test address %s", str);
  return a;
}

/* Chooses with NCCL's automatic order and returns the chosen name. */
static const char *choose_auto(const struct mc_ifc *ifs, int n, char *why, size_t why_bytes)
{
  static struct mc_ifc chosen;

  memset(&chosen, 0, sizeof(chosen));
  MC_T_OK(mc_if_choose(ifs, n, NULL, NULL, NULL, &chosen, why, why_bytes));
  return chosen.name;
}

static const char *choose_spec(const struct mc_ifc *ifs, int n, const char *spec)
{
  static struct mc_ifc chosen;
  char why[512];

  memset(&chosen, 0, sizeof(chosen));
  MC_T_OK(mc_if_choose(ifs, n, spec, NULL, NULL, &chosen, why, sizeof(why)));
  MC_T_CONTAINS(why, spec);
  return chosen.name;
}

/* ---------- patterns ---------- */

static void pattern_parse(void)
{
  struct mc_if_pattern p;

  MC_T_OK(mc_if_pattern_parse("eth,ib", "NCCL_SOCKET_IFNAME", &p));
  MC_T_TRUE(!p.exclude);
  MC_T_TRUE(!p.exact);
  MC_T_EQ_INT(p.n, 2);
  MC_T_EQ_STR(p.names[0], "eth");
  MC_T_EQ_STR(p.names[1], "ib");
  MC_T_TRUE(mc_if_pattern_match(&p, "eth0"));
  MC_T_TRUE(mc_if_pattern_match(&p, "ib1"));
  MC_T_TRUE(!mc_if_pattern_match(&p, "lo"));

  MC_T_OK(mc_if_pattern_parse("^docker,lo", "NCCL_SOCKET_IFNAME", &p));
  MC_T_TRUE(p.exclude);
  MC_T_TRUE(!p.exact);
  MC_T_TRUE(!mc_if_pattern_match(&p, "docker0"));
  MC_T_TRUE(!mc_if_pattern_match(&p, "lo"));
  MC_T_TRUE(mc_if_pattern_match(&p, "eth0"));

  MC_T_OK(mc_if_pattern_parse("=eth0", "NCCL_SOCKET_IFNAME", &p));
  MC_T_TRUE(!p.exclude);
  MC_T_TRUE(p.exact);
  MC_T_TRUE(mc_if_pattern_match(&p, "eth0"));
  MC_T_TRUE(!mc_if_pattern_match(&p, "eth01"));
  MC_T_TRUE(!mc_if_pattern_match(&p, "eth"));

  MC_T_OK(mc_if_pattern_parse("^=docker0", "NCCL_SOCKET_IFNAME", &p));
  MC_T_TRUE(p.exclude);
  MC_T_TRUE(p.exact);
  MC_T_TRUE(!mc_if_pattern_match(&p, "docker0"));
  MC_T_TRUE(mc_if_pattern_match(&p, "docker1"));

  /* ":port" suffixes are stripped and ignored; blanks around names too */
  MC_T_OK(mc_if_pattern_parse("=eth0:5000,ib0:1, eth1 ", "NCCL_SOCKET_IFNAME", &p));
  MC_T_EQ_INT(p.n, 3);
  MC_T_EQ_STR(p.names[0], "eth0");
  MC_T_EQ_STR(p.names[1], "ib0");
  MC_T_EQ_STR(p.names[2], "eth1");

  /* empty entries are skipped */
  MC_T_OK(mc_if_pattern_parse("eth,,ib,", "NCCL_SOCKET_IFNAME", &p));
  MC_T_EQ_INT(p.n, 2);
}

static void pattern_bad(void)
{
  struct mc_if_pattern p;
  const char *s17 = "a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16,a17";
  const char *s16 = "a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16";

  /* 16 names is the limit; a 17th is an error rather than silently dropped */
  MC_T_OK(mc_if_pattern_parse(s16, "NCCL_SOCKET_IFNAME", &p));
  MC_T_EQ_INT(p.n, 16);
  MC_T_EQ_INT(mc_if_pattern_parse(s17, "NCCL_SOCKET_IFNAME", &p), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_SOCKET_IFNAME");
  MC_T_CONTAINS(mc_t_last_error(), s17);
  MC_T_CONTAINS(mc_t_last_error(), "more than 16");

  MC_T_EQ_INT(mc_if_pattern_parse("", "NCCL_SOCKET_IFNAME", &p), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_SOCKET_IFNAME");
  MC_T_EQ_INT(mc_if_pattern_parse(NULL, "NCCL_SOCKET_IFNAME", &p), ncclInvalidUsage);
  MC_T_EQ_INT(mc_if_pattern_parse("^=", "NCCL_SOCKET_IFNAME", &p), ncclInvalidUsage);
  MC_T_EQ_INT(mc_if_pattern_parse("=^eth0", "NCCL_SOCKET_IFNAME", &p), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "'^' must come before '='");
}

/* ---------- automatic order ---------- */

static void auto_lo_eth(void)
{
  struct mc_ifc ifs[2];
  char why[512];

  ifs[0] = mk_if("lo", "127.0.0.1", 8);
  ifs[1] = mk_if("eth0", "192.0.2.2", 24);
  MC_T_EQ_STR(choose_auto(ifs, 2, why, sizeof(why)), "eth0");
  MC_T_EQ_STR(why, "eth0 192.0.2.2: first interface outside ^docker,lo,virbr; rejected: lo "
                   "(loopback: last resort)");
}

static void auto_lo_only(void)
{
  struct mc_ifc ifs[1];
  char why[512];

  ifs[0] = mk_if("lo", "127.0.0.1", 8);
  MC_T_EQ_STR(choose_auto(ifs, 1, why, sizeof(why)), "lo");
  MC_T_CONTAINS(why, "lo 127.0.0.1: ");
  MC_T_TRUE(strstr(why, "rejected") == NULL);
}

static void auto_docker_eth(void)
{
  struct mc_ifc ifs[3];
  char why[512];

  ifs[0] = mk_if("docker0", "172.17.0.1", 16);
  ifs[1] = mk_if("eth0", "192.0.2.2", 24);
  ifs[2] = mk_if("lo", "127.0.0.1", 8);
  MC_T_EQ_STR(choose_auto(ifs, 3, why, sizeof(why)), "eth0");
  MC_T_CONTAINS(why, "docker0 (docker");
  MC_T_CONTAINS(why, "lo (loopback");
}

static void auto_ib_first(void)
{
  struct mc_ifc ifs[3];
  char why[512];

  ifs[0] = mk_if("eth0", "192.0.2.2", 24);
  ifs[1] = mk_if("ib0", "10.1.0.2", 16);
  ifs[2] = mk_if("ib1", "10.2.0.2", 16);
  MC_T_EQ_STR(choose_auto(ifs, 3, why, sizeof(why)), "ib0");
  MC_T_CONTAINS(why, "ib0 10.1.0.2: first ib*");
  MC_T_CONTAINS(why, "eth0 (not ib*");
  MC_T_CONTAINS(why, "ib1 (");
}

static void auto_docker_lo_virbr(void)
{
  struct mc_ifc ifs[3];
  char why[512];

  /* NCCL's order after "anything else": docker, then lo, then virbr */
  ifs[0] = mk_if("virbr0", "192.168.122.1", 24);
  ifs[1] = mk_if("lo", "127.0.0.1", 8);
  MC_T_EQ_STR(choose_auto(ifs, 2, why, sizeof(why)), "lo");
  MC_T_CONTAINS(why, "virbr0 (virbr");

  ifs[2] = mk_if("docker0", "172.17.0.1", 16);
  MC_T_EQ_STR(choose_auto(ifs, 3, why, sizeof(why)), "docker0");

  ifs[0] = mk_if("virbr0", "192.168.122.1", 24);
  MC_T_EQ_STR(choose_auto(ifs, 1, why, sizeof(why)), "virbr0");
}

/* ---------- NCCL_SOCKET_IFNAME ---------- */

static void spec_choice(void)
{
  struct mc_ifc ifs[4];

  ifs[0] = mk_if("lo", "127.0.0.1", 8);
  ifs[1] = mk_if("eth1", "10.0.1.2", 24);
  ifs[2] = mk_if("eth0", "10.0.0.2", 24);
  ifs[3] = mk_if("eth01", "10.0.2.2", 24);
  MC_T_EQ_STR(choose_spec(ifs, 4, "=eth0"), "eth0");
  MC_T_EQ_STR(choose_spec(ifs, 4, "eth"), "eth1");
  MC_T_EQ_STR(choose_spec(ifs, 4, "eth0"), "eth0");
  MC_T_EQ_STR(choose_spec(ifs, 4, "^eth"), "lo");
  MC_T_EQ_STR(choose_spec(ifs, 4, "^lo,eth1"), "eth0");
  MC_T_EQ_STR(choose_spec(ifs, 4, "^=lo,eth1,eth0"), "eth01");
  MC_T_EQ_STR(choose_spec(ifs, 4, "=eth0:5000"), "eth0");
}

static void spec_why(void)
{
  struct mc_ifc ifs[3];
  struct mc_ifc chosen;
  char why[512];

  ifs[0] = mk_if("lo", "127.0.0.1", 8);
  ifs[1] = mk_if("eth0", "10.0.0.2", 24);
  ifs[2] = mk_if("eth1", "10.0.1.2", 24);
  MC_T_OK(mc_if_choose(ifs, 3, "^lo", NULL, NULL, &chosen, why, sizeof(why)));
  MC_T_EQ_STR(chosen.name, "eth0");
  MC_T_CONTAINS(why, "eth0 10.0.0.2: first interface matching NCCL_SOCKET_IFNAME=^lo");
  MC_T_CONTAINS(why, "lo (excluded by NCCL_SOCKET_IFNAME)");
  MC_T_CONTAINS(why, "eth1 (matches too");
}

static void spec_unknown(void)
{
  struct mc_ifc ifs[2];
  struct mc_ifc chosen;
  char why[256] = "untouched";

  ifs[0] = mk_if("lo", "127.0.0.1", 8);
  ifs[1] = mk_if("eth0", "192.0.2.2", 24);
  memset(&chosen, 0x5a, sizeof(chosen));
  MC_T_EQ_INT(mc_if_choose(ifs, 2, "eth2", NULL, NULL, &chosen, why, sizeof(why)),
              ncclInvalidUsage);
  MC_T_EQ_STR(mc_t_last_error(), "NCCL_SOCKET_IFNAME=eth2 matches no usable interface; "
                                 "interfaces: =lo =eth0 (set NCCL_SOCKET_IFNAME to one of them)");
  MC_T_EQ_STR(why, "untouched");
  MC_T_EQ_INT((unsigned char)chosen.name[0], 0x5a);

  MC_T_EQ_INT(mc_if_choose(ifs, 2, "^lo,eth", NULL, NULL, &chosen, why, sizeof(why)),
              ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "=eth0");

  /* a bad pattern is reported as such */
  MC_T_EQ_INT(mc_if_choose(ifs, 2, "=^x", NULL, NULL, &chosen, why, sizeof(why)), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_SOCKET_IFNAME");
}

static void none_at_all(void)
{
  struct mc_ifc chosen;
  char why[64];

  MC_T_EQ_INT(mc_if_choose(NULL, 0, NULL, NULL, NULL, &chosen, why, sizeof(why)), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "no usable socket interface");
}

/* ---------- NCCL_COMM_ID ---------- */

static void comm_id_subnet(void)
{
  struct mc_ifc ifs[4];
  struct mc_ifc chosen;
  union mc_sockaddr id = mk_addr("10.0.0.1:5000");
  char why[512];

  ifs[0] = mk_if("lo", "127.0.0.1", 8);
  ifs[1] = mk_if("ib0", "10.1.0.2", 24);
  ifs[2] = mk_if("eth1", "10.0.0.7", 24);
  ifs[3] = mk_if("eth0", "192.0.2.2", 24);
  /* the subnet wins over ib* and over NCCL_SOCKET_IFNAME */
  MC_T_OK(mc_if_choose(ifs, 4, "=eth0", &id, NULL, &chosen, why, sizeof(why)));
  MC_T_EQ_STR(chosen.name, "eth1");
  MC_T_CONTAINS(why, "eth1 10.0.0.7: ");
  MC_T_CONTAINS(why, "10.0.0.1<5000>");
  MC_T_CONTAINS(why, "ib0 (other subnet)");
  MC_T_CONTAINS(why, "NCCL_SOCKET_IFNAME ignored");
  MC_T_EQ_INT(mc_sockaddr_port(&chosen.addr), 0);
}

static void comm_id_route(void)
{
  struct mc_ifc ifs[2];
  struct mc_ifc chosen;
  union mc_sockaddr id = mk_addr("198.51.100.9:5000");
  union mc_sockaddr src = mk_addr("192.0.2.2:41000");
  union mc_sockaddr other = mk_addr("203.0.113.5:41000");
  char why[512];

  ifs[0] = mk_if("lo", "127.0.0.1", 8);
  ifs[1] = mk_if("eth0", "192.0.2.2", 24);
  MC_T_OK(mc_if_choose(ifs, 2, NULL, &id, &src, &chosen, why, sizeof(why)));
  MC_T_EQ_STR(chosen.name, "eth0");
  MC_T_CONTAINS(why, "route");
  MC_T_CONTAINS(why, "lo (");

  /* no subnet, no route: nothing to choose */
  MC_T_EQ_INT(mc_if_choose(ifs, 2, NULL, &id, NULL, &chosen, why, sizeof(why)), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "198.51.100.9<5000>");
  MC_T_CONTAINS(mc_t_last_error(), "eth0 192.0.2.2/24");
  /* the route leaves from an address no usable interface owns */
  MC_T_EQ_INT(mc_if_choose(ifs, 2, NULL, &id, &other, &chosen, why, sizeof(why)), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "203.0.113.5");
}

static void subnet_ipv6(void)
{
  struct mc_ifc ifc = mk_if("eth0", "fe80::1", 64);
  union mc_sockaddr a = mk_addr("[fe80::99]:1");
  union mc_sockaddr b = mk_addr("[fd00::1]:1");

  MC_T_TRUE(mc_if_subnet_match(&ifc, &a));
  MC_T_TRUE(!mc_if_subnet_match(&ifc, &b));
  /* link-local: a different scope is a different link */
  ifc.addr.sin6.sin6_scope_id = 2;
  a.sin6.sin6_scope_id = 3;
  MC_T_TRUE(!mc_if_subnet_match(&ifc, &a));
  a.sin6.sin6_scope_id = 2;
  MC_T_TRUE(mc_if_subnet_match(&ifc, &a));
  a.sin6.sin6_scope_id = 0;
  MC_T_TRUE(mc_if_subnet_match(&ifc, &a));
  /* families never match each other */
  MC_T_TRUE(!mc_if_subnet_match(&ifc, &(union mc_sockaddr){.sin = {.sin_family = AF_INET}}));
}

/* ---------- this machine ---------- */

static void list_here(void)
{
  struct mc_ifc ifs[MC_MAX_IFS];
  int n = -1;
  int lo = -1;

  MC_T_OK(mc_if_list(AF_UNSPEC, ifs, MC_MAX_IFS, &n));
  for (int i = 0; i < n; i++) {
    MC_T_TRUE((ifs[i].addr.sa.sa_family == AF_INET) || (ifs[i].addr.sa.sa_family == AF_INET6));
    MC_T_EQ_INT(mc_sockaddr_port(&ifs[i].addr), 0);
    MC_T_TRUE(ifs[i].index > 0);
    MC_T_TRUE(!((ifs[i].addr.sa.sa_family == AF_INET6) &&
                IN6_IS_ADDR_LOOPBACK(&ifs[i].addr.sin6.sin6_addr)));
    for (int j = 0; j < i; j++)
      MC_T_TRUE(strcmp(ifs[i].name, ifs[j].name) != 0);
    if (strcmp(ifs[i].name, "lo") == 0)
      lo = i;
  }
  if (lo < 0)
    MC_T_SKIP("no running interface named lo on this machine");
  /* lo's first address here is 127.0.0.1/8 (its ::1 is skipped anyway) */
  MC_T_EQ_INT(ifs[lo].addr.sa.sa_family, AF_INET);
  MC_T_TRUE(mc_sockaddr_is_loopback(&ifs[lo].addr));
  MC_T_TRUE(mc_if_subnet_match(
      &ifs[lo],
      &(union mc_sockaddr){.sin = {.sin_family = AF_INET, .sin_addr = {htonl(0x7f000002u)}}}));

  /* the family filter */
  MC_T_OK(mc_if_list(AF_INET6, ifs, MC_MAX_IFS, &n));
  for (int i = 0; i < n; i++)
    MC_T_EQ_INT(ifs[i].addr.sa.sa_family, AF_INET6);
  /* max_ifs is respected */
  MC_T_OK(mc_if_list(AF_UNSPEC, ifs, 1, &n));
  MC_T_TRUE(n <= 1);
}

static void find_bootstrap_here(void)
{
  struct mc_ifc chosen;
  union mc_sockaddr id = mk_addr("127.0.0.1:5000");

  if (if_nametoindex("lo") == 0)
    MC_T_SKIP("no interface named lo on this machine");
  mc_param_set_for_tests(MC_P_SOCKET_IFNAME, "=lo");
  MC_T_OK(mc_if_find_bootstrap(NULL, &chosen));
  MC_T_EQ_STR(chosen.name, "lo");

  /* a one-character value is ignored, as in NCCL */
  mc_param_set_for_tests(MC_P_SOCKET_IFNAME, "^");
  MC_T_OK(mc_if_find_bootstrap(NULL, &chosen));

  mc_param_set_for_tests(MC_P_SOCKET_IFNAME, "=nosuchif9");
  MC_T_EQ_INT(mc_if_find_bootstrap(NULL, &chosen), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "=lo");

  /* NCCL_COMM_ID on loopback: lo's subnet holds it */
  mc_param_set_for_tests(MC_P_SOCKET_IFNAME, NULL);
  MC_T_OK(mc_if_find_bootstrap(&id, &chosen));
  MC_T_EQ_STR(chosen.name, "lo");

  mc_param_set_for_tests(MC_P_SOCKET_FAMILY, "AF_INET");
  MC_T_EQ_INT(mc_if_family_param(), AF_INET);
  MC_T_OK(mc_if_find_bootstrap(NULL, &chosen));
  MC_T_EQ_INT(chosen.addr.sa.sa_family, AF_INET);
  mc_param_set_for_tests(MC_P_SOCKET_FAMILY, "AF_INET6");
  MC_T_EQ_INT(mc_if_family_param(), AF_INET6);
  mc_param_set_for_tests(MC_P_SOCKET_FAMILY, "bogus");
  MC_T_EQ_INT(mc_if_family_param(), AF_UNSPEC);
  mc_param_set_for_tests(MC_P_SOCKET_FAMILY, NULL);
}

MC_T_MAIN(pattern_parse, pattern_bad, auto_lo_eth, auto_lo_only, auto_docker_eth, auto_ib_first,
          auto_docker_lo_virbr, spec_choice, spec_why, spec_unknown, none_at_all, comm_id_subnet,
          comm_id_route, subnet_ipv6, list_here, find_bootstrap_here)

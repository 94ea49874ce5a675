/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Mesh net's NICs: every address of every interface that carries mesh
 * links. Unlike the socket net (NCCL's transport/net_socket.cc, one device
 * per interface, first address only), a mesh host needs all its link
 * addresses, each with its prefix length, because a peer is reached through
 * the local address on the subnet that peer shares with us.
 *
 * Lanes: a NIC at least MESHCCL_MESH_FAST_MBPS fast is on the fast lane,
 * a slower one on the management lane; MESHCCL_MESH_LANES overrides per
 * interface. Data goes on fast-lane NICs, or on management-lane ones when
 * the host has no fast NIC at all (a net of slow NICs still works).
 */
#include "mesh_int.h"

#include "check.h"
#include "log.h"
#include "params.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CANDS 128

const char *mc_net_mesh_lane_str(enum mc_net_mesh_lane lane)
{
  return (lane == MC_NET_MESH_LANE_FAST) ? "fast" : "mgmt";
}

static int prefix_of_mask(const struct sockaddr *mask, int family)
{
  const uint8_t *m;
  size_t n;
  int bits = 0;

  if (mask == NULL)
    return (family == AF_INET) ? 32 : 128;
  if (family == AF_INET) {
    m = (const uint8_t *)&((const struct sockaddr_in *)(const void *)mask)->sin_addr;
    n = 4;
  } else {
    m = ((const struct sockaddr_in6 *)(const void *)mask)->sin6_addr.s6_addr;
    n = 16;
  }
  for (size_t i = 0; i < n; i++) {
    for (int b = 7; b >= 0; b--) {
      if ((m[i] >> b) & 1)
        bits++;
      else
        return bits;
    }
  }
  return bits;
}

/* The address bytes of a and their count (0 for an unknown family). */
static size_t addr_bytes(const union mc_sockaddr *a, const uint8_t **p_out)
{
  if (a->sa.sa_family == AF_INET) {
    *p_out = (const uint8_t *)&a->sin.sin_addr;
    return 4;
  }
  if (a->sa.sa_family == AF_INET6) {
    *p_out = a->sin6.sin6_addr.s6_addr;
    return 16;
  }
  *p_out = NULL;
  return 0;
}

bool mc_net_mesh_same_subnet(const union mc_sockaddr *a, int a_len, const union mc_sockaddr *b,
                             int b_len)
{
  const uint8_t *x;
  const uint8_t *y;
  size_t n = addr_bytes(a, &x);

  if ((a->sa.sa_family != b->sa.sa_family) || (n == 0) || (a_len != b_len) || (a_len < 0) ||
      ((size_t)a_len > 8 * n))
    return false;
  (void)addr_bytes(b, &y);
  for (int bit = 0; bit < a_len; bit++) {
    int i = bit / 8;
    int s = 7 - (bit % 8);
    if (((x[i] >> s) & 1) != ((y[i] >> s) & 1))
      return false;
  }
  return true;
}

const char *mc_net_mesh_subnet_str(const union mc_sockaddr *addr, int prefix_len, char *buf,
                                   size_t buf_bytes)
{
  uint8_t net[16];
  const uint8_t *p;
  size_t n = addr_bytes(addr, &p);
  char text[INET6_ADDRSTRLEN];

  if (n == 0) {
    snprintf(buf, buf_bytes, "(family %d)", (int)addr->sa.sa_family);
    return buf;
  }
  memcpy(net, p, n);
  for (size_t bit = (size_t)((prefix_len > 0) ? prefix_len : 0); bit < 8 * n; bit++)
    net[bit / 8] &= (uint8_t) ~(1u << (7 - bit % 8));
  if (inet_ntop(addr->sa.sa_family, net, text, sizeof(text)) == NULL)
    snprintf(text, sizeof(text), "?");
  snprintf(buf, buf_bytes, "%s/%d", text, prefix_len);
  return buf;
}

static bool is_link_local(const struct mc_net_mesh_nic *c)
{
  return (c->addr.sa.sa_family == AF_INET6) && IN6_IS_ADDR_LINKLOCAL(&c->addr.sin6.sin6_addr);
}

static bool is_loopback_name(const struct mc_net_mesh_nic *c)
{
  return mc_sockaddr_is_loopback(&c->addr) || (strcmp(c->name, "lo") == 0);
}

/* Applies MESHCCL_MESH_LANES ("eth1=fast,eth0=mgmt") to the chosen NICs. */
static ncclResult_t apply_lanes(const char *spec, struct mc_net_mesh_nic *nics, int n_nics)
{
  char buf[512];
  char *save = NULL;

  if ((spec == NULL) || (spec[0] == '\0'))
    return ncclSuccess;
  if (strlen(spec) >= sizeof(buf))
    return MC_FAIL(ncclInvalidUsage, "NET/Mesh: MESHCCL_MESH_LANES is longer than %zu characters",
                   sizeof(buf) - 1);
  memcpy(buf, spec, strlen(spec) + 1);
  for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    enum mc_net_mesh_lane lane;
    bool found = false;

    while (*tok == ' ')
      tok++;
    if ((eq == NULL) || (eq == tok))
      return MC_FAIL(ncclInvalidUsage,
                     "NET/Mesh: MESHCCL_MESH_LANES=%s: '%s' is not name=fast or name=mgmt", spec,
                     tok);
    *eq = '\0';
    if (strcmp(eq + 1, "fast") == 0)
      lane = MC_NET_MESH_LANE_FAST;
    else if ((strcmp(eq + 1, "mgmt") == 0) || (strcmp(eq + 1, "management") == 0))
      lane = MC_NET_MESH_LANE_MGMT;
    else
      return MC_FAIL(ncclInvalidUsage,
                     "NET/Mesh: MESHCCL_MESH_LANES=%s: lane '%s' of %s is neither fast nor mgmt",
                     spec, eq + 1, tok);
    for (int i = 0; i < n_nics; i++) {
      if (strcmp(nics[i].name, tok) == 0) {
        nics[i].lane = lane;
        found = true;
      }
    }
    if (!found)
      return MC_FAIL(ncclInvalidUsage,
                     "NET/Mesh: MESHCCL_MESH_LANES=%s names %s, which is not a mesh interface "
                     "(see MESHCCL_MESH_IFNAME)",
                     spec, tok);
  }
  return ncclSuccess;
}

/* Candidates kept by `keep` (one selection stage); link-local IPv6 only when
 * the stage has nothing else. Returns the count written to nics. */
static int take_stage(const struct mc_net_mesh_nic *cands, int n_cands, const bool *keep,
                      struct mc_net_mesh_nic *nics, int max_nics)
{
  int n = 0;

  for (int pass = 0; (pass < 2) && (n == 0); pass++) {
    for (int i = 0; (i < n_cands) && (n < max_nics); i++) {
      if (keep[i] && (is_link_local(&cands[i]) == (pass == 1)))
        nics[n++] = cands[i];
    }
  }
  return n;
}

ncclResult_t mc_net_mesh_nics_select(const struct mc_net_mesh_nic *cands, int n_cands,
                                     const struct mc_net_mesh_nic_rules *rules,
                                     struct mc_net_mesh_nic *nics, int max_nics, int *n_nics_out,
                                     char *why_out, size_t why_bytes)
{
  struct mc_if_pattern mesh_pat;
  struct mc_if_pattern mgmt_pat;
  struct mc_if_pattern virt_pat;
  bool keep[MAX_CANDS];
  const char *why = NULL;
  bool has_fast = false;
  int n = 0;

  if (n_cands > MAX_CANDS)
    n_cands = MAX_CANDS;
  if ((rules->mesh_ifname != NULL) && (strlen(rules->mesh_ifname) > 1)) {
    MC_CHECK(mc_if_pattern_parse(rules->mesh_ifname, "MESHCCL_MESH_IFNAME", &mesh_pat));
    for (int i = 0; i < n_cands; i++)
      keep[i] = mc_if_pattern_match(&mesh_pat, cands[i].name);
    n = take_stage(cands, n_cands, keep, nics, max_nics);
    why = "MESHCCL_MESH_IFNAME";
  } else {
    bool has_mgmt = (rules->mgmt_ifname != NULL) && (strlen(rules->mgmt_ifname) > 1);

    if (has_mgmt)
      MC_CHECK(mc_if_pattern_parse(rules->mgmt_ifname, "NCCL_SOCKET_IFNAME", &mgmt_pat));
    MC_CHECK(mc_if_pattern_parse("docker,virbr", "NET/Mesh virtual interfaces", &virt_pat));
    /* 1: links only; 2: the management network too (a switched network is a
     * mesh of one subnet); 3: loopback (one host). */
    for (int stage = 0; (stage < 3) && (n == 0); stage++) {
      for (int i = 0; i < n_cands; i++) {
        bool lo = is_loopback_name(&cands[i]);
        bool mgmt = has_mgmt && mc_if_pattern_match(&mgmt_pat, cands[i].name);
        bool virt = mc_if_pattern_match(&virt_pat, cands[i].name);

        if (stage == 0)
          keep[i] = !lo && !mgmt && !virt;
        else if (stage == 1)
          keep[i] = !lo;
        else
          keep[i] = lo;
      }
      n = take_stage(cands, n_cands, keep, nics, max_nics);
      why = (stage == 0)   ? "every interface but loopback, docker, virbr and NCCL_SOCKET_IFNAME's"
            : (stage == 1) ? "no other interface: the management network is the mesh"
                           : "no other interface: loopback only";
    }
  }
  if (n == 0) {
    char names[512];
    size_t used = 0;

    names[0] = '\0';
    for (int i = 0; i < n_cands; i++)
      mc_str_appendf(names, sizeof(names), &used, "%s%s", (i > 0) ? " " : "", cands[i].name);
    return MC_FAIL(ncclInvalidUsage,
                   "NET/Mesh: no mesh interface (MESHCCL_MESH_IFNAME=%s, NCCL_SOCKET_IFNAME=%s); "
                   "interfaces up: %s",
                   (rules->mesh_ifname != NULL) ? rules->mesh_ifname : "unset",
                   (rules->mgmt_ifname != NULL) ? rules->mgmt_ifname : "unset",
                   (n_cands > 0) ? names : "none");
  }
  for (int i = 0; i < n; i++)
    nics[i].lane =
        (nics[i].speed_mbps >= rules->fast_mbps) ? MC_NET_MESH_LANE_FAST : MC_NET_MESH_LANE_MGMT;
  MC_CHECK(apply_lanes(rules->lanes, nics, n));
  for (int i = 0; i < n; i++)
    has_fast = has_fast || (nics[i].lane == MC_NET_MESH_LANE_FAST);
  for (int i = 0; i < n; i++)
    nics[i].carries_data = !has_fast || (nics[i].lane == MC_NET_MESH_LANE_FAST);
  if (why_out != NULL)
    snprintf(why_out, why_bytes, "%s%s", why,
             has_fast ? "" : "; no fast-lane NIC: the management lane carries data");
  *n_nics_out = n;
  return ncclSuccess;
}

/* Every IPv4/IPv6 address of every interface that is up and running. */
static ncclResult_t list_cands(struct mc_net_mesh_nic *cands, int max_cands, int *n_out)
{
  struct ifaddrs *all = NULL;
  int n = 0;

  if (getifaddrs(&all) != 0)
    return MC_FAIL(ncclSystemError, "NET/Mesh: getifaddrs failed: %s (cannot list interfaces)",
                   strerror(errno));
  for (struct ifaddrs *ifa = all; (ifa != NULL) && (n < max_cands); ifa = ifa->ifa_next) {
    struct mc_net_mesh_nic *c = &cands[n];
    struct mc_if_speed speed;
    int fam;

    if ((ifa->ifa_addr == NULL) || (ifa->ifa_name == NULL))
      continue;
    fam = ifa->ifa_addr->sa_family;
    if (((fam != AF_INET) && (fam != AF_INET6)) || ((ifa->ifa_flags & IFF_UP) == 0) ||
        ((ifa->ifa_flags & IFF_RUNNING) == 0))
      continue;
    memset(c, 0, sizeof(*c));
    memcpy(&c->addr, ifa->ifa_addr, (fam == AF_INET) ? sizeof(c->addr.sin) : sizeof(c->addr.sin6));
    mc_sockaddr_set_port(&c->addr, 0);
    if (fam == AF_INET6)
      c->addr.sin6.sin6_flowinfo = 0;
    c->prefix_len = prefix_of_mask(ifa->ifa_netmask, fam);
    snprintf(c->name, sizeof(c->name), "%s", ifa->ifa_name);
    c->if_index = (int)if_nametoindex(ifa->ifa_name);
    mc_if_speed(c->name, &speed);
    c->speed_mbps = speed.mbps;
    c->shaped_mbps = speed.shaped_mbps;
    n++;
  }
  freeifaddrs(all);
  *n_out = n;
  return ncclSuccess;
}

/* The candidates, the rules from the parameters and the choice; why_out
 * says why these (mc_net_mesh_nics_select). */
static ncclResult_t probe(const char *mgmt_ifname, struct mc_net_mesh_nic *nics, int max_nics,
                          int *n_nics_out, char *why_out, size_t why_bytes)
{
  struct mc_net_mesh_nic *cands = NULL;
  struct mc_net_mesh_nic_rules rules;
  ncclResult_t res;
  char spec[MC_IF_NAME_BYTES + 2];
  int n_cands = 0;

  MC_CHECK(mc_calloc(&cands, MAX_CANDS));
  MC_CHECK_GOTO(list_cands(cands, MAX_CANDS, &n_cands), res, out);
  rules.mesh_ifname = mc_param_str(MC_P_MESH_IFNAME);
  rules.mgmt_ifname = mc_param_str(MC_P_SOCKET_IFNAME);
  if ((rules.mgmt_ifname == NULL) && (mgmt_ifname != NULL) && (mgmt_ifname[0] != '\0')) {
    snprintf(spec, sizeof(spec), "=%s", mgmt_ifname);
    rules.mgmt_ifname = spec;
  }
  rules.lanes = mc_param_str(MC_P_MESH_LANES);
  rules.fast_mbps = (int)mc_param_int(MC_P_MESH_FAST_MBPS);
  res = mc_net_mesh_nics_select(cands, n_cands, &rules, nics, max_nics, n_nics_out, why_out,
                                why_bytes);
out:
  free(cands);
  return res;
}

ncclResult_t mc_net_mesh_nics_probe(const char *mgmt_ifname, struct mc_net_mesh_nic *nics,
                                    int max_nics, int *n_nics_out)
{
  char why[256];

  return probe(mgmt_ifname, nics, max_nics, n_nics_out, why, sizeof(why));
}

ncclResult_t mc_net_mesh_nics_find(const char *mgmt_ifname, struct mc_net_mesh_nic *nics,
                                   int max_nics, int *n_nics_out)
{
  char why[256];
  char line[1536];
  size_t used = 0;
  int n = 0;

  MC_CHECK(probe(mgmt_ifname, nics, max_nics, &n, why, sizeof(why)));
  line[0] = '\0';
  for (int i = 0; i < n; i++) {
    char a[MC_SOCKADDR_STRLEN];
    char s[MC_SOCKADDR_STRLEN];

    mc_str_appendf(line, sizeof(line), &used, " [%d]%s:%s(%s,%dMb/s%s,%s%s)", i, nics[i].name,
                   mc_sockaddr_str(&nics[i].addr, a, sizeof(a)), mc_net_mesh_lane_str(nics[i].lane),
                   nics[i].speed_mbps, (nics[i].shaped_mbps > 0) ? " tbf" : "",
                   mc_net_mesh_subnet_str(&nics[i].addr, nics[i].prefix_len, s, sizeof(s)),
                   nics[i].carries_data ? "" : ",no data");
  }
  MC_INFO(MC_SUB_INIT | MC_SUB_NET, "NET/Mesh : Using%s (%s)", line, why);
  *n_nics_out = n;
  return ncclSuccess;
}

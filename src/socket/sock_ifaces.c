/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Network interfaces for bootstrap: the NCCL_SOCKET_IFNAME pattern language
 * (prefixes, "^" to exclude, "=" for exact names, ":port" suffixes ignored),
 * the list of usable interfaces (up, running, IPv4/IPv6, first address per
 * name, NCCL_SOCKET_FAMILY filter), subnet matching, and the choice of the
 * bootstrap interface: NCCL_COMM_ID's subnet or route, else
 * NCCL_SOCKET_IFNAME, else NCCL's automatic order (ib*, anything but
 * docker/lo/virbr, docker, lo, virbr). It mirrors the interface rules of
 * NCCL's misc/socket.cc and os/linux.cc; the code is written from the
 * contract in socket.h, not copied. The choice is pure logic over an array
 * so that tests can feed it synthetic machines, and it explains itself in one
 * line (the chosen interface, the rule, and why every other one lost).
 */
#include "socket.h"

#include "check.h"
#include "log.h"
#include "params.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PATTERN_MAX_NAMES                                                                          \
  ((int)(sizeof(((struct mc_if_pattern *)0)->names) /                                              \
         sizeof(((struct mc_if_pattern *)0)->names[0])))

#define PATTERN_FORMS                                                                              \
  "expected a comma list of interface name prefixes (eth,ib), ^ to exclude (^docker,lo), "         \
  "= for exact names (=eth0) or both (^=docker0)"

/* ---------- NCCL_SOCKET_IFNAME patterns ---------- */

ncclResult_t mc_if_pattern_parse(const char *spec, const char *what,
                                 struct mc_if_pattern *pattern_out)
{
  struct mc_if_pattern pat;
  const char *p;

  if (what == NULL)
    what = "interface pattern";
  if ((spec == NULL) || (spec[0] == '\0'))
    return MC_FAIL(ncclInvalidUsage, "%s='': empty; " PATTERN_FORMS, what);
  memset(&pat, 0, sizeof(pat));
  p = spec;
  if (*p == '^') {
    pat.exclude = true;
    p++;
  }
  if (*p == '=') {
    pat.exact = true;
    p++;
  }
  if (*p == '^')
    return MC_FAIL(ncclInvalidUsage, "%s='%s': '^' must come before '=' (^=name); " PATTERN_FORMS,
                   what, spec);
  while (*p != '\0') {
    size_t token_len = strcspn(p, ",");
    size_t name_len = strcspn(p, ",:"); /* a ":port" suffix is accepted and ignored */
    const char *name = p;

    /* Interface names hold no blanks: "eth0, eth1" means what it says. */
    while ((name_len > 0) && ((*name == ' ') || (*name == '\t'))) {
      name++;
      name_len--;
    }
    while ((name_len > 0) && ((name[name_len - 1] == ' ') || (name[name_len - 1] == '\t')))
      name_len--;
    if (name_len > 0) {
      if (pat.n == PATTERN_MAX_NAMES)
        return MC_FAIL(ncclInvalidUsage, "%s='%s': more than %d interface names; " PATTERN_FORMS,
                       what, spec, PATTERN_MAX_NAMES);
      if (name_len >= sizeof(pat.names[0]))
        return MC_FAIL(ncclInvalidUsage, "%s='%s': name '%.*s' is too long; " PATTERN_FORMS, what,
                       spec, (int)name_len, name);
      memcpy(pat.names[pat.n], name, name_len);
      pat.names[pat.n][name_len] = '\0';
      pat.n++;
    }
    p += token_len;
    if (*p == ',')
      p++;
  }
  if (pat.n == 0)
    return MC_FAIL(ncclInvalidUsage, "%s='%s': names no interface; " PATTERN_FORMS, what, spec);
  *pattern_out = pat;
  return ncclSuccess;
}

bool mc_if_pattern_match(const struct mc_if_pattern *pattern, const char *if_name)
{
  bool found = false;

  /* Like NCCL, an empty list lets everything through. */
  if (pattern->n == 0)
    return true;
  for (int i = 0; (i < pattern->n) && !found; i++) {
    if (pattern->exact)
      found = (strcmp(if_name, pattern->names[i]) == 0);
    else
      found = (strncmp(if_name, pattern->names[i], strlen(pattern->names[i])) == 0);
  }
  return found != pattern->exclude;
}

/* ---------- listing ---------- */

static int find_name(const struct mc_ifc *ifs, int n_ifs, const char *name)
{
  for (int i = 0; i < n_ifs; i++) {
    if (strcmp(ifs[i].name, name) == 0)
      return i;
  }
  return -1;
}

ncclResult_t mc_if_list(int family, struct mc_ifc *ifs, int max_ifs, int *n_ifs_out)
{
  struct ifaddrs *all = NULL;
  int n = 0;

  if ((family != AF_UNSPEC) && (family != AF_INET) && (family != AF_INET6))
    return MC_FAIL(ncclInvalidArgument,
                   "interface list: family %d is not AF_UNSPEC, AF_INET or AF_INET6", family);
  if (getifaddrs(&all) != 0)
    return MC_FAIL(ncclSystemError, "getifaddrs failed: %s (cannot list network interfaces)",
                   strerror(errno));
  for (struct ifaddrs *ifa = all; (ifa != NULL) && (n < max_ifs); ifa = ifa->ifa_next) {
    struct mc_ifc *ifc;
    size_t addr_bytes;
    int fam;

    if ((ifa->ifa_addr == NULL) || (ifa->ifa_name == NULL))
      continue;
    fam = ifa->ifa_addr->sa_family;
    if ((fam != AF_INET) && (fam != AF_INET6))
      continue;
    if ((family != AF_UNSPEC) && (fam != family))
      continue;
    if (((ifa->ifa_flags & IFF_UP) == 0) || ((ifa->ifa_flags & IFF_RUNNING) == 0))
      continue;
    if (find_name(ifs, n, ifa->ifa_name) >= 0)
      continue;
    ifc = &ifs[n];
    memset(ifc, 0, sizeof(*ifc));
    addr_bytes = (fam == AF_INET) ? sizeof(ifc->addr.sin) : sizeof(ifc->addr.sin6);
    memcpy(&ifc->addr, ifa->ifa_addr, addr_bytes);
    if ((fam == AF_INET6) && IN6_IS_ADDR_LOOPBACK(&ifc->addr.sin6.sin6_addr))
      continue; /* ::1 is skipped, as NCCL does */
    mc_sockaddr_set_port(&ifc->addr, 0);
    if (fam == AF_INET6)
      ifc->addr.sin6.sin6_flowinfo = 0;
    if (ifa->ifa_netmask != NULL)
      memcpy(&ifc->mask, ifa->ifa_netmask, addr_bytes);
    ifc->mask.sa.sa_family = (sa_family_t)fam;
    snprintf(ifc->name, sizeof(ifc->name), "%s", ifa->ifa_name);
    ifc->index = (int)if_nametoindex(ifa->ifa_name);
    n++;
  }
  freeifaddrs(all);
  *n_ifs_out = n;
  return ncclSuccess;
}

int mc_if_family_param(void)
{
  const char *v = mc_param_str(MC_P_SOCKET_FAMILY);

  if (v == NULL)
    return AF_UNSPEC;
  if (strcmp(v, "AF_INET") == 0)
    return AF_INET;
  if (strcmp(v, "AF_INET6") == 0)
    return AF_INET6;
  return AF_UNSPEC;
}

/* ---------- subnets ---------- */

bool mc_if_subnet_match(const struct mc_ifc *ifc, const union mc_sockaddr *addr)
{
  int fam = ifc->addr.sa.sa_family;

  if (addr->sa.sa_family != fam)
    return false;
  if (fam == AF_INET) {
    uint32_t m = ifc->mask.sin.sin_addr.s_addr;

    return (ifc->addr.sin.sin_addr.s_addr & m) == (addr->sin.sin_addr.s_addr & m);
  }
  if (fam == AF_INET6) {
    const uint8_t *a = ifc->addr.sin6.sin6_addr.s6_addr;
    const uint8_t *b = addr->sin6.sin6_addr.s6_addr;
    const uint8_t *m = ifc->mask.sin6.sin6_addr.s6_addr;

    for (int i = 0; i < 16; i++) {
      if (((a[i] ^ b[i]) & m[i]) != 0)
        return false;
    }
    /* fe80::/10 exists once per link: the scope tells which. */
    if (IN6_IS_ADDR_LINKLOCAL(&addr->sin6.sin6_addr) && (ifc->addr.sin6.sin6_scope_id != 0) &&
        (addr->sin6.sin6_scope_id != 0) &&
        (ifc->addr.sin6.sin6_scope_id != addr->sin6.sin6_scope_id))
      return false;
    return true;
  }
  return false;
}

/* ---------- choice ---------- */

/* The address without its "<port>". */
static const char *host_str(const union mc_sockaddr *a, char *buf, size_t buf_bytes)
{
  char *lt;

  mc_sockaddr_str(a, buf, buf_bytes);
  lt = strrchr(buf, '<');
  if (lt != NULL)
    *lt = '\0';
  return buf;
}

static int prefix_len(const union mc_sockaddr *mask)
{
  const uint8_t *m;
  size_t bytes;
  int bits = 0;

  if (mask->sa.sa_family == AF_INET6) {
    m = mask->sin6.sin6_addr.s6_addr;
    bytes = 16;
  } else {
    m = (const uint8_t *)&mask->sin.sin_addr.s_addr;
    bytes = 4;
  }
  for (size_t i = 0; i < bytes; i++)
    bits += __builtin_popcount(m[i]);
  return bits;
}

/* NCCL's automatic order, one pattern per stage; the first stage with a match wins. */
enum auto_stage { STAGE_IB, STAGE_OTHER, STAGE_DOCKER, STAGE_LO, STAGE_VIRBR, N_STAGES };

static const struct {
  const char *spec;
  const char *rule;   /* why the chosen interface won */
  const char *reject; /* why an interface of this stage lost to an earlier stage */
} auto_stages[N_STAGES] = {
    [STAGE_IB] = {"ib", "first ib* interface (IPoIB comes first)", "ib*"},
    [STAGE_OTHER] = {"^docker,lo,virbr", "first interface outside ^docker,lo,virbr",
                     "not ib*: ib* comes first"},
    [STAGE_DOCKER] = {"docker", "first docker* interface (nothing outside ^docker,lo,virbr)",
                      "docker: only when nothing else exists"},
    [STAGE_LO] = {"lo", "first lo* interface (no ib*, no docker*, nothing else but virbr*)",
                  "loopback: last resort"},
    [STAGE_VIRBR] = {"virbr", "first virbr* interface (nothing else exists)",
                     "virbr: only when nothing else exists"},
};

enum choose_mode { MODE_SUBNET, MODE_ROUTE, MODE_SPEC, MODE_AUTO };

struct choose_ctx {
  enum choose_mode mode;
  struct mc_if_pattern pattern; /* MODE_SPEC */
  int stage[MC_MAX_IFS];        /* MODE_AUTO: stage of each interface */
  int chosen;
};

static const char *reject_reason(const struct choose_ctx *ctx, const struct mc_ifc *ifs, int i,
                                 const union mc_sockaddr *comm_id)
{
  switch (ctx->mode) {
  case MODE_SUBNET:
    return mc_if_subnet_match(&ifs[i], comm_id) ? "same subnet, later in order" : "other subnet";
  case MODE_ROUTE:
    return "other subnet, not the route's source";
  case MODE_SPEC:
    if (mc_if_pattern_match(&ctx->pattern, ifs[i].name))
      return "matches too, later in order";
    return ctx->pattern.exclude ? "excluded by NCCL_SOCKET_IFNAME" : "not in NCCL_SOCKET_IFNAME";
  case MODE_AUTO:
    if (ctx->stage[i] == ctx->stage[ctx->chosen])
      return "same rank in NCCL's order, later in order";
    return auto_stages[ctx->stage[i]].reject;
  }
  return "?";
}

/* Lists the interfaces for an error message: "=lo =eth0" or "lo 127.0.0.1/8, ...". */
static void list_ifs(const struct mc_ifc *ifs, int n_ifs, bool as_names, char *buf,
                     size_t buf_bytes)
{
  size_t used = 0;
  char host[MC_SOCKADDR_STRLEN];

  buf[0] = '\0';
  for (int i = 0; i < n_ifs; i++) {
    if (as_names)
      mc_str_appendf(buf, buf_bytes, &used, "%s=%s", (i == 0) ? "" : " ", ifs[i].name);
    else
      mc_str_appendf(buf, buf_bytes, &used, "%s%s %s/%d", (i == 0) ? "" : ", ", ifs[i].name,
                     host_str(&ifs[i].addr, host, sizeof(host)), prefix_len(&ifs[i].mask));
  }
}

static void write_why(const struct choose_ctx *ctx, const struct mc_ifc *ifs, int n_ifs,
                      const char *rule, const union mc_sockaddr *comm_id, char *why,
                      size_t why_bytes)
{
  size_t used = 0;
  char host[MC_SOCKADDR_STRLEN];
  bool first = true;

  if ((why == NULL) || (why_bytes == 0))
    return;
  why[0] = '\0';
  mc_str_appendf(why, why_bytes, &used, "%s %s: %s", ifs[ctx->chosen].name,
                 host_str(&ifs[ctx->chosen].addr, host, sizeof(host)), rule);
  for (int i = 0; i < n_ifs; i++) {
    if (i == ctx->chosen)
      continue;
    mc_str_appendf(why, why_bytes, &used, "%s%s (%s)", first ? "; rejected: " : ", ", ifs[i].name,
                   reject_reason(ctx, ifs, i, comm_id));
    first = false;
  }
}

static ncclResult_t choose_comm_id(const struct mc_ifc *ifs, int n_ifs, const char *ifname_spec,
                                   const union mc_sockaddr *comm_id,
                                   const union mc_sockaddr *route_src, struct choose_ctx *ctx,
                                   char *rule, size_t rule_bytes)
{
  char id_str[MC_SOCKADDR_STRLEN];
  char src_str[MC_SOCKADDR_STRLEN];
  char list[1024];
  const char *ignored = (ifname_spec != NULL)
                            ? " (NCCL_SOCKET_IFNAME ignored: NCCL_COMM_ID decides, as in NCCL)"
                            : "";

  mc_sockaddr_str(comm_id, id_str, sizeof(id_str));
  for (int i = 0; i < n_ifs; i++) {
    if (mc_if_subnet_match(&ifs[i], comm_id)) {
      ctx->mode = MODE_SUBNET;
      ctx->chosen = i;
      snprintf(rule, rule_bytes, "its subnet holds NCCL_COMM_ID %s%s", id_str, ignored);
      return ncclSuccess;
    }
  }
  if (route_src != NULL) {
    host_str(route_src, src_str, sizeof(src_str));
    for (int i = 0; i < n_ifs; i++) {
      union mc_sockaddr a = ifs[i].addr;
      union mc_sockaddr b = *route_src;

      mc_sockaddr_set_port(&a, 0);
      mc_sockaddr_set_port(&b, 0);
      if (mc_sockaddr_equal(&a, &b)) {
        ctx->mode = MODE_ROUTE;
        ctx->chosen = i;
        snprintf(rule, rule_bytes, "the route to NCCL_COMM_ID %s leaves from it%s", id_str,
                 ignored);
        return ncclSuccess;
      }
    }
  }
  list_ifs(ifs, n_ifs, false, list, sizeof(list));
  if (route_src == NULL)
    return MC_FAIL(ncclInvalidUsage,
                   "no interface reaches NCCL_COMM_ID %s: no interface's subnet holds it and there "
                   "is no route to it; interfaces: %s (check NCCL_COMM_ID, NCCL_SOCKET_FAMILY and "
                   "the routing table)",
                   id_str, list);
  return MC_FAIL(ncclInvalidUsage,
                 "no interface reaches NCCL_COMM_ID %s: no interface's subnet holds it and the "
                 "route to it leaves from %s, which is not a usable interface; interfaces: %s "
                 "(check NCCL_COMM_ID, NCCL_SOCKET_FAMILY and the routing table)",
                 id_str, src_str, list);
}

static ncclResult_t choose_spec(const struct mc_ifc *ifs, int n_ifs, const char *ifname_spec,
                                struct choose_ctx *ctx, char *rule, size_t rule_bytes)
{
  char list[1024];

  MC_CHECK(mc_if_pattern_parse(ifname_spec, "NCCL_SOCKET_IFNAME", &ctx->pattern));
  for (int i = 0; i < n_ifs; i++) {
    if (mc_if_pattern_match(&ctx->pattern, ifs[i].name)) {
      ctx->mode = MODE_SPEC;
      ctx->chosen = i;
      snprintf(rule, rule_bytes, "first interface matching NCCL_SOCKET_IFNAME=%s", ifname_spec);
      return ncclSuccess;
    }
  }
  list_ifs(ifs, n_ifs, true, list, sizeof(list));
  return MC_FAIL(ncclInvalidUsage,
                 "NCCL_SOCKET_IFNAME=%s matches no usable interface; interfaces: %s (set "
                 "NCCL_SOCKET_IFNAME to one of them)",
                 ifname_spec, list);
}

static ncclResult_t choose_auto(const struct mc_ifc *ifs, int n_ifs, struct choose_ctx *ctx,
                                char *rule, size_t rule_bytes)
{
  struct mc_if_pattern stages[N_STAGES];
  int best = -1;

  for (int s = 0; s < N_STAGES; s++)
    MC_CHECK(mc_if_pattern_parse(auto_stages[s].spec, "automatic interface order", &stages[s]));
  for (int i = 0; i < n_ifs; i++) {
    int s = 0;

    while ((s < N_STAGES) && !mc_if_pattern_match(&stages[s], ifs[i].name))
      s++;
    if (s == N_STAGES)
      return MC_FAIL(ncclInternalError, "interface %s fits no stage of NCCL's automatic order",
                     ifs[i].name);
    ctx->stage[i] = s;
    if ((best < 0) || (s < ctx->stage[best]))
      best = i;
  }
  ctx->mode = MODE_AUTO;
  ctx->chosen = best;
  snprintf(rule, rule_bytes, "%s", auto_stages[ctx->stage[best]].rule);
  return ncclSuccess;
}

ncclResult_t mc_if_choose(const struct mc_ifc *ifs, int n_ifs, const char *ifname_spec,
                          const union mc_sockaddr *comm_id, const union mc_sockaddr *route_src,
                          struct mc_ifc *chosen_out, char *why_out, size_t why_bytes)
{
  struct choose_ctx ctx;
  char rule[256];

  if (n_ifs <= 0)
    return MC_FAIL(ncclInvalidUsage, "no usable socket interface (no interface is up and running "
                                     "with an IPv4/IPv6 address)");
  if (n_ifs > MC_MAX_IFS)
    n_ifs = MC_MAX_IFS;
  memset(&ctx, 0, sizeof(ctx));
  if (comm_id != NULL)
    MC_CHECK(choose_comm_id(ifs, n_ifs, ifname_spec, comm_id, route_src, &ctx, rule, sizeof(rule)));
  else if (ifname_spec != NULL)
    MC_CHECK(choose_spec(ifs, n_ifs, ifname_spec, &ctx, rule, sizeof(rule)));
  else
    MC_CHECK(choose_auto(ifs, n_ifs, &ctx, rule, sizeof(rule)));
  write_why(&ctx, ifs, n_ifs, rule, comm_id, why_out, why_bytes);
  *chosen_out = ifs[ctx.chosen];
  return ncclSuccess;
}

/* ---------- this host ---------- */

/* The local address the kernel would use to reach `to`: a connected UDP
 * socket sends nothing but gets its source address bound. */
static bool route_source(const union mc_sockaddr *to, union mc_sockaddr *src_out)
{
  union mc_sockaddr src;
  socklen_t len = sizeof(src);
  char to_str[MC_SOCKADDR_STRLEN];
  int fd;

  mc_sockaddr_str(to, to_str, sizeof(to_str));
  fd = socket(to->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    MC_INFO(MC_SUB_BOOTSTRAP | MC_SUB_NET, "Bootstrap: no route lookup to %s: socket: %s", to_str,
            strerror(errno));
    return false;
  }
  memset(&src, 0, sizeof(src));
  if ((connect(fd, &to->sa, mc_sockaddr_len(to)) != 0) || (getsockname(fd, &src.sa, &len) != 0)) {
    MC_INFO(MC_SUB_BOOTSTRAP | MC_SUB_NET, "Bootstrap: no route to %s: %s", to_str,
            strerror(errno));
    close(fd);
    return false;
  }
  close(fd);
  *src_out = src;
  return true;
}

ncclResult_t mc_if_find_bootstrap(const union mc_sockaddr *comm_id, struct mc_ifc *chosen_out)
{
  struct mc_ifc ifs[MC_MAX_IFS];
  struct mc_ifc chosen;
  union mc_sockaddr route_src;
  bool has_route = false;
  int family = mc_if_family_param();
  const char *spec = mc_param_str(MC_P_SOCKET_IFNAME);
  char why[1024];
  char host[MC_SOCKADDR_STRLEN];
  char prefix[MC_IF_NAME_BYTES + MC_SOCKADDR_STRLEN + 4];
  const char *reason = why;
  int n_ifs = 0;

  MC_CHECK(mc_if_list(family, ifs, MC_MAX_IFS, &n_ifs));
  if ((n_ifs == 0) && (family != AF_UNSPEC))
    return MC_FAIL(ncclInvalidUsage,
                   "no usable socket interface (no interface is up and running with an %s "
                   "address, as NCCL_SOCKET_FAMILY=%s asks)",
                   (family == AF_INET) ? "IPv4" : "IPv6", mc_param_str(MC_P_SOCKET_FAMILY));
  /* NCCL ignores a value of one character or less ("^", "="). */
  if ((spec != NULL) && (strlen(spec) <= 1)) {
    if (spec[0] != '\0')
      MC_INFO(MC_SUB_BOOTSTRAP | MC_SUB_NET, "Bootstrap: ignoring NCCL_SOCKET_IFNAME=%s", spec);
    spec = NULL;
  }
  if (comm_id != NULL)
    has_route = route_source(comm_id, &route_src);
  /* NCCL never lists the IPv6 loopback; a root at ::1 is still reachable
   * through it (single-host jobs, IPv6 tests), so use it then. */
  if ((comm_id != NULL) && (comm_id->sa.sa_family == AF_INET6) &&
      mc_sockaddr_is_loopback(comm_id) && (family != AF_INET)) {
    memset(&chosen, 0, sizeof(chosen));
    snprintf(chosen.name, sizeof(chosen.name), "lo");
    chosen.addr.sin6.sin6_family = AF_INET6;
    chosen.addr.sin6.sin6_addr = in6addr_loopback;
    chosen.mask.sin6.sin6_family = AF_INET6;
    memset(&chosen.mask.sin6.sin6_addr, 0xff, sizeof(chosen.mask.sin6.sin6_addr));
    chosen.index = (int)if_nametoindex("lo");
    MC_INFO(MC_SUB_BOOTSTRAP | MC_SUB_NET, "Bootstrap: Using lo:::1<0>");
    MC_INFO(MC_SUB_BOOTSTRAP | MC_SUB_NET, "Bootstrap: lo chosen: NCCL_COMM_ID is the IPv6 "
                                           "loopback");
    *chosen_out = chosen;
    return ncclSuccess;
  }
  MC_CHECK(mc_if_choose(ifs, n_ifs, spec, comm_id, has_route ? &route_src : NULL, &chosen, why,
                        sizeof(why)));
  host_str(&chosen.addr, host, sizeof(host));
  /* why starts with "<name> <addr>: ", which the log line already says. */
  snprintf(prefix, sizeof(prefix), "%s %s: ", chosen.name, host);
  if (strncmp(why, prefix, strlen(prefix)) == 0)
    reason = why + strlen(prefix);
  /* NCCL's line (bootstrapNetInit), then why, on a line of its own. */
  MC_INFO(MC_SUB_BOOTSTRAP | MC_SUB_NET, "Bootstrap: Using %s:%s<0>", chosen.name, host);
  MC_INFO(MC_SUB_BOOTSTRAP | MC_SUB_NET, "Bootstrap: %s chosen: %s", chosen.name, reason);
  *chosen_out = chosen;
  return ncclSuccess;
}

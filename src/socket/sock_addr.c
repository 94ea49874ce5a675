/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket addresses: formatting in NCCL's "addr<port>" style, the small
 * accessors every socket user needs (length, port, equality, loopback), and
 * the parser for NCCL_COMM_ID ("ipv4:port", "hostname:port", "[ipv6]:port",
 * "[ipv6%ifname]:port"). It mirrors the address rules of NCCL's
 * misc/socket.cc (the text forms and what they resolve to); the code is
 * written from the contract in socket.h, not copied.
 */
#include "socket.h"

#include "check.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#define ACCEPTED_FORMS "expected <ipv4>:<port>, <hostname>:<port> or [<ipv6>]:<port>"

const char *mc_sockaddr_str(const union mc_sockaddr *a, char *buf, size_t buf_bytes)
{
  char host[INET6_ADDRSTRLEN];
  char scope[IF_NAMESIZE + 2];

  if ((buf == NULL) || (buf_bytes == 0))
    return buf;
  if (a == NULL) {
    snprintf(buf, buf_bytes, "(null)");
    return buf;
  }
  scope[0] = '\0';
  if (a->sa.sa_family == AF_INET) {
    if (inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof(host)) == NULL)
      snprintf(host, sizeof(host), "?");
  } else if (a->sa.sa_family == AF_INET6) {
    if (inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof(host)) == NULL)
      snprintf(host, sizeof(host), "?");
    if (a->sin6.sin6_scope_id != 0) {
      char if_name[IF_NAMESIZE];

      /* NCCL prints the interface name; an index without a name stays a number. */
      if (if_indextoname(a->sin6.sin6_scope_id, if_name) != NULL)
        snprintf(scope, sizeof(scope), "%%%s", if_name);
      else
        snprintf(scope, sizeof(scope), "%%%u", (unsigned)a->sin6.sin6_scope_id);
    }
  } else {
    snprintf(buf, buf_bytes, "(family %d)", (int)a->sa.sa_family);
    return buf;
  }
  snprintf(buf, buf_bytes, "%s%s<%d>", host, scope, mc_sockaddr_port(a));
  return buf;
}

socklen_t mc_sockaddr_len(const union mc_sockaddr *a)
{
  if (a->sa.sa_family == AF_INET)
    return (socklen_t)sizeof(a->sin);
  if (a->sa.sa_family == AF_INET6)
    return (socklen_t)sizeof(a->sin6);
  return 0;
}

int mc_sockaddr_port(const union mc_sockaddr *a)
{
  if (a->sa.sa_family == AF_INET)
    return ntohs(a->sin.sin_port);
  if (a->sa.sa_family == AF_INET6)
    return ntohs(a->sin6.sin6_port);
  return 0;
}

void mc_sockaddr_set_port(union mc_sockaddr *a, int port)
{
  if (a->sa.sa_family == AF_INET)
    a->sin.sin_port = htons((uint16_t)port);
  else if (a->sa.sa_family == AF_INET6)
    a->sin6.sin6_port = htons((uint16_t)port);
}

bool mc_sockaddr_equal(const union mc_sockaddr *a, const union mc_sockaddr *b)
{
  if (a->sa.sa_family != b->sa.sa_family)
    return false;
  if (a->sa.sa_family == AF_INET)
    return (a->sin.sin_addr.s_addr == b->sin.sin_addr.s_addr) &&
           (a->sin.sin_port == b->sin.sin_port);
  if (a->sa.sa_family == AF_INET6) {
    /* A scope id left at 0 ("any") does not make two addresses different. */
    if ((a->sin6.sin6_scope_id != 0) && (b->sin6.sin6_scope_id != 0) &&
        (a->sin6.sin6_scope_id != b->sin6.sin6_scope_id))
      return false;
    return (memcmp(&a->sin6.sin6_addr, &b->sin6.sin6_addr, sizeof(a->sin6.sin6_addr)) == 0) &&
           (a->sin6.sin6_port == b->sin6.sin6_port);
  }
  return false;
}

bool mc_sockaddr_is_loopback(const union mc_sockaddr *a)
{
  if (a->sa.sa_family == AF_INET)
    return (ntohl(a->sin.sin_addr.s_addr) >> 24) == 127;
  if (a->sa.sa_family == AF_INET6) {
    const uint8_t *b = a->sin6.sin6_addr.s6_addr;

    if (IN6_IS_ADDR_LOOPBACK(&a->sin6.sin6_addr))
      return true;
    /* ::ffff:127.x.y.z, an IPv4 loopback seen through an IPv6 socket */
    return IN6_IS_ADDR_V4MAPPED(&a->sin6.sin6_addr) && (b[12] == 127);
  }
  return false;
}

/* "1".."65535", digits only; -1 otherwise. */
static int parse_port(const char *s)
{
  long v = 0;

  if (*s == '\0')
    return -1;
  for (const char *p = s; *p != '\0'; p++) {
    if ((*p < '0') || (*p > '9'))
      return -1;
    v = v * 10 + (*p - '0');
    if (v > 65535)
      return -1;
  }
  return (v == 0) ? -1 : (int)v;
}

/* The text between "[" and "]": "ipv6" or "ipv6%ifname" (scope id from the name). */
static ncclResult_t parse_ipv6(const char *str, const char *what, const char *inside,
                               size_t inside_len, union mc_sockaddr *addr)
{
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
  char *pct;

  if ((inside_len == 0) || (inside_len >= sizeof(host)))
    return MC_FAIL(ncclInvalidArgument, "%s='%s': bad IPv6 address between [ ]; " ACCEPTED_FORMS,
                   what, str);
  memcpy(host, inside, inside_len);
  host[inside_len] = '\0';
  memset(addr, 0, sizeof(*addr));
  addr->sin6.sin6_family = AF_INET6;
  pct = strchr(host, '%');
  if (pct != NULL) {
    *pct = '\0';
    addr->sin6.sin6_scope_id = if_nametoindex(pct + 1);
    if (addr->sin6.sin6_scope_id == 0)
      return MC_FAIL(ncclInvalidArgument,
                     "%s='%s': no network interface named '%s' for the IPv6 scope; use "
                     "[<ipv6>%%<ifname>]:<port> with an existing interface",
                     what, str, pct + 1);
  }
  if (inet_pton(AF_INET6, host, &addr->sin6.sin6_addr) != 1)
    return MC_FAIL(ncclInvalidArgument, "%s='%s': '%s' is not an IPv6 address; " ACCEPTED_FORMS,
                   what, str, host);
  return ncclSuccess;
}

/* "a.b.c.d" or a host name resolved with getaddrinfo (first IPv4 or IPv6 result). */
static ncclResult_t parse_host(const char *str, const char *what, const char *host,
                               union mc_sockaddr *addr)
{
  struct addrinfo hints;
  struct addrinfo *res = NULL;
  struct addrinfo *ai;
  int rc;

  memset(addr, 0, sizeof(*addr));
  if (inet_pton(AF_INET, host, &addr->sin.sin_addr) == 1) {
    addr->sin.sin_family = AF_INET;
    return ncclSuccess;
  }
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0)
    return MC_FAIL(ncclInvalidArgument,
                   "%s='%s': cannot resolve host name '%s' (%s); " ACCEPTED_FORMS, what, str, host,
                   gai_strerror(rc));
  for (ai = res; ai != NULL; ai = ai->ai_next) {
    if ((ai->ai_family == AF_INET) && (ai->ai_addrlen >= sizeof(addr->sin))) {
      memcpy(&addr->sin, ai->ai_addr, sizeof(addr->sin));
      break;
    }
    if ((ai->ai_family == AF_INET6) && (ai->ai_addrlen >= sizeof(addr->sin6))) {
      memcpy(&addr->sin6, ai->ai_addr, sizeof(addr->sin6));
      break;
    }
  }
  freeaddrinfo(res);
  if (ai == NULL)
    return MC_FAIL(ncclInvalidArgument, "%s='%s': host name '%s' has no IPv4 or IPv6 address", what,
                   str, host);
  return ncclSuccess;
}

ncclResult_t mc_sockaddr_parse(const char *str, const char *what, union mc_sockaddr *addr_out)
{
  union mc_sockaddr addr;
  const char *port_str;
  int port;

  if (what == NULL)
    what = "address";
  if ((str == NULL) || (str[0] == '\0'))
    return MC_FAIL(ncclInvalidArgument, "%s='%s': empty; " ACCEPTED_FORMS, what,
                   (str == NULL) ? "" : str);

  if (str[0] == '[') {
    const char *close = strchr(str, ']');

    if (close == NULL)
      return MC_FAIL(ncclInvalidArgument,
                     "%s='%s': missing ']' after the IPv6 address; " ACCEPTED_FORMS, what, str);
    if (close[1] != ':')
      return MC_FAIL(ncclInvalidArgument, "%s='%s': missing ':<port>' after ']'; " ACCEPTED_FORMS,
                     what, str);
    MC_CHECK(parse_ipv6(str, what, str + 1, (size_t)(close - str - 1), &addr));
    port_str = close + 2;
  } else {
    const char *colon = strrchr(str, ':');
    char host[256];
    size_t host_len;

    if (colon == NULL)
      return MC_FAIL(ncclInvalidArgument, "%s='%s': missing ':<port>'; " ACCEPTED_FORMS, what, str);
    if (strchr(str, ':') != colon)
      return MC_FAIL(ncclInvalidArgument,
                     "%s='%s': an IPv6 address needs brackets; " ACCEPTED_FORMS, what, str);
    host_len = (size_t)(colon - str);
    if ((host_len == 0) || (host_len >= sizeof(host)))
      return MC_FAIL(ncclInvalidArgument, "%s='%s': %s host before ':'; " ACCEPTED_FORMS, what, str,
                     (host_len == 0) ? "missing" : "too long a");
    memcpy(host, str, host_len);
    host[host_len] = '\0';
    MC_CHECK(parse_host(str, what, host, &addr));
    port_str = colon + 1;
  }

  port = parse_port(port_str);
  if (port < 0)
    return MC_FAIL(ncclInvalidArgument,
                   "%s='%s': port '%s' is not a number in 1..65535; " ACCEPTED_FORMS, what, str,
                   port_str);
  mc_sockaddr_set_port(&addr, port);
  *addr_out = addr;
  return ncclSuccess;
}

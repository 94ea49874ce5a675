/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An interface's speed, for the nets' properties (socket.h): the link speed
 * from /sys/class/net/<if>/speed (below MESHCCL_SYSFS_ROOT), NCCL's 10000
 * Mb/s when that is unreadable or not positive (as NCCL's socket net,
 * transport/net_socket.cc ncclNetSocketGetSpeed), lowered to the rate of a
 * token bucket (`tc qdisc ... root tbf rate R`) that shapes the interface's
 * egress: such a host cannot send faster than R whatever the link says, and
 * the search and the tuning model must see it (a triangle of 1 Gbit/s
 * cables on veths that report 10 Gbit/s gets trees where rings are twice as
 * fast). The qdisc is read over rtnetlink (RTM_GETQDISC), one bounded
 * request; any failure there leaves the link speed.
 */
#include "socket.h"

#include "params.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define DEFAULT_SPEED_MBPS 10000
#define NL_BUF_BYTES       16384
#define NL_TIMEOUT_MS      500

static int sysfs_speed(const char *if_name)
{
  const char *root = mc_param_str(MC_P_SYSFS_ROOT);
  char path[PATH_MAX];
  char buf[32];
  int speed = DEFAULT_SPEED_MBPS;
  ssize_t n;
  int fd;

  snprintf(path, sizeof(path), "%s/sys/class/net/%s/speed", (root != NULL) ? root : "", if_name);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return speed;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n > 0) {
    buf[n] = '\0';
    if (atoi(buf) > 0)
      speed = atoi(buf);
  }
  return speed;
}

/* The rate (bytes/s) in a tbf qdisc's nested TCA_OPTIONS, 0 if absent. */
static uint64_t tbf_rate(const struct rtattr *opts)
{
  int len = (int)RTA_PAYLOAD(opts);
  uint64_t rate = 0;

  for (const struct rtattr *a = RTA_DATA(opts); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if ((a->rta_type == TCA_TBF_PARMS) && (RTA_PAYLOAD(a) >= sizeof(struct tc_tbf_qopt))) {
      const struct tc_tbf_qopt *q = RTA_DATA(a);

      if (rate == 0)
        rate = q->rate.rate;
    } else if ((a->rta_type == TCA_TBF_RATE64) && (RTA_PAYLOAD(a) >= sizeof(uint64_t))) {
      memcpy(&rate, RTA_DATA(a), sizeof(rate)); /* set when the rate needs 64 bits */
    }
  }
  return rate;
}

/* One RTM_NEWQDISC: the rate of a root tbf on if_index, 0 otherwise. */
static uint64_t qdisc_rate(const struct nlmsghdr *h, int if_index)
{
  const struct tcmsg *tc = NLMSG_DATA(h);
  int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*tc));
  bool is_tbf = false;
  uint64_t rate = 0;

  if ((len < 0) || (tc->tcm_ifindex != if_index) || (tc->tcm_parent != TC_H_ROOT))
    return 0;
  for (const struct rtattr *a =
           (const struct rtattr *)((const char *)tc + NLMSG_ALIGN(sizeof(*tc)));
       RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == TCA_KIND)
      is_tbf = (strncmp(RTA_DATA(a), "tbf", RTA_PAYLOAD(a)) == 0);
    else if (a->rta_type == TCA_OPTIONS)
      rate = tbf_rate(a);
  }
  return is_tbf ? rate : 0;
}

/* The egress rate of a root tbf qdisc on if_name in bytes/s, 0 if none. */
static uint64_t shaped_rate(const char *if_name)
{
  struct {
    struct nlmsghdr h;
    struct tcmsg tc;
  } req;
  struct timeval tv = {.tv_sec = 0, .tv_usec = NL_TIMEOUT_MS * 1000};
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  int if_index = (int)if_nametoindex(if_name);
  uint64_t rate = 0;
  bool done = false;
  char *buf;
  int fd;

  if (if_index <= 0)
    return 0;
  fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0)
    return 0;
  buf = malloc(NL_BUF_BYTES);
  memset(&req, 0, sizeof(req));
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.tc));
  req.h.nlmsg_type = RTM_GETQDISC;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.h.nlmsg_seq = 1;
  req.tc.tcm_family = AF_UNSPEC;
  req.tc.tcm_ifindex = if_index;
  if ((buf == NULL) || (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) ||
      (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0))
    done = true;
  /* A dump ends with NLMSG_DONE; a receive timeout or error ends it too. */
  while (!done) {
    ssize_t n = recv(fd, buf, NL_BUF_BYTES, 0);
    int len = (int)n;

    if (n <= 0)
      break;
    for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)len);
         h = NLMSG_NEXT(h, len)) {
      if ((h->nlmsg_type == NLMSG_DONE) || (h->nlmsg_type == NLMSG_ERROR)) {
        done = true;
        break;
      }
      if ((h->nlmsg_type == RTM_NEWQDISC) && (rate == 0))
        rate = qdisc_rate(h, if_index);
    }
  }
  free(buf);
  close(fd);
  return rate;
}

void mc_if_speed(const char *if_name, struct mc_if_speed *out)
{
  uint64_t shaped = 0;

  memset(out, 0, sizeof(*out));
  out->link_mbps = sysfs_speed(if_name);
  out->mbps = out->link_mbps;
  /* A fake sysfs tree (tests) describes machines that are not this one. */
  if (mc_param_str(MC_P_SYSFS_ROOT) == NULL)
    shaped = shaped_rate(if_name);
  if (shaped > 0) {
    uint64_t mbps = shaped * 8 / 1000000;

    out->shaped_mbps = (mbps < 1) ? 1 : (mbps > INT_MAX) ? INT_MAX : (int)mbps;
    if (out->shaped_mbps < out->mbps)
      out->mbps = out->shaped_mbps;
  }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The net of the NET transport: the built-in socket net (plugins come later). */
#include "net/net.h"

const struct mc_net *mc_net_default(void)
{
  return &mc_net_socket;
}

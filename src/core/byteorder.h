/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Big-endian (network order) reads and writes of 16, 32 and 64-bit fields,
 * for wire formats written byte by byte so that hosts of any endianness and
 * compilers of any padding agree (the nets' handles, handshakes and
 * announcements).
 */
#ifndef MC_CORE_BYTEORDER_H
#define MC_CORE_BYTEORDER_H

#include <stdint.h>

static inline void mc_be_put16(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static inline void mc_be_put32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static inline void mc_be_put64(uint8_t *p, uint64_t v)
{
  mc_be_put32(p, (uint32_t)(v >> 32));
  mc_be_put32(p + 4, (uint32_t)v);
}

static inline uint32_t mc_be_get16(const uint8_t *p)
{
  return ((uint32_t)p[0] << 8) | p[1];
}

static inline uint32_t mc_be_get32(const uint8_t *p)
{
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t mc_be_get64(const uint8_t *p)
{
  return ((uint64_t)mc_be_get32(p) << 32) | mc_be_get32(p + 4);
}

#endif /* MC_CORE_BYTEORDER_H */

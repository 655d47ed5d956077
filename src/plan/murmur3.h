/* MurmurHash3 x86_128 (Austin Appleby's public-domain hash), as ONNX Runtime
 * uses it to key node-stats rows. Byte order of the input is little-endian
 * on every host, so keys match across machines. */
#ifndef SN_PLAN_MURMUR3_H
#define SN_PLAN_MURMUR3_H

#include <stddef.h>
#include <stdint.h>

/* Hashes len bytes of key with seed into out[0..3] (h1..h4). */
void sn_murmur3_x86_128(const void *key, size_t len, uint32_t seed, uint32_t out[4]);

#endif

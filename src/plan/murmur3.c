#include "plan/murmur3.h"

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static inline uint32_t fmix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

/* Little-endian 32-bit load of bytes p[0..n) (n <= 4), zero-filled above. */
static inline uint32_t load_le(const uint8_t *p, size_t n) {
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

void sn_murmur3_x86_128(const void *key, size_t len, uint32_t seed, uint32_t out[4]) {
    static const uint32_t c[4] = {0x239b961bu, 0xab0e9789u, 0x38b34ae5u, 0xa1e38b93u};
    static const int kr[4] = {15, 16, 17, 18};      /* rotation of lane i's key word */
    static const int hr[4] = {19, 17, 15, 13};      /* rotation of lane i's state */
    static const uint32_t hadd[4] = {0x561ccd1bu, 0x0bcaa747u, 0x96cd1c35u, 0x32ac3b17u};
    const uint8_t *data = key;
    uint32_t h[4] = {seed, seed, seed, seed};
    size_t nblocks = len / 16;
    for (size_t b = 0; b < nblocks; b++) {
        for (int i = 0; i < 4; i++) {
            uint32_t k = load_le(data + b * 16 + (size_t)i * 4, 4);
            k *= c[i];
            k = rotl32(k, kr[i]);
            k *= c[(i + 1) & 3];
            h[i] ^= k;
            h[i] = rotl32(h[i], hr[i]);
            h[i] += h[(i + 1) & 3];
            h[i] = h[i] * 5 + hadd[i];
        }
    }
    /* Tail: up to 15 bytes, lane i takes bytes [4i, 4i+4), mixed without the
     * state rotation; lanes are applied from the last one down. */
    const uint8_t *tail = data + nblocks * 16;
    size_t rest = len & 15;
    for (int i = 3; i >= 0; i--) {
        size_t lo = (size_t)i * 4;
        if (rest <= lo)
            continue;
        size_t n = rest - lo < 4 ? rest - lo : 4;
        uint32_t k = load_le(tail + lo, n);
        k *= c[i];
        k = rotl32(k, kr[i]);
        k *= c[(i + 1) & 3];
        h[i] ^= k;
    }
    for (int i = 0; i < 4; i++)
        h[i] ^= (uint32_t)len;
    h[0] += h[1] + h[2] + h[3];
    h[1] += h[0];
    h[2] += h[0];
    h[3] += h[0];
    for (int i = 0; i < 4; i++)
        h[i] = fmix32(h[i]);
    h[0] += h[1] + h[2] + h[3];
    h[1] += h[0];
    h[2] += h[0];
    h[3] += h[0];
    for (int i = 0; i < 4; i++)
        out[i] = h[i];
}

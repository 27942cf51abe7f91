/* siphash.c - see siphash.h. */
#include "siphash.h"

#include <string.h>

#define SIP_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void sipround(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = SIP_ROTL(v[1], 13);
    v[1] ^= v[0];
    v[0] = SIP_ROTL(v[0], 32);
    v[2] += v[3];
    v[3] = SIP_ROTL(v[3], 16);
    v[3] ^= v[2];
    v[0] += v[3];
    v[3] = SIP_ROTL(v[3], 21);
    v[3] ^= v[0];
    v[2] += v[1];
    v[1] = SIP_ROTL(v[1], 17);
    v[1] ^= v[2];
    v[2] = SIP_ROTL(v[2], 32);
}

static uint64_t load64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Checked against the reference vectors and OpenSSL's SIPHASH in
 * tests/unit/test_signer_limits.c. */
uint64_t hsmca_siphash24(const uint8_t key[16], const uint8_t *in, size_t n)
{
    uint64_t k0 = load64(key), k1 = load64(key + 8);
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL,
                     k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m = load64(in + i);
        v[3] ^= m;
        sipround(v);
        sipround(v);
        v[0] ^= m;
    }
    uint8_t tail[8] = {0};
    memcpy(tail, in + i, n - i);
    tail[7] = (uint8_t)n;
    uint64_t m = load64(tail);
    v[3] ^= m;
    sipround(v);
    sipround(v);
    v[0] ^= m;
    v[2] ^= 0xff;
    for (int r = 0; r < 4; r++)
        sipround(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* audit_tu.c - see audit_tu.h. */
#include "audit_tu.h"

#include <openssl/x509.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
    fprintf(stderr, "audit_tu: %s\n", what);
    abort();
}

void atu_tree_build(atu_tree *t, const audit_hash *leaves, uint64_t n)
{
    memset(t, 0, sizeof(*t));
    t->size = n;
    t->levels[0] = malloc((n ? n : 1) * sizeof(audit_hash));
    if (!t->levels[0])
        die("out of memory");
    if (n)
        memcpy(t->levels[0], leaves, n * sizeof(audit_hash));
    t->counts[0] = n;
    t->nlevels = 1;
    for (unsigned l = 1; t->counts[l - 1] >= 2; l++) {
        uint64_t c = t->counts[l - 1] / 2;
        t->levels[l] = malloc(c * sizeof(audit_hash));
        if (!t->levels[l])
            die("out of memory");
        for (uint64_t i = 0; i < c; i++)
            if (audit_hash_node(&t->levels[l - 1][2 * i], &t->levels[l - 1][2 * i + 1],
                                &t->levels[l][i], NULL) != HSMCA_OK)
                die("audit_hash_node failed");
        t->counts[l] = c;
        t->nlevels = l + 1;
    }
}

void atu_tree_free(atu_tree *t)
{
    for (unsigned l = 0; l < t->nlevels; l++)
        free(t->levels[l]);
    memset(t, 0, sizeof(*t));
}

hsmca_code atu_source(void *ctx, unsigned level, uint64_t index, audit_hash *out, hsmca_err *e)
{
    const atu_tree *t = ctx;
    HSMCA_ENSURE(level < t->nlevels && index < t->counts[level], e, HSMCA_EINTERNAL,
                 "test source: no subtree at level %u index %llu in a tree of %llu", level,
                 (unsigned long long)index, (unsigned long long)t->size);
    *out = t->levels[level][index];
    return HSMCA_OK;
}

audit_hash atu_mth(const audit_hash *leaves, uint64_t lo, uint64_t hi)
{
    if (hi == lo)
        return audit_empty_root;
    if (hi - lo == 1)
        return leaves[lo];
    uint64_t k = 1;
    while (k * 2 < hi - lo)
        k *= 2;
    audit_hash l = atu_mth(leaves, lo, lo + k), r = atu_mth(leaves, lo + k, hi), out;
    if (audit_hash_node(&l, &r, &out, NULL) != HSMCA_OK)
        die("audit_hash_node failed");
    return out;
}

uint64_t atu_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static void pub_of(EVP_PKEY *k, uint8_t pub[32])
{
    size_t n = 32;
    if (!k || EVP_PKEY_get_raw_public_key(k, pub, &n) != 1 || n != 32)
        die("Ed25519 public key");
}

EVP_PKEY *atu_ed25519_key(uint8_t pub[32])
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    pub_of(k, pub);
    return k;
}

EVP_PKEY *atu_ed25519_from_seed(const uint8_t seed[32], uint8_t pub[32])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, 32);
    pub_of(k, pub);
    return k;
}

hsmca_code atu_ed25519_sign(void *ctx, const uint8_t *msg, size_t len, uint8_t sig[AUDIT_SIG_MAX],
                            size_t *siglen, hsmca_err *e)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t n = 64;
    int ok = md && EVP_DigestSignInit(md, NULL, NULL, NULL, ctx) == 1 &&
             EVP_DigestSign(md, sig, &n, msg, len) == 1 && n == 64;
    EVP_MD_CTX_free(md);
    HSMCA_ENSURE(ok, e, HSMCA_EINTERNAL, "test signer: Ed25519 sign failed");
    *siglen = n;
    return HSMCA_OK;
}

EVP_PKEY *atu_ec_key(const char *curve, uint8_t spki[AUDIT_KEY_MAX], size_t *len)
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", strcmp(curve, "P-384") == 0 ? "P-384" : "P-256");
    unsigned char *der = NULL;
    int n = k ? i2d_PUBKEY(k, &der) : 0;
    if (n <= 0 || n > AUDIT_KEY_MAX)
        die("EC keygen");
    memcpy(spki, der, (size_t)n);
    *len = (size_t)n;
    OPENSSL_free(der);
    return k;
}

hsmca_code atu_ecdsa_sign(void *ctx, const uint8_t *msg, size_t len, uint8_t sig[AUDIT_SIG_MAX],
                          size_t *siglen, hsmca_err *e)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t n = *siglen;
    int ok = md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, ctx) == 1 &&
             EVP_DigestSign(md, sig, &n, msg, len) == 1;
    EVP_MD_CTX_free(md);
    HSMCA_ENSURE(ok, e, HSMCA_EINTERNAL, "test signer: ECDSA sign failed");
    *siglen = n;
    return HSMCA_OK;
}

size_t atu_unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = strlen(hex);
    if (n % 2 || n / 2 > cap)
        die("bad hex");
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            die("bad hex");
        out[i] = (uint8_t)v;
    }
    return n / 2;
}

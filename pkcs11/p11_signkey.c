/* p11_signkey.c - a second signing key in the token beside the CA key: the
 * audit key, which signs whole messages. Ed25519 with CKM_EDDSA (the token
 * hashes the message), or ECDSA P-256/P-384 with CKM_ECDSA over the message's
 * SHA-256, computed here (SHA-256 whatever the curve: what the signed-note
 * ECDSA type verifies), the token's r||s turned into a DER ECDSA-Sig-Value.
 *
 * It rides on a session pool of its own (p11_pool_open_role), so it gets the
 * CA key's checks and the pool's CKR-driven recovery, but shares neither the
 * CA pool's sessions nor its lock. Everything here but the pool is fixed at
 * open, so any thread may call in. */
#include "p11_int.h"
#include "sigfmt.h"
#include "util.h"
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>

/* The audit log signs a checkpoint a second at most: one session is plenty,
 * and callers beyond it wait for it. */
#define SIGNKEY_SESSIONS 1

struct p11_signkey {
    p11_pool *pool;
    EVP_PKEY *pub;
    int ec;            /* ECDSA, else Ed25519 */
    size_t field;      /* ECDSA: bytes of r and of s (32 or 48) */
    const char *alg;   /* "ed25519", "ecdsa-p256", "ecdsa-p384" */
    uint8_t raw[P11_SIGNKEY_PUB_MAX];
    size_t raw_len;
    char fingerprint[2 * SHA256_DIGEST_LENGTH + 1];
};

typedef struct {
    CK_MECHANISM_TYPE mech;
    const uint8_t *msg; /* the message (CKM_EDDSA) or its digest (CKM_ECDSA) */
    size_t len;
    uint8_t sig[256]; /* room for a token that answers with more than we expect */
    CK_ULONG siglen;
} sign_op;

static CK_RV sign_op_run(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, void *arg)
{
    static const uint8_t nothing[1];
    sign_op *o = arg;
    /* CKM_EDDSA without parameters is pure Ed25519 (PKCS#11 3.0 §2.3.14): the
     * token hashes the whole message itself, so it goes in one C_Sign.
     * CKM_ECDSA signs the digest it is given and answers r||s. */
    CK_MECHANISM mech = {o->mech, NULL, 0};
    o->siglen = sizeof(o->sig);
    CK_RV rv = m->fl->C_SignInit(s, &mech, key);
    if (rv != CKR_OK)
        return rv;
    return m->fl->C_Sign(s, (CK_BYTE_PTR)(o->len ? o->msg : nothing), (CK_ULONG)o->len, o->sig,
                         &o->siglen);
}

/* 1 when sig[0..siglen) is pub's signature over msg: pure Ed25519, or ECDSA
 * (DER) over SHA-256(msg). */
static int sig_verify(const p11_signkey *k, const uint8_t *msg, size_t len, const uint8_t *sig,
                      size_t siglen)
{
    static const uint8_t nothing[1];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestVerifyInit(ctx, NULL, k->ec ? EVP_sha256() : NULL, NULL, k->pub) == 1 &&
             EVP_DigestVerify(ctx, sig, siglen, len ? msg : nothing, len) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
}

/* The token's r||s as a DER ECDSA-Sig-Value in der[0..*len) (capacity *len), through
 * the conversion the CA key's signatures take (sigfmt.h); 0 when the answer is not
 * 2 * k->field bytes or does not convert. */
static int ecdsa_der(const p11_signkey *k, const uint8_t *rs, size_t rslen, uint8_t *der,
                     size_t *len)
{
    hsmca_err ignored; /* the caller names the failure: the token's signature is refused */
    return rslen == 2 * k->field &&
           sigfmt_ecdsa_raw_to_der(rs, rslen, der, len, &ignored) == HSMCA_OK;
}

/* A signature, verified before release: a faulty token must not put a bad
 * signature on the record. *unverified is set when the token signed but the
 * signature does not verify. */
static HSMCA_MUSTCHECK hsmca_code sign_verified(p11_signkey *k, const uint8_t *msg, size_t len,
                                                uint8_t *sig, size_t *siglen, int *unverified,
                                                hsmca_err *e)
{
    *unverified = 0;
    if (!k || !sig || !siglen || (!msg && len))
        return hsmca_fail(e, HSMCA_EINVAL, "audit key sign: no key, message or signature buffer");
    if (len > P11_SIGNKEY_MAX_MSG)
        return hsmca_fail(e, HSMCA_EINVAL, "audit key sign: message of %zu bytes, above %d", len,
                          P11_SIGNKEY_MAX_MSG);
    /* The longest DER ECDSA-Sig-Value: two INTEGERs of field + 1 bytes, headers of 2-3. */
    size_t need = k->ec ? 2 * k->field + 9 : P11_ED25519_SIG_LEN;
    if (*siglen < need)
        return hsmca_fail(e, HSMCA_EINVAL, "audit key sign: a %s signature needs %zu bytes, not %zu",
                          k->alg, need, *siglen);
    uint8_t digest[SHA256_DIGEST_LENGTH];
    sign_op o = {.mech = CKM_EDDSA, .msg = msg, .len = len};
    if (k->ec) {
        SHA256(len ? msg : (const uint8_t *)"", len, digest);
        o = (sign_op){.mech = CKM_ECDSA, .msg = digest, .len = sizeof(digest)};
    }
    HSMCA_GUARD(p11_pool_run(k->pool, sign_op_run, &o, "audit key sign: C_Sign", e));
    uint8_t out[P11_SIGNKEY_SIG_MAX];
    size_t outlen = sizeof(out);
    int shaped;
    if (k->ec) {
        shaped = ecdsa_der(k, o.sig, o.siglen, out, &outlen);
    } else {
        shaped = o.siglen == P11_ED25519_SIG_LEN;
        outlen = P11_ED25519_SIG_LEN;
        memcpy(out, o.sig, outlen);
    }
    if (!shaped || !sig_verify(k, msg, len, out, outlen)) {
        *unverified = 1;
        return hsmca_fail(e, HSMCA_EINTERNAL,
                          "audit key sign: the token's %s signature (%lu bytes) failed "
                          "verification",
                          k->alg, (unsigned long)o.siglen);
    }
    memcpy(sig, out, outlen);
    *siglen = outlen;
    return HSMCA_OK;
}

hsmca_code p11_signkey_sign_message(p11_signkey *k, const uint8_t *msg, size_t len, uint8_t *sig,
                                    size_t *siglen, hsmca_err *e)
{
    int unverified;
    return sign_verified(k, msg, len, sig, siglen, &unverified, e);
}

/* The algorithm, the public key's bytes (Ed25519: raw; ECDSA: DER SPKI) and the
 * SHA-256 of its DER SubjectPublicKeyInfo. */
static HSMCA_MUSTCHECK hsmca_code describe(p11_signkey *k, hsmca_err *e)
{
    unsigned char *der = NULL;
    int len = i2d_PUBKEY(k->pub, &der);
    if (len <= 0 || (size_t)len > sizeof(k->raw)) {
        OPENSSL_free(der);
        return hsmca_fail(e, HSMCA_EINTERNAL, "audit key: cannot encode the public key");
    }
    k->ec = EVP_PKEY_get_base_id(k->pub) == EVP_PKEY_EC;
    if (k->ec) {
        k->field = (size_t)(EVP_PKEY_get_bits(k->pub) + 7) / 8;
        k->alg = k->field == 48 ? "ecdsa-p384" : "ecdsa-p256";
        memcpy(k->raw, der, (size_t)len);
        k->raw_len = (size_t)len;
    } else {
        k->alg = "ed25519";
        k->raw_len = P11_ED25519_PUB_LEN;
        size_t n = k->raw_len;
        if (EVP_PKEY_get_raw_public_key(k->pub, k->raw, &n) != 1 || n != P11_ED25519_PUB_LEN) {
            OPENSSL_free(der);
            return hsmca_fail(e, HSMCA_EINTERNAL, "audit key: cannot read the raw public key");
        }
    }
    uint8_t md[SHA256_DIGEST_LENGTH];
    SHA256(der, (size_t)len, md);
    OPENSSL_free(der);
    util_hex(md, sizeof(md), k->fingerprint);
    return HSMCA_OK;
}

/* The public half we found must be the private key's: a signature over a
 * random message must verify. */
hsmca_code p11_signkey_self_test(p11_signkey *k, hsmca_err *e)
{
    uint8_t msg[32], sig[P11_SIGNKEY_SIG_MAX];
    size_t siglen = sizeof(sig);
    int unverified;
    util_random(msg, sizeof(msg));
    hsmca_code c = sign_verified(k, msg, sizeof(msg), sig, &siglen, &unverified, e);
    if (unverified)
        return hsmca_fail(e, HSMCA_EPERM,
                          "key check: the %s public key does not verify the private key's "
                          "signature",
                          k->alg);
    return c;
}

hsmca_code p11_signkey_open(p11_module *m, const char *key_uri, const char *user_pin,
                            p11_signkey **out, hsmca_err *e)
{
    *out = NULL;
    p11_signkey *k = calloc(1, sizeof(*k));
    if (!k)
        return hsmca_fail(e, HSMCA_ENOMEM, "audit key: out of memory");
    hsmca_code c =
        p11_pool_open_role(m, key_uri, user_pin, SIGNKEY_SESSIONS, P11_ROLE_AUDIT, &k->pool, e);
    if (c == HSMCA_OK && !(k->pub = p11_pool_public_key(k->pool)))
        c = hsmca_fail(e, HSMCA_EINTERNAL, "audit key: no public key");
    if (c == HSMCA_OK)
        c = describe(k, e);
    if (c == HSMCA_OK)
        c = p11_signkey_self_test(k, e);
    if (c != HSMCA_OK) {
        p11_signkey_close(k);
        return c;
    }
    *out = k;
    return HSMCA_OK;
}

void p11_signkey_close(p11_signkey *k)
{
    if (!k)
        return;
    p11_pool_close(k->pool); /* wipes its copy of the PIN */
    EVP_PKEY_free(k->pub);
    free(k);
}

EVP_PKEY *p11_signkey_public_key(p11_signkey *k)
{
    if (!k || !k->pub || EVP_PKEY_up_ref(k->pub) != 1)
        return NULL;
    return k->pub;
}

const uint8_t *p11_signkey_public_raw(const p11_signkey *k)
{
    return k->raw;
}

size_t p11_signkey_public_len(const p11_signkey *k)
{
    return k->raw_len;
}

const char *p11_signkey_alg(const p11_signkey *k)
{
    return k->alg;
}

const char *p11_signkey_fingerprint(const p11_signkey *k)
{
    return k->fingerprint;
}

hsmca_code p11_signkey_reinit_module(p11_signkey *k, hsmca_err *e)
{
    return p11_pool_reinit_module(k->pool, e);
}

p11_pool_state p11_signkey_get_state(p11_signkey *k)
{
    return p11_pool_get_state(k->pool);
}

void p11_signkey_figures_get(p11_signkey *k, p11_pool_figures *out)
{
    p11_pool_figures_get(k->pool, out);
}

p11_pool_state p11_signkey_probe(p11_signkey *k)
{
    return p11_pool_probe(k->pool);
}

/* p11_signkey.c - a second signing key in the token beside the CA key: an
 * Ed25519 key (the audit key) that signs whole messages with CKM_EDDSA.
 *
 * It rides on a session pool of its own (p11_pool_open_role), so it gets the
 * CA key's checks and the pool's CKR-driven recovery, but shares neither the
 * CA pool's sessions nor its lock. Everything here but the pool is fixed at
 * open, so any thread may call in. */
#include "p11_int.h"
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
    uint8_t raw[P11_ED25519_PUB_LEN];
    char fingerprint[2 * SHA256_DIGEST_LENGTH + 1];
};

typedef struct {
    const uint8_t *msg;
    size_t len;
    uint8_t sig[128]; /* room for a token that answers with more than 64 bytes */
    CK_ULONG siglen;
} eddsa_op;

static CK_RV eddsa_sign_op(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, void *arg)
{
    static const uint8_t nothing[1];
    eddsa_op *o = arg;
    /* CKM_EDDSA without parameters is pure Ed25519 (PKCS#11 3.0 §2.3.14): the
     * token hashes the whole message itself, so it goes in one C_Sign. */
    CK_MECHANISM mech = {CKM_EDDSA, NULL, 0};
    o->siglen = sizeof(o->sig);
    CK_RV rv = m->fl->C_SignInit(s, &mech, key);
    if (rv != CKR_OK)
        return rv;
    return m->fl->C_Sign(s, (CK_BYTE_PTR)(o->len ? o->msg : nothing), (CK_ULONG)o->len, o->sig,
                         &o->siglen);
}

static int ed25519_verify(EVP_PKEY *pub, const uint8_t *msg, size_t len,
                          const uint8_t sig[P11_ED25519_SIG_LEN])
{
    static const uint8_t nothing[1];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pub) == 1 &&
             EVP_DigestVerify(ctx, sig, P11_ED25519_SIG_LEN, len ? msg : nothing, len) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
}

/* A signature, verified before release: a faulty token must not put a bad
 * signature on the record. *unverified is set when the token signed but the
 * signature does not verify. */
static HSMCA_MUSTCHECK hsmca_code sign_verified(p11_signkey *k, const uint8_t *msg, size_t len,
                                                uint8_t sig[P11_ED25519_SIG_LEN], int *unverified,
                                                hsmca_err *e)
{
    *unverified = 0;
    if (!k || !sig || (!msg && len))
        return hsmca_fail(e, HSMCA_EINVAL, "Ed25519 sign: no key, message or signature buffer");
    if (len > P11_SIGNKEY_MAX_MSG)
        return hsmca_fail(e, HSMCA_EINVAL, "Ed25519 sign: message of %zu bytes, above %d", len,
                          P11_SIGNKEY_MAX_MSG);
    eddsa_op o = {.msg = msg, .len = len};
    HSMCA_GUARD(p11_pool_run(k->pool, eddsa_sign_op, &o, "Ed25519 sign: C_Sign", e));
    if (o.siglen != P11_ED25519_SIG_LEN || !ed25519_verify(k->pub, msg, len, o.sig)) {
        *unverified = 1;
        return hsmca_fail(e, HSMCA_EINTERNAL,
                          "Ed25519 sign: the token's signature (%lu bytes) failed verification",
                          (unsigned long)o.siglen);
    }
    memcpy(sig, o.sig, P11_ED25519_SIG_LEN);
    return HSMCA_OK;
}

hsmca_code p11_signkey_sign_message(p11_signkey *k, const uint8_t *msg, size_t len,
                                    uint8_t sig[P11_ED25519_SIG_LEN], hsmca_err *e)
{
    int unverified;
    return sign_verified(k, msg, len, sig, &unverified, e);
}

/* The raw key and the SHA-256 of its DER SubjectPublicKeyInfo. */
static HSMCA_MUSTCHECK hsmca_code describe(p11_signkey *k, hsmca_err *e)
{
    size_t n = sizeof(k->raw);
    if (EVP_PKEY_get_raw_public_key(k->pub, k->raw, &n) != 1 || n != sizeof(k->raw))
        return hsmca_fail(e, HSMCA_EINTERNAL, "Ed25519 key: cannot read the raw public key");
    unsigned char *der = NULL;
    int len = i2d_PUBKEY(k->pub, &der);
    if (len <= 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "Ed25519 key: cannot encode the public key");
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
    uint8_t msg[32], sig[P11_ED25519_SIG_LEN];
    int unverified;
    util_random(msg, sizeof(msg));
    hsmca_code c = sign_verified(k, msg, sizeof(msg), sig, &unverified, e);
    if (unverified)
        return hsmca_fail(e, HSMCA_EPERM,
                          "key check: the Ed25519 public key does not verify the private key's "
                          "signature");
    return c;
}

hsmca_code p11_signkey_open(p11_module *m, const char *key_uri, const char *user_pin,
                            p11_signkey **out, hsmca_err *e)
{
    *out = NULL;
    p11_signkey *k = calloc(1, sizeof(*k));
    if (!k)
        return hsmca_fail(e, HSMCA_ENOMEM, "Ed25519 key: out of memory");
    hsmca_code c =
        p11_pool_open_role(m, key_uri, user_pin, SIGNKEY_SESSIONS, P11_ROLE_ED25519, &k->pool, e);
    if (c == HSMCA_OK && !(k->pub = p11_pool_public_key(k->pool)))
        c = hsmca_fail(e, HSMCA_EINTERNAL, "Ed25519 key: no public key");
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

const char *p11_signkey_fingerprint(const p11_signkey *k)
{
    return k->fingerprint;
}

p11_pool_state p11_signkey_get_state(p11_signkey *k)
{
    return p11_pool_get_state(k->pool);
}

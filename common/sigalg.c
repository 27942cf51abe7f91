/* sigalg.c - see sigalg.h. */
#include "sigalg.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/ec.h>
#include <openssl/objects.h>
#include <openssl/rsa.h>

/* RFC 5758 §3.2: ECDSA algorithm identifiers carry no parameters. */
static const uint8_t ALG_ECDSA_SHA256[] = {0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86,
                                           0x48, 0xce, 0x3d, 0x04, 0x03, 0x02};
static const uint8_t ALG_ECDSA_SHA384[] = {0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86,
                                           0x48, 0xce, 0x3d, 0x04, 0x03, 0x03};
/* RFC 4055 §5: RSA PKCS#1 v1.5 carries explicit NULL parameters. */
static const uint8_t ALG_RSA_SHA256[] = {0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86,
                                         0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00};
/* RFC 8017 §9.2 note 1: CKM_RSA_PKCS signs what it is given, so the signer
 * builds the EMSA-PKCS1-v1_5 DigestInfo itself. */
static const uint8_t DIGEST_INFO_SHA256[] = {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60,
                                             0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02,
                                             0x01, 0x05, 0x00, 0x04, 0x20};

static const sigalg SIGALGS[] = {
    {"ecdsa-with-SHA256", NID_ecdsa_with_SHA256, EVP_PKEY_EC, NID_X9_62_prime256v1,
     ALG_ECDSA_SHA256, sizeof(ALG_ECDSA_SHA256), "SHA256", 32, NULL, 0, SIGALG_CKM_ECDSA},
    {"ecdsa-with-SHA384", NID_ecdsa_with_SHA384, EVP_PKEY_EC, NID_secp384r1, ALG_ECDSA_SHA384,
     sizeof(ALG_ECDSA_SHA384), "SHA384", 48, NULL, 0, SIGALG_CKM_ECDSA},
    {"sha256WithRSAEncryption", NID_sha256WithRSAEncryption, EVP_PKEY_RSA, NID_undef,
     ALG_RSA_SHA256, sizeof(ALG_RSA_SHA256), "SHA256", 32, DIGEST_INFO_SHA256,
     sizeof(DIGEST_INFO_SHA256), SIGALG_CKM_RSA_PKCS},
};
#define N_SIGALGS (sizeof(SIGALGS) / sizeof(SIGALGS[0]))

static int key_curve(const EVP_PKEY *key)
{
    char name[64];
    size_t n = 0;
    if (EVP_PKEY_get_utf8_string_param(key, "group", name, sizeof(name), &n) != 1)
        return NID_undef;
    return OBJ_sn2nid(name) != NID_undef ? OBJ_sn2nid(name) : OBJ_ln2nid(name);
}

const sigalg *sigalg_for_key(const EVP_PKEY *key)
{
    if (!key)
        return NULL;
    int type = EVP_PKEY_get_base_id(key);
    int curve = type == EVP_PKEY_EC ? key_curve(key) : NID_undef;
    for (size_t i = 0; i < N_SIGALGS; i++)
        if (SIGALGS[i].key_type == type && SIGALGS[i].curve_nid == curve)
            return &SIGALGS[i];
    return NULL;
}

const sigalg *sigalg_by_nid(int nid)
{
    for (size_t i = 0; i < N_SIGALGS; i++)
        if (SIGALGS[i].nid == nid)
            return &SIGALGS[i];
    return NULL;
}

/* Fetching a digest by name takes OpenSSL 3.0's global lock: once per process. */
static EVP_MD *sigalg_mds[N_SIGALGS];
static pthread_once_t sigalg_mds_once = PTHREAD_ONCE_INIT;

static void sigalg_fetch_mds(void)
{
    for (size_t i = 0; i < N_SIGALGS; i++)
        sigalg_mds[i] = EVP_MD_fetch(NULL, SIGALGS[i].digest, NULL);
}

static const EVP_MD *sigalg_md(const sigalg *alg)
{
    pthread_once(&sigalg_mds_once, sigalg_fetch_mds);
    size_t i = (size_t)(alg - SIGALGS);
    return i < N_SIGALGS ? sigalg_mds[i] : NULL;
}

int sigalg_digest(const sigalg *alg, const uint8_t *data, size_t len, uint8_t *out)
{
    const EVP_MD *md = alg ? sigalg_md(alg) : NULL;
    unsigned int n = 0;
    return md && EVP_Digest(data, len, out, &n, md, NULL) == 1 && n == alg->digest_len;
}

/* A verify context per thread for the last (algorithm, key) pair: the signer
 * verifies every signature before release with the same CA key, and setting a
 * context up (key management and signature fetches, their locks) cost about a
 * fifth of that check. The context holds a reference to the key, so the pair
 * cannot name a freed key that a new one reused the address of. */
typedef struct {
    const sigalg *alg;
    const EVP_PKEY *pub;
    EVP_PKEY_CTX *ctx;
} verify_ctx;

static pthread_key_t verify_key;
static pthread_once_t verify_key_once = PTHREAD_ONCE_INIT;
static __thread verify_ctx tl_verify; /* scanned as a root by leak checkers */

static void verify_ctx_drop(void *p)
{
    (void)p;
    EVP_PKEY_CTX_free(tl_verify.ctx);
    memset(&tl_verify, 0, sizeof(tl_verify));
}

/* The key only frees a thread's cached context when the thread ends. Its failure (no
 * more keys, no memory) is safe to drop: verification uses tl_verify either way, and a
 * thread that ends then leaves its one context unfreed. */
static void verify_key_make(void)
{
    (void)pthread_key_create(&verify_key, verify_ctx_drop);
}

static EVP_PKEY_CTX *verify_ctx_for(const sigalg *alg, EVP_PKEY *pub, const EVP_MD *md)
{
    if (tl_verify.ctx && tl_verify.alg == alg && tl_verify.pub == pub)
        return tl_verify.ctx;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pub, NULL);
    int ok = ctx && EVP_PKEY_verify_init(ctx) == 1 && EVP_PKEY_CTX_set_signature_md(ctx, md) == 1;
    if (ok && alg->key_type == EVP_PKEY_RSA)
        ok = EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1;
    if (!ok) {
        EVP_PKEY_CTX_free(ctx);
        return NULL;
    }
    EVP_PKEY_CTX_free(tl_verify.ctx);
    tl_verify = (verify_ctx){alg, pub, ctx};
    pthread_once(&verify_key_once, verify_key_make);
    /* Freed when the thread ends; a failure only leaves it to the process's end (above). */
    (void)pthread_setspecific(verify_key, &tl_verify);
    return ctx;
}

int sigalg_verify_digest(const sigalg *alg, EVP_PKEY *pub, const uint8_t *digest,
                         const uint8_t *sig, size_t sig_len)
{
    const EVP_MD *md = alg ? sigalg_md(alg) : NULL;
    if (!md || !pub)
        return 0;
    /* ECDSA and RSA PKCS#1 verification keep no state between calls on a context. */
    EVP_PKEY_CTX *ctx = verify_ctx_for(alg, pub, md);
    return ctx && EVP_PKEY_verify(ctx, sig, sig_len, digest, alg->digest_len) == 1;
}

void sigalg_key_type(const EVP_PKEY *k, char *out, size_t cap)
{
    char group[24];
    size_t glen = 0;
    int id = EVP_PKEY_get_base_id(k);
    if (id == EVP_PKEY_EC && EVP_PKEY_get_group_name(k, group, sizeof(group), &glen) == 1)
        snprintf(out, cap, "ec-%s", group);
    else if (id == EVP_PKEY_ED25519)
        snprintf(out, cap, "ed25519");
    else if (id == EVP_PKEY_RSA)
        snprintf(out, cap, "rsa-%d", EVP_PKEY_get_bits(k));
    else
        snprintf(out, cap, "type-%d", id);
}

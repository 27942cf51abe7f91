/* test_p11_eddsa.c - the audit key against a real SoftHSM2 token, Ed25519 and ECDSA:
 * generation and its attributes, p11_signkey's checks, signatures of several
 * lengths checked by OpenSSL alone, RFC 8032's vectors through the token (on
 * keys imported for the purpose: a generated key's signatures cannot be
 * predicted), and the pool's recovery shared with the CA key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <pkcs11.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p11.h"
#include "p11_tu.h"
#include "testutil.h"

#define URI(label) "pkcs11:token=" TU_TOKEN ";object=" label ";type=private"

static const uint8_t OID_ED25519[] = {0x06, 0x03, 0x2b, 0x65, 0x70};

static void unhex(const char *hex, uint8_t *out, size_t n)
{
    assert_int_equal(strlen(hex), 2 * n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(sscanf(hex + 2 * i, "%2hhx", &out[i]), 1);
}

static p11_signkey *open_ok(tu_p11_env *v, const char *uri)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    p11_signkey *k = NULL;
    if (p11_signkey_open(v->m, uri, TU_USER_PIN, &k, &e) != HSMCA_OK)
        fail_msg("open %s: %s", uri, e.msg);
    assert_non_null(k);
    return k;
}

static void open_fails(tu_p11_env *v, const char *uri, const char *pin, hsmca_code want,
                       const char *msg)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    p11_signkey *k = (p11_signkey *)1;
    hsmca_code c = p11_signkey_open(v->m, uri, pin, &k, &e);
    assert_null(k);
    if (c != want || !strstr(e.msg, msg))
        fail_msg("open %s: got %d '%s', want %d '%s'", uri, c, e.msg, want, msg);
}

/* OpenSSL's own verify, from the raw public key only. */
static int ossl_verify(const uint8_t pub[32], const uint8_t *msg, size_t len, const uint8_t *sig)
{
    EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    assert_non_null(pk);
    assert_non_null(ctx);
    int ok = EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pk) == 1 &&
             EVP_DigestVerify(ctx, sig, 64, msg, len) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pk);
    return ok;
}

/* The public half's CKA_EC_POINT, read from the token past our code. */
static void token_point(const char *label, uint8_t pub[32])
{
    CK_FUNCTION_LIST *fl = tu_p11_raw_fl();
    CK_SESSION_HANDLE s = tu_p11_raw_login(fl);
    uint8_t pt[64];
    CK_ATTRIBUTE a = {CKA_EC_POINT, pt, sizeof(pt)};
    assert_int_equal(
        fl->C_GetAttributeValue(s, tu_p11_raw_find(fl, s, CKO_PUBLIC_KEY, label), &a, 1), CKR_OK);
    assert_int_equal(a.ulValueLen, 34);
    assert_int_equal(pt[0], 0x04);
    assert_int_equal(pt[1], 0x20);
    memcpy(pub, pt + 2, 32);
    fl->C_CloseSession(s);
}

/* ---- generation ---- */

static void test_generate_attributes(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_gen(&v, "audit-key", P11_KEY_ED25519);
    hsmca_err e;
    assert_int_equal(p11_generate_key(v.m, TU_TOKEN, TU_USER_PIN, "audit-key", P11_KEY_ED25519, &e),
                     HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "'audit-key' already exists"));

    CK_FUNCTION_LIST *fl = tu_p11_raw_fl();
    CK_SESSION_HANDLE s = tu_p11_raw_login(fl);
    CK_OBJECT_HANDLE hk = tu_p11_raw_find(fl, s, CKO_PRIVATE_KEY, "audit-key");
    CK_OBJECT_HANDLE hp = tu_p11_raw_find(fl, s, CKO_PUBLIC_KEY, "audit-key");

    /* The private half: in the token, sensitive from birth, never extractable,
     * made there, and good for signing only. */
    CK_KEY_TYPE kt = 0;
    CK_BBOOL b[13];
    memset(b, 0xff, sizeof(b));
    uint8_t id[64], pid[64], params[64];
    CK_ATTRIBUTE a[] = {
        {CKA_TOKEN, &b[0], 1},
        {CKA_PRIVATE, &b[1], 1},
        {CKA_SENSITIVE, &b[2], 1},
        {CKA_ALWAYS_SENSITIVE, &b[3], 1},
        {CKA_LOCAL, &b[4], 1},
        {CKA_SIGN, &b[5], 1},
        {CKA_EXTRACTABLE, &b[6], 1},
        {CKA_NEVER_EXTRACTABLE, &b[7], 1},
        {CKA_DECRYPT, &b[8], 1},
        {CKA_UNWRAP, &b[9], 1},
        {CKA_DERIVE, &b[10], 1},
        {CKA_SIGN_RECOVER, &b[11], 1},
        {CKA_KEY_TYPE, &kt, sizeof(kt)},
        {CKA_ID, id, sizeof(id)},
        {CKA_EC_PARAMS, params, sizeof(params)},
    };
    assert_int_equal(fl->C_GetAttributeValue(s, hk, a, sizeof(a) / sizeof(a[0])), CKR_OK);
    assert_int_equal(kt, CKK_EC_EDWARDS);
    for (int i = 0; i < 6; i++)
        if (b[i] != CK_TRUE)
            fail_msg("private attribute %d is not TRUE", i);
    assert_int_equal(b[6], CK_FALSE); /* extractable */
    assert_int_equal(b[7], CK_TRUE);  /* never extractable */
    for (int i = 8; i < 12; i++)
        if (b[i] != CK_FALSE)
            fail_msg("private attribute %d (a use besides signing) is not FALSE", i);
    assert_int_equal(a[13].ulValueLen, 16);
    /* SoftHSM reports the curve by name on the private half. */
    assert_true(a[14].ulValueLen == 14 && !memcmp(params,
                                                  "\x13\x0c"
                                                  "edwards25519",
                                                  14));

    /* The public half: verify only, the OID we asked for, the same CKA_ID. */
    CK_ATTRIBUTE pa[] = {
        {CKA_VERIFY, &b[0], 1},     {CKA_ENCRYPT, &b[1], 1},
        {CKA_WRAP, &b[2], 1},       {CKA_VERIFY_RECOVER, &b[3], 1},
        {CKA_DERIVE, &b[4], 1},     {CKA_KEY_TYPE, &kt, sizeof(kt)},
        {CKA_ID, pid, sizeof(pid)}, {CKA_EC_PARAMS, params, sizeof(params)},
    };
    assert_int_equal(fl->C_GetAttributeValue(s, hp, pa, sizeof(pa) / sizeof(pa[0])), CKR_OK);
    assert_int_equal(b[0], CK_TRUE);
    for (int i = 1; i < 5; i++)
        if (b[i] != CK_FALSE)
            fail_msg("public attribute %d is not FALSE", i);
    assert_int_equal(kt, CKK_EC_EDWARDS);
    assert_int_equal(pa[6].ulValueLen, 16);
    assert_memory_equal(pid, id, 16);
    assert_int_equal(pa[7].ulValueLen, sizeof(OID_ED25519));
    assert_memory_equal(params, OID_ED25519, sizeof(OID_ED25519));
    /* A sensitive key does not give its value away. */
    CK_ATTRIBUTE val = {CKA_VALUE, NULL, 0};
    assert_int_equal(fl->C_GetAttributeValue(s, hk, &val, 1), CKR_ATTRIBUTE_SENSITIVE);
    fl->C_CloseSession(s);
    tu_p11_down(&v);
}

/* ---- signing ---- */

static void test_sign_lengths(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_gen(&v, "audit-key", P11_KEY_ED25519);
    p11_signkey *k = open_ok(&v, URI("audit-key"));
    uint8_t pub[32];
    token_point("audit-key", pub);
    assert_memory_equal(p11_signkey_public_raw(k), pub, 32);
    EVP_PKEY *pk = p11_signkey_public_key(k);
    assert_non_null(pk);
    assert_true(EVP_PKEY_is_a(pk, "ED25519"));
    EVP_PKEY_free(pk);

    /* The fingerprint: SHA-256 of the DER SubjectPublicKeyInfo (RFC 8410). */
    uint8_t spki[44] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
    memcpy(spki + 12, pub, 32);
    uint8_t md[32];
    char hex[65];
    SHA256(spki, sizeof(spki), md);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    assert_string_equal(p11_signkey_fingerprint(k), hex);

    static const size_t lens[] = {0, 1, 31, 32, 33, 64, 127, 128, 1000, 4096, P11_SIGNKEY_MAX_MSG};
    uint8_t *msg = malloc(P11_SIGNKEY_MAX_MSG + 1);
    assert_non_null(msg);
    assert_int_equal(RAND_bytes(msg, P11_SIGNKEY_MAX_MSG + 1), 1);
    hsmca_err e;
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        size_t n = lens[i];
        uint8_t sig[64];
        if (p11_signkey_sign_message(k, msg, n, sig, &(size_t){sizeof(sig)}, &e) != HSMCA_OK)
            fail_msg("sign %zu bytes: %s", n, e.msg);
        if (!ossl_verify(pub, msg, n, sig))
            fail_msg("a %zu-byte message's signature does not verify", n);
        /* And the check can fail: one more byte, a flipped bit, another signature. */
        assert_false(ossl_verify(pub, msg, n + 1, sig));
        if (n) {
            msg[n / 2] ^= 0x01;
            assert_false(ossl_verify(pub, msg, n, sig));
            msg[n / 2] ^= 0x01;
        }
        sig[63] ^= 0x10;
        assert_false(ossl_verify(pub, msg, n, sig));
    }
    uint8_t sig[64];
    assert_int_equal(p11_signkey_sign_message(k, NULL, 0, sig, &(size_t){sizeof(sig)}, &e), HSMCA_OK);
    assert_true(ossl_verify(pub, (const uint8_t *)"", 0, sig));
    assert_int_equal(p11_signkey_sign_message(k, msg, P11_SIGNKEY_MAX_MSG + 1, sig, &(size_t){sizeof(sig)}, &e),
                     HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "above 65536"));
    assert_int_equal(p11_signkey_sign_message(k, NULL, 1, sig, &(size_t){sizeof(sig)}, &e), HSMCA_EINVAL);
    assert_int_equal(p11_signkey_get_state(k), P11_POOL_READY);
    free(msg);
    p11_signkey_close(k);
    p11_signkey_close(NULL);
    tu_p11_down(&v);
}

/* A key imported with a known seed: sensitive and not extractable, so it
 * passes the checks, and its signatures are RFC 8032's. */
static void import_key(const char *label, const uint8_t seed[32], const uint8_t pub[32], uint8_t id)
{
    CK_FUNCTION_LIST *fl = tu_p11_raw_fl();
    CK_SESSION_HANDLE s = tu_p11_raw_login(fl);
    CK_OBJECT_CLASS priv_cls = CKO_PRIVATE_KEY, pub_cls = CKO_PUBLIC_KEY;
    CK_KEY_TYPE kt = CKK_EC_EDWARDS;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    uint8_t point[34] = {0x04, 0x20};
    memcpy(point + 2, pub, 32);
    CK_ULONG llen = strlen(label);
    CK_ATTRIBUTE pt[] = {
        {CKA_CLASS, &priv_cls, sizeof(priv_cls)},
        {CKA_KEY_TYPE, &kt, sizeof(kt)},
        {CKA_TOKEN, &yes, 1},
        {CKA_PRIVATE, &yes, 1},
        {CKA_SENSITIVE, &yes, 1},
        {CKA_EXTRACTABLE, &no, 1},
        {CKA_SIGN, &yes, 1},
        {CKA_EC_PARAMS, (void *)OID_ED25519, sizeof(OID_ED25519)},
        {CKA_VALUE, (void *)seed, 32},
        {CKA_LABEL, (void *)label, llen},
        {CKA_ID, &id, 1},
    };
    CK_ATTRIBUTE pu[] = {
        {CKA_CLASS, &pub_cls, sizeof(pub_cls)},
        {CKA_KEY_TYPE, &kt, sizeof(kt)},
        {CKA_TOKEN, &yes, 1},
        {CKA_VERIFY, &yes, 1},
        {CKA_EC_PARAMS, (void *)OID_ED25519, sizeof(OID_ED25519)},
        {CKA_EC_POINT, point, sizeof(point)},
        {CKA_LABEL, (void *)label, llen},
        {CKA_ID, &id, 1},
    };
    CK_OBJECT_HANDLE h;
    assert_int_equal(fl->C_CreateObject(s, pt, sizeof(pt) / sizeof(pt[0]), &h), CKR_OK);
    assert_int_equal(fl->C_CreateObject(s, pu, sizeof(pu) / sizeof(pu[0]), &h), CKR_OK);
    fl->C_CloseSession(s);
}

/* RFC 8032 §7.1, tests 1-3. */
static const struct {
    const char *seed, *pub, *msg, *sig;
} RFC8032[] = {
    {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b"
     "4"
     "6bd25bf5f0595bbe24655141438e7a100b"},
    {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11"
     "d"
     "8c387b2eaeb4302aeeb00d291612bb0c00"},
    {"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc"
     "6"
     "594a7c15e9716ed28dc027beceea1ec40a"},
};

static void test_rfc8032_and_openssl(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    hsmca_err e;
    for (size_t i = 0; i < sizeof(RFC8032) / sizeof(RFC8032[0]); i++) {
        uint8_t seed[32], pub[32], msg[2], want[64], sig[64];
        size_t mlen = strlen(RFC8032[i].msg) / 2;
        char label[16], uri[128];
        unhex(RFC8032[i].seed, seed, 32);
        unhex(RFC8032[i].pub, pub, 32);
        unhex(RFC8032[i].msg, msg, mlen);
        unhex(RFC8032[i].sig, want, 64);
        snprintf(label, sizeof(label), "rfc8032-%zu", i + 1);
        snprintf(uri, sizeof(uri), "pkcs11:token=%s;object=%s", TU_TOKEN, label);
        import_key(label, seed, pub, (uint8_t)(0x80 + i));
        p11_signkey *k = open_ok(&v, uri);
        assert_memory_equal(p11_signkey_public_raw(k), pub, 32);
        if (p11_signkey_sign_message(k, mlen ? msg : NULL, mlen, sig, &(size_t){sizeof(sig)}, &e) != HSMCA_OK)
            fail_msg("%s: %s", label, e.msg);
        assert_memory_equal(sig, want, 64); /* Ed25519 is deterministic */
        assert_true(ossl_verify(pub, msg, mlen, want));

        /* Beyond the vectors: OpenSSL's own signature with the same seed over
         * a longer message is the token's, byte for byte. */
        uint8_t big[1500], osig[64];
        size_t olen = sizeof(osig);
        assert_int_equal(RAND_bytes(big, sizeof(big)), 1);
        EVP_PKEY *sk = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, 32);
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        assert_true(sk && ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, sk) == 1 &&
                    EVP_DigestSign(ctx, osig, &olen, big, sizeof(big)) == 1 && olen == 64);
        EVP_MD_CTX_free(ctx);
        EVP_PKEY_free(sk);
        assert_int_equal(p11_signkey_sign_message(k, big, sizeof(big), sig, &(size_t){sizeof(sig)}, &e), HSMCA_OK);
        assert_memory_equal(sig, osig, 64);
        p11_signkey_close(k);
    }
    tu_p11_down(&v);
}

/* ---- the checks ---- */

/* OpenSSL's own ECDSA verify over SHA-256(msg), from the DER SPKI only. */
static int ossl_ec_verify(const uint8_t *spki, size_t spki_len, const uint8_t *msg, size_t len,
                          const uint8_t *sig, size_t siglen)
{
    const unsigned char *p = spki;
    EVP_PKEY *pk = d2i_PUBKEY(NULL, &p, (long)spki_len);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = pk && ctx && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pk) == 1 &&
             EVP_DigestVerify(ctx, sig, siglen, len ? msg : (const uint8_t *)"", len) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pk);
    return ok;
}

/* The audit key on a token without EdDSA: EC P-256 (made by p11_generate_key, as `hsmca dev
 * --audit-key ec-p256` makes it) and P-384, CKM_ECDSA over SHA-256 whatever the curve, each
 * signature a DER ECDSA-Sig-Value that OpenSSL verifies from the SPKI alone. */
static void test_ecdsa_key(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_gen(&v, "ec-audit", P11_KEY_EC_P256);
    tu_p11_raw_gen("ec384-audit", CK_TRUE, CK_FALSE, CK_TRUE, "ec-p384");
    static const struct {
        const char *label, *alg;
        size_t spki_len;
    } keys[] = {{"ec-audit", "ecdsa-p256", 91}, {"ec384-audit", "ecdsa-p384", 120}};
    for (size_t i = 0; i < 2; i++) {
        char uri[128];
        snprintf(uri, sizeof(uri), "pkcs11:token=%s;object=%s;type=private", TU_TOKEN,
                 keys[i].label);
        p11_signkey *k = open_ok(&v, uri);
        assert_string_equal(p11_signkey_alg(k), keys[i].alg);
        const uint8_t *spki = p11_signkey_public_raw(k);
        size_t spki_len = p11_signkey_public_len(k);
        assert_int_equal(spki_len, keys[i].spki_len);
        uint8_t md[SHA256_DIGEST_LENGTH];
        char hex[2 * SHA256_DIGEST_LENGTH + 1];
        SHA256(spki, spki_len, md);
        for (size_t j = 0; j < sizeof(md); j++)
            snprintf(hex + 2 * j, 3, "%02x", md[j]);
        assert_string_equal(p11_signkey_fingerprint(k), hex);
        static const size_t lens[] = {0, 1, 100, 4096};
        uint8_t msg[4097];
        assert_int_equal(RAND_bytes(msg, sizeof(msg)), 1);
        hsmca_err e;
        for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
            uint8_t sig[P11_SIGNKEY_SIG_MAX];
            size_t siglen = sizeof(sig);
            if (p11_signkey_sign_message(k, lens[j] ? msg : NULL, lens[j], sig, &siglen, &e) !=
                HSMCA_OK)
                fail_msg("%s: sign %zu bytes: %s", keys[i].label, lens[j], e.msg);
            assert_int_equal(sig[0], 0x30); /* DER, not the token's r||s */
            assert_true(ossl_ec_verify(spki, spki_len, msg, lens[j], sig, siglen));
            assert_false(ossl_ec_verify(spki, spki_len, msg, lens[j] + 1, sig, siglen));
            sig[siglen - 1] ^= 0x01;
            assert_false(ossl_ec_verify(spki, spki_len, msg, lens[j], sig, siglen));
        }
        uint8_t small[16];
        size_t smallen = sizeof(small);
        assert_int_equal(p11_signkey_sign_message(k, msg, 10, small, &smallen, &e),
                         HSMCA_EINVAL); /* no room: refused before the token signs */
        p11_signkey_close(k);
    }
    tu_p11_down(&v);
}

/* An EC audit key is held to the same checks as any other, and to P-256 or P-384. */
static void test_ecdsa_refusals(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_raw_gen("ec-extractable", CK_TRUE, CK_TRUE, CK_TRUE, "ec-p256");
    tu_p11_raw_gen("ec-not-sensitive", CK_FALSE, CK_FALSE, CK_TRUE, "ec-p256");
    tu_p11_raw_gen("ec-no-sign", CK_TRUE, CK_FALSE, CK_FALSE, "ec-p256");
    tu_p11_raw_gen("ec-p224", CK_TRUE, CK_FALSE, CK_TRUE, "ec-p224");
    open_fails(&v, URI("ec-extractable"), TU_USER_PIN, HSMCA_EPERM,
               "key check (ec-extractable): CKA_EXTRACTABLE is TRUE");
    open_fails(&v, URI("ec-not-sensitive"), TU_USER_PIN, HSMCA_EPERM,
               "key check (ec-not-sensitive): CKA_SENSITIVE is FALSE");
    open_fails(&v, URI("ec-no-sign"), TU_USER_PIN, HSMCA_EPERM,
               "key check (ec-no-sign): CKA_SIGN is FALSE");
    open_fails(&v, URI("ec-p224"), TU_USER_PIN, HSMCA_EPERM,
               "key check (ec-p224): curve is not P-256 or P-384");
    tu_p11_down(&v);
}

static void test_refusals(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_raw_gen("ed-extractable", CK_TRUE, CK_TRUE, CK_TRUE, "ed25519");
    tu_p11_raw_gen("ed-not-sensitive", CK_FALSE, CK_FALSE, CK_TRUE, "ed25519");
    tu_p11_raw_gen("ed-no-sign", CK_TRUE, CK_FALSE, CK_FALSE, "ed25519");
    tu_p11_raw_gen("ed448", CK_TRUE, CK_FALSE, CK_TRUE, "ed448");
    tu_p11_gen(&v, "ca-key", P11_KEY_EC_P256);
    tu_p11_gen(&v, "rsa-key", P11_KEY_RSA_2048);
    tu_p11_gen(&v, "audit-key", P11_KEY_ED25519);

    open_fails(&v, URI("ed-extractable"), TU_USER_PIN, HSMCA_EPERM,
               "key check (ed-extractable): CKA_EXTRACTABLE is TRUE");
    open_fails(&v, URI("ed-not-sensitive"), TU_USER_PIN, HSMCA_EPERM,
               "key check (ed-not-sensitive): CKA_SENSITIVE is FALSE");
    open_fails(&v, URI("ed-no-sign"), TU_USER_PIN, HSMCA_EPERM,
               "key check (ed-no-sign): CKA_SIGN is FALSE");
    open_fails(&v, URI("rsa-key"), TU_USER_PIN, HSMCA_EPERM,
               "key check (rsa-key): CKA_KEY_TYPE is CKK_RSA, not CKK_EC_EDWARDS (Ed25519) or "
               "CKK_EC (P-256, P-384)");
    open_fails(&v, URI("ed448"), TU_USER_PIN, HSMCA_EPERM,
               "key check (ed448): curve is not edwards25519");
    open_fails(&v, URI("missing"), TU_USER_PIN, HSMCA_ENOTFOUND,
               "private key 'missing' not found in token '" TU_TOKEN "'");
    open_fails(&v, "pkcs11:token=nope;object=audit-key", TU_USER_PIN, HSMCA_EUNAVAIL,
               "token 'nope' not found");
    open_fails(&v, "pkcs11:object=audit-key", TU_USER_PIN, HSMCA_EINVAL, "no token given");
    open_fails(&v, URI("audit-key"), "wrong-pin", HSMCA_EAUTH, "CKR_PIN_INCORRECT");

    /* A public half that is not the private key's: the self-test catches it. */
    uint8_t seed[32], other[32];
    unhex(RFC8032[0].seed, seed, 32);
    unhex(RFC8032[1].pub, other, 32);
    import_key("mismatched", seed, other, 0x42);
    open_fails(&v, URI("mismatched"), TU_USER_PIN, HSMCA_EPERM,
               "public key does not verify the private key's signature");

    /* And the other way round: the audit key is no CA key. */
    hsmca_err e;
    p11_pool *p = (p11_pool *)1;
    assert_int_equal(p11_pool_open(v.m, URI("audit-key"), TU_USER_PIN, 1, &p, &e), HSMCA_EPERM);
    assert_null(p);
    assert_non_null(strstr(e.msg, "key check (audit-key): CKA_KEY_TYPE is not EC or RSA"));

    /* The good one still opens after all that. */
    p11_signkey_close(open_ok(&v, URI("audit-key")));
    tu_p11_down(&v);
}

/* ---- beside the CA key's pool ---- */

typedef struct {
    p11_signkey *k;
    p11_pool *p; /* NULL: sign with k */
} signer_arg;

static void *sign_thread(void *arg)
{
    signer_arg *a = arg;
    const uint8_t *pub = a->k ? p11_signkey_public_raw(a->k) : NULL;
    long bad = 0;
    for (int i = 0; i < 30; i++) {
        hsmca_err e;
        if (a->p) {
            bad += tu_pool_sign_check(a->p, &e) != HSMCA_OK;
            continue;
        }
        uint8_t msg[100], sig[64];
        RAND_bytes(msg, sizeof(msg));
        bad += p11_signkey_sign_message(a->k, msg, (size_t)i, sig, &(size_t){sizeof(sig)}, &e) != HSMCA_OK ||
               !ossl_verify(pub, msg, (size_t)i, sig);
    }
    return (void *)bad;
}

static void test_beside_ca_pool(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_gen(&v, "ca-key", P11_KEY_EC_P256);
    tu_p11_gen(&v, "audit-key", P11_KEY_ED25519);
    hsmca_err e;
    p11_pool *p = NULL;
    assert_int_equal(p11_pool_open(v.m, URI("ca-key"), TU_USER_PIN, 2, &p, &e), HSMCA_OK);
    p11_signkey *k = open_ok(&v, URI("audit-key"));
    /* Three threads on the audit key's one session, two on the CA pool. */
    signer_arg args[5] = {{k, NULL}, {k, NULL}, {k, NULL}, {NULL, p}, {NULL, p}};
    pthread_t th[5];
    for (int i = 0; i < 5; i++)
        assert_int_equal(pthread_create(&th[i], NULL, sign_thread, &args[i]), 0);
    for (int i = 0; i < 5; i++) {
        void *bad;
        pthread_join(th[i], &bad);
        assert_int_equal((long)bad, 0);
    }

    /* Behind both keys' backs every session of the application goes, and the
     * login with them: each recovers within its next request (the dead
     * session evicted, the key's sessions rebuilt, the request retried once). */
    CK_FUNCTION_LIST *fl = tu_p11_raw_fl();
    assert_int_equal(fl->C_CloseAllSessions(tu_p11_raw_slot(fl)), CKR_OK);
    uint8_t sig[64];
    if (p11_signkey_sign_message(k, (const uint8_t *)"after", 5, sig, &(size_t){sizeof(sig)}, &e) != HSMCA_OK)
        fail_msg("audit key after losing its session: %s", e.msg);
    assert_true(ossl_verify(p11_signkey_public_raw(k), (const uint8_t *)"after", 5, sig));
    if (tu_pool_sign_check(p, &e) != HSMCA_OK)
        fail_msg("CA pool after losing its sessions: %s", e.msg);
    assert_int_equal(p11_signkey_get_state(k), P11_POOL_READY);
    p11_signkey_close(k);
    /* Closing the audit key leaves the CA pool's login alone. */
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);
    p11_pool_close(p);
    tu_p11_down(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_attributes), cmocka_unit_test(test_sign_lengths),
        cmocka_unit_test(test_rfc8032_and_openssl), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_beside_ca_pool), cmocka_unit_test(test_ecdsa_key),
        cmocka_unit_test(test_ecdsa_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_audit_note_ec.c - the signed-note ECDSA type (0x02) of audit/audit_note.h: key IDs
 * and vkeys built from the bytes the spec names (computed here with OpenSSL's SHA-256, not
 * with the library), notes signed by a software P-256 or P-384 key in the shape the signer
 * makes of the token's CKM_ECDSA (DER over SHA-256 of the text), verified both ways; a
 * tampered text or signature, and a key of the other type, refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "audit_note.h"
#include "audit_tu.h"
#include "util.h"

#define NAME "ca.example/audit"
#define BODY "ca.example/audit\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"

/* A P-256 vkey made by Python's `cryptography` (the private scalar 0x1234567890abcdef
 * 1234567890abcdef; key ID = hashlib.sha256(spki).digest()[:4]), not by this library. */
#define PY_VKEY                                                                                    \
    "hsmca.fuzz/audit-log+d3949091+AjBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABPnr5GQUfMEC2SMk0JnZJ8GlDkLV" \
    "egihFv/sCimBnYxlcLr30SiIkCpqDB1nrdEDEjyFmrab+OlDHJOEkw1Lfu4="

typedef struct {
    EVP_PKEY *key;
    uint8_t spki[AUDIT_KEY_MAX];
    size_t spki_len;
    audit_vkey vk;
} ec_fx;

static void ec_fx_new(ec_fx *f, const char *curve)
{
    f->key = atu_ec_key(curve, f->spki, &f->spki_len);
    hsmca_err e;
    if (audit_vkey_from_spki(NAME, f->spki, f->spki_len, &f->vk, &e) != HSMCA_OK)
        fail_msg("vkey: %s", e.msg);
}

static void expect_refused(hsmca_code rc, hsmca_code want, const hsmca_err *e, const char *rule)
{
    assert_int_equal(rc, want);
    if (!strstr(e->msg, rule))
        fail_msg("message \"%s\" does not name \"%s\"", e->msg, rule);
}

static char *sign_body(const ec_fx *f, const char *text)
{
    char *note;
    size_t n;
    hsmca_err e;
    if (audit_note_sign(text, strlen(text), &f->vk, atu_ecdsa_sign, f->key, &note, &n, &e) !=
        HSMCA_OK)
        fail_msg("sign: %s", e.msg);
    assert_int_equal(n, strlen(note));
    return note;
}

static hsmca_code verify(const char *note, const audit_vkey *k, hsmca_err *e)
{
    size_t tlen;
    hsmca_err_clear(e);
    return audit_note_verify(note, strlen(note), k, &tlen, e);
}

/* The vkey is NAME "+" hex8(SHA-256(SPKI)[:4]) "+" base64(0x02 || SPKI): neither the name
 * nor the type byte in the key ID (the spec's words for type 0x02). */
static void test_vkey_bytes(void **state)
{
    (void)state;
    static const char *curves[] = {"P-256", "P-384"};
    for (size_t i = 0; i < 2; i++) {
        ec_fx f;
        ec_fx_new(&f, curves[i]);
        assert_int_equal(f.spki_len, i == 0 ? 91 : 120);
        uint8_t h[SHA256_DIGEST_LENGTH], raw[1 + AUDIT_KEY_MAX] = {0x02};
        SHA256(f.spki, f.spki_len, h);
        memcpy(raw + 1, f.spki, f.spki_len);
        char *b64 = util_b64_encode(raw, 1 + f.spki_len), want[AUDIT_VKEY_MAX + 1];
        snprintf(want, sizeof(want), "%s+%02x%02x%02x%02x+%s", NAME, h[0], h[1], h[2], h[3], b64);
        free(b64);
        assert_int_equal(f.vk.type, AUDIT_SIG_TYPE_ECDSA);
        assert_int_equal(f.vk.id, (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
                                      (uint32_t)h[2] << 8 | h[3]);
        char *s;
        assert_int_equal(audit_vkey_format(&f.vk, &s, NULL), HSMCA_OK);
        assert_string_equal(s, want);
        audit_vkey k;
        assert_int_equal(audit_vkey_parse(s, strlen(s), &k, NULL), HSMCA_OK);
        assert_int_equal(k.type, AUDIT_SIG_TYPE_ECDSA);
        assert_int_equal(k.id, f.vk.id);
        assert_int_equal(k.pub_len, f.spki_len);
        assert_memory_equal(k.pub, f.spki, f.spki_len);
        assert_string_equal(k.name, NAME);
        /* The same key under another name keeps its ID. */
        audit_vkey other;
        assert_int_equal(audit_vkey_from_spki("other.example/log", f.spki, f.spki_len, &other, NULL),
                         HSMCA_OK);
        assert_int_equal(other.id, f.vk.id);
        free(s);
        EVP_PKEY_free(f.key);
    }
}

static void test_vkey_from_python(void **state)
{
    (void)state;
    audit_vkey k;
    hsmca_err e;
    if (audit_vkey_parse(PY_VKEY, strlen(PY_VKEY), &k, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(k.type, AUDIT_SIG_TYPE_ECDSA);
    assert_int_equal(k.id, 0xd3949091u);
    assert_int_equal(k.pub_len, 91);
    assert_string_equal(k.name, "hsmca.fuzz/audit-log");
    char *s;
    assert_int_equal(audit_vkey_format(&k, &s, NULL), HSMCA_OK);
    assert_string_equal(s, PY_VKEY);
    free(s);
}

/* A vkey string from name, id and type || key bytes. */
static void vkey_str(char *out, size_t cap, uint32_t id, uint8_t type, const uint8_t *key,
                     size_t len)
{
    uint8_t raw[1 + 256] = {type};
    memcpy(raw + 1, key, len);
    char *b64 = util_b64_encode(raw, 1 + len);
    assert_non_null(b64);
    snprintf(out, cap, "%s+%08x+%s", NAME, id, b64);
    free(b64);
}

static uint32_t spki_id(const uint8_t *spki, size_t len)
{
    uint8_t h[SHA256_DIGEST_LENGTH];
    SHA256(spki, len, h);
    return (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
}

/* 0x02 takes only the DER SPKI of a P-256 or P-384 key whose ID is SHA-256(SPKI)[:4]. */
static void test_vkey_refusals(void **state)
{
    (void)state;
    ec_fx f;
    ec_fx_new(&f, "P-256");
    char s[AUDIT_VKEY_MAX * 2];
    audit_vkey k;
    hsmca_err e;
    /* The Ed25519 rule's ID (name, newline and type hashed) is not this type's. */
    uint8_t h[SHA256_DIGEST_LENGTH];
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int hl;
    assert_true(md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
                EVP_DigestUpdate(md, NAME "\n\x02", strlen(NAME) + 2) == 1 &&
                EVP_DigestUpdate(md, f.spki, f.spki_len) == 1 &&
                EVP_DigestFinal_ex(md, h, &hl) == 1);
    EVP_MD_CTX_free(md);
    uint32_t wrong = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    vkey_str(s, sizeof(s), wrong, 0x02, f.spki, f.spki_len);
    expect_refused(audit_vkey_parse(s, strlen(s), &k, &e), HSMCA_EINVAL, &e, "does not match");
    /* Trailing bytes after the SPKI. */
    uint8_t longer[AUDIT_KEY_MAX];
    memcpy(longer, f.spki, f.spki_len);
    longer[f.spki_len] = 0;
    vkey_str(s, sizeof(s), spki_id(longer, f.spki_len + 1), 0x02, longer, f.spki_len + 1);
    expect_refused(audit_vkey_parse(s, strlen(s), &k, &e), HSMCA_EINVAL, &e, "P-256 or P-384");
    /* An Ed25519 SPKI, a P-224 key, a compressed point: not this type's keys. */
    EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    EVP_PKEY *p224 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-224");
    assert_non_null(ed);
    assert_non_null(p224);
    EVP_PKEY *keys[] = {ed, p224};
    for (size_t i = 0; i < 2; i++) {
        unsigned char *der = NULL;
        int n = i2d_PUBKEY(keys[i], &der);
        assert_true(n > 0);
        vkey_str(s, sizeof(s), spki_id(der, (size_t)n), 0x02, der, (size_t)n);
        expect_refused(audit_vkey_parse(s, strlen(s), &k, &e), HSMCA_EINVAL, &e,
                       "P-256 or P-384");
        expect_refused(audit_vkey_from_spki(NAME, der, (size_t)n, &k, &e), HSMCA_EINVAL, &e,
                       "P-256 or P-384");
        OPENSSL_free(der);
        EVP_PKEY_free(keys[i]);
    }
    assert_int_equal(EVP_PKEY_set_utf8_string_param(f.key, "point-format", "compressed"), 1);
    unsigned char *der = NULL;
    int n = i2d_PUBKEY(f.key, &der);
    assert_true(n > 0 && (size_t)n < f.spki_len);
    vkey_str(s, sizeof(s), spki_id(der, (size_t)n), 0x02, der, (size_t)n);
    expect_refused(audit_vkey_parse(s, strlen(s), &k, &e), HSMCA_EINVAL, &e, "P-256 or P-384");
    OPENSSL_free(der);
    /* An unknown type byte. */
    vkey_str(s, sizeof(s), spki_id(f.spki, f.spki_len), 0x03, f.spki, f.spki_len);
    expect_refused(audit_vkey_parse(s, strlen(s), &k, &e), HSMCA_EINVAL, &e, "0x02 and an ECDSA");
    EVP_PKEY_free(f.key);
}

/* Signed and verified here, and the signature line is keyID || DER ECDSA over SHA-256 of
 * the text, which OpenSSL checks from the SPKI alone. */
static void test_sign_verify(void **state)
{
    (void)state;
    static const char *curves[] = {"P-256", "P-384"};
    for (size_t i = 0; i < 2; i++) {
        ec_fx f;
        ec_fx_new(&f, curves[i]);
        char *note = sign_body(&f, BODY);
        hsmca_err e;
        assert_int_equal(verify(note, &f.vk, &e), HSMCA_OK);
        audit_checkpoint c;
        assert_int_equal(audit_checkpoint_open(note, strlen(note), &f.vk, &c, &e), HSMCA_OK);
        assert_int_equal(c.size, 3);
        /* Take the line apart by hand. */
        const char *line = note + strlen(BODY) + 1;
        assert_memory_equal(line, "\xe2\x80\x94 " NAME " ", 4 + strlen(NAME) + 1);
        const char *b64 = line + 4 + strlen(NAME) + 1;
        size_t rawlen;
        uint8_t *raw = util_b64_decode(b64, strlen(b64) - 1, &rawlen);
        assert_non_null(raw);
        assert_int_equal(spki_id(f.spki, f.spki_len),
                         (uint32_t)raw[0] << 24 | (uint32_t)raw[1] << 16 |
                             (uint32_t)raw[2] << 8 | raw[3]);
        assert_int_equal(raw[4], 0x30);
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        assert_true(md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, f.key) == 1 &&
                    EVP_DigestVerify(md, raw + 4, rawlen - 4, (const uint8_t *)BODY,
                                     strlen(BODY)) == 1);
        EVP_MD_CTX_free(md);
        free(raw);
        free(note);
        EVP_PKEY_free(f.key);
    }
}

/* Tampering with the text or the signature fails the note; so does a signature of the
 * other key type under a key ID made to match. */
static void test_tamper_and_type(void **state)
{
    (void)state;
    ec_fx f;
    ec_fx_new(&f, "P-256");
    char *note = sign_body(&f, BODY);
    hsmca_err e;
    char *t = strdup(note);
    t[strlen(NAME) + 1] = '4'; /* size 3 -> 4 */
    expect_refused(verify(t, &f.vk, &e), HSMCA_EPERM, &e, "does not verify");
    free(t);
    /* One bit of the DER signature: re-encoded so that only the signature changes. */
    const char *b64 = note + strlen(BODY) + 1 + 4 + strlen(NAME) + 1;
    size_t rawlen;
    uint8_t *raw = util_b64_decode(b64, strlen(b64) - 1, &rawlen);
    assert_non_null(raw);
    raw[rawlen - 1] ^= 0x01;
    char *bad = util_b64_encode(raw, rawlen), buf[1024];
    snprintf(buf, sizeof(buf), "%s\n\xe2\x80\x94 %s %s\n", BODY, NAME, bad);
    free(bad);
    expect_refused(verify(buf, &f.vk, &e), HSMCA_EPERM, &e, "does not verify");
    /* An Ed25519 signature of the text carrying the ECDSA key's ID: checked as ECDSA, refused. */
    uint8_t pub[32], edsig[AUDIT_SIG_MAX];
    size_t edlen = sizeof(edsig);
    EVP_PKEY *ed = atu_ed25519_key(pub);
    assert_int_equal(atu_ed25519_sign(ed, (const uint8_t *)BODY, strlen(BODY), edsig, &edlen, NULL),
                     HSMCA_OK);
    memcpy(raw + 4, edsig, edlen);
    bad = util_b64_encode(raw, 4 + edlen);
    snprintf(buf, sizeof(buf), "%s\n\xe2\x80\x94 %s %s\n", BODY, NAME, bad);
    free(bad);
    expect_refused(verify(buf, &f.vk, &e), HSMCA_EPERM, &e, "does not verify");
    /* The ECDSA note under an Ed25519 vkey of the same name: not its key, so no signature. */
    audit_vkey edvk;
    assert_int_equal(audit_vkey_from_pub(NAME, pub, &edvk, NULL), HSMCA_OK);
    expect_refused(verify(note, &edvk, &e), HSMCA_EPERM, &e, "no signature by");
    /* And the ECDSA signature never assembles under the Ed25519 key, nor the reverse. */
    char *out;
    size_t n;
    expect_refused(audit_note_assemble(BODY, strlen(BODY), &edvk, raw + 4, rawlen - 4, &out, &n, &e),
                   HSMCA_EPERM, &e, "does not verify");
    expect_refused(audit_note_assemble(BODY, strlen(BODY), &f.vk, edsig, edlen, &out, &n, &e),
                   HSMCA_EPERM, &e, "does not verify");
    /* A signer for the wrong type under the ECDSA key: refused before a note exists. */
    expect_refused(audit_note_sign(BODY, strlen(BODY), &f.vk, atu_ed25519_sign, ed, &out, &n, &e),
                   HSMCA_EPERM, &e, "does not verify");
    free(raw);
    free(note);
    EVP_PKEY_free(ed);
    EVP_PKEY_free(f.key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vkey_bytes),
        cmocka_unit_test(test_vkey_from_python),
        cmocka_unit_test(test_vkey_refusals),
        cmocka_unit_test(test_sign_verify),
        cmocka_unit_test(test_tamper_and_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

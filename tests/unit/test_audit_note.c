/* test_audit_note.c - C2SP signed-note and tlog-checkpoint (audit/audit_note.h): key IDs
 * and vkeys, checkpoint bodies, note assembly around a signature made elsewhere, strict
 * parsing (each refusal names its rule) and verification. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_note.h"
#include "audit_tu.h"
#include "util.h"

/* Test data from golang.org/x/mod/sumdb/note (note.go's package doc and note_test.go): a
 * signer key (0x01 ‖ Ed25519 seed), its vkey, a text and the note Go signs from them. */
#define PN_SKEY_B64 "AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
#define PN_VKEY "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
#define PN_TEXT                                                                                    \
    "If you think cryptography is the answer to your problem,\n"                                   \
    "then you don't know what your problem is.\n"
#define PN_NOTE                                                                                    \
    PN_TEXT "\n"                                                                                   \
            "\xe2\x80\x94 PeterNeumann "                                                           \
            "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6"   \
            "RyyBwJnAM=\n"

static EVP_PKEY *g_pn, *g_key;
static audit_vkey g_pn_vk, g_vk;

static int setup(void **state)
{
    size_t n;
    uint8_t *sk = util_b64_decode(PN_SKEY_B64, strlen(PN_SKEY_B64), &n), pub[32];
    if (!sk || n != 33)
        return -1;
    g_pn = atu_ed25519_from_seed(sk + 1, pub);
    free(sk);
    if (audit_vkey_from_pub("PeterNeumann", pub, &g_pn_vk, NULL) != HSMCA_OK)
        return -1;
    g_key = atu_ed25519_key(pub);
    return audit_vkey_from_pub("ca.example/audit", pub, &g_vk, NULL) == HSMCA_OK ? 0 : -1;
}

static int teardown(void **state)
{
    EVP_PKEY_free(g_pn);
    EVP_PKEY_free(g_key);
    return 0;
}

static void expect_refused(hsmca_code rc, hsmca_code want, const hsmca_err *e, const char *rule)
{
    assert_int_equal(rc, want);
    if (!strstr(e->msg, rule))
        fail_msg("message \"%s\" does not name \"%s\"", e->msg, rule);
}

/* ---- keys ------------------------------------------------------------------------------ */

static void test_vkey_matches_go(void **state)
{
    char *s;
    assert_int_equal(g_pn_vk.id, 0xc74f20a3);
    assert_int_equal(audit_vkey_format(&g_pn_vk, &s, NULL), HSMCA_OK);
    assert_string_equal(s, PN_VKEY);
    audit_vkey k;
    assert_int_equal(audit_vkey_parse(s, strlen(s), &k, NULL), HSMCA_OK);
    assert_memory_equal(&k, &g_pn_vk, sizeof(k));
    free(s);
}

static void test_vkey_refusals(void **state)
{
    static const struct {
        const char *s, *rule;
    } bad[] = {
        {"PeterNeumann", "name+keyid+key"},
        {"+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "1-255 bytes"},
        {"Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "no spaces"},
        {"PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "lowercase hex"},
        {"PeterNeumann+c74f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "8 hex digits"},
        {"PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "does not match"},
        {"PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW\n", "base64"},
        {"PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T", "base64"},
        {"PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "0x01 and a 32"},
        {"PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
         "base64"}, /* Go: a 39-byte key; here the spare bits are not zero */
        {"PeterNeumann+c74f20a3+AQABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4fIA==", "0x01 and a 32"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        audit_vkey k;
        hsmca_err e;
        hsmca_err_clear(&e);
        expect_refused(audit_vkey_parse(bad[i].s, strlen(bad[i].s), &k, &e), HSMCA_EINVAL, &e,
                       bad[i].rule);
    }
    char longname[AUDIT_VKEY_MAX + 2];
    memset(longname, 'a', sizeof(longname));
    audit_vkey k;
    hsmca_err e;
    expect_refused(audit_vkey_parse(longname, sizeof(longname), &k, &e), HSMCA_EINVAL, &e,
                   "longer than");
    uint8_t pub[32] = {0};
    expect_refused(audit_vkey_from_pub("a+b", pub, &k, &e), HSMCA_EINVAL, &e, "no '+'");
    expect_refused(audit_vkey_from_pub("a\xc2\xa0"
                                       "b",
                                       pub, &k, &e),
                   HSMCA_EINVAL, &e, "no spaces");
    expect_refused(audit_vkey_from_pub("a\x01"
                                       "b",
                                       pub, &k, &e),
                   HSMCA_EINVAL, &e, "control");
    expect_refused(audit_vkey_from_pub("a\xc0\xaf", pub, &k, &e), HSMCA_EINVAL, &e, "UTF-8");
    assert_int_equal(audit_vkey_from_pub("\xe2\x80\x94\xf0\x9f\x94\x8f/log", pub, &k, NULL),
                     HSMCA_OK);
}

/* ---- notes ------------------------------------------------------------------------------ */

static void test_note_matches_go(void **state)
{
    /* Ed25519 is deterministic: the same key and text give Go's note byte for byte. */
    char *note;
    size_t n, tlen;
    assert_int_equal(audit_note_sign(PN_TEXT, strlen(PN_TEXT), &g_pn_vk, atu_ed25519_sign, g_pn,
                                     &note, &n, NULL),
                     HSMCA_OK);
    assert_int_equal(n, strlen(PN_NOTE));
    assert_string_equal(note, PN_NOTE);
    free(note);
    audit_vkey k;
    assert_int_equal(audit_vkey_parse(PN_VKEY, strlen(PN_VKEY), &k, NULL), HSMCA_OK);
    assert_int_equal(audit_note_verify(PN_NOTE, strlen(PN_NOTE), &k, &tlen, NULL), HSMCA_OK);
    assert_int_equal(tlen, strlen(PN_TEXT));
}

static char *sign_text(const char *text)
{
    char *note;
    size_t n;
    assert_int_equal(
        audit_note_sign(text, strlen(text), &g_vk, atu_ed25519_sign, g_key, &note, &n, NULL),
        HSMCA_OK);
    assert_int_equal(n, strlen(note));
    return note;
}

static HSMCA_MUSTCHECK hsmca_code verify_str(const char *note, hsmca_err *e)
{
    size_t tlen;
    hsmca_err_clear(e);
    return audit_note_verify(note, strlen(note), &g_vk, &tlen, e);
}

/* "— name base64(raw)\n" into out. */
static void sig_line(char *out, size_t cap, const char *name, const uint8_t *raw, size_t n)
{
    char *b64 = util_b64_encode(raw, n);
    assert_non_null(b64);
    int w = snprintf(out, cap, "\xe2\x80\x94 %s %s\n", name, b64);
    assert_true(w > 0 && (size_t)w < cap);
    free(b64);
}

static void test_note_verify(void **state)
{
    hsmca_err e;
    char *note = sign_text("ca.example/audit\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n");
    size_t len = strlen(note), tlen, ns, rawlen;
    assert_int_equal(verify_str(note, &e), HSMCA_OK);
    audit_note_sig sg[AUDIT_NOTE_SIGS_MAX];
    assert_int_equal(audit_note_parse(note, len, &tlen, sg, &ns, NULL), HSMCA_OK);
    assert_int_equal(ns, 1);
    assert_int_equal(sg[0].id, g_vk.id);
    uint8_t *raw = util_b64_decode(sg[0].b64, sg[0].b64_len, &rawlen);
    assert_non_null(raw);
    assert_int_equal(rawlen, 68);
    char buf[2048], line[512], ours[512];
    sig_line(ours, sizeof(ours), g_vk.name, raw, rawlen);
    /* Another key's signature is ignored, before or after ours. */
    sig_line(line, sizeof(line), "witness.example/w1", raw, rawlen);
    snprintf(buf, sizeof(buf), "%.*s\n%s%s", (int)tlen, note, line, ours);
    assert_int_equal(verify_str(buf, &e), HSMCA_OK);
    snprintf(buf, sizeof(buf), "%s%s", note, line);
    assert_int_equal(verify_str(buf, &e), HSMCA_OK);
    /* The same line twice is fine. */
    snprintf(buf, sizeof(buf), "%s%s", note, ours);
    assert_int_equal(verify_str(buf, &e), HSMCA_OK);
    /* The same name with another key ID is another key: ignored, so none is ours. */
    raw[0] ^= 1;
    sig_line(line, sizeof(line), g_vk.name, raw, rawlen);
    raw[0] ^= 1;
    snprintf(buf, sizeof(buf), "%.*s\n%s", (int)tlen, note, line);
    expect_refused(verify_str(buf, &e), HSMCA_EPERM, &e, "no signature by");
    /* A second, bad signature by our key fails the note though the first verifies. */
    raw[40] ^= 1;
    sig_line(line, sizeof(line), g_vk.name, raw, rawlen);
    raw[40] ^= 1;
    snprintf(buf, sizeof(buf), "%s%s", note, line);
    expect_refused(verify_str(buf, &e), HSMCA_EPERM, &e, "does not verify");
    /* Our key ID with a signature that is not 64 bytes. */
    sig_line(line, sizeof(line), g_vk.name, raw, rawlen - 4);
    snprintf(buf, sizeof(buf), "%s%s", note, line);
    expect_refused(verify_str(buf, &e), HSMCA_EPERM, &e, "not 64 bytes");
    /* One changed byte anywhere (but the separators) breaks it. */
    for (size_t i = 0; i < len; i++) {
        memcpy(buf, note, len + 1);
        if (buf[i] == '\n' || (unsigned char)buf[i] >= 0x80 || buf[i] == ' ')
            continue;
        buf[i] = buf[i] == 'A' ? 'B' : 'A';
        assert_int_not_equal(verify_str(buf, &e), HSMCA_OK);
    }
    free(raw);
    free(note);
}

static void test_note_refusals(void **state)
{
    static const struct {
        const char *note, *rule;
    } bad[] = {
        {"", "no blank line"},
        {"text\n", "no blank line"},
        {"text\n\n", "signature lines must follow"},
        {"text\n\n\xe2\x80\x94 a AAAAAAA=", "signature lines must follow"},
        {"text\n\n- a AAAAAAA=\n", "em dash"},
        {"text\n\n\xe2\x80\x94 aAAAAAAA=\n", "'\xe2\x80\x94 name signature'"},
        {"text\n\n\xe2\x80\x94 a AAAAAA==\n", "a key ID and at least a byte"},
        {"text\n\n\xe2\x80\x94 a AAAAAAB=\n", "canonical padded base64"},
        {"text\n\n\xe2\x80\x94 a AAAAAAA\n", "canonical padded base64"},
        {"text\n\n\xe2\x80\x94 a+b AAAAAAA=\n", "no '+'"},
        {"text\n\n\xe2\x80\x94  AAAAAAA=\n", "1-255 bytes"},
        {"te\txt\n\n\xe2\x80\x94 a AAAAAAA=\n", "control character 0x09"},
        {"te\rxt\n\n\xe2\x80\x94 a AAAAAAA=\n", "control character 0x0d"},
        {"te\xffxt\n\n\xe2\x80\x94 a AAAAAAA=\n", "not valid UTF-8 at byte 2"},
        {"te\xed\xa0\x80xt\n\n\xe2\x80\x94 a AAAAAAA=\n", "not valid UTF-8"},
        {"text\n\n\xe2\x80\x94 a AAAAAAA=\n\xe2\x80\x94 b\n", "'\xe2\x80\x94 name signature'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hsmca_err e;
        expect_refused(verify_str(bad[i].note, &e), HSMCA_EINVAL, &e, bad[i].rule);
    }
    /* Caps: the whole note, and the number of signature lines. */
    size_t big = AUDIT_NOTE_MAX + 1, tlen, ns;
    char *s = malloc(big);
    memset(s, 'a', big);
    hsmca_err e;
    expect_refused(audit_note_verify(s, big, &g_vk, &tlen, &e), HSMCA_EINVAL, &e, "longer than");
    size_t at = (size_t)sprintf(s, "text\n\n");
    for (int i = 0; i <= AUDIT_NOTE_SIGS_MAX; i++)
        at += (size_t)sprintf(s + at, "\xe2\x80\x94 a AAAAAAA=\n");
    audit_note_sig sigs[AUDIT_NOTE_SIGS_MAX];
    expect_refused(audit_note_parse(s, at, &tlen, sigs, &ns, &e), HSMCA_EINVAL, &e,
                   "more than 64 signatures");
    free(s);
    /* The text is what ends at the last blank line, and may hold blank lines itself. */
    const char *ok = "a\n\nb\n\n\xe2\x80\x94 x AAAAAAA=\n\xe2\x80\x94 y AAECAwQ=\n";
    assert_int_equal(audit_note_parse(ok, strlen(ok), &tlen, sigs, &ns, NULL), HSMCA_OK);
    assert_int_equal(tlen, 5);
    assert_int_equal(ns, 2);
    assert_int_equal(sigs[1].name_len, 1);
    assert_memory_equal(sigs[1].name, "y", 1);
    assert_int_equal(sigs[1].id, 0x00010203);
    assert_int_equal(sigs[1].b64_len, 8);
}

static void test_assemble_refusals(void **state)
{
    const char *text = "ca.example/audit\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n";
    uint8_t sig[AUDIT_SIG_MAX];
    size_t siglen = sizeof(sig);
    char *out;
    size_t n;
    hsmca_err e;
    assert_int_equal(
        atu_ed25519_sign(g_pn, (const uint8_t *)text, strlen(text), sig, &siglen, NULL), HSMCA_OK);
    /* Signed by another key than the vkey names: never assembled. */
    expect_refused(audit_note_assemble(text, strlen(text), &g_vk, sig, siglen, &out, &n, &e), HSMCA_EPERM,
                   &e, "does not verify");
    expect_refused(audit_note_assemble(text, strlen(text) - 1, &g_vk, sig, siglen, &out, &n, &e),
                   HSMCA_EINVAL, &e, "end in a newline");
    expect_refused(audit_note_assemble("a\tb\n", 4, &g_vk, sig, siglen, &out, &n, &e), HSMCA_EINVAL, &e,
                   "control character");
    expect_refused(audit_note_assemble("", 0, &g_vk, sig, siglen, &out, &n, &e), HSMCA_EINVAL, &e,
                   "end in a newline");
}

/* ---- checkpoints ------------------------------------------------------------------------ */

static void test_checkpoint_roundtrip(void **state)
{
    audit_checkpoint c, back;
    memset(&c, 0, sizeof(c));
    strcpy(c.origin, "ca.example/audit");
    const uint64_t sizes[] = {0, 1, 10, 20852163, AUDIT_TREE_SIZE_MAX};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        c.size = sizes[i];
        c.root = audit_empty_root;
        c.root.b[31] ^= (uint8_t)i;
        strcpy(c.ext, i % 2 ? "ext one\n\xc3\xa9xt two\n" : "");
        c.ext_len = strlen(c.ext);
        char *body, want[256], *root = util_b64_encode(c.root.b, 32);
        size_t len;
        assert_int_equal(audit_checkpoint_body(&c, &body, &len, NULL), HSMCA_OK);
        snprintf(want, sizeof(want), "ca.example/audit\n%llu\n%s\n%s", (unsigned long long)sizes[i],
                 root, c.ext);
        assert_string_equal(body, want);
        assert_int_equal(len, strlen(want));
        memset(&back, 0x5a, sizeof(back));
        assert_int_equal(audit_checkpoint_parse(body, len, &back, NULL), HSMCA_OK);
        assert_string_equal(back.origin, c.origin);
        assert_true(back.size == c.size);
        assert_true(audit_hash_equal(&back.root, &c.root));
        assert_int_equal(back.ext_len, c.ext_len);
        assert_memory_equal(back.ext, c.ext, c.ext_len);
        assert_int_equal(back.ext[back.ext_len], '\0');
        /* Signed, opened, the same checkpoint. */
        char *note = sign_text(body);
        memset(&back, 0, sizeof(back));
        assert_int_equal(audit_checkpoint_open(note, strlen(note), &g_vk, &back, NULL), HSMCA_OK);
        assert_true(back.size == c.size && audit_hash_equal(&back.root, &c.root));
        free(note);
        free(body);
        free(root);
    }
    /* The spec's example body. */
    const char *ex = "example.com/behind-the-sofa\n20852163\n"
                     "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
    assert_int_equal(audit_checkpoint_parse(ex, strlen(ex), &back, NULL), HSMCA_OK);
    assert_true(back.size == 20852163);
}

static void test_checkpoint_refusals(void **state)
{
#define R "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    static const struct {
        const char *text, *rule;
    } bad[] = {
        {"", "no origin line"},
        {"o", "no origin line"},
        {"o\n1\n" R, "no root hash line"},
        {"o\n1\n", "no root hash line"},
        {"\n1\n" R "\n", "origin must not be empty"},
        {"a b\n1\n" R "\n", "checkpoint: the origin has no spaces"},
        {"a+b\n1\n" R "\n", "checkpoint: the origin has no spaces and no '+'"},
        {"a\xe3\x80\x80"
         "b\n1\n" R "\n",
         "no spaces"},
        {"a\xc3\n1\n" R "\n", "checkpoint: the origin: not valid UTF-8"},
        {"o\n01\n" R "\n", "no leading zeros"},
        {"o\n00\n" R "\n", "no leading zeros"},
        {"o\n\n" R "\n", "1-19 decimal digits"},
        {"o\n+1\n" R "\n", "decimal digits only"},
        {"o\n-1\n" R "\n", "decimal digits only"},
        {"o\n 1\n" R "\n", "decimal digits only"},
        {"o\n1 \n" R "\n", "decimal digits only"},
        {"o\n1x\n" R "\n", "decimal digits only"},
        {"o\n9223372036854775808\n" R "\n", "2^63-1 cap"},
        {"o\n99999999999999999999\n" R "\n", "1-19 decimal digits"},
        {"o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU\n", "44 base64 characters"},
        {"o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV=\n", "not canonical base64"},
        {"o\n1\n47DEQpj8HBSa-_TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n", "not canonical base64"},
        {"o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFUA\n", "must be 32 bytes"},
        {"o\n1\n" R "\n\n", "must not be empty"},
        {"o\n1\n" R "\next\n\n", "must not be empty"},
        {"o\n1\n" R "\next", "end in a newline"},
        {"o\n1\n" R "\ne\x01xt\n", "control character"},
        {"o\r\n1\n" R "\n", "control character"},
    };
#undef R
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        audit_checkpoint c, before;
        memset(&c, 0x5a, sizeof(c));
        before = c;
        hsmca_err e;
        hsmca_err_clear(&e);
        expect_refused(audit_checkpoint_parse(bad[i].text, strlen(bad[i].text), &c, &e),
                       HSMCA_EINVAL, &e, bad[i].rule);
        assert_memory_equal(&c, &before, sizeof(c)); /* untouched on error */
    }
    /* Size caps on the whole body and on the extension lines. */
    char big[AUDIT_CHECKPOINT_MAX + 64];
    int n =
        snprintf(big, sizeof(big), "o\n1\n%s\n", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    memset(big + n, 'x', sizeof(big) - (size_t)n);
    big[sizeof(big) - 1] = '\n';
    audit_checkpoint c;
    hsmca_err e;
    expect_refused(audit_checkpoint_parse(big, sizeof(big), &c, &e), HSMCA_EINVAL, &e,
                   "longer than 2048");
    expect_refused(audit_checkpoint_parse(big, (size_t)n + AUDIT_CHECKPOINT_EXT_MAX + 1, &c, &e),
                   HSMCA_EINVAL, &e, "extension lines longer than");
    big[n + AUDIT_CHECKPOINT_EXT_MAX - 1] = '\n';
    assert_int_equal(audit_checkpoint_parse(big, (size_t)n + AUDIT_CHECKPOINT_EXT_MAX, &c, NULL),
                     HSMCA_OK);
    /* What the parser refuses, the formatter refuses to write. */
    memset(&c, 0, sizeof(c));
    strcpy(c.origin, "a b");
    char *body;
    size_t len;
    expect_refused(audit_checkpoint_body(&c, &body, &len, &e), HSMCA_EINVAL, &e, "no spaces");
    strcpy(c.origin, "o");
    strcpy(c.ext, "x\n\n");
    c.ext_len = 3;
    expect_refused(audit_checkpoint_body(&c, &body, &len, &e), HSMCA_EINVAL, &e,
                   "must not be empty");
    c.ext_len = 0;
    c.size = AUDIT_TREE_SIZE_MAX + 1;
    expect_refused(audit_checkpoint_body(&c, &body, &len, &e), HSMCA_EINVAL, &e, "cap");
    /* A signed note whose text is not a checkpoint opens as a refusal of the body. */
    char *note = sign_text("o\n1\n");
    expect_refused(audit_checkpoint_open(note, strlen(note), &g_vk, &c, &e), HSMCA_EINVAL, &e,
                   "no root hash line");
    free(note);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vkey_matches_go),      cmocka_unit_test(test_vkey_refusals),
        cmocka_unit_test(test_note_matches_go),      cmocka_unit_test(test_note_verify),
        cmocka_unit_test(test_note_refusals),        cmocka_unit_test(test_assemble_refusals),
        cmocka_unit_test(test_checkpoint_roundtrip), cmocka_unit_test(test_checkpoint_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* test_signer_request.c - the SignRequest wire check the signer runs before
 * protobuf-c allocates anything: only known fields, each once, each bounded. */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "tok_jwt.h"
#include "profile.h"
#include "signer.pb-c.h"
#include "signer_request.h"

/* A packed SignRequest with the given fields (tbs of tbs_len 0x30 bytes). */
static size_t pack(uint8_t *out, size_t tbs_len, const char *requester, int with_hash)
{
    static uint8_t tbs[PROFILE_TBS_MAX + 10], hash[32];
    memset(tbs, 0x30, sizeof(tbs));
    Hsmca__Ipc__SignRequest r = HSMCA__IPC__SIGN_REQUEST__INIT;
    r.profile = 1;
    r.tbs.data = tbs;
    r.tbs.len = tbs_len;
    r.requester = (char *)requester;
    if (with_hash) {
        r.csr_sha256.data = hash;
        r.csr_sha256.len = 32;
    }
    return hsmca__ipc__sign_request__pack(&r, out);
}

static void expect(const uint8_t *p, size_t n, hsmca_code code, const char *msg)
{
    signer_request_shape shape;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = signer_request_check(p, n, &shape, &e);
    if (rc != code || (msg && strncmp(e.msg, msg, strlen(msg)) != 0))
        fail_msg("expected %s \"%s\", got %s \"%s\"", hsmca_code_name(code), msg ? msg : "",
                 hsmca_code_name(rc), e.msg);
}

static void test_accepts_what_the_front_end_sends(void **state)
{
    static uint8_t buf[65536];
    size_t n = pack(buf, 600, "spiffe://cluster.local/ns/default/sa/sleep", 1);
    signer_request_shape shape;
    hsmca_err e;
    assert_int_equal(signer_request_check(buf, n, &shape, &e), HSMCA_OK);
    assert_int_equal(shape.tbs_len, 600);
    assert_int_equal(shape.requester_len, strlen("spiffe://cluster.local/ns/default/sa/sleep"));
    assert_int_equal(shape.csr_sha256_len, 32);
    n = pack(buf, PROFILE_TBS_MAX, "", 0); /* the limits themselves */
    expect(buf, n, HSMCA_OK, NULL);
    expect(buf, 0, HSMCA_OK, NULL); /* all defaults: the validator refuses it later */
}

static void test_refuses_before_unpacking(void **state)
{
    static uint8_t buf[65536];
    char big[PROFILE_REQUESTER_MAX + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    size_t n = pack(buf, PROFILE_TBS_MAX + 1, "x", 0);
    expect(buf, n, HSMCA_EINVAL, "SignRequest: field tbs of 16385 bytes exceeds 16384");
    n = pack(buf, 100, big, 0);
    expect(buf, n, HSMCA_EINVAL, "SignRequest: field requester of 2049 bytes exceeds 2048");

    /* Unknown fields: the padding that cost ~1.75 MiB per frame once unpacked. */
    n = pack(buf, 100, "x", 0);
    static const uint8_t unknown[] = {0x5a, 0x03, 'a', 'b', 'c'}; /* field 11, LEN */
    memcpy(buf + n, unknown, sizeof(unknown));
    expect(buf, n + sizeof(unknown), HSMCA_EINVAL, "SignRequest: unknown field 11");
    /* The presented certificate's serial (9) without its issuer (10): both or neither. */
    static const uint8_t serial_alone[] = {0x4a, 0x03, 'a', 'b', 'c'};
    memcpy(buf + n, serial_alone, sizeof(serial_alone));
    expect(buf, n + sizeof(serial_alone), HSMCA_EINVAL,
           "SignRequest: client_serial (3 bytes) and client_issuer (0 bytes, 32 needed)");
    static const uint8_t huge_field[] = {0xf8, 0xff, 0xff, 0xff, 0x0f, 0x00}; /* varint field */
    memcpy(buf + n, huge_field, sizeof(huge_field));
    expect(buf, n + sizeof(huge_field), HSMCA_EINVAL, "SignRequest: unknown field");
    /* A field twice (protobuf keeps the last; we keep neither). */
    static const uint8_t again[] = {0x1a, 0x01, 'y'};
    memcpy(buf + n, again, sizeof(again));
    expect(buf, n + sizeof(again), HSMCA_EINVAL, "SignRequest: field requester repeated");
    /* A NUL in the requester: protobuf-c would cut the string there. */
    static const uint8_t nul[] = {0x1a, 0x03, 'a', 0x00, 'b'};
    expect(nul, sizeof(nul), HSMCA_EINVAL, "SignRequest: requester contains a NUL byte");
    /* Wrong wire type, truncation, a varint that never ends. */
    static const uint8_t wrong_type[] = {0x08 | 2, 0x01, 0x00}; /* profile as LEN */
    expect(wrong_type, sizeof(wrong_type), HSMCA_EINVAL,
           "SignRequest: field profile has the wrong wire type");
    expect(buf, n - 1, HSMCA_EINVAL, "SignRequest: field requester runs past the frame");
    static const uint8_t endless[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    expect(endless, sizeof(endless), HSMCA_EINVAL, "SignRequest: field profile malformed");
    /* A uint32 beyond 32 bits: protobuf-c would keep 1 of 2^32 + 1. */
    static const uint8_t wide[] = {0x08, 0x81, 0x80, 0x80, 0x80, 0x10};
    expect(wide, sizeof(wide), HSMCA_EINVAL,
           "SignRequest: field profile of 4294967297 exceeds 4294967295");
    static const uint8_t widest[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0x0f}; /* 2^32 - 1 */
    expect(widest, sizeof(widest), HSMCA_OK, NULL);
    /* Varints in their shortest form only: protobuf-c refuses a 6-byte length
     * the format allows (found by fuzz_sigreq), so the check refuses them all. */
    static const uint8_t long_len[] = {0x1a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    expect(long_len, sizeof(long_len), HSMCA_EINVAL,
           "SignRequest: field requester malformed or non-minimal");
    static const uint8_t long_key[] = {0x88, 0x00, 0x01}; /* field 1 in a 2-byte key */
    expect(long_key, sizeof(long_key), HSMCA_EINVAL,
           "SignRequest: malformed or non-minimal field key");
    static const uint8_t long_profile[] = {0x08, 0x81, 0x00};
    expect(long_profile, sizeof(long_profile), HSMCA_EINVAL,
           "SignRequest: field profile malformed or non-minimal");
    static const uint8_t bad_hash[] = {0x22, 0x02, 0x01, 0x02};
    expect(bad_hash, sizeof(bad_hash), HSMCA_EINVAL, "SignRequest: csr_sha256 of 2 bytes");
}

/* Identity binding's fields (5 authenticator, 6 token): bounded, NUL-free, once. */
/* The request id: empty or exactly IPC_REQUEST_ID_LEN lowercase hex digits, since the
 * signer logs it as the key its lines and the front end's are joined on. */
static void test_request_id(void **state)
{
    (void)state;
    static uint8_t buf[65536];
    size_t n = pack(buf, 100, "x", 0);
    const char *ok = "0123456789abcdef";
    buf[n] = 0x42; /* field 8, LEN */
    buf[n + 1] = 16;
    memcpy(buf + n + 2, ok, 16);
    signer_request_shape shape;
    hsmca_err e;
    assert_int_equal(signer_request_check(buf, n + 18, &shape, &e), HSMCA_OK);
    assert_int_equal(shape.request_id_len, 16);
    memcpy(buf + n + 2, "0123456789ABCDEF", 16);
    expect(buf, n + 18, HSMCA_EINVAL, "SignRequest: request_id is not lowercase hex");
    memcpy(buf + n + 2, "0123456789abcde\n", 16);
    expect(buf, n + 18, HSMCA_EINVAL, "SignRequest: request_id is not lowercase hex");
    buf[n + 1] = 15;
    memcpy(buf + n + 2, ok, 15);
    expect(buf, n + 17, HSMCA_EINVAL, "SignRequest: request_id of 15 hex digits, not 16");
    buf[n + 1] = 17;
    memcpy(buf + n + 2, "0123456789abcdef0", 17);
    expect(buf, n + 19, HSMCA_EINVAL, "SignRequest: field request_id of 17 bytes exceeds 16");
}

static void test_binding_fields(void **state)
{
    static uint8_t buf[65536];
    static char token[IPC_TOKEN_MAX + 2];
    static uint8_t tbs[100];
    memset(token, 'a', IPC_TOKEN_MAX);
    Hsmca__Ipc__SignRequest r = HSMCA__IPC__SIGN_REQUEST__INIT;
    r.profile = 1;
    r.tbs.data = tbs;
    r.tbs.len = sizeof(tbs);
    r.authenticator = (char *)"jwt";
    r.token = token; /* IPC_TOKEN_MAX bytes: the limit itself */
    size_t n = hsmca__ipc__sign_request__pack(&r, buf);
    signer_request_shape shape;
    hsmca_err e;
    assert_int_equal(signer_request_check(buf, n, &shape, &e), HSMCA_OK);
    assert_int_equal(shape.authenticator_len, 3);
    assert_int_equal(shape.token_len, IPC_TOKEN_MAX);
    token[IPC_TOKEN_MAX] = 'a';
    n = hsmca__ipc__sign_request__pack(&r, buf);
    expect(buf, n, HSMCA_EINVAL, "SignRequest: field token of 8193 bytes exceeds 8192");
    static char longname[IPC_AUTHENTICATOR_MAX + 2];
    memset(longname, 'j', IPC_AUTHENTICATOR_MAX + 1);
    r.token = (char *)"x";
    r.authenticator = longname;
    n = hsmca__ipc__sign_request__pack(&r, buf);
    expect(buf, n, HSMCA_EINVAL, "SignRequest: field authenticator of 65 bytes exceeds 64");
    static const uint8_t nul_token[] = {0x32, 0x03, 'a', 0x00, 'b'};
    expect(nul_token, sizeof(nul_token), HSMCA_EINVAL, "SignRequest: token contains a NUL byte");
    static const uint8_t two_tokens[] = {0x32, 0x01, 'a', 0x32, 0x01, 'b'};
    expect(two_tokens, sizeof(two_tokens), HSMCA_EINVAL, "SignRequest: field token repeated");
    static const uint8_t auth_varint[] = {0x28, 0x01}; /* field 5 as a varint */
    expect(auth_varint, sizeof(auth_varint), HSMCA_EINVAL,
           "SignRequest: field authenticator has the wrong wire type");
    /* Multicluster's field 7, the token's ClusterID: bounded, NUL-free, once. */
    static char cluster[CONFIG_MAX_CLUSTER_ID + 2];
    memset(cluster, 'c', CONFIG_MAX_CLUSTER_ID);
    r.authenticator = (char *)"jwt";
    r.cluster = cluster;
    n = hsmca__ipc__sign_request__pack(&r, buf);
    assert_int_equal(signer_request_check(buf, n, &shape, &e), HSMCA_OK);
    assert_int_equal(shape.cluster_len, CONFIG_MAX_CLUSTER_ID);
    cluster[CONFIG_MAX_CLUSTER_ID] = 'c';
    n = hsmca__ipc__sign_request__pack(&r, buf);
    expect(buf, n, HSMCA_EINVAL, "SignRequest: field cluster of 64 bytes exceeds 63");
    static const uint8_t nul_cluster[] = {0x3a, 0x03, 'a', 0x00, 'b'};
    expect(nul_cluster, sizeof(nul_cluster), HSMCA_EINVAL,
           "SignRequest: cluster contains a NUL byte");
    static const uint8_t two_clusters[] = {0x3a, 0x01, 'a', 0x3a, 0x01, 'b'};
    expect(two_clusters, sizeof(two_clusters), HSMCA_EINVAL, "SignRequest: field cluster repeated");
}

/* FrontendDeny (proto/signer.proto): what the front end packs passes; anything else
 * names its rule. */
static size_t pack_deny(uint8_t *out, const char *requester, const char *auth, uint32_t code,
                        const char *reason, uint32_t suppressed)
{
    Hsmca__Ipc__FrontendDeny d = HSMCA__IPC__FRONTEND_DENY__INIT;
    d.requester = (char *)requester;
    d.authenticator = (char *)auth;
    d.code = code;
    d.reason = (char *)reason;
    d.suppressed = suppressed;
    return hsmca__ipc__frontend_deny__pack(&d, out);
}

static void expect_deny(const uint8_t *p, size_t n, hsmca_code code, const char *msg)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(signer_deny_check(p, n, &e), code);
    if (msg)
        assert_string_equal(e.msg, msg);
}

static void test_frontend_deny(void **state)
{
    static uint8_t buf[8192];
    static char big[IPC_DENY_REASON_MAX + 2];
    size_t n = pack_deny(buf, "spiffe://td/ns/a/sa/b", "jwt", HSMCA_EAUTH, "bad token", 3);
    expect_deny(buf, n, HSMCA_OK, NULL);
    n = pack_deny(buf, "", "none", HSMCA_EPERM, "", 0); /* empty strings are absent fields */
    expect_deny(buf, n, HSMCA_OK, NULL);
    n = pack_deny(buf, "", "", 0, "r", 0); /* code 0 is not packed at all */
    expect_deny(buf, n, HSMCA_EINVAL, "FrontendDeny: code must name a refusal (1..9)");
    n = pack_deny(buf, "", "", HSMCA_CODE_MAX + 1, "r", 0);
    expect_deny(buf, n, HSMCA_EINVAL, "FrontendDeny: field code of 10 exceeds 9");
    memset(big, 'r', IPC_DENY_REASON_MAX);
    n = pack_deny(buf, "", "jwt", HSMCA_EAUTH, big, 0);
    expect_deny(buf, n, HSMCA_OK, NULL);
    big[IPC_DENY_REASON_MAX] = 'r';
    n = pack_deny(buf, "", "jwt", HSMCA_EAUTH, big, 0);
    expect_deny(buf, n, HSMCA_EINVAL, "FrontendDeny: field reason of 1025 bytes exceeds 1024");
    n = pack_deny(buf, "", "jwt", HSMCA_EAUTH, "r", 0);
    buf[n++] = 0x22; /* field 4 again: "r" */
    buf[n++] = 1;
    buf[n++] = 'r';
    expect_deny(buf, n, HSMCA_EINVAL, "FrontendDeny: field reason repeated");
    n = pack_deny(buf, "", "jwt", HSMCA_EAUTH, "rr", 0);
    buf[n - 1] = 0;
    expect_deny(buf, n, HSMCA_EINVAL, "FrontendDeny: reason contains a NUL byte");
    expect_deny(buf, n - 1, HSMCA_EINVAL, "FrontendDeny: field reason runs past the frame");
    static const uint8_t six[] = {0x18, 0x02, 0x32, 0x00}; /* code 2, field 6 */
    expect_deny(six, sizeof(six), HSMCA_EINVAL, "FrontendDeny: unknown field 6");
    static const uint8_t wide[] = {0x28, 0x80, 0x80, 0x80, 0x80, 0x10}; /* suppressed 2^32 */
    expect_deny(wide, sizeof(wide), HSMCA_EINVAL,
                "FrontendDeny: field suppressed of 4294967296 exceeds 4294967295");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_what_the_front_end_sends),
        cmocka_unit_test(test_refuses_before_unpacking),
        cmocka_unit_test(test_binding_fields),
        cmocka_unit_test(test_request_id),
        cmocka_unit_test(test_frontend_deny),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

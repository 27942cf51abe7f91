/* hostile_revoke.c - what a revocation stops (signer/signer_revoke.h), with its own signer
 * on a dev CA: an administrator revokes through the admin socket (as `hsmca ca revoke`
 * does), and the front end is the attacker. A revocation by identity holds whatever the
 * front end sends: a TBS for the revoked identity (or a namespace's) is refused with no
 * presented certificate, with any authenticator, and as a deny entry, while other
 * identities are signed; a renewal that names its presented certificate is refused when
 * that certificate is revoked or is not of this CA. */
#include "hostile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "admin_cmd.h"
#include "ipc_frame.h"
#include "profile.h"
#include "util.h"

#define VICTIM "spiffe://cluster.local/ns/default/sa/victim"
#define QUARANTINED "spiffe://cluster.local/ns/quarantine/sa/any"

int hf_revoke_group_setup(void **state)
{
    hf_group_teardown(state);
    return hf_start_signer("hostile-revoke", NULL);
}

/* The admin op's reply (a new reference); fails the test when the signer refuses. */
static json_t *admin(json_t *req)
{
    char sock[1100];
    snprintf(sock, sizeof(sock), "%s/admin.sock", hf.dir);
    json_t *r = NULL;
    hsmca_err e;
    hsmca_code rc = admin_call(NULL, sock, req, &r, &e);
    json_decref(req);
    if (rc != HSMCA_OK)
        fail_msg("admin op refused: %s", e.msg);
    return r;
}

/* A SignRequest for tbs with the authenticator (NULL: absent) and the presented
 * certificate's serial (NULL: absent) and issuer hash; the signer's reply. */
static Hsmca__Ipc__SignReply *sign_with(const uint8_t *tbs, size_t len, const char *authenticator,
                                        const uint8_t *serial, size_t serial_len,
                                        const uint8_t issuer[32])
{
    Hsmca__Ipc__SignRequest req = HSMCA__IPC__SIGN_REQUEST__INIT;
    req.profile = PROFILE_WORKLOAD;
    req.tbs.data = (uint8_t *)tbs;
    req.tbs.len = len;
    req.requester = (char *)HF_SPIFFE_ID;
    req.authenticator = (char *)authenticator;
    if (serial) {
        req.client_serial.data = (uint8_t *)serial;
        req.client_serial.len = serial_len;
        req.client_issuer.data = (uint8_t *)issuer;
        req.client_issuer.len = 32;
    }
    uint64_t id = hf_send_sign_request(hf.ipc, &req);
    return hf_await_reply(hf.ipc, id, HF_REPLY_MS);
}

static uint8_t *tbs_for(const char *uri, size_t *len)
{
    tbs_spec s = {.uri = uri};
    return hf_build_tbs(&s, len);
}

/* The signer must refuse a TBS for uri with authenticator, naming want. */
static void assert_refused_for(const char *uri, const char *authenticator, const char *want)
{
    size_t len;
    uint8_t *tbs = tbs_for(uri, &len);
    Hsmca__Ipc__SignReply *rep = sign_with(tbs, len, authenticator, NULL, 0, NULL);
    if (rep->code != HSMCA_EPERM || !strstr(rep->reason, want))
        fail_msg("%s (%s): code %u \"%s\", expected PERMISSION (%s)", uri,
                 authenticator ? authenticator : "no authenticator", rep->code, rep->reason, want);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
}

/* Signs a TBS for uri; its serial's octets into serial (PROFILE_SERIAL_MAX). */
static size_t signed_for(const char *uri, uint8_t *serial)
{
    size_t len;
    uint8_t *tbs = tbs_for(uri, &len);
    Hsmca__Ipc__SignReply *rep = hf_sign(PROFILE_WORKLOAD, tbs, len);
    hf_assert_signed(rep, tbs, len);
    const unsigned char *p = rep->certificate.data;
    X509 *x = d2i_X509(NULL, &p, (long)rep->certificate.len);
    assert_non_null(x);
    const ASN1_INTEGER *sn = X509_get0_serialNumber(x);
    size_t n = (size_t)ASN1_STRING_length(sn);
    assert_true(n <= PROFILE_SERIAL_MAX);
    memcpy(serial, ASN1_STRING_get0_data(sn), n);
    X509_free(x);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    return n;
}

/* A revocation by identity: the front end omits any presented certificate and names any
 * authenticator (or none); the signer refuses every TBS of that identity all the same. */
static void test_identity_whatever_the_front_end_says(void **state)
{
    (void)state;
    uint8_t serial[PROFILE_SERIAL_MAX];
    char hex[2 * PROFILE_SERIAL_MAX + 1];
    util_hex(serial, signed_for(VICTIM, serial), hex);
    json_t *r = admin(json_pack("{s:s, s:s, s:s}", "op", "ca-revoke-identity", "identity",
                                VICTIM, "reason", "keyCompromise"));
    assert_int_equal(json_integer_value(json_object_get(r, "revoked")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(r, "serials"), 0)),
                        hex);
    json_decref(r);
    const char *why = "identity " VICTIM ": revoked by identity (keyCompromise";
    assert_refused_for(VICTIM, NULL, why);
    assert_refused_for(VICTIM, "tokenreview", why);
    assert_refused_for(VICTIM, "client_cert", why);
    hf_assert_signs_fresh(); /* another identity */
    assert_true(hf_audit_count("deny") >= 3);
    assert_int_equal(hf_audit_count("revoke-identity"), 1);
    r = admin(json_pack("{s:s, s:s, s:b}", "op", "ca-revoke-identity", "identity", VICTIM,
                        "lift", 1));
    json_decref(r);
    size_t len;
    uint8_t *tbs = tbs_for(VICTIM, &len);
    Hsmca__Ipc__SignReply *rep = hf_sign(PROFILE_WORKLOAD, tbs, len);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
}

static void test_namespace(void **state)
{
    (void)state;
    json_decref(admin(json_pack("{s:s, s:s, s:s}", "op", "ca-revoke-identity", "namespace",
                                "quarantine", "reason", "cessationOfOperation")));
    assert_refused_for(QUARANTINED, NULL, "revoked by namespace (cessationOfOperation");
    hf_assert_signs_fresh();
}

/* A renewal that names its presented certificate: refused when it is revoked, or not of
 * this CA; signed otherwise. */
static void test_presented_certificate(void **state)
{
    (void)state;
    uint8_t serial[PROFILE_SERIAL_MAX], issuer[32], other[32] = {0};
    size_t n = signed_for(HF_SPIFFE_ID, serial);
    const unsigned char *der;
    size_t der_len;
    assert_true(X509_NAME_get0_der(X509_get_subject_name(hf.ca), &der, &der_len));
    SHA256(der, der_len, issuer);
    size_t len;
    uint8_t *tbs = tbs_for(NULL, &len);
    Hsmca__Ipc__SignReply *rep = sign_with(tbs, len, "client_cert", serial, n, issuer);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    char hex[2 * PROFILE_SERIAL_MAX + 1];
    util_hex(serial, n, hex);
    json_decref(admin(json_pack("{s:s, s:s, s:s}", "op", "ca-revoke", "serial", hex, "reason",
                                "keyCompromise")));
    hf_tbs_new_serial(tbs, len);
    rep = sign_with(tbs, len, "client_cert", serial, n, issuer);
    char want[120];
    snprintf(want, sizeof(want), "client certificate serial %s: revoked (keyCompromise)", hex);
    if (rep->code != HSMCA_EPERM || !strstr(rep->reason, want))
        fail_msg("code %u \"%s\", expected \"%s\"", rep->code, rep->reason, want);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    hf_tbs_new_serial(tbs, len);
    rep = sign_with(tbs, len, "client_cert", serial, n, other);
    if (rep->code != HSMCA_EPERM || !strstr(rep->reason, "its issuer is not this CA"))
        fail_msg("code %u \"%s\", expected the issuer's refusal", rep->code, rep->reason);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    hf_assert_signs_fresh();
}

static const struct CMUnitTest revoke_tests[] = {
    cmocka_unit_test(test_identity_whatever_the_front_end_says),
    cmocka_unit_test(test_namespace),
    cmocka_unit_test(test_presented_certificate),
};

const struct CMUnitTest *hf_revoke_tests(size_t *n)
{
    *n = sizeof(revoke_tests) / sizeof(revoke_tests[0]);
    return revoke_tests;
}

/* test_fe_clientcert.c - the client-certificate authenticator against
 * certificates built here with OpenSSL: roots, our CA (a root or an
 * intermediate), a sibling CA under the same root, a foreign CA with our CA's
 * very name, and leaves that break one rule each. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "fe_clientcert.h"

#define ME "spiffe://cluster.local/ns/default/sa/sleep"
#define TD "cluster.local"
#define HOUR 3600L

typedef struct {
    const char *cn;       /* subject CN; NULL: empty subject (a workload leaf) */
    X509 *issuer;         /* NULL: self-signed */
    EVP_PKEY *issuer_key; /* with issuer */
    EVP_PKEY *key;
    int ca;
    long not_before, not_after; /* seconds from now */
    const char *san;            /* X509V3 conf text, e.g. "critical,URI:spiffe://..." */
    const char *eku;            /* NULL: serverAuth,clientAuth for a leaf, none for a CA */
    const char *ku;             /* NULL: a workload's, or a CA's */
} cert_spec;

static EVP_PKEY *root_key, *inter_key, *inter2_key, *sibling_key, *foreign_key, *leaf_key;
static X509 *root, *inter, *inter2, *sibling, *foreign;
static int64_t now;

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    assert_non_null(ext);
    assert_true(X509_add_ext(x, ext, -1));
    X509_EXTENSION_free(ext);
}

static X509 *make_cert(const cert_spec *s)
{
    static long serial = 1;
    X509 *x = X509_new();
    assert_non_null(x);
    assert_true(X509_set_version(x, X509_VERSION_3));
    assert_true(ASN1_INTEGER_set(X509_get_serialNumber(x), serial++));
    X509_NAME *n = X509_get_subject_name(x);
    if (s->cn)
        assert_true(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)s->cn,
                                               -1, -1, 0));
    X509 *issuer = s->issuer ? s->issuer : x;
    assert_true(X509_set_issuer_name(x, X509_get_subject_name(issuer)));
    assert_true(X509_gmtime_adj(X509_getm_notBefore(x), s->not_before));
    assert_true(X509_gmtime_adj(X509_getm_notAfter(x), s->not_after));
    assert_true(X509_set_pubkey(x, s->key));
    add_ext(x, issuer, NID_basic_constraints, s->ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
    add_ext(x, issuer, NID_key_usage,
            s->ku   ? s->ku
            : s->ca ? "critical,keyCertSign,cRLSign"
                    : "critical,digitalSignature,keyEncipherment");
    if (s->eku || !s->ca)
        add_ext(x, issuer, NID_ext_key_usage, s->eku ? s->eku : "serverAuth,clientAuth");
    add_ext(x, issuer, NID_subject_key_identifier, "hash");
    if (s->issuer)
        add_ext(x, issuer, NID_authority_key_identifier, "keyid:always");
    if (s->san)
        add_ext(x, issuer, NID_subject_alt_name, s->san);
    assert_true(X509_sign(x, s->issuer_key ? s->issuer_key : s->key, EVP_sha256()) > 0);
    return x;
}

static char *to_pem(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    assert_non_null(b);
    assert_true(PEM_write_bio_X509(b, x));
    char *data;
    long n = BIO_get_mem_data(b, &data);
    char *out = malloc((size_t)n + 1);
    assert_non_null(out);
    memcpy(out, data, (size_t)n);
    out[n] = '\0';
    BIO_free(b);
    return out;
}

/* A leaf for ME under issuer, valid for an hour, with spec overrides from s. */
static cert_spec leaf_spec(X509 *issuer, EVP_PKEY *issuer_key)
{
    return (cert_spec){.issuer = issuer,
                       .issuer_key = issuer_key,
                       .key = leaf_key,
                       .not_before = -120,
                       .not_after = HOUR,
                       .san = "critical,URI:" ME};
}

static fe_clientcert *verifier(X509 *ca, X509 *chain, X509 *roots)
{
    char *roots_pem = to_pem(roots);
    char *chain_pem = chain ? to_pem(chain) : NULL;
    fe_clientcert *cc = NULL;
    hsmca_err e;
    assert_int_equal(fe_clientcert_new(ca, chain_pem, roots_pem, TD, &cc, &e), HSMCA_OK);
    free(roots_pem);
    free(chain_pem);
    return cc;
}

/* Verifies s's certificate with cc at time at: the code, the identity in id. */
static hsmca_code check_at(const fe_clientcert *cc, const cert_spec *s, int64_t at, char *id,
                           size_t idsz, hsmca_err *e)
{
    X509 *x = make_cert(s);
    char *pem = to_pem(x);
    hsmca_code rc = fe_clientcert_verify_pem(cc, pem, strlen(pem), at, id, idsz, e);
    free(pem);
    X509_free(x);
    return rc;
}

static void assert_refused(const fe_clientcert *cc, const cert_spec *s, int64_t at,
                           const char *reason)
{
    char id[512];
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(check_at(cc, s, at, id, sizeof(id), &e), HSMCA_EAUTH);
    if (!strstr(e.msg, reason))
        fail_msg("expected \"%s\" in \"%s\"", reason, e.msg);
    assert_string_equal(id, "");
}

static void assert_identity(const fe_clientcert *cc, const cert_spec *s)
{
    char id[512];
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = check_at(cc, s, now, id, sizeof(id), &e);
    if (rc != HSMCA_OK)
        fail_msg("refused: %s", e.msg);
    assert_string_equal(id, ME);
}

static int setup(void **state)
{
    (void)state;
    now = (int64_t)time(NULL);
    root_key = EVP_EC_gen("P-256");
    inter_key = EVP_EC_gen("P-256");
    inter2_key = EVP_EC_gen("P-256");
    sibling_key = EVP_EC_gen("P-256");
    foreign_key = EVP_EC_gen("P-256");
    leaf_key = EVP_EC_gen("P-256");
    cert_spec r = {.cn = "Root CA",
                   .key = root_key,
                   .ca = 1,
                   .not_before = -HOUR,
                   .not_after = 400 * 24 * HOUR};
    root = make_cert(&r);
    /* Another key under the very same name: only the signature tells them apart. */
    cert_spec f = r;
    f.key = foreign_key;
    foreign = make_cert(&f);
    cert_spec i = {.cn = "Issuing CA",
                   .issuer = root,
                   .issuer_key = root_key,
                   .key = inter_key,
                   .ca = 1,
                   .not_before = -HOUR,
                   .not_after = 300 * 24 * HOUR};
    inter = make_cert(&i);
    cert_spec s = i;
    s.cn = "istiod CA";
    s.key = sibling_key;
    sibling = make_cert(&s);
    cert_spec i2 = {.cn = "Issuing CA 2",
                    .issuer = inter,
                    .issuer_key = inter_key,
                    .key = inter2_key,
                    .ca = 1,
                    .not_before = -HOUR,
                    .not_after = 200 * 24 * HOUR};
    inter2 = make_cert(&i2);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    X509 *certs[] = {root, inter, inter2, sibling, foreign};
    for (size_t i = 0; i < sizeof(certs) / sizeof(certs[0]); i++)
        X509_free(certs[i]);
    EVP_PKEY *keys[] = {root_key, inter_key, inter2_key, sibling_key, foreign_key, leaf_key};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        EVP_PKEY_free(keys[i]);
    return 0;
}

static void test_leaf_of_root_ca(void **state)
{
    (void)state;
    fe_clientcert *cc = verifier(root, NULL, root);
    cert_spec s = leaf_spec(root, root_key);
    assert_identity(cc, &s);
    /* Other SAN types beside the one URI do not change who it is. */
    s.san = "critical,URI:" ME ",DNS:sleep.default.svc";
    assert_identity(cc, &s);
    fe_clientcert_free(cc);
}

static void test_leaf_of_intermediate_ca(void **state)
{
    (void)state;
    fe_clientcert *cc = verifier(inter, NULL, root);
    cert_spec s = leaf_spec(inter, inter_key);
    assert_identity(cc, &s);
    fe_clientcert_free(cc);
    /* Our CA two levels down: the chain file fills the gap to the root. */
    cc = verifier(inter2, inter, root);
    s = leaf_spec(inter2, inter2_key);
    assert_identity(cc, &s);
    fe_clientcert_free(cc);
    /* Without the chain file there is no path. */
    cc = verifier(inter2, NULL, root);
    assert_refused(cc, &s, now, "does not verify to our roots at depth 1");
    fe_clientcert_free(cc);
}

static void test_another_ca_refused(void **state)
{
    (void)state;
    fe_clientcert *cc = verifier(root, NULL, root);
    cert_spec s = leaf_spec(foreign, foreign_key); /* same issuer name, other key */
    assert_refused(cc, &s, now, "client certificate: does not verify to our roots at depth 0");
    /* Self-signed, with our identity. */
    s = leaf_spec(NULL, NULL);
    assert_refused(cc, &s, now, "does not verify to our roots");
    fe_clientcert_free(cc);
}

static void test_only_our_ca_issues(void **state)
{
    (void)state;
    /* A sibling CA under the same root (an istiod intermediate we approved) and
     * the root itself chain to our roots, but are not our CA. */
    fe_clientcert *cc = verifier(inter, NULL, root);
    cert_spec s = leaf_spec(root, root_key);
    assert_refused(cc, &s, now, "client certificate: not issued by this CA");
    /* The sibling is not among the certificates we build paths with (the peer's
     * own chain is never used), so its leaves have no path at all. */
    s = leaf_spec(sibling, sibling_key);
    assert_refused(cc, &s, now, "does not verify to our roots at depth 0");
    fe_clientcert_free(cc);
    /* An intermediate of our chain file is not our CA either. */
    cc = verifier(inter2, inter, root);
    s = leaf_spec(inter, inter_key);
    assert_refused(cc, &s, now, "client certificate: not issued by this CA");
    fe_clientcert_free(cc);
    /* Our own CA certificate presented as a client certificate, one fit for
     * clientAuth and carrying our identity: its path is itself alone. */
    cert_spec c = {.cn = "Root CA",
                   .key = root_key,
                   .ca = 1,
                   .not_before = -HOUR,
                   .not_after = HOUR,
                   .san = "URI:" ME,
                   .eku = "clientAuth",
                   .ku = "critical,digitalSignature,keyCertSign"};
    X509 *self = make_cert(&c);
    cc = verifier(self, NULL, self);
    char *pem = to_pem(self);
    char id[512];
    hsmca_err e;
    assert_int_equal(fe_clientcert_verify_pem(cc, pem, strlen(pem), now, id, sizeof(id), &e),
                     HSMCA_EAUTH);
    if (!strstr(e.msg, "not issued by this CA"))
        fail_msg("refused for another reason: %s", e.msg);
    free(pem);
    X509_free(self);
    fe_clientcert_free(cc);
}

static void test_validity_window(void **state)
{
    (void)state;
    fe_clientcert *cc = verifier(root, NULL, root);
    cert_spec s = leaf_spec(root, root_key);
    assert_refused(cc, &s, now + HOUR + 60, "depth 0: certificate has expired");
    assert_refused(cc, &s, now - 600, "depth 0: certificate is not yet valid");
    s.not_before = -2 * HOUR;
    s.not_after = -HOUR;
    assert_refused(cc, &s, now, "certificate has expired");
    fe_clientcert_free(cc);
}

static void test_purpose_and_ca_flag(void **state)
{
    (void)state;
    fe_clientcert *cc = verifier(root, NULL, root);
    cert_spec s = leaf_spec(root, root_key);
    s.eku = "serverAuth";
    assert_refused(cc, &s, now, "unsuitable certificate purpose");
    s = leaf_spec(root, root_key);
    s.ca = 1;
    s.eku = "clientAuth";
    s.ku = "critical,digitalSignature,keyCertSign";
    assert_refused(cc, &s, now, "is a CA certificate");
    fe_clientcert_free(cc);
}

static void test_uri_sans(void **state)
{
    (void)state;
    fe_clientcert *cc = verifier(root, NULL, root);
    cert_spec s = leaf_spec(root, root_key);
    s.san = NULL;
    assert_refused(cc, &s, now, "client certificate: no SAN extension");
    s.san = "critical,DNS:localhost,IP:127.0.0.1"; /* like the front end's serving certificate */
    assert_refused(cc, &s, now, "client certificate: 0 URI SANs (exactly one needed)");
    s.san = "critical,URI:" ME ",URI:spiffe://cluster.local/ns/default/sa/admin";
    assert_refused(cc, &s, now, "client certificate: 2 URI SANs");
    s.san = "critical,URI:spiffe://other.domain/ns/default/sa/sleep";
    assert_refused(cc, &s, now, "client certificate: URI SAN: SPIFFE ID: trust domain");
    s.san = "critical,URI:https://cluster.local/ns/default/sa/sleep";
    assert_refused(cc, &s, now, "client certificate: URI SAN: SPIFFE ID: scheme");
    s.san = "critical,URI:spiffe://cluster.local/ns/default/sa/../admin";
    assert_refused(cc, &s, now, "client certificate: URI SAN: SPIFFE ID: path segment");
    /* An identity that does not fit the caller's buffer is refused, not cut. */
    s = leaf_spec(root, root_key);
    char id[8];
    hsmca_err e;
    assert_int_equal(check_at(cc, &s, now, id, sizeof(id), &e), HSMCA_EAUTH);
    assert_non_null(strstr(e.msg, "too long"));
    assert_string_equal(id, "");
    fe_clientcert_free(cc);
}

static void test_not_a_certificate(void **state)
{
    (void)state;
    fe_clientcert *cc = verifier(root, NULL, root);
    char id[512];
    hsmca_err e;
    const char junk[] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    assert_int_equal(fe_clientcert_verify_pem(cc, junk, strlen(junk), now, id, sizeof(id), &e),
                     HSMCA_EAUTH);
    assert_non_null(strstr(e.msg, "not a PEM X.509 certificate"));
    assert_int_equal(fe_clientcert_verify_pem(cc, "", 0, now, id, sizeof(id), &e), HSMCA_EAUTH);
    assert_non_null(strstr(e.msg, "empty"));
    /* The length is checked before anything is parsed. */
    size_t big = FE_CLIENTCERT_MAX_PEM + 1;
    char *huge = malloc(big);
    assert_non_null(huge);
    memset(huge, 'A', big);
    assert_int_equal(fe_clientcert_verify_pem(cc, huge, big, now, id, sizeof(id), &e), HSMCA_EAUTH);
    assert_non_null(strstr(e.msg, "exceeds"));
    free(huge);
    /* A valid certificate followed by bytes that are not read: only the first counts. */
    cert_spec s = leaf_spec(root, root_key);
    X509 *x = make_cert(&s);
    char *pem = to_pem(x);
    size_t n = strlen(pem);
    assert_int_equal(fe_clientcert_verify_pem(cc, pem, n - 10, now, id, sizeof(id), &e),
                     HSMCA_EAUTH); /* cut short */
    free(pem);
    X509_free(x);
    fe_clientcert_free(cc);
}

static void test_no_certificate_on_the_call(void **state)
{
    (void)state;
    fe_clientcert *cc = verifier(root, NULL, root);
    assert_int_equal(fe_clientcert_presented(NULL), 0);
    char id[512] = "stale";
    hsmca_err e;
    assert_int_equal(fe_clientcert_identity(cc, NULL, now, id, sizeof(id), &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "client certificate: none presented");
    assert_string_equal(id, "");
    fe_clientcert_free(cc);
}

static void test_new_refuses_bad_inputs(void **state)
{
    (void)state;
    fe_clientcert *cc = (fe_clientcert *)1;
    hsmca_err e;
    char *roots = to_pem(root);
    assert_int_equal(fe_clientcert_new(root, NULL, "no certificate here", TD, &cc, &e),
                     HSMCA_EINVAL);
    assert_null(cc);
    assert_non_null(strstr(e.msg, "root bundle"));
    assert_int_equal(fe_clientcert_new(root, "junk", roots, TD, &cc, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "chain file"));
    char td[300];
    memset(td, 'a', sizeof(td) - 1);
    td[sizeof(td) - 1] = '\0';
    assert_int_equal(fe_clientcert_new(root, NULL, roots, td, &cc, &e), HSMCA_EINVAL);
    /* A bundle of several roots (rotation): a leaf under either verifies. */
    char *both = malloc(strlen(roots) * 3);
    assert_non_null(both);
    char *fpem = to_pem(foreign);
    snprintf(both, strlen(roots) * 3, "%s%s", fpem, roots);
    assert_int_equal(fe_clientcert_new(root, NULL, both, TD, &cc, &e), HSMCA_OK);
    cert_spec s = leaf_spec(root, root_key);
    assert_identity(cc, &s);
    /* ... but only through our CA, even when the other root is trusted. */
    s = leaf_spec(foreign, foreign_key);
    assert_refused(cc, &s, now, "not issued by this CA");
    fe_clientcert_free(cc);
    free(fpem);
    free(both);
    free(roots);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leaf_of_root_ca),
        cmocka_unit_test(test_leaf_of_intermediate_ca),
        cmocka_unit_test(test_another_ca_refused),
        cmocka_unit_test(test_only_our_ca_issues),
        cmocka_unit_test(test_validity_window),
        cmocka_unit_test(test_purpose_and_ca_flag),
        cmocka_unit_test(test_uri_sans),
        cmocka_unit_test(test_not_a_certificate),
        cmocka_unit_test(test_no_certificate_on_the_call),
        cmocka_unit_test(test_new_refuses_bad_inputs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

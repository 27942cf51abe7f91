/* fuzz_ca.c - see fuzz_ca.h. */
#include "fuzz_ca.h"

#include <stdint.h>
#include <time.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "fuzz_common.h"

/* Fixed, so the AKI of every seed TBS names this CA whatever its key. */
#define FUZZ_CA_SKI "5A:11:C0:FF:EE:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE"

static int add_ext(X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    int ok = ext && X509_add_ext(x, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

X509 *fuzz_ca_new(EVP_PKEY **key)
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    X509 *x = X509_new();
    X509_NAME *n = x ? X509_get_subject_name(x) : NULL;
    int ok = k && x && X509_set_version(x, X509_VERSION_3) &&
             ASN1_INTEGER_set(X509_get_serialNumber(x), 1) &&
             X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC,
                                        (const unsigned char *)"hsmca fuzz", -1, -1, 0) &&
             X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                                        (const unsigned char *)"fuzz root", -1, -1, 0) &&
             X509_set_issuer_name(x, n) &&
             ASN1_TIME_set(X509_getm_notBefore(x), (time_t)(FUZZ_NOW - 365 * 86400)) &&
             ASN1_TIME_set(X509_getm_notAfter(x), (time_t)(FUZZ_NOW + 5 * 365 * 86400)) &&
             X509_set_pubkey(x, k) && add_ext(x, NID_basic_constraints, "critical,CA:TRUE") &&
             add_ext(x, NID_key_usage, "critical,keyCertSign,cRLSign") &&
             add_ext(x, NID_subject_key_identifier, FUZZ_CA_SKI) &&
             X509_sign(x, k, EVP_sha256()) > 0;
    if (!ok) {
        X509_free(x);
        EVP_PKEY_free(k);
        return NULL;
    }
    if (key)
        *key = k;
    else
        EVP_PKEY_free(k);
    return x;
}

tbs_policy fuzz_ca_policy(X509 *ca)
{
    tbs_policy p = {
        .ca_cert = ca,
        .ca_sig_nid = NID_ecdsa_with_SHA256,
        .max_ttl = 86400,
        .serving_max_ttl = 7 * 86400,
        .trust_domains = {FUZZ_TRUST_DOMAIN},
        .n_trust_domains = 1,
        .serving_dns = {"localhost", "hsmca.hsmca-system.svc"},
        .n_serving_dns = 2,
        .serving_ips = {"127.0.0.1", "::1"},
        .n_serving_ips = 2,
    };
    return p;
}

/* The istiod keys (EC P-256): fixed, so seeds made for them (seeds_ca.py reads them
 * from here) keep naming the same keys. */
static const char *const istiod_keys[FUZZ_CA_ISTIOD_KEYS] = {
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgGM4CfIhcIPbcgDU+\n"
    "cdAgwBRyHcgp+IYCXyCTTfsAIy+hRANCAAQr7t2+C2/GPAqr132qzp5wPQEcbDCi\n"
    "CskMtJ7ZHrQ++h3AiOCtLO5aGDX+6eIMaZbBy9Rzn+sV1gVS2EF9C79H\n"
    "-----END PRIVATE KEY-----\n",
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQguWSN9DezTV8p0kEq\n"
    "SZuB4/w+nkLR57z5uYELB14Q6ZOhRANCAATKLjkWggqcN9QMbsbrIEkNaH/cjGbh\n"
    "D7uYRziSaZHHQJOhQbUq3k2d7cW0YWYAHTK0GwaGejeik++HUNueKcjs\n"
    "-----END PRIVATE KEY-----\n",
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgmulYZqBnNSf3Z/Uy\n"
    "WtWOuZIK3FEWGnfxJBnt2rFQpbShRANCAAQ3ZjD4e0l9uilJ2YhDH3YqcTpJ9Z9V\n"
    "rASBED945fYdWAOK8XGO1fGGH7OvK9BLQ1bkce3N4T4hEAgfM3VhiwFj\n"
    "-----END PRIVATE KEY-----\n",
};

int fuzz_ca_intermediate(X509 *ca, EVP_PKEY *ca_key, int which, const char *serial_hex,
                         int64_t not_before, int64_t not_after, EVP_PKEY **key, uint8_t **csr,
                         int *csr_len, uint8_t **cert, int *cert_len)
{
    BIO *b = which >= 0 && which < FUZZ_CA_ISTIOD_KEYS
                 ? BIO_new_mem_buf(istiod_keys[which], -1)
                 : NULL;
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    X509_REQ *req = X509_REQ_new();
    X509 *x = X509_new();
    BIGNUM *bn = NULL;
    *csr = *cert = NULL;
    int ok = k && req && x && X509_REQ_set_pubkey(req, k) &&
             X509_NAME_add_entry_by_txt(X509_REQ_get_subject_name(req), "CN", MBSTRING_ASC,
                                        (const unsigned char *)"istiod", -1, -1, 0) &&
             X509_REQ_sign(req, k, EVP_sha256()) > 0 && (*csr_len = i2d_X509_REQ(req, csr)) > 0 &&
             BN_hex2bn(&bn, serial_hex) && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
             X509_set_version(x, X509_VERSION_3) &&
             X509_set_issuer_name(x, X509_get_subject_name(ca)) &&
             X509_set_subject_name(x, X509_REQ_get_subject_name(req)) &&
             ASN1_TIME_set(X509_getm_notBefore(x), (time_t)not_before) &&
             ASN1_TIME_set(X509_getm_notAfter(x), (time_t)not_after) && X509_set_pubkey(x, k) &&
             add_ext(x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
             X509_sign(x, ca_key, EVP_sha256()) > 0 && (*cert_len = i2d_X509(x, cert)) > 0;
    BN_free(bn);
    X509_free(x);
    X509_REQ_free(req);
    if (!ok) {
        OPENSSL_free(*csr);
        OPENSSL_free(*cert);
        EVP_PKEY_free(k);
        return 0;
    }
    *key = k;
    return 1;
}

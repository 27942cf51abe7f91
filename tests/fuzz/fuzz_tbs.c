/* fuzz_tbs.c - libFuzzer target for tbs_validate (signer/signer_tbs.h): the
 * signer's last line against a compromised front end.
 *
 * The first input byte picks the profile (bit 0: workload leaf or serving
 * certificate); the rest is the DER TBSCertificate. The CA (fuzz_ca.c) and the
 * policy are fixed and "now" is FUZZ_NOW, so seeds built for them pass.
 * Oracles: an accepted TBS yields facts inside the profile (serial 8-20
 * octets, validity within the TTL, exactly one SAN for a workload, a SPIFFE ID
 * in the trust domain) and is DER that OpenSSL parses and re-encodes to the
 * same bytes; a refusal names its invariant and zeroes the facts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_ca.h"
#include "fuzz_common.h"
#include "certasm.h"
#include "signer_tbs.h"

static X509 *g_ca;
static tbs_policy g_pol;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    g_ca = fuzz_ca_new(NULL);
    if (!g_ca)
        abort();
    g_pol = fuzz_ca_policy(g_ca);
    return 0;
}

static void check_facts(const tbs_facts *f, profile_id prof)
{
    uint32_t ttl = prof == PROFILE_WORKLOAD ? g_pol.max_ttl : g_pol.serving_max_ttl;
    static const char uri[] = "uri:spiffe://" FUZZ_TRUST_DOMAIN "/";
    if (f->serial_len < 8 || f->serial_len > 20 || (f->serial[0] & 0x80) ||
        f->not_after <= f->not_before || f->not_after - f->not_before > (int64_t)ttl ||
        !memchr(f->sans, '\0', sizeof(f->sans)) || f->sans[0] == '\0' || f->n_sans < 1)
        abort();
    if (prof == PROFILE_WORKLOAD &&
        (f->n_sans != 1 || strncmp(f->sans, uri, sizeof(uri) - 1) != 0))
        abort();
}

/* An accepted TBS is DER: wrapped as a certificate with a dummy signature,
 * OpenSSL parses it and re-encodes exactly the same bytes. */
static void check_reencodes(const uint8_t *der, size_t n)
{
    static const uint8_t sig[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t *cert = NULL, *again = NULL;
    size_t cert_len = 0;
    if (certasm_assemble(der, n, g_pol.ca_sig_nid, sig, sizeof(sig), &cert, &cert_len, NULL) !=
        HSMCA_OK)
        abort();
    const uint8_t *p = cert;
    X509 *x = d2i_X509(NULL, &p, (long)cert_len);
    if (!x || p != cert + cert_len)
        abort();
    int m = i2d_re_X509_tbs(x, &again);
    if (m <= 0 || (size_t)m != n || memcmp(again, der, n) != 0)
        abort();
    OPENSSL_free(again);
    X509_free(x);
    OPENSSL_free(cert);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > PROFILE_TBS_MAX + 2)
        return 0;
    profile_id prof = (data[0] & 1) ? PROFILE_SERVING : PROFILE_WORKLOAD;
    size_t n = size - 1;
    uint8_t *der = malloc(n ? n : 1); /* exactly n bytes, so ASan sees any overread */
    if (!der)
        return 0;
    memcpy(der, data + 1, n);
    tbs_facts f;
    memset(&f, 0x5A, sizeof(f));
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = tbs_validate(der, n, prof, &g_pol, FUZZ_NOW, &f, &e);
    if (rc == HSMCA_OK) {
        check_facts(&f, prof);
        check_reencodes(der, n);
    } else {
        static const tbs_facts zero;
        if ((rc != HSMCA_EPERM && rc != HSMCA_EINVAL && rc != HSMCA_EINTERNAL) ||
            strncmp(e.msg, "invariant ", 10) != 0 || memcmp(&f, &zero, sizeof(f)) != 0)
            abort();
    }
    free(der);
    return 0;
}

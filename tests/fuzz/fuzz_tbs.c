/* fuzz_tbs.c - libFuzzer target for tbs_validate (signer/signer_tbs.h): the
 * signer's last line against a compromised front end.
 *
 * The first input byte picks the profile (bit 0: workload leaf or serving
 * certificate); the rest is the DER TBSCertificate. The CA (fuzz_ca.c) and the
 * policy are fixed and "now" is FUZZ_NOW, so seeds built for them pass.
 * Oracles: an accepted TBS yields facts inside the profile (serial 8-20
 * octets, validity within the TTL, a workload SAN in the trust domain); a
 * refusal names its invariant and zeroes the facts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_ca.h"
#include "fuzz_common.h"
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

static void check_facts(const tbs_facts *f, tbs_profile prof)
{
    static const char spiffe[] = "spiffe://" FUZZ_TRUST_DOMAIN "/";
    uint32_t ttl = prof == TBS_PROFILE_WORKLOAD ? g_pol.max_ttl : g_pol.serving_max_ttl;
    if (f->serial_len < 8 || f->serial_len > 20 || (f->serial[0] & 0x80) ||
        f->not_after <= f->not_before || f->not_after - f->not_before > (int64_t)ttl ||
        !memchr(f->first_san, '\0', sizeof(f->first_san)) || f->first_san[0] == '\0')
        abort();
    if (prof == TBS_PROFILE_WORKLOAD && strncmp(f->first_san, spiffe, sizeof(spiffe) - 1) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > TBS_MAX_LEN + 2)
        return 0;
    tbs_profile prof = (data[0] & 1) ? TBS_PROFILE_SERVING : TBS_PROFILE_WORKLOAD;
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
    } else {
        static const tbs_facts zero;
        if ((rc != HSMCA_EPERM && rc != HSMCA_EINVAL && rc != HSMCA_EINTERNAL) ||
            strncmp(e.msg, "invariant ", 10) != 0 || memcmp(&f, &zero, sizeof(f)) != 0)
            abort();
    }
    free(der);
    return 0;
}

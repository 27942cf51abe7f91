/* fuzz_csr.c - libFuzzer target for leaf_csr_parse (leafcert/leaf_csr.h).
 *
 * The first input byte picks how the rest reaches the parser:
 *   even: the bytes are the PEM text a workload sends (exercises the strict PEM
 *         and base64 reader);
 *   odd:  the bytes are DER, wrapped here in a well-formed PEM block, so the
 *         mutations land in the ASN.1, the key checks and the SAN walk instead
 *         of dying in base64. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "leaf_csr.h"

/* PEM text of der: header, 64-column base64 lines, footer. Caller frees. */
static char *pem_wrap(const uint8_t *der, size_t n, size_t *outlen)
{
    static const char head[] = "-----BEGIN CERTIFICATE REQUEST-----\n";
    static const char foot[] = "-----END CERTIFICATE REQUEST-----\n";
    size_t b64len = 4 * ((n + 2) / 3);
    size_t cap = sizeof(head) + b64len + b64len / 64 + 2 + sizeof(foot);
    char *pem = malloc(cap);
    if (!pem)
        return NULL;
    size_t o = 0;
    memcpy(pem + o, head, sizeof(head) - 1);
    o += sizeof(head) - 1;
    for (size_t i = 0; i < n; i += 48) { /* 48 bytes -> one 64-character line */
        size_t chunk = n - i < 48 ? n - i : 48;
        o += (size_t)EVP_EncodeBlock((unsigned char *)pem + o, der + i, (int)chunk);
        pem[o++] = '\n';
    }
    memcpy(pem + o, foot, sizeof(foot) - 1);
    o += sizeof(foot) - 1;
    *outlen = o;
    return pem;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 2 * LEAF_CSR_MAX_LEN)
        return 0;
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    char *text;
    size_t len;
    if (data[0] & 1) {
        text = pem_wrap(rest, n, &len);
    } else {
        /* A private copy of exactly n bytes, so ASan catches any read past it. */
        text = malloc(n ? n : 1);
        if (text)
            memcpy(text, rest, n);
        len = n;
    }
    if (!text)
        return 0;

    leaf_csr csr;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (leaf_csr_parse(text, len, &csr, &e) == HSMCA_OK) {
        /* What the policy reads next must be sane for any accepted CSR. */
        if (!csr.pubkey || csr.n_uris < 0 || csr.n_uris > LEAF_CSR_MAX_SANS || csr.n_other_sans < 0)
            abort();
        for (int i = 0; i < csr.n_uris; i++)
            if (!csr.uris[i] || strlen(csr.uris[i]) == (size_t)-1)
                abort();
        leaf_csr_free(&csr);
    } else if (e.code == HSMCA_OK || e.msg[0] == '\0' || csr.pubkey || csr.n_uris != 0) {
        abort(); /* a refusal names its check and leaves nothing to free */
    }
    free(text);
    return 0;
}

/* fuzz_oidc.c - libFuzzer target for sup_oidc_parse_discovery (keyfetch/sup_oidc.h): the
 * OpenID Connect discovery document an issuer serves (network input to the
 * supervisor). The configured issuer is fixed; an accepted document yields an
 * https jwks_uri that fits the buffer, and a refusal names its check. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sup_oidc.h"

#define FUZZ_ISSUER "https://kubernetes.default.svc.cluster.local"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > SUP_OIDC_MAX_DOC + 1)
        return 0;
    char *doc = malloc(size ? size : 1); /* exactly size bytes: no NUL to lean on */
    if (!doc)
        return 0;
    memcpy(doc, data, size);
    char uri[SUP_OIDC_MAX_URL];
    memset(uri, 0x5a, sizeof(uri));
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = sup_oidc_parse_discovery(doc, size, FUZZ_ISSUER, uri, sizeof(uri), &e);
    if (rc == HSMCA_OK) {
        size_t n = strnlen(uri, sizeof(uri));
        if (n == sizeof(uri) || strncmp(uri, "https://", 8) != 0 || n <= 8)
            abort();
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)uri[i] <= ' ' || (unsigned char)uri[i] >= 0x7f)
                abort();
    } else if (e.code == HSMCA_OK || e.msg[0] == '\0') {
        abort();
    }
    free(doc);
    return 0;
}

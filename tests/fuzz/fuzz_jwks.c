/* fuzz_jwks.c - libFuzzer target for tok_jwks_parse (token/tok_jwks.h).
 * The input is the JWKS document (from a file or an OIDC issuer's jwks_uri). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok_jwks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > TOK_JWKS_MAX_LEN + 1)
        return 0;
    char *doc = malloc(size ? size : 1); /* exactly size bytes: no NUL for the parser to lean on */
    if (!doc)
        return 0;
    memcpy(doc, data, size);
    tok_jwks *ks = NULL;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = tok_jwks_parse(doc, size, &ks, &e);
    if (rc == HSMCA_OK) {
        if (!ks)
            abort();
        tok_jwks_free(ks);
    } else if (e.code == HSMCA_OK || e.msg[0] == '\0') {
        abort(); /* a refusal names its check */
    }
    free(doc);
    return 0;
}

/* fuzz_entry.c - libFuzzer target for the signing log's entry-line parser
 * (audit/audit_entry.h), which the signer's replay at start (and later the offline
 * verifier) runs over DIR/log.
 *
 * The whole input is one line (without its '\n'). Oracles: an accepted line re-encodes to
 * exactly the input bytes plus '\n' (one spelling per entry) and fits AUDIT_LINE_MAX; a
 * refusal is HSMCA_EINVAL and names its rule. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audit_entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static audit_entry_buf buf;
    static char out[AUDIT_LINE_MAX];
    audit_entry ent;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = audit_entry_parse((const char *)data, size, &ent, &buf, &e);
    if (rc != HSMCA_OK) {
        if (rc != HSMCA_EINVAL || e.msg[0] == 0)
            abort();
        return 0;
    }
    size_t n;
    if (audit_entry_encode(&ent, out, &n, &e) != HSMCA_OK || n != size + 1 ||
        memcmp(out, data, size) != 0 || out[size] != '\n' || n > AUDIT_LINE_MAX)
        abort();
    return 0;
}

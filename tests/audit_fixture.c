/* audit_fixture.c - writes a signing-log fixture directory (tests/unit/audit_fx.h) for
 * the CLI test (integration/test_audit_cli.py):
 *
 *   audit_fixture DIR ENTRIES SIZE... [--cert-sha256 HEX]
 *
 * DIR gets ENTRIES log entries, a checkpoint at each SIZE (ascending, the last is
 * `checkpoint`), their tiles, and vkey; HEX (64 lowercase hex digits) is the certificate
 * hash of the first successful issue-result. Exit status 0, or 2 on bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_fx.h"

int main(int argc, char **argv)
{
    const char *cert = NULL;
    uint64_t sizes[64];
    size_t n = 0;
    if (argc < 3) {
        fputs("usage: audit_fixture DIR ENTRIES SIZE... [--cert-sha256 HEX]\n", stderr);
        return 2;
    }
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--cert-sha256") && i + 1 < argc)
            cert = argv[++i];
        else if (n < 64)
            sizes[n++] = strtoull(argv[i], NULL, 10);
    }
    uint64_t entries = strtoull(argv[2], NULL, 10);
    for (size_t i = 0; i < n; i++)
        if (sizes[i] > entries || (i && sizes[i] <= sizes[i - 1])) {
            fputs("audit_fixture: sizes must ascend, up to ENTRIES\n", stderr);
            return 2;
        }
    afx_log l;
    afx_entries(&l, entries, 0, cert);
    audit_vkey vk;
    EVP_PKEY *key = afx_key(0, &vk);
    afx_write(argv[1], &l, sizes, n, key, &vk);
    EVP_PKEY_free(key);
    afx_log_free(&l);
    return 0;
}

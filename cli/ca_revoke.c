/* ca_revoke.c - `hsmca ca revoke`: asks the signer, over its admin socket, to revoke a
 * certificate (signer/signer_crl.h decides and records; this only asks and prints). */
#include "admin_cmd.h"
#include "ca_cmd.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli_opts.h"

const char ca_revoke_help[] =
    "usage: hsmca ca revoke SERIAL --config FILE --reason REASON [--force-unknown]\n"
    "                      (--socket PATH instead of --config: the signer's admin.socket)\n"
    "\n"
    "Revokes the certificate with serial SERIAL (hex, as `openssl x509 -serial`\n"
    "prints it; colons and a 0x prefix are accepted): an istiod intermediate this CA\n"
    "signed, or a workload certificate. The signer does it: only root and the users\n"
    "of admin.group may ask; the revocation is an entry of the audit log, with your\n"
    "user name, before the reply, and is never undone. The signer then signs a new\n"
    "CRL in the token and writes it to crl.path.\n"
    "\n"
    "  --reason         keyCompromise, cACompromise, affiliationChanged, superseded,\n"
    "                   cessationOfOperation, privilegeWithdrawn, aACompromise or\n"
    "                   unspecified (RFC 5280 names)\n"
    "  --force-unknown  revoke a serial the log does not know (a certificate of\n"
    "                   another CA key, or one that has expired); refused without it\n"
    "\n"
    "Exit status: 0 revoked, 1 refused or failed, 2 bad usage.";

/* SERIAL as the signer takes it: lowercase hex of whole octets. 0 when not hex. */
static int normalize(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    if (!strncmp(in, "0x", 2) || !strncmp(in, "0X", 2))
        in += 2;
    for (; *in && n + 2 < cap; in++) {
        if (*in == ':')
            continue;
        if (!isxdigit((unsigned char)*in))
            return 0;
        out[n++] = (char)tolower((unsigned char)*in);
    }
    out[n] = '\0';
    if (*in || n == 0)
        return 0;
    if (n % 2) { /* a leading zero completes the first octet */
        memmove(out + 1, out, n + 1);
        out[0] = '0';
    }
    return 1;
}

static int revoke_call(const char *config, const char *sock, const char *serial,
                       const char *reason, int force)
{
    json_t *req = json_pack("{s:s, s:s, s:s, s:b}", "op", "ca-revoke", "serial", serial,
                            "reason", reason, "force_unknown", force),
           *r = NULL;
    hsmca_err e;
    hsmca_code rc = req ? admin_call(config, sock, req, &r, &e)
                        : hsmca_fail(&e, HSMCA_ENOMEM, "out of memory");
    json_decref(req);
    if (rc != HSMCA_OK) {
        fprintf(stderr, "hsmca ca revoke: %s\n", e.msg);
        return 1;
    }
    const char *kind = json_string_value(json_object_get(r, "kind"));
    const char *crl_error = json_string_value(json_object_get(r, "crl_error"));
    printf("revoked serial %s (%s), reason %s: audit log seq %lld\n", serial, kind ? kind : "?",
           reason, (long long)json_integer_value(json_object_get(r, "seq")));
    if (crl_error)
        printf("no new CRL yet (the signer tries again): %s\n", crl_error);
    else
        printf("CRL number %lld written to crl.path\n",
               (long long)json_integer_value(json_object_get(r, "crl_number")));
    json_decref(r);
    return 0;
}

int ca_revoke(int argc, char **argv)
{
    static const struct option flags[] = {{"config", required_argument, 0, 'c'},
                                          {"socket", required_argument, 0, 's'},
                                          {"reason", required_argument, 0, 'r'},
                                          {"force-unknown", no_argument, 0, 'f'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    const char *operands[1] = {NULL}, *config = NULL, *sock = NULL, *reason = NULL;
    int force = 0, c;
    cli_opts o;
    cli_opts_init(&o, "hsmca ca revoke", flags, operands, 1);
    while ((c = cli_opts_next(&o, argc, argv)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 's': sock = optarg; break;
        case 'r': reason = optarg; break;
        case 'f': force = 1; break;
        case 'h': puts(ca_revoke_help); return 0;
        default: return 2;
        }
    }
    char serial[64];
    if (!operands[0] || !reason || (!config && !sock)) {
        fprintf(stderr, "hsmca ca revoke: SERIAL, --reason and --config (or --socket) are "
                        "required\n%s\n", ca_revoke_help);
        return 2;
    }
    if (!normalize(operands[0], serial, sizeof(serial)) || strlen(serial) > 40) {
        fprintf(stderr, "hsmca ca revoke: SERIAL '%s': hex of 1 to 20 octets\n", operands[0]);
        return 2;
    }
    return revoke_call(config, sock, serial, reason, force);
}

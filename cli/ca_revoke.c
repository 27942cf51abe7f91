/* ca_revoke.c - `hsmca ca revoke`: asks the signer, over its admin socket, to revoke a
 * certificate (signer/signer_crl.h decides and records; this only asks and prints). */
#include "admin_cmd.h"
#include "ca_cmd.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_opts.h"

const char ca_revoke_help[] =
    "usage: hsmca ca revoke SERIAL --config FILE --reason REASON [--force-unknown]\n"
    "       hsmca ca revoke (--identity SPIFFE-ID | --namespace NS) --config FILE\n"
    "                       --reason REASON [--until TIME]\n"
    "       hsmca ca revoke --lift (--identity SPIFFE-ID | --namespace NS) --config FILE\n"
    "                      (--socket PATH instead of --config: the signer's admin.socket)\n"
    "\n"
    "Revokes the certificate with serial SERIAL (hex, as `openssl x509 -serial`\n"
    "prints it; colons and a 0x prefix are accepted): an istiod intermediate this CA\n"
    "signed, or a workload certificate. The signer does it: only root and the users\n"
    "of admin.group may ask; the revocation is an entry of the audit log, with your\n"
    "user name, before the reply, and is never undone. The signer then signs a new\n"
    "CRL in the token and writes it to crl.path. A revoked workload certificate no\n"
    "longer renews itself (client-certificate renewal is refused); its key may still\n"
    "ask with a token: to stop an identity, revoke the identity.\n"
    "\n"
    "With --identity (or --namespace: every identity spiffe://TD/ns/NS/... of\n"
    "issuance.trust_domain), revokes every unexpired certificate of it that the log\n"
    "holds (each a revoke entry: the CRL lists them) and makes the signer refuse any\n"
    "new certificate for it, by any authenticator, until TIME or until lifted. The\n"
    "refusal holds across restarts (it is rebuilt from the log). --lift ends it\n"
    "(certificates revoked with it stay revoked).\n"
    "\n"
    "  --reason         keyCompromise, cACompromise, affiliationChanged, superseded,\n"
    "                   cessationOfOperation, privilegeWithdrawn, aACompromise or\n"
    "                   unspecified (RFC 5280 names; unspecified is not written\n"
    "                   into the CRL entry, as RFC 5280 5.3.1 says)\n"
    "  --force-unknown  revoke a serial the log does not know (a certificate of\n"
    "                   another CA key, or one that has expired); refused without it\n"
    "  --identity ID    a SPIFFE ID (spiffe://cluster.local/ns/NS/sa/SA)\n"
    "  --namespace NS   every identity of Kubernetes namespace NS\n"
    "  --until TIME     when new certificates are allowed again: RFC 3339\n"
    "                   (2026-12-01T08:00:00Z) or a duration from now (90m, 12h, 7d);\n"
    "                   without it, until --lift\n"
    "  --lift           end the revocation by identity in force\n"
    "\n"
    "Exit status: 0 revoked (or lifted), 1 refused or failed, 2 bad usage.";

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

/* Sends req (consumed) to the signer's admin socket: its reply (caller frees), or NULL
 * with the reason printed. */
static json_t *ask(const char *config, const char *sock, json_t *req)
{
    json_t *r = NULL;
    hsmca_err e;
    hsmca_code rc = req ? admin_call(config, sock, req, &r, &e)
                        : hsmca_fail(&e, HSMCA_ENOMEM, "out of memory");
    json_decref(req);
    if (rc != HSMCA_OK) {
        fprintf(stderr, "hsmca ca revoke: %s\n", e.msg);
        return NULL;
    }
    return r;
}

/* The CRL line of a revocation's reply. */
static void print_crl(json_t *r)
{
    const char *crl_error = json_string_value(json_object_get(r, "crl_error"));
    if (crl_error)
        printf("no new CRL yet (the signer tries again): %s\n", crl_error);
    else
        printf("CRL number %lld written to crl.path\n",
               (long long)json_integer_value(json_object_get(r, "crl_number")));
}

static int revoke_call(const char *config, const char *sock, const char *serial,
                       const char *reason, int force)
{
    json_t *r = ask(config, sock,
                    json_pack("{s:s, s:s, s:s, s:b}", "op", "ca-revoke", "serial", serial,
                              "reason", reason, "force_unknown", force));
    if (!r)
        return 1;
    const char *kind = json_string_value(json_object_get(r, "kind"));
    printf("revoked serial %s (%s), reason %s: audit log seq %lld\n", serial, kind ? kind : "?",
           reason, (long long)json_integer_value(json_object_get(r, "seq")));
    print_crl(r);
    json_decref(r);
    return 0;
}

/* --until: RFC 3339 UTC (YYYY-MM-DDTHH:MM:SSZ) or a duration (N followed by s, m, h, d)
 * from now; -1 when neither. */
static int64_t until_of(const char *s)
{
    struct tm tm = {0};
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (end && *end == '\0')
        return (int64_t)timegm(&tm);
    char *unit;
    long long n = strtoll(s, &unit, 10);
    long long mult = *unit == 's' ? 1 : *unit == 'm' ? 60 : *unit == 'h' ? 3600
                   : *unit == 'd' ? 86400 : 0;
    if (!isdigit((unsigned char)s[0]) || !mult || unit[1] || n <= 0 || n > 3650LL * 86400 / mult)
        return -1;
    return (int64_t)time(NULL) + n * mult;
}

static int identity_call(const char *config, const char *sock, const char *id, const char *ns,
                         const char *reason, int64_t until, int lift)
{
    json_t *req = json_pack("{s:s, s:s}", "op", "ca-revoke-identity", id ? "identity" : "namespace",
                            id ? id : ns);
    if (req && lift)
        json_object_set_new(req, "lift", json_true());
    if (req && !lift) {
        json_object_set_new(req, "reason", json_string(reason));
        json_object_set_new(req, "until", json_integer(until));
    }
    json_t *r = ask(config, sock, req);
    if (!r)
        return 1;
    const char *target = json_string_value(json_object_get(r, "identity"));
    long long seq = (long long)json_integer_value(json_object_get(r, "seq"));
    if (lift) {
        printf("lifted the revocation by identity of %s: audit log seq %lld\n", target, seq);
        json_decref(r);
        return 0;
    }
    printf("revoked %s %s, reason %s, %s: audit log seq %lld\n", ns ? "namespace" : "identity",
           target, reason, until ? "new certificates refused until the time given"
                                 : "new certificates refused until lifted", seq);
    json_t *serials = json_object_get(r, "serials");
    printf("%lld unexpired certificate(s) revoked\n",
           (long long)json_integer_value(json_object_get(r, "revoked")));
    for (size_t i = 0; i < json_array_size(serials); i++)
        printf("  serial %s\n", json_string_value(json_array_get(serials, i)));
    print_crl(r);
    json_decref(r);
    return 0;
}

/* The --identity / --namespace form, its flags checked. */
static int ca_revoke_identity(const char *config, const char *sock, const char *id,
                              const char *ns, const char *reason, const char *until, int lift)
{
    if ((!id == !ns) || (!config && !sock) || (!lift && !reason) ||
        (lift && (reason || until))) {
        fprintf(stderr, "hsmca ca revoke: one of --identity or --namespace, --config (or "
                        "--socket), and --reason (not with --lift)\n%s\n", ca_revoke_help);
        return 2;
    }
    int64_t t = until ? until_of(until) : 0;
    if (t < 0) {
        fprintf(stderr, "hsmca ca revoke: --until '%s': an RFC 3339 UTC time "
                        "(2026-12-01T08:00:00Z) or a duration (90m, 12h, 7d)\n", until);
        return 2;
    }
    return identity_call(config, sock, id, ns, reason, t, lift);
}

int ca_revoke(int argc, char **argv)
{
    static const struct option flags[] = {{"config", required_argument, 0, 'c'},
                                          {"socket", required_argument, 0, 's'},
                                          {"reason", required_argument, 0, 'r'},
                                          {"force-unknown", no_argument, 0, 'f'},
                                          {"identity", required_argument, 0, 'i'},
                                          {"namespace", required_argument, 0, 'n'},
                                          {"until", required_argument, 0, 'u'},
                                          {"lift", no_argument, 0, 'l'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    const char *operands[1] = {NULL}, *config = NULL, *sock = NULL, *reason = NULL;
    const char *id = NULL, *ns = NULL, *until = NULL;
    int force = 0, lift = 0, c;
    cli_opts o;
    cli_opts_init(&o, "hsmca ca revoke", flags, operands, 1);
    while ((c = cli_opts_next(&o, argc, argv)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 's': sock = optarg; break;
        case 'r': reason = optarg; break;
        case 'f': force = 1; break;
        case 'i': id = optarg; break;
        case 'n': ns = optarg; break;
        case 'u': until = optarg; break;
        case 'l': lift = 1; break;
        case 'h': puts(ca_revoke_help); return 0;
        default: return 2;
        }
    }
    if ((id || ns || until || lift) && !operands[0] && !force)
        return ca_revoke_identity(config, sock, id, ns, reason, until, lift);
    char serial[64];
    if (!operands[0] || !reason || (!config && !sock) || id || ns || until || lift) {
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

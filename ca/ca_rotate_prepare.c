/* ca_rotate_prepare.c - `hsmca ca rotate prepare`: the new CA key made in the token the
 * current one is in (a label of its own), its self-signed root (or, with --csr, a CSR
 * for an offline root), a ca-key entry, then the config's ca.next_key and ca.next_cert
 * (with --csr: ca.next_key only; rotate import-next adds the rest). Nothing the signer
 * uses changes. */
#include "ca_rotate.h"
#include "ca_rotate_cfg.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/x509v3.h>

#include "cert_build.h"
#include "cli_opts.h"
#include "p11.h"

static const char prepare_help[] =
    "usage: hsmca ca rotate prepare --config FILE --label LABEL --subject NAME\n"
    "                               [--ttl 10y] [--type ec-p256|...] [--out NEW.pem]\n"
    "                               [--force]\n"
    "       hsmca ca rotate prepare --config FILE --label LABEL --subject NAME\n"
    "                               --csr NEW.csr [--type ec-p256|...] [--force]\n"
    "\n"
    "Makes the new CA key in pkcs11.ca_key's token, labeled LABEL (a label no key there\n"
    "has), with ca init's template and checks, and a self-signed root for it (as ca init\n"
    "--self-signed: --subject, --ttl, --type). The root goes to NEW.pem (default:\n"
    "LABEL.pem beside ca.cert; an existing file only with --force); the config gains\n"
    "ca.next_key and ca.next_cert. Refused while a rotation is under way (ca.next_key or\n"
    "ca.previous_key set) or, without --csr, when ca.cert is not a self-signed root.\n"
    "\n"
    "--csr: for a CA under an offline root. Writes a CSR for the new key (as ca init\n"
    "--csr) to NEW.csr instead of a root; the config gains ca.next_key only. Have the\n"
    "offline root sign it as a CA certificate, then hsmca ca rotate import-next.";

typedef struct {
    const char *config, *label, *subject, *ttl, *out, *type, *csr;
    int force;
} prep_args;

static int prep_parse(int argc, char **argv, prep_args *a)
{
    static const struct option flags[] = {{"config", required_argument, 0, 'c'},
                                          {"label", required_argument, 0, 'l'},
                                          {"subject", required_argument, 0, 'j'},
                                          {"ttl", required_argument, 0, 't'},
                                          {"type", required_argument, 0, 'y'},
                                          {"out", required_argument, 0, 'o'},
                                          {"force", no_argument, 0, 'f'},
                                          {"csr", required_argument, 0, 'r'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    cli_opts o;
    cli_opts_init(&o, "hsmca ca rotate prepare", flags, NULL, 0);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(prepare_help); return -1;
        case 'c': a->config = optarg; break;
        case 'l': a->label = optarg; break;
        case 'j': a->subject = optarg; break;
        case 't': a->ttl = optarg; break;
        case 'y': a->type = optarg; break;
        case 'o': a->out = optarg; break;
        case 'f': a->force = 1; break;
        case 'r': a->csr = optarg; break;
        default: return 2;
        }
    }
    if (!a->config || !a->label || !a->subject) {
        fprintf(stderr,
                "hsmca ca rotate prepare: --config, --label and --subject are "
                "required\n%s\n",
                prepare_help);
        return 2;
    }
    if (a->csr && (a->ttl || a->out)) {
        fputs("hsmca ca rotate prepare: --ttl and --out go with a self-signed root; with "
              "--csr the offline root chooses the validity\n", stderr);
        return 2;
    }
    return 0;
}

/* Where the rotation may start from: no rotation under way, a root CA. */
static int prep_state(const rot_ctx *r, int csr)
{
    const hsmca_config *c = r->s.cfg;
    if (c->ca_next_key[0] || c->ca_previous_key[0]) {
        fprintf(stderr,
                "%s: a rotation is under way (ca.%s_key is set): take it to rotate "
                "finish first\n",
                r->step, c->ca_next_key[0] ? "next" : "previous");
        return 0;
    }
    if (csr)
        return 1; /* the new CA's issuer is the offline root's business: import-next checks */
    hsmca_err e;
    X509 *ca = c->chain[0] ? NULL : rot_load_one(c->ca_cert, "ca.cert", &e);
    int root = ca && X509_check_issued(ca, ca) == X509_V_OK;
    X509_free(ca);
    if (!root) {
        fprintf(stderr,
                "%s: ca.cert is not a self-signed root%s: ca rotate replaces a self-signed "
                "root CA with a new self-signed root; for a CA under an offline root pass "
                "--csr (docs/ROTATION.md)\n",
                r->step, c->chain[0] ? " (ca.chain is set)" : "");
        return 0;
    }
    return 1;
}

/* The new key (refused when the label is taken) and its root, signed in the token. */
static HSMCA_MUSTCHECK hsmca_code make(rot_ctx *r, const key_kind *k, const X509_NAME *name,
                                       long long validity, p11_pool **pool, X509 **root,
                                       hsmca_err *e)
{
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = ca_session_open_key(&r->s, pool, &why);
    if (rc == HSMCA_OK) {
        p11_pool_close(*pool);
        *pool = NULL;
        return hsmca_fail(e, HSMCA_EINVAL,
                          "--label: the token already holds %.160s: pick another "
                          "label; nothing made",
                          r->s.cfg->ca_key_uri);
    }
    if (rc != HSMCA_ENOTFOUND)
        return hsmca_fail(e, rc, "%s", why.msg);
    HSMCA_GUARD(ca_make_key(&r->s, k, pool, e));
    return root ? cert_build_root(*pool, name, validity, root, e) : HSMCA_OK;
}

/* The root written, the step recorded, the config told. */
static HSMCA_MUSTCHECK hsmca_code publish(rot_ctx *r, const prep_args *a, const char *uri,
                                          const char *out, p11_pool *pool, X509 *root, hsmca_err *e)
{
    STACK_OF(X509) *one = sk_X509_new_null();
    char *pem = one && sk_X509_push(one, root) ? certfile_pem(one) : NULL;
    sk_X509_free(one);
    HSMCA_ENSURE(pem, e, HSMCA_ENOMEM, "out of memory");
    hsmca_code rc = ca_install(out, "--out", pem, a->force, NULL, e);
    free(pem);
    HSMCA_GUARD(rc);
    printf("wrote the new self-signed root, signed in the token, to %s\n", out);
    EVP_PKEY *pub = p11_pool_public_key(pool);
    rc = ca_audit_record(&r->au, "rotate-prepare", uri, pub, root, e);
    EVP_PKEY_free(pub);
    HSMCA_GUARD(rc);
    rot_cfg_set sets[] = {{"ca", "next_key", uri}, {"ca", "next_cert", out}};
    HSMCA_GUARD(rot_cfg_apply(a->config, sets, 2, e));
    printf("config %s: ca.next_key and ca.next_cert set\n"
           "next: hsmca ca rotate overlap --config %s, then restart hsmca serve\n",
           a->config, a->config);
    return HSMCA_OK;
}

/* --csr: the CSR written, the step recorded (no certificate yet), ca.next_key set. */
static HSMCA_MUSTCHECK hsmca_code publish_csr(rot_ctx *r, const prep_args *a, const char *uri,
                                              const X509_NAME *name, p11_pool *pool,
                                              hsmca_err *e)
{
    char *pem = NULL;
    HSMCA_GUARD(cert_build_csr_pem(pool, name, &pem, e));
    EVP_PKEY *pub = p11_pool_public_key(pool);
    char hex[CA_HEX_LEN] = "?";
    ca_spki_sha256(pub, hex);
    hsmca_code rc = ca_audit_record(&r->au, "rotate-prepare", uri, pub, NULL, e);
    EVP_PKEY_free(pub);
    if (rc == HSMCA_OK)
        rc = ca_install(a->csr, "--csr", pem, a->force, NULL, e);
    free(pem);
    HSMCA_GUARD(rc);
    printf("wrote the CSR for the new CA key, signed in the token, to %s\n"
           "public key sha256: %s\n",
           a->csr, hex);
    rot_cfg_set sets[] = {{"ca", "next_key", uri}};
    HSMCA_GUARD(rot_cfg_apply(a->config, sets, 1, e));
    printf("config %s: ca.next_key set\n"
           "next: compare that fingerprint with what the offline root's operator sees, have\n"
           "  it sign the CSR as a CA certificate, then hsmca ca rotate import-next --config "
           "%s\n  --cert NEW-CA.pem --root ROOT.pem [--chain CHAIN.pem]\n",
           a->config, a->config);
    return HSMCA_OK;
}

static int prepare(rot_ctx *r, const prep_args *a, const key_kind *k, X509_NAME *name,
                   long long validity)
{
    char uri[CONFIG_MAX_STR], out[4096];
    hsmca_err e;
    if (!rot_uri_with_label(r->s.cfg->ca_key_uri, a->label, uri, sizeof(uri))) {
        fprintf(stderr, "%s: --label must be letters, digits, '.', '_' or '-'\n", r->step);
        return 2;
    }
    if (a->csr)
        snprintf(out, sizeof(out), "%s", a->csr);
    else if (a->out && a->out[0] != '/' && getcwd(out, sizeof(out)))
        snprintf(out + strlen(out), sizeof(out) - strlen(out), "/%s", a->out);
    else if (a->out)
        snprintf(out, sizeof(out), "%s", a->out);
    else {
        char dir[CONFIG_MAX_STR];
        snprintf(dir, sizeof(dir), "%s", r->s.cfg->ca_cert);
        snprintf(out, sizeof(out), "%s/%s.pem", dirname(dir), a->label);
    }
    if (!a->force && access(out, F_OK) == 0) {
        fprintf(stderr,
                "%s: %s exists: pass --force to replace it, or --out elsewhere; "
                "nothing done\n",
                r->step, out);
        return 1;
    }
    snprintf(r->s.cfg->ca_key_uri, sizeof(r->s.cfg->ca_key_uri), "%s", uri);
    if (p11_uri_parse(uri, &r->s.uri, &e) != HSMCA_OK) {
        fprintf(stderr, "%s: %s: %s\n", r->step, uri, e.msg);
        return 1;
    }
    if (ca_session_token(&r->s))
        return 1;
    p11_pool *pool = NULL;
    X509 *root = NULL;
    int rc = 0;
    if (make(r, k, name, validity, &pool, a->csr ? NULL : &root, &e) != HSMCA_OK ||
        (a->csr ? publish_csr(r, a, uri, name, pool, &e)
                : publish(r, a, uri, out, pool, root, &e)) != HSMCA_OK) {
        fprintf(stderr, "%s: %s\n", r->step, e.msg);
        rc = 1;
    }
    X509_free(root);
    p11_pool_close(pool);
    return rc;
}

int ca_rotate_prepare(int argc, char **argv)
{
    prep_args a = {0};
    int rc = prep_parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    const key_kind *k = key_kind_find(a.type);
    long long validity = 0;
    X509_NAME *name = NULL;
    hsmca_err e;
    if (a.type && (!k || !k->ca)) {
        fprintf(stderr, "hsmca ca rotate prepare: --type must be %s\n", key_kind_names(0));
        return 2;
    }
    if (!ca_parse_ttl(a.ttl ? a.ttl : "10y", &validity)) {
        fputs("hsmca ca rotate prepare: --ttl must be years (10y) or days (3650d)\n", stderr);
        return 2;
    }
    if (cert_build_parse_subject(a.subject, &name, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca ca rotate prepare: %s\n", e.msg);
        return 2;
    }
    rot_ctx r = {0};
    rc = rot_begin(&r, "hsmca ca rotate prepare", a.config);
    if (rc == 0)
        rc = prep_state(&r, a.csr != NULL) ? prepare(&r, &a, k, name, validity) : 1;
    rot_end(&r);
    X509_NAME_free(name);
    return rc;
}

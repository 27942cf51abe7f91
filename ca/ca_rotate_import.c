/* ca_rotate_import.c - `hsmca ca rotate import-next`: the CA certificate an offline root
 * signed for the CSR of `rotate prepare --csr`, checked as `ca import` checks a CA
 * (ca_candidate_check: the token's new key, a CA, a chain to the root now), recorded,
 * copied beside ca.cert and named in the config as ca.next_cert, ca.next_chain and
 * ca.next_root. Nothing the signer uses changes. */
#include "ca_rotate.h"
#include "ca_rotate_cfg.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509v3.h>

#include "cli_opts.h"

static const char import_help[] =
    "usage: hsmca ca rotate import-next --config FILE --cert NEW-CA.pem --root ROOT.pem\n"
    "                                   [--chain CHAIN.pem] [--force]\n"
    "\n"
    "After rotate prepare --csr: checks that NEW-CA.pem certifies ca.next_key (opened as\n"
    "serve opens it), is a CA (CA:TRUE, keyCertSign, a subjectKeyIdentifier, not expired)\n"
    "and chains now to ROOT.pem (one self-signed root: the one the CA is under today, or\n"
    "a new one) through CHAIN.pem. Then copies them beside ca.cert as LABEL.pem,\n"
    "LABEL-chain.pem and LABEL-root.pem (LABEL: ca.next_key's object=; files that hold\n"
    "something else only with --force) and sets ca.next_cert, ca.next_chain, ca.next_root.\n"
    "rotate overlap adds ROOT.pem to ca.root_bundle unless it is there already.";

typedef struct {
    const char *config, *cert, *chain, *root;
    int force;
} imp_args;

static int imp_parse(int argc, char **argv, imp_args *a)
{
    static const struct option flags[] = {
        {"config", required_argument, 0, 'c'}, {"cert", required_argument, 0, 'C'},
        {"chain", required_argument, 0, 'n'},  {"root", required_argument, 0, 'r'},
        {"force", no_argument, 0, 'f'},        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    cli_opts o;
    cli_opts_init(&o, "hsmca ca rotate import-next", flags, NULL, 0);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(import_help); return -1;
        case 'c': a->config = optarg; break;
        case 'C': a->cert = optarg; break;
        case 'n': a->chain = optarg; break;
        case 'r': a->root = optarg; break;
        case 'f': a->force = 1; break;
        default: return 2;
        }
    }
    if (!a->config || !a->cert || !a->root) {
        fprintf(stderr, "hsmca ca rotate import-next: --config, --cert and --root are "
                        "required\n%s\n", import_help);
        return 2;
    }
    return 0;
}

/* After prepare --csr, before anything was imported. */
static int imp_state(const rot_ctx *r)
{
    const hsmca_config *c = r->s.cfg;
    const char *why = !c->ca_next_key[0] ? "no new CA key prepared (ca.next_key is set by "
                                           "hsmca ca rotate prepare --csr)"
                      : c->ca_next_cert[0] ? "ca.next_cert is set already (a root made by "
                                             "prepare, or an import done)"
                      : c->ca_previous_key[0] ? "the switch is done: rotate finish is next"
                                              : NULL;
    if (why)
        fprintf(stderr, "%s: %s; nothing changed\n", r->step, why);
    return why == NULL;
}

typedef struct {
    char path[CONFIG_MAX_STR];
    const char *key;
    char *pem;
} imp_file;

static char *one_pem(X509 *x)
{
    STACK_OF(X509) *one = sk_X509_new_null();
    char *pem = one && sk_X509_push(one, x) ? certfile_pem(one) : NULL;
    sk_X509_free(one);
    return pem;
}

/* The three files beside ca.cert, each refused (before any is written) when it holds
 * something else and --force is not given, then written. */
static HSMCA_MUSTCHECK hsmca_code imp_install(rot_ctx *r, const imp_args *a, ca_candidate *k,
                                              imp_file f[3], int n, hsmca_err *e)
{
    char dir[CONFIG_MAX_STR];
    snprintf(dir, sizeof(dir), "%s", r->s.cfg->ca_cert);
    const char *d = dirname(dir), *label = r->s.uri.object;
    static const char *const suffix[3] = {"", "-root", "-chain"};
    static const char *const keys[3] = {"ca.next_cert", "ca.next_root", "ca.next_chain"};
    f[0].pem = one_pem(k->ca);
    f[1].pem = one_pem(sk_X509_value(k->roots, 0));
    if (n == 3)
        f[2].pem = certfile_pem(k->untrusted);
    for (int i = 0; i < n; i++) {
        f[i].key = keys[i];
        if ((size_t)snprintf(f[i].path, sizeof(f[i].path), "%s/%s%s.pem", d, label, suffix[i]) >=
            sizeof(f[i].path))
            return hsmca_fail(e, HSMCA_EINVAL, "ca.cert's directory is too long a path");
        if (!f[i].pem)
            return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        if (!a->force && ca_file_differs(f[i].path, f[i].pem, strlen(f[i].pem)))
            return hsmca_fail(e, HSMCA_EINVAL, "%s: %.150s exists and holds something else: "
                              "pass --force to replace it; nothing installed", f[i].key,
                              f[i].path);
    }
    for (int i = 0; i < n; i++) {
        HSMCA_GUARD(ca_install(f[i].path, f[i].key, f[i].pem, 1, NULL, e));
        printf("installed %s (%s)\n", f[i].path, f[i].key);
    }
    return HSMCA_OK;
}

/* --cert, --chain, --root read into k; the root must be one self-signed certificate. */
static HSMCA_MUSTCHECK hsmca_code imp_load(const imp_args *a, ca_candidate *k, hsmca_err *e)
{
    *k = (ca_candidate){.cert = a->cert, .chain = a->chain, .root = a->root,
                        .key = "ca.next_key"};
    if (!(k->ca = rot_load_one(a->cert, "--cert", e)))
        return e->code;
    if (a->chain && !(k->untrusted = certfile_load(a->chain, "--chain", e)))
        return e->code;
    X509 *root = rot_load_one(a->root, "--root", e);
    if (!root)
        return e->code;
    if (X509_check_issued(root, root) != X509_V_OK ||
        X509_verify(root, X509_get0_pubkey(root)) != 1) {
        X509_free(root);
        return hsmca_fail(e, HSMCA_EINVAL, "--root %.200s is not a self-signed root", a->root);
    }
    if (!(k->roots = sk_X509_new_null()) || !sk_X509_push(k->roots, root)) {
        X509_free(root);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code imp_run(rot_ctx *r, const imp_args *a, ca_candidate *k,
                                          imp_file f[3], hsmca_err *e)
{
    EVP_PKEY *key = NULL;
    HSMCA_GUARD(imp_load(a, k, e));
    HSMCA_GUARD(rot_open_next(r, &key, e));
    hsmca_code rc = ca_candidate_check(k, key, NULL, e);
    if (rc == HSMCA_OK)
        rc = ca_audit_record(&r->au, "rotate-import", r->s.cfg->ca_next_key, key, k->ca, e);
    EVP_PKEY_free(key);
    HSMCA_GUARD(rc);
    int n = k->untrusted ? 3 : 2;
    HSMCA_GUARD(imp_install(r, a, k, f, n, e));
    rot_cfg_set sets[] = {{"ca", "next_cert", f[0].path},
                          {"ca", "next_root", f[1].path},
                          {"ca", "next_chain", n == 3 ? f[2].path : ""}};
    HSMCA_GUARD(rot_cfg_apply(a->config, sets, 3, e));
    STACK_OF(X509) *bundle = certfile_load(r->s.cfg->root_bundle, "ca.root_bundle", e);
    int same = bundle && rot_find(bundle, sk_X509_value(k->roots, 0)) >= 0;
    sk_X509_pop_free(bundle, X509_free);
    printf("config %s: ca.next_cert, ca.next_root and ca.next_chain set\n"
           "%s\nnext: hsmca ca rotate overlap --config %s, then restart hsmca serve\n",
           a->config,
           same ? "the new CA is under a root ca.root_bundle holds already: overlap changes "
                  "no root, and is still the step the switch waits issuance.max_ttl after"
                : "the new CA is under a root ca.root_bundle does not hold: overlap adds it",
           a->config);
    return HSMCA_OK;
}

int ca_rotate_import_next(int argc, char **argv)
{
    imp_args a = {0};
    int rc = imp_parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    rot_ctx r = {0};
    ca_candidate k = {0};
    imp_file f[3];
    memset(f, 0, sizeof(f));
    hsmca_err e;
    rc = rot_begin(&r, "hsmca ca rotate import-next", a.config);
    if (rc == 0 && !imp_state(&r))
        rc = 1;
    if (rc == 0 && imp_run(&r, &a, &k, f, &e) != HSMCA_OK) {
        fprintf(stderr, "%s: %s\n", r.step, e.msg);
        rc = 1;
    }
    rot_end(&r);
    for (int i = 0; i < 3; i++)
        free(f[i].pem);
    X509_free(k.ca);
    sk_X509_pop_free(k.untrusted, X509_free);
    sk_X509_pop_free(k.roots, X509_free);
    return rc;
}

/* ca_import.c - `hsmca ca import`: a CA certificate made elsewhere (a root CA signed
 * the CSR of `hsmca ca init --csr`) checked against the token's key, serve's CA rule
 * (common/ca_cert_rules.h) and its chain to the root, then installed where the config
 * points. Nothing is written unless every check passed. */
#include "ca.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509v3.h>

#include "ca_audit.h"
#include "ca_cert_rules.h"
#include "ca_util.h"
#include "cli_opts.h"

const char ca_import_help[] =
    "usage: hsmca ca import --config FILE --cert CA.pem [--chain CHAIN.pem]\n"
    "                       [--root ROOT.pem] [--force]\n"
    "\n"
    "Checks CA.pem (one certificate) and installs it, nothing unless every check\n"
    "passed: its public key is the token's CA key (opened as serve opens it; a\n"
    "mismatch names both SHA-256 fingerprints); basicConstraints CA:TRUE, keyUsage\n"
    "keyCertSign, and serve's own rule for ca.cert (a CA, a subjectKeyIdentifier,\n"
    "not expired); it chains to ROOT.pem (its certificates the only trust anchors)\n"
    "through CHAIN.pem (untrusted intermediates), verified now. --root may be left\n"
    "out for a self-signed CA.pem.\n"
    "\n"
    "Installs CA.pem to ca.cert, CHAIN.pem to ca.chain, ROOT.pem to ca.root_bundle\n"
    "(each written to a temporary file, synced and renamed); a file already holding\n"
    "other content is replaced only with --force. ca.chain and ca.root_bundle must\n"
    "be set in the config for --chain and --root. Exit status: 0 installed, 1\n"
    "refused, 2 bad usage, 78 the config does not load.";

typedef struct {
    const char *config, *cert, *chain, *root;
    int force;
    ca_candidate k; /* --cert; --chain (may be NULL); --root, or the certificate itself */
    int self_signed;
} import_args;

static int import_parse(int argc, char **argv, import_args *a)
{
    static const struct option flags[] = {{"config", required_argument, 0, 'c'},
                                          {"cert", required_argument, 0, 'C'},
                                          {"chain", required_argument, 0, 'n'},
                                          {"root", required_argument, 0, 'r'},
                                          {"force", no_argument, 0, 'f'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    cli_opts o;
    cli_opts_init(&o, "hsmca ca import", flags, NULL, 0);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(ca_import_help); return -1;
        case 'c': a->config = optarg; break;
        case 'C': a->cert = a->k.cert = optarg; break;
        case 'n': a->chain = a->k.chain = optarg; break;
        case 'r': a->root = a->k.root = optarg; break;
        case 'f': a->force = 1; break;
        default: return 2;
        }
    }
    if (!a->config || !a->cert) {
        fputs("hsmca ca import: --config FILE and --cert FILE are required\n", stderr);
        return 2;
    }
    a->k.key = "pkcs11.ca_key";
    return 0;
}

static int is_self_signed(X509 *x)
{
    return X509_check_issued(x, x) == X509_V_OK && X509_verify(x, X509_get0_pubkey(x)) == 1;
}

/* --cert, --chain and --root read; where they go checked against the config. */
static HSMCA_MUSTCHECK hsmca_code import_load(const hsmca_config *c, import_args *a, hsmca_err *e)
{
    STACK_OF(X509) *certs = certfile_load(a->cert, "--cert", e);
    if (!certs)
        return HSMCA_EINVAL;
    int n = sk_X509_num(certs);
    if (n == 1)
        a->k.ca = sk_X509_shift(certs);
    sk_X509_pop_free(certs, X509_free);
    if (!a->k.ca)
        return hsmca_fail(e, HSMCA_EINVAL, "--cert %s holds %d certificates: put the CA "
                          "certificate alone there and its intermediates in --chain", a->cert, n);
    a->self_signed = is_self_signed(a->k.ca);
    if (a->chain && !(a->k.untrusted = certfile_load(a->chain, "--chain", e)))
        return HSMCA_EINVAL;
    if (a->root && !(a->k.roots = certfile_load(a->root, "--root", e)))
        return HSMCA_EINVAL;
    if (!a->root && !a->self_signed)
        return hsmca_fail(e, HSMCA_EINVAL, "--root ROOT.pem is required: %s is not "
                          "self-signed", a->cert);
    if (!a->root && ((a->k.roots = sk_X509_new_null()) == NULL || !X509_up_ref(a->k.ca) ||
                     !sk_X509_push(a->k.roots, a->k.ca)))
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    if (a->chain && !c->chain[0])
        return hsmca_fail(e, HSMCA_EINVAL, "--chain: ca.chain is not set in %s: set it to "
                          "where the intermediates go", a->config);
    if (a->root && !a->self_signed && !strcmp(c->root_bundle, c->ca_cert))
        return hsmca_fail(e, HSMCA_EINVAL, "--root: ca.root_bundle is not set in %s (it then "
                          "is ca.cert): set it to where the root goes", a->config);
    return HSMCA_OK;
}

/* The certificate holds the token's key: else both fingerprints. */
static HSMCA_MUSTCHECK hsmca_code check_key(const ca_candidate *a, EVP_PKEY *token_key,
                                           hsmca_err *e)
{
    char have[CA_HEX_LEN] = "?", want[CA_HEX_LEN] = "?";
    ca_spki_sha256(token_key, want);
    if (EVP_PKEY_eq(token_key, X509_get0_pubkey(a->ca)) == 1) {
        printf("ok   key: %s certifies the token's CA key (public key sha256 %s)\n", a->cert,
               want);
        return HSMCA_OK;
    }
    ca_spki_sha256(X509_get0_pubkey(a->ca), have);
    /* Both fingerprints in full: with a path the message would be cut at its size. */
    return hsmca_fail(e, HSMCA_EINVAL, "--cert does not certify the token's CA key "
                      "(%s): its public key sha256 is %s, the token key's is %s",
                      a->key, have, want);
}

/* A CA certificate by serve's rule, and explicitly one: CA:TRUE and keyCertSign. */
static HSMCA_MUSTCHECK hsmca_code check_ca(const ca_candidate *a, EVP_PKEY *token_key,
                                           hsmca_err *e)
{
    uint32_t f = X509_get_extension_flags(a->ca);
    if (!(f & EXFLAG_BCONS) || !(f & EXFLAG_CA))
        return hsmca_fail(e, HSMCA_EINVAL, "%s has no basicConstraints CA:TRUE: not a CA "
                          "certificate", a->cert);
    if (!(f & EXFLAG_KUSAGE) || !(X509_get_key_usage(a->ca) & KU_KEY_CERT_SIGN))
        return hsmca_fail(e, HSMCA_EINVAL, "%s has no keyUsage keyCertSign: it may not sign "
                          "certificates", a->cert);
    hsmca_code rc = ca_cert_check(a->ca, a->cert, token_key, e);
    if (rc == HSMCA_OK)
        printf("ok   CA: CA:TRUE, keyCertSign, a subjectKeyIdentifier, %ld days left\n",
               ca_days_left(X509_get0_notAfter(a->ca)));
    return rc;
}

/* X509_verify_cert now, the roots the only trust anchors, the chain untrusted. */
static HSMCA_MUSTCHECK hsmca_code check_chain(const ca_candidate *a, X509 **top_out,
                                              hsmca_err *e)
{
    X509_STORE *st = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int ok = st && ctx;
    for (int i = 0; ok && i < sk_X509_num(a->roots); i++)
        ok = X509_STORE_add_cert(st, sk_X509_value(a->roots, i));
    hsmca_code rc = HSMCA_OK;
    if (!ok || !X509_STORE_CTX_init(ctx, st, a->ca, a->untrusted)) {
        rc = hsmca_fail(e, HSMCA_ENOMEM, "cannot set up the chain check");
    } else if (X509_verify_cert(ctx) != 1) {
        int err = X509_STORE_CTX_get_error(ctx);
        rc = hsmca_fail(e, HSMCA_EINVAL, "%s does not chain to %s%s%s: %s (at depth %d)",
                        a->cert, a->root ? a->root : "itself", a->chain ? " through " : "",
                        a->chain ? a->chain : "", X509_verify_cert_error_string(err),
                        X509_STORE_CTX_get_error_depth(ctx));
    } else {
        STACK_OF(X509) *path = X509_STORE_CTX_get0_chain(ctx);
        X509 *top = sk_X509_value(path, sk_X509_num(path) - 1);
        char name[256];
        X509_NAME_oneline(X509_get_subject_name(top), name, sizeof(name));
        printf("ok   chain: %d certificate%s up to the root %s, verified now\n",
               sk_X509_num(path), sk_X509_num(path) == 1 ? "" : "s", name);
        if (top_out && X509_up_ref(top))
            *top_out = top;
    }
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
    return rc;
}

hsmca_code ca_candidate_check(const ca_candidate *c, EVP_PKEY *token_key, X509 **top,
                              hsmca_err *e)
{
    if (top)
        *top = NULL;
    HSMCA_GUARD(check_key(c, token_key, e));
    HSMCA_GUARD(check_ca(c, token_key, e));
    return check_chain(c, top, e);
}

typedef struct {
    const char *path, *key;
    char *pem;
} target;

/* ca.cert, ca.chain, ca.root_bundle: every target refused before any is written. */
static HSMCA_MUSTCHECK hsmca_code install(const hsmca_config *c, const import_args *a,
                                          hsmca_err *e)
{
    STACK_OF(X509) *one = sk_X509_new_null();
    target t[3] = {{c->ca_cert, "ca.cert", NULL}};
    int n = 1;
    if (one && sk_X509_push(one, a->k.ca))
        t[0].pem = certfile_pem(one);
    sk_X509_free(one);
    if (a->chain)
        t[n++] = (target){c->chain, "ca.chain", certfile_pem(a->k.untrusted)};
    if (a->root && strcmp(c->root_bundle, c->ca_cert) != 0)
        t[n++] = (target){c->root_bundle, "ca.root_bundle", certfile_pem(a->k.roots)};
    hsmca_code rc = HSMCA_OK;
    for (int i = 0; rc == HSMCA_OK && i < n; i++) {
        if (!t[i].pem)
            rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        else if (!a->force && ca_file_differs(t[i].path, t[i].pem, strlen(t[i].pem)))
            rc = hsmca_fail(e, HSMCA_EINVAL, "%s: %s exists and holds something else: pass "
                            "--force to replace it; nothing installed", t[i].key, t[i].path);
    }
    for (int i = 0; rc == HSMCA_OK && i < n; i++) {
        int changed = 0;
        if ((rc = ca_install(t[i].path, t[i].key, t[i].pem, 1, &changed, e)) == HSMCA_OK)
            printf("%s %s (%s)\n", changed ? "installed" : "unchanged", t[i].path, t[i].key);
    }
    for (int i = 0; i < n; i++)
        free(t[i].pem);
    return rc;
}

int ca_import(int argc, char **argv)
{
    import_args a = {0};
    ca_session s = {0};
    ca_audit au = {.lock_fd = -1};
    hsmca_err e;
    int rc = import_parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    if ((rc = ca_session_config(&s, "hsmca ca import", a.config)) == 0 &&
        (import_load(s.cfg, &a, &e) != HSMCA_OK || ca_audit_open(s.cfg, &au, &e) != HSMCA_OK)) {
        fprintf(stderr, "hsmca ca import: %s\n", e.msg);
        rc = 1;
    }
    if (rc == 0 && (rc = ca_session_token(&s)) == 0) {
        p11_pool *pool = NULL;
        EVP_PKEY *key = NULL;
        rc = 1;
        if (ca_session_open_key(&s, &pool, &e) != HSMCA_OK)
            fprintf(stderr, "hsmca ca import: pkcs11.ca_key: %s\n", e.msg);
        else if (!(key = p11_pool_public_key(pool)))
            fputs("hsmca ca import: out of memory\n", stderr);
        else if (ca_candidate_check(&a.k, key, NULL, &e) != HSMCA_OK ||
                 ca_audit_record(&au, "import", s.cfg->ca_key_uri, key, a.k.ca, &e) != HSMCA_OK ||
                 install(s.cfg, &a, &e) != HSMCA_OK)
            fprintf(stderr, "hsmca ca import: %s\n", e.msg);
        else
            rc = 0;
        if (rc == 0)
            printf("next: hsmca token check --config %s\n", a.config);
        EVP_PKEY_free(key);
        p11_pool_close(pool);
    }
    ca_audit_close(&au);
    ca_session_end(&s);
    X509_free(a.k.ca);
    sk_X509_pop_free(a.k.untrusted, X509_free);
    sk_X509_pop_free(a.k.roots, X509_free);
    return rc;
}

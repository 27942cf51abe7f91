/* ca_rotate.c - `hsmca ca rotate STEP`: the dispatch, its help, and what the steps share
 * (ca_rotate.h). */
#include "ca_rotate.h"
#include "ca.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char rotate_help[] =
    "usage: hsmca ca rotate STEP --config FILE [flags]   (hsmca ca rotate STEP --help)\n"
    "\n"
    "Replaces the CA's key and certificate (a self-signed root, or a CA under an offline\n"
    "root) with new ones, without a moment when a workload holds a certificate its\n"
    "peers cannot verify (docs/ROTATION.md). Run each step while hsmca serve is stopped,\n"
    "then start it: the signer and the front end read the CA at start. Each step is a ca-key entry of the signing log (audit.dir).\n"
    "\n"
    "  prepare     a new CA key in the token (--label) and its self-signed root; the\n"
    "              config gains them as ca.next_key and ca.next_cert\n"
    "              (--csr: a CSR for an offline root instead, ca.next_key only)\n"
    "  import-next the new CA certificate the offline root signed (--cert, --chain,\n"
    "              --root) checked and installed: ca.next_cert, ca.next_chain, ca.next_root\n"
    "  overlap     the new root joins ca.root_bundle (unless it is there: the same offline\n"
    "              root): every response carries both roots;\n"
    "              certificates are still signed by the old key\n"
    "  switch      certificates are signed by the new key (pkcs11.ca_key, ca.cert); the\n"
    "              old ones become ca.previous_key and ca.previous_cert; between two\n"
    "              self-signed roots the new root cross-signed by the old key becomes\n"
    "              ca.chain, so a peer that trusts only the old root still verifies. Not\n"
    "              sooner than issuance.max_ttl after overlap (--early to override)\n"
    "  cross-sign  the new root signed by the old key, written to --out; --offer puts it\n"
    "              in ca.chain when switch did not (ca.chain unset after switch)\n"
    "  finish      the old root leaves ca.root_bundle (unless the new CA is under it\n"
    "              too). Not sooner than issuance.max_ttl after switch (--early to\n"
    "              override)\n";

int ca_rotate(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } steps[] = {{"prepare", ca_rotate_prepare},
                 {"import-next", ca_rotate_import_next},
                 {"overlap", ca_rotate_overlap},
                 {"switch", ca_rotate_switch},
                 {"cross-sign", ca_rotate_cross},
                 {"finish", ca_rotate_finish}};
    if (argc < 2) {
        fputs(rotate_help, stderr);
        return 2;
    }
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if (!strcmp(argv[1], steps[i].name))
            return steps[i].fn(argc - 1, argv + 1);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(rotate_help, stdout);
        return 0;
    }
    fprintf(stderr, "hsmca ca rotate: unknown step '%s'\n%s", argv[1], rotate_help);
    return 2;
}

int rot_begin(rot_ctx *r, const char *cmd, const char *config)
{
    hsmca_err e;
    r->step = cmd;
    r->au.lock_fd = -1;
    int rc = ca_session_config(&r->s, cmd, config);
    if (rc)
        return rc;
    if (strcmp(r->s.cfg->root_bundle, r->s.cfg->ca_cert) == 0) {
        fprintf(stderr,
                "%s: ca.root_bundle is ca.cert (it is not set): a rotation changes "
                "the roots apart from the CA certificate. Copy ca.cert to a file of "
                "its own and set ca.root_bundle to it\n",
                cmd);
        return 1;
    }
    if (ca_audit_open(r->s.cfg, &r->au, &e) != HSMCA_OK) {
        fprintf(stderr, "%s: %s\n", cmd, e.msg);
        return 1;
    }
    return 0;
}

void rot_end(rot_ctx *r)
{
    ca_audit_close(&r->au);
    ca_session_end(&r->s);
}

int rot_uri_with_label(const char *uri, const char *label, char *out, size_t cap)
{
    if (!label[0] ||
        strspn(label, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789._-") != strlen(label) ||
        strncmp(uri, "pkcs11:", 7) != 0)
        return 0;
    const char *q = strchr(uri, '?'), *p = uri + 7;
    const char *end = q ? q : uri + strlen(uri);
    size_t n = (size_t)snprintf(out, cap, "pkcs11:");
    int labeled = 0;
    /* The attributes in their order, object= replaced in place, id= dropped. */
    while (p < end && n < cap) {
        size_t len = strcspn(p, ";?");
        const char *sep = n > 7 ? ";" : "";
        if (!strncmp(p, "object=", 7) && !labeled)
            n += (size_t)snprintf(out + n, cap - n, "%sobject=%s", sep, label), labeled = 1;
        else if (strncmp(p, "id=", 3) != 0 && strncmp(p, "object=", 7) != 0 && len > 0)
            n += (size_t)snprintf(out + n, cap - n, "%s%.*s", sep, (int)len, p);
        p += len + (p[len] == ';');
    }
    if (n < cap && !labeled)
        n += (size_t)snprintf(out + n, cap - n, "%sobject=%s", n > 7 ? ";" : "", label);
    if (n < cap && q)
        n += (size_t)snprintf(out + n, cap - n, "%s", q);
    return n < cap;
}

X509 *rot_load_one(const char *path, const char *key, hsmca_err *e)
{
    STACK_OF(X509) *certs = certfile_load(path, key, e);
    if (!certs)
        return NULL;
    X509 *x = sk_X509_num(certs) == 1 ? sk_X509_shift(certs) : NULL;
    if (!x)
        hsmca_fail(e, HSMCA_EINVAL, "%s %.160s holds %d certificates, not one", key, path,
                   sk_X509_num(certs));
    sk_X509_pop_free(certs, X509_free);
    return x;
}

int rot_find(STACK_OF(X509) * certs, X509 *x)
{
    for (int i = 0; i < sk_X509_num(certs); i++)
        if (X509_cmp(sk_X509_value(certs, i), x) == 0)
            return i;
    return -1;
}

hsmca_code rot_write_certs(const char *path, const char *key, STACK_OF(X509) * certs, hsmca_err *e)
{
    char *pem = certfile_pem(certs);
    HSMCA_ENSURE(pem, e, HSMCA_ENOMEM, "out of memory");
    hsmca_code rc = ca_install(path, key, pem, 1, NULL, e);
    free(pem);
    if (rc == HSMCA_OK)
        printf("wrote %s (%s): %d certificate%s\n", path, key, sk_X509_num(certs),
               sk_X509_num(certs) == 1 ? "" : "s");
    return rc;
}

int rot_too_soon(const rot_ctx *r, int64_t since, const char *after, int early)
{
    int64_t wait = (int64_t)r->s.cfg->max_ttl, now = (int64_t)time(NULL);
    if (!r->au.log) {
        printf("note: no signing log (audit.dir): cannot tell when %s was done; make sure "
               "issuance.max_ttl (%lld s) has passed since\n",
               after, (long long)wait);
        return 0;
    }
    if (since == 0 || now - since >= wait)
        return 0;
    if (early) {
        printf("note: --early: %lld s after %s, before issuance.max_ttl (%lld s) has passed\n",
               (long long)(now - since), after, (long long)wait);
        return 0;
    }
    fprintf(stderr,
            "%s: %s was %lld s ago (signing log); wait until issuance.max_ttl (%lld s) "
            "has passed since, so that every workload has renewed once in between, or "
            "pass --early; nothing changed\n",
            r->step, after, (long long)(now - since), (long long)wait);
    return 1;
}

hsmca_code rot_open_next(rot_ctx *r, EVP_PKEY **pub, hsmca_err *e)
{
    return rot_session_next_key(&r->s, pub, e);
}

hsmca_code rot_session_next_key(ca_session *s, EVP_PKEY **pub, hsmca_err *e)
{
    hsmca_config *c = s->cfg;
    char old[CONFIG_MAX_STR];
    hsmca_err why;
    hsmca_err_clear(&why);
    *pub = NULL;
    snprintf(old, sizeof(old), "%s", c->ca_key_uri);
    snprintf(c->ca_key_uri, sizeof(c->ca_key_uri), "%s", c->ca_next_key);
    hsmca_code rc = p11_uri_parse(c->ca_key_uri, &s->uri, &why);
    if (rc == HSMCA_OK && !s->m && ca_session_token(s))
        rc = hsmca_fail(&why, HSMCA_EIO, "the token did not open (above)");
    p11_pool *pool = NULL;
    if (rc == HSMCA_OK && (rc = ca_session_open_key(s, &pool, &why)) == HSMCA_OK &&
        !(*pub = p11_pool_public_key(pool)))
        rc = hsmca_fail(&why, HSMCA_ENOMEM, "out of memory");
    p11_pool_close(pool);
    snprintf(c->ca_key_uri, sizeof(c->ca_key_uri), "%s", old);
    return rc == HSMCA_OK ? rc : rot_fail_in(e, rc, "ca.next_key", &why);
}

hsmca_code rot_fail_in(hsmca_err *e, hsmca_code rc, const char *what, const hsmca_err *why)
{
    if (strlen(what) + 2 + strlen(why->msg) < sizeof(e->msg))
        return hsmca_fail(e, rc, "%s: %s", what, why->msg);
    return hsmca_fail(e, rc, "%s", why->msg);
}

X509 *rot_next_root(const hsmca_config *c, hsmca_err *e)
{
    return c->ca_next_root[0] ? rot_load_one(c->ca_next_root, "ca.next_root", e)
                              : rot_load_one(c->ca_next_cert, "ca.next_cert", e);
}

X509 *rot_root_of(X509 *x, const char *chain_path, STACK_OF(X509) * roots, hsmca_err *e)
{
    STACK_OF(X509) *chain = NULL;
    if (chain_path[0] && !(chain = certfile_load(chain_path, "its chain file", e)))
        return NULL;
    X509_STORE *st = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int ok = st && ctx;
    for (int i = 0; ok && i < sk_X509_num(roots); i++)
        ok = X509_STORE_add_cert(st, sk_X509_value(roots, i));
    X509 *top = NULL;
    if (!ok || !X509_STORE_CTX_init(ctx, st, x, chain)) {
        hsmca_fail(e, HSMCA_ENOMEM, "cannot set up the chain check");
    } else {
        X509_STORE_CTX_set_flags(ctx, X509_V_FLAG_NO_CHECK_TIME);
        if (X509_verify_cert(ctx) != 1) {
            hsmca_fail(e, HSMCA_EINVAL, "no path to a root of ca.root_bundle%s%.120s: %s",
                       chain ? " through " : "", chain_path,
                       X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
        } else {
            STACK_OF(X509) *path = X509_STORE_CTX_get0_chain(ctx);
            top = sk_X509_value(path, sk_X509_num(path) - 1);
            if (!X509_up_ref(top))
                top = NULL;
        }
    }
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
    sk_X509_pop_free(chain, X509_free);
    return top;
}

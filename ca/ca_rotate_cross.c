/* ca_rotate_cross.c - `hsmca ca rotate cross-sign`: the new root signed by the old CA key
 * in the token (cert_build_cross), recorded, written to --out and, with --offer after the
 * switch, put in ca.chain so every response carries it between the leaf and the roots. */
#include "ca_rotate.h"
#include "ca_rotate_cfg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/x509v3.h>

#include "cert_build.h"
#include "cli_opts.h"

static const char cross_help[] =
    "usage: hsmca ca rotate cross-sign --config FILE --out CROSS.pem [--offer] [--force]\n"
    "\n"
    "Signs, with the old CA key in the token, a certificate with the new root's subject\n"
    "and key, issued by the old root (valid until the earlier of the two roots' end), and\n"
    "writes it to CROSS.pem (an existing file only with --force). Between prepare and\n"
    "switch the old CA is pkcs11.ca_key and ca.cert, the new one ca.next_*; after switch,\n"
    "ca.previous_* and pkcs11.ca_key, ca.cert. --offer (after switch, with ca.chain unset)\n"
    "sets ca.chain to CROSS.pem: each response's cert_chain is then [leaf, CROSS, roots],\n"
    "which a peer trusting only the old root verifies. rotate finish takes it out again.\n"
    "rotate switch makes and offers one itself (LABEL-cross.pem beside ca.next_cert).";

typedef struct {
    const char *config, *out;
    int offer, force;
} cross_args;

static int cross_parse(int argc, char **argv, cross_args *a)
{
    static const struct option flags[] = {
        {"config", required_argument, 0, 'c'}, {"out", required_argument, 0, 'o'},
        {"offer", no_argument, 0, 'O'},        {"force", no_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    cli_opts o;
    cli_opts_init(&o, "hsmca ca rotate cross-sign", flags, NULL, 0);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(cross_help); return -1;
        case 'c': a->config = optarg; break;
        case 'o': a->out = optarg; break;
        case 'O': a->offer = 1; break;
        case 'f': a->force = 1; break;
        default: return 2;
        }
    }
    if (!a->config || !a->out) {
        fprintf(stderr, "hsmca ca rotate cross-sign: --config and --out are required\n%s\n",
                cross_help);
        return 2;
    }
    return 0;
}

/* The old key's URI and the two roots' paths, by the rotation's state. 0: none. */
static int pick(const hsmca_config *c, const char **old_key, const char **old_cert,
                const char **new_cert)
{
    if (c->ca_next_key[0] && c->ca_next_cert[0]) {
        *old_key = c->ca_key_uri, *old_cert = c->ca_cert, *new_cert = c->ca_next_cert;
        return 1;
    }
    if (c->ca_previous_key[0] && c->ca_previous_cert[0]) {
        *old_key = c->ca_previous_key, *old_cert = c->ca_previous_cert, *new_cert = c->ca_cert;
        return 2;
    }
    return 0;
}

hsmca_code rot_cross_sign(rot_ctx *r, const char *old_key, X509 *old_root, X509 *new_root,
                          X509 **cross, hsmca_err *e)
{
    hsmca_config *c = r->s.cfg;
    char key[CONFIG_MAX_STR], saved[CONFIG_MAX_STR];
    /* old_key may be c->ca_key_uri itself: copied before it is overwritten. */
    snprintf(key, sizeof(key), "%s", old_key);
    snprintf(saved, sizeof(saved), "%s", c->ca_key_uri);
    snprintf(c->ca_key_uri, sizeof(c->ca_key_uri), "%s", key);
    hsmca_code rc = p11_uri_parse(c->ca_key_uri, &r->s.uri, e);
    if (rc == HSMCA_OK && !r->s.m && ca_session_token(&r->s))
        rc = hsmca_fail(e, HSMCA_EIO, "the token did not open (above)");
    p11_pool *pool = NULL;
    if (rc == HSMCA_OK)
        rc = ca_session_open_key(&r->s, &pool, e);
    if (rc == HSMCA_OK)
        rc = cert_build_cross(pool, old_root, new_root, cross, e);
    p11_pool_close(pool);
    snprintf(c->ca_key_uri, sizeof(c->ca_key_uri), "%s", saved);
    return rc;
}

static HSMCA_MUSTCHECK hsmca_code cross(rot_ctx *r, const cross_args *a, hsmca_err *e)
{
    const char *old_key, *old_path, *new_path;
    int state = pick(r->s.cfg, &old_key, &old_path, &new_path);
    HSMCA_ENSURE(state, e, HSMCA_EINVAL,
                 "no rotation under way (hsmca ca rotate prepare "
                 "first)");
    HSMCA_ENSURE(!a->offer || (state == 2 && !r->s.cfg->chain[0]), e, HSMCA_EINVAL, "--offer: %s",
                 state != 2 ? "only after rotate switch (until then the "
                              "certificates are the old key's)"
                            : "ca.chain is set already");
    HSMCA_ENSURE(a->force || access(a->out, F_OK) != 0, e, HSMCA_EINVAL,
                 "%.200s exists: pass --force to replace it", a->out);
    char key[CONFIG_MAX_STR];
    snprintf(key, sizeof(key), "%s", old_key);
    X509 *old_root = rot_load_one(old_path, "the old root", e), *new_root = NULL, *x = NULL;
    hsmca_code rc = old_root ? HSMCA_OK : HSMCA_EINVAL;
    if (rc == HSMCA_OK && !(new_root = rot_load_one(new_path, "the new root", e)))
        rc = HSMCA_EINVAL;
    /* Under an offline root there is no old root key here: the offline root's operator
     * cross-certifies a new root, if one is needed. */
    int old_ok = old_root && X509_check_issued(old_root, old_root) == X509_V_OK;
    if (rc == HSMCA_OK && (!old_ok || X509_check_issued(new_root, new_root) != X509_V_OK))
        rc = hsmca_fail(e, HSMCA_EINVAL,
                        "cross-sign is only between two self-signed roots (a CA under an "
                        "offline root that stays needs none): %s %.100s is not one",
                        old_ok ? "the new CA" : "the old CA", old_ok ? new_path : old_path);
    if (rc == HSMCA_OK)
        rc = rot_cross_sign(r, key, old_root, new_root, &x, e);
    if (rc == HSMCA_OK)
        rc = ca_audit_record(&r->au, "rotate-cross-sign", key, X509_get0_pubkey(old_root), x, e);
    STACK_OF(X509) *one = x ? sk_X509_new_null() : NULL;
    if (rc == HSMCA_OK && one && sk_X509_push(one, x)) {
        char *pem = certfile_pem(one);
        rc = pem ? ca_install(a->out, "--out", pem, 1, NULL, e)
                 : hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        free(pem);
    }
    sk_X509_free(one);
    if (rc == HSMCA_OK)
        printf("wrote the new root cross-signed by the old key to %s\n"
               "check: openssl verify -CAfile %s %s\n",
               a->out, old_path, a->out);
    rot_cfg_set set = {"ca", "chain", a->out};
    if (rc == HSMCA_OK && a->offer && (rc = rot_cfg_apply(a->config, &set, 1, e)) == HSMCA_OK)
        printf("config %s: ca.chain is %s: restart hsmca serve to offer it\n", a->config, a->out);
    X509_free(x);
    X509_free(old_root);
    X509_free(new_root);
    return rc;
}

/* ca.next_cert's path with "-cross" before its ".pem" (or at its end). 0: too long. */
static int cross_path_of(const char *next_cert, char *out, size_t cap)
{
    size_t n = strlen(next_cert);
    size_t stem = n >= 4 && !strcmp(next_cert + n - 4, ".pem") ? n - 4 : n;
    int w = snprintf(out, cap, "%.*s-cross.pem", (int)stem, next_cert);
    return w > 0 && (size_t)w < cap;
}

/* Says so when the new CA does not chain to the old CA's root: a peer trusting only
 * that root loses the path at the switch, and no key here can give it one. */
static void note_no_path(const hsmca_config *c, X509 *old, X509 *next, STACK_OF(X509) * bundle)
{
    hsmca_err ignored;
    X509 *was = rot_root_of(old, c->chain, bundle, &ignored);
    X509 *now = was ? rot_root_of(next, c->ca_next_chain, bundle, &ignored) : NULL;
    char name[256];
    if (now && X509_cmp(was, now) != 0)
        printf("note: the new CA does not chain to the old CA's root (%s): a client that "
               "trusts only that root cannot verify the serving certificate or new "
               "certificates after the restart. Give it the new root first, or have the old "
               "root cross-certify the new one into ca.chain (docs/ROTATION.md)\n",
               X509_NAME_oneline(X509_get_subject_name(was), name, sizeof(name)));
    X509_free(was);
    X509_free(now);
}

hsmca_code rot_switch_cross(rot_ctx *r, X509 *next, STACK_OF(X509) * bundle, char *path,
                            size_t cap, hsmca_err *e)
{
    const hsmca_config *c = r->s.cfg;
    path[0] = '\0';
    X509 *old = rot_load_one(c->ca_cert, "ca.cert", e), *x = NULL;
    if (!old)
        return e->code;
    if (X509_check_issued(old, old) != X509_V_OK || X509_check_issued(next, next) != X509_V_OK ||
        c->ca_next_chain[0]) {
        note_no_path(c, old, next, bundle);
        X509_free(old);
        return HSMCA_OK;
    }
    hsmca_code rc = cross_path_of(c->ca_next_cert, path, cap)
                        ? HSMCA_OK
                        : hsmca_fail(e, HSMCA_EINVAL, "ca.next_cert: its path is too long to "
                                                      "name the cross-signed certificate's");
    if (rc == HSMCA_OK)
        rc = rot_cross_sign(r, c->ca_key_uri, old, next, &x, e);
    /* Recorded before the file is written: a certificate on disk is on the record. */
    if (rc == HSMCA_OK)
        rc = ca_audit_record(&r->au, "rotate-cross-sign", c->ca_key_uri, X509_get0_pubkey(old), x,
                             e);
    STACK_OF(X509) *one = rc == HSMCA_OK ? sk_X509_new_null() : NULL;
    if (rc == HSMCA_OK && (!one || !sk_X509_push(one, x)))
        rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    if (rc == HSMCA_OK)
        rc = rot_write_certs(path, "ca.chain", one, e);
    sk_X509_free(one);
    X509_free(x);
    X509_free(old);
    if (rc != HSMCA_OK)
        path[0] = '\0';
    return rc;
}

int ca_rotate_cross(int argc, char **argv)
{
    cross_args a = {0};
    int rc = cross_parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    char out[4096];
    if (a.out[0] != '/' && getcwd(out, sizeof(out))) {
        snprintf(out + strlen(out), sizeof(out) - strlen(out), "/%s", a.out);
        a.out = out;
    }
    rot_ctx r = {0};
    hsmca_err e;
    if ((rc = rot_begin(&r, "hsmca ca rotate cross-sign", a.config)) == 0 &&
        cross(&r, &a, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca ca rotate cross-sign: %s\n", e.msg);
        rc = 1;
    }
    rot_end(&r);
    return rc;
}

/* ca_rotate_steps.c - `hsmca ca rotate overlap|switch|finish`: each checks the rotation's
 * state in the config, records a ca-key entry, then changes the files and the config.
 * The entry comes first: a change on disk is never missing from the log. */
#include "ca_rotate.h"
#include "ca_rotate_cfg.h"

#include <stdio.h>
#include <string.h>

#include <openssl/x509v3.h>

#include "ca_cert_rules.h"
#include "cli_opts.h"

typedef struct {
    const char *config;
    int early;
} step_args;

static int step_parse(int argc, char **argv, const char *cmd, const char *help, step_args *a)
{
    static const struct option flags[] = {{"config", required_argument, 0, 'c'},
                                          {"early", no_argument, 0, 'e'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    cli_opts o;
    cli_opts_init(&o, cmd, flags, NULL, 0);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(help); return -1;
        case 'c': a->config = optarg; break;
        case 'e': a->early = 1; break;
        default: return 2;
        }
    }
    if (!a->config) {
        fprintf(stderr, "%s: --config FILE is required\n%s\n", cmd, help);
        return 2;
    }
    return 0;
}

/* The new root (ca.next_cert) and the bundle, after prepare and before switch. */
static int load_next(rot_ctx *r, X509 **next, STACK_OF(X509) **bundle)
{
    const hsmca_config *c = r->s.cfg;
    hsmca_err e;
    if (!c->ca_next_key[0] || !c->ca_next_cert[0] || c->ca_previous_key[0]) {
        fprintf(stderr,
                "%s: no new CA prepared (ca.next_key and ca.next_cert are set by "
                "hsmca ca rotate prepare%s)\n",
                r->step,
                c->ca_previous_key[0] ? "; the switch is done: rotate finish is next" : "");
        return 1;
    }
    if (!(*next = rot_load_one(c->ca_next_cert, "ca.next_cert", &e)) ||
        !(*bundle = ca_load_certs(c->root_bundle, "ca.root_bundle", &e))) {
        fprintf(stderr, "%s: %s\n", r->step, e.msg);
        return 1;
    }
    return 0;
}

static int overlap(rot_ctx *r)
{
    X509 *next = NULL;
    STACK_OF(X509) *bundle = NULL;
    hsmca_err e;
    int rc = load_next(r, &next, &bundle);
    if (rc == 0 && rot_find(bundle, next) >= 0) {
        printf("the new root is in %s (ca.root_bundle) already: nothing to do\n",
               r->s.cfg->root_bundle);
    } else if (rc == 0) {
        X509_up_ref(next);
        if (!sk_X509_push(bundle, next)) {
            X509_free(next);
            rc = 1;
            fprintf(stderr, "%s: out of memory\n", r->step);
        } else if (ca_audit_record(&r->au, "rotate-overlap", r->s.cfg->ca_next_key,
                                   X509_get0_pubkey(next), next, &e) != HSMCA_OK ||
                   rot_write_certs(r->s.cfg->root_bundle, "ca.root_bundle", bundle, &e) !=
                       HSMCA_OK) {
            rc = 1;
            fprintf(stderr, "%s: %s\n", r->step, e.msg);
        } else {
            printf("next: restart hsmca serve (every response then carries both roots); after "
                   "issuance.max_ttl (%u s), hsmca ca rotate switch\n",
                   r->s.cfg->max_ttl);
        }
    }
    X509_free(next);
    sk_X509_pop_free(bundle, X509_free);
    return rc;
}

/* The new key opened as serve opens it, and it is the new root's: what serve will check. */
static HSMCA_MUSTCHECK hsmca_code check_next_key(rot_ctx *r, X509 *next, hsmca_err *e)
{
    hsmca_config *c = r->s.cfg;
    char old[CONFIG_MAX_STR];
    snprintf(old, sizeof(old), "%s", c->ca_key_uri);
    snprintf(c->ca_key_uri, sizeof(c->ca_key_uri), "%s", c->ca_next_key);
    HSMCA_GUARD(p11_uri_parse(c->ca_key_uri, &r->s.uri, e));
    if (ca_session_token(&r->s))
        return hsmca_fail(e, HSMCA_EIO, "the token did not open (above)");
    p11_pool *pool = NULL;
    hsmca_code rc = ca_session_open_key(&r->s, &pool, e);
    EVP_PKEY *key = rc == HSMCA_OK ? p11_pool_public_key(pool) : NULL;
    if (rc == HSMCA_OK && (!key || EVP_PKEY_eq(key, X509_get0_pubkey(next)) != 1))
        rc = hsmca_fail(e, HSMCA_EINVAL, "ca.next_cert does not certify ca.next_key");
    if (rc == HSMCA_OK)
        rc = ca_cert_check(next, c->ca_next_cert, key, e);
    EVP_PKEY_free(key);
    p11_pool_close(pool);
    snprintf(c->ca_key_uri, sizeof(c->ca_key_uri), "%s", old);
    return rc;
}

static int do_switch(rot_ctx *r, int early)
{
    X509 *next = NULL;
    STACK_OF(X509) *bundle = NULL;
    hsmca_err e;
    hsmca_config *c = r->s.cfg;
    int rc = load_next(r, &next, &bundle);
    if (rc == 0 && rot_find(bundle, next) < 0) {
        fprintf(stderr,
                "%s: the new root is not in ca.root_bundle yet: run hsmca ca rotate "
                "overlap first (a workload would get a certificate its peers cannot "
                "verify)\n",
                r->step);
        rc = 1;
    }
    if (rc == 0 && rot_too_soon(r, r->au.overlapped, "rotate overlap", early))
        rc = 1;
    if (rc == 0) {
        rot_cfg_set sets[] = {{"pkcs11", "ca_key", c->ca_next_key},
                              {"ca", "cert", c->ca_next_cert},
                              {"ca", "previous_key", c->ca_key_uri},
                              {"ca", "previous_cert", c->ca_cert},
                              {"ca", "next_key", ""},
                              {"ca", "next_cert", ""}};
        if (check_next_key(r, next, &e) != HSMCA_OK ||
            ca_audit_record(&r->au, "rotate-switch", c->ca_next_key, X509_get0_pubkey(next), next,
                            &e) != HSMCA_OK ||
            rot_cfg_apply(r->s.config, sets, 6, &e) != HSMCA_OK) {
            fprintf(stderr, "%s: %s\n", r->step, e.msg);
            rc = 1;
        } else {
            printf("config %s: pkcs11.ca_key is %s, ca.cert %s; the old CA is "
                   "ca.previous_key and ca.previous_cert\n"
                   "next: restart hsmca serve; after issuance.max_ttl (%u s), hsmca ca rotate "
                   "finish\n",
                   r->s.config, sets[0].value, sets[1].value, c->max_ttl);
        }
    }
    X509_free(next);
    sk_X509_pop_free(bundle, X509_free);
    return rc;
}

/* ca.chain holds only certificates the old root issued (the cross-signed one). */
static int chain_is_cross(const hsmca_config *c, X509 *prev)
{
    hsmca_err e;
    STACK_OF(X509) *chain = c->chain[0] ? ca_load_certs(c->chain, "ca.chain", &e) : NULL;
    int all = chain != NULL;
    for (int i = 0; chain && i < sk_X509_num(chain); i++)
        all = all && X509_check_issued(prev, sk_X509_value(chain, i)) == X509_V_OK;
    sk_X509_pop_free(chain, X509_free);
    return all;
}

static int finish(rot_ctx *r, int early)
{
    hsmca_config *c = r->s.cfg;
    hsmca_err e;
    if (!c->ca_previous_key[0] || !c->ca_previous_cert[0]) {
        fprintf(stderr,
                "%s: no switch done (ca.previous_key and ca.previous_cert are set by "
                "hsmca ca rotate switch)\n",
                r->step);
        return 1;
    }
    if (rot_too_soon(r, r->au.switched, "rotate switch", early))
        return 1;
    X509 *prev = rot_load_one(c->ca_previous_cert, "ca.previous_cert", &e);
    STACK_OF(X509) *bundle = prev ? ca_load_certs(c->root_bundle, "ca.root_bundle", &e) : NULL;
    int rc = bundle ? 0 : 1, at;
    if (rc)
        fprintf(stderr, "%s: %s\n", r->step, e.msg);
    while (rc == 0 && (at = rot_find(bundle, prev)) >= 0)
        X509_free(sk_X509_delete(bundle, at));
    int cross = rc == 0 && chain_is_cross(c, prev);
    rot_cfg_set sets[] = {
        {"ca", "previous_key", ""}, {"ca", "previous_cert", ""}, {"ca", "chain", ""}};
    if (rc == 0 && sk_X509_num(bundle) == 0) {
        fprintf(stderr, "%s: ca.root_bundle would hold no root\n", r->step);
        rc = 1;
    } else if (rc == 0 &&
               (ca_audit_record(&r->au, "rotate-finish", c->ca_previous_key, X509_get0_pubkey(prev),
                                prev, &e) != HSMCA_OK ||
                rot_write_certs(c->root_bundle, "ca.root_bundle", bundle, &e) != HSMCA_OK ||
                rot_cfg_apply(r->s.config, sets, cross ? 3 : 2, &e) != HSMCA_OK)) {
        fprintf(stderr, "%s: %s\n", r->step, e.msg);
        rc = 1;
    } else if (rc == 0) {
        printf("the old root left ca.root_bundle%s; config: ca.previous_* cleared\n"
               "next: restart hsmca serve. The old key stays in the token (%s): delete it "
               "when nothing needs it (pkcs11-tool --delete-object)\n",
               cross ? ", and the cross-signed certificate ca.chain" : "", c->ca_previous_key);
    }
    X509_free(prev);
    sk_X509_pop_free(bundle, X509_free);
    return rc;
}

static const char overlap_help[] =
    "usage: hsmca ca rotate overlap --config FILE\n\n"
    "Adds ca.next_cert to ca.root_bundle. Restart hsmca serve after it.";
static const char switch_help[] =
    "usage: hsmca ca rotate switch --config FILE [--early]\n\n"
    "Makes ca.next_key and ca.next_cert the CA (pkcs11.ca_key, ca.cert) after checking the\n"
    "key opens as serve opens it and is the certificate's; the old ones become\n"
    "ca.previous_key and ca.previous_cert. Refused before issuance.max_ttl has passed\n"
    "since rotate overlap (by the signing log), unless --early. Restart hsmca serve after.";
static const char finish_help[] =
    "usage: hsmca ca rotate finish --config FILE [--early]\n\n"
    "Takes ca.previous_cert out of ca.root_bundle (and a cross-signed ca.chain), clears\n"
    "ca.previous_*. Refused before issuance.max_ttl has passed since rotate switch, unless\n"
    "--early. Restart hsmca serve after.";

static int run(int argc, char **argv, const char *cmd, const char *help, int which)
{
    step_args a = {0};
    int rc = step_parse(argc, argv, cmd, help, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    rot_ctx r = {0};
    if ((rc = rot_begin(&r, cmd, a.config)) == 0)
        rc = which == 0 ? overlap(&r) : which == 1 ? do_switch(&r, a.early) : finish(&r, a.early);
    rot_end(&r);
    return rc;
}

int ca_rotate_overlap(int argc, char **argv)
{
    return run(argc, argv, "hsmca ca rotate overlap", overlap_help, 0);
}

int ca_rotate_switch(int argc, char **argv)
{
    return run(argc, argv, "hsmca ca rotate switch", switch_help, 1);
}

int ca_rotate_finish(int argc, char **argv)
{
    return run(argc, argv, "hsmca ca rotate finish", finish_help, 2);
}

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

/* The new CA (ca.next_cert), the root it chains to (itself, or ca.next_root), the bundle
 * and where the rotation is (*st: rot_state_of), after prepare (and import-next) and before
 * switch. */
static int load_next(rot_ctx *r, rot_state *st, X509 **next, X509 **root,
                     STACK_OF(X509) **bundle)
{
    const hsmca_config *c = r->s.cfg;
    hsmca_err e;
    if (!(*bundle = certfile_load(c->root_bundle, "ca.root_bundle", &e))) {
        fprintf(stderr, "%s: %s\n", r->step, e.msg);
        return 1;
    }
    *st = rot_state_of(c, *bundle, &e);
    if (*st == ROT_UNCLEAR) {
        fprintf(stderr, "%s: %s\n", r->step, e.msg);
        return 1;
    }
    if (*st == ROT_PREPARED && !c->ca_next_cert[0]) {
        fprintf(stderr,
                "%s: the new CA's certificate is not imported yet: have the offline root "
                "sign the CSR of rotate prepare --csr, then hsmca ca rotate import-next\n",
                r->step);
        return 1;
    }
    if (*st == ROT_NONE || *st == ROT_SWITCHED) {
        fprintf(stderr,
                "%s: no new CA prepared (ca.next_key and ca.next_cert are set by "
                "hsmca ca rotate prepare%s)\n",
                r->step, *st == ROT_SWITCHED ? "; the switch is done: rotate finish is next" : "");
        return 1;
    }
    if (!(*next = rot_load_one(c->ca_next_cert, "ca.next_cert", &e)) ||
        !(*root = rot_next_root(c, &e))) {
        fprintf(stderr, "%s: %s\n", r->step, e.msg);
        return 1;
    }
    return 0;
}

/* The new root joins the bundle (unless it is there: a new CA under the same root);
 * either way the step is recorded, and switch waits issuance.max_ttl after it. */
static int overlap(rot_ctx *r)
{
    X509 *next = NULL, *root = NULL;
    STACK_OF(X509) *bundle = NULL;
    hsmca_err e;
    rot_state st = ROT_UNCLEAR;
    int rc = load_next(r, &st, &next, &root, &bundle);
    int there = rc == 0 && st == ROT_OVERLAP;
    if (rc == 0 && !there) {
        if (!X509_up_ref(root) || !sk_X509_push(bundle, root)) {
            X509_free(root);
            fprintf(stderr, "%s: out of memory\n", r->step);
            rc = 1;
        }
    }
    if (rc == 0 &&
        (ca_audit_record(&r->au, "rotate-overlap", r->s.cfg->ca_next_key,
                         X509_get0_pubkey(next), next, &e) != HSMCA_OK ||
         (!there &&
          rot_write_certs(r->s.cfg->root_bundle, "ca.root_bundle", bundle, &e) != HSMCA_OK))) {
        fprintf(stderr, "%s: %s\n", r->step, e.msg);
        rc = 1;
    } else if (rc == 0) {
        printf("%s\nnext: restart hsmca serve; after issuance.max_ttl (%u s), hsmca ca rotate "
               "switch\n",
               there ? "the new CA's root is in ca.root_bundle already: the bundle is unchanged"
                     : "the new root joined ca.root_bundle: every response carries both roots",
               r->s.cfg->max_ttl);
    }
    X509_free(next);
    X509_free(root);
    sk_X509_pop_free(bundle, X509_free);
    return rc;
}

/* The new key opened as serve opens it, and it is the new CA's: what serve will check;
 * and the new CA still chains, through ca.next_chain, to a root of the bundle. */
static HSMCA_MUSTCHECK hsmca_code check_next_key(rot_ctx *r, X509 *next, STACK_OF(X509) * bundle,
                                                 hsmca_err *e)
{
    hsmca_err why;
    hsmca_err_clear(&why);
    X509 *top = rot_root_of(next, r->s.cfg->ca_next_chain, bundle, &why);
    if (!top)
        return rot_fail_in(e, why.code, "ca.next_cert", &why);
    X509_free(top);
    EVP_PKEY *key = NULL;
    HSMCA_GUARD(rot_open_next(r, &key, e));
    hsmca_code rc = HSMCA_OK;
    if (EVP_PKEY_eq(key, X509_get0_pubkey(next)) != 1)
        rc = hsmca_fail(e, HSMCA_EINVAL, "ca.next_cert does not certify ca.next_key");
    if (rc == HSMCA_OK)
        rc = ca_cert_check(next, r->s.cfg->ca_next_cert, key, e);
    EVP_PKEY_free(key);
    return rc;
}

static int do_switch(rot_ctx *r, int early)
{
    X509 *next = NULL, *root = NULL;
    STACK_OF(X509) *bundle = NULL;
    hsmca_err e;
    hsmca_config *c = r->s.cfg;
    rot_state st = ROT_UNCLEAR;
    int rc = load_next(r, &st, &next, &root, &bundle);
    if (rc == 0 && st != ROT_OVERLAP) {
        fprintf(stderr,
                "%s: the new root is not in ca.root_bundle yet: run hsmca ca rotate "
                "overlap first (a workload would get a certificate its peers cannot "
                "verify)\n",
                r->step);
        rc = 1;
    }
    if (rc == 0 && rot_too_soon(r, r->au.overlapped, "rotate overlap", early))
        rc = 1;
    char cross[CONFIG_MAX_STR] = "";
    if (rc == 0) {
        rot_cfg_set sets[] = {{"pkcs11", "ca_key", c->ca_next_key},
                              {"ca", "cert", c->ca_next_cert},
                              {"ca", "previous_key", c->ca_key_uri},
                              {"ca", "previous_cert", c->ca_cert},
                              {"ca", "next_key", ""},
                              {"ca", "next_cert", ""},
                              {"ca", "chain", c->ca_next_chain},
                              {"ca", "previous_chain", c->chain},
                              {"ca", "next_chain", ""},
                              {"ca", "next_root", ""}};
        /* The old key cross-signs the new root while it is still the CA's: ca.chain
         * then gives peers that trust only the old root a path (rot_switch_cross). */
        hsmca_code ok = check_next_key(r, next, bundle, &e);
        if (ok == HSMCA_OK)
            ok = rot_switch_cross(r, next, bundle, cross, sizeof(cross), &e);
        sets[6].value = cross[0] ? cross : c->ca_next_chain;
        if (ok != HSMCA_OK ||
            ca_audit_record(&r->au, "rotate-switch", c->ca_next_key, X509_get0_pubkey(next), next,
                            &e) != HSMCA_OK ||
            rot_cfg_apply(r->s.config, sets, 10, &e) != HSMCA_OK) {
            fprintf(stderr, "%s: %s\n", r->step, e.msg);
            rc = 1;
        } else {
            printf("config %s: pkcs11.ca_key is %s, ca.cert %s; the old CA is "
                   "ca.previous_key and ca.previous_cert%s%s%s\n"
                   "next: restart hsmca serve; after issuance.max_ttl (%u s), hsmca ca rotate "
                   "finish\n",
                   r->s.config, sets[0].value, sets[1].value,
                   cross[0] ? "; ca.chain is " : "", cross,
                   cross[0] ? " (the new root cross-signed by the old key: peers that trust "
                              "only the old root verify through it until finish)"
                            : "",
                   c->max_ttl);
        }
    }
    X509_free(next);
    X509_free(root);
    sk_X509_pop_free(bundle, X509_free);
    return rc;
}

/* ca.chain holds only certificates the old root issued (the cross-signed one). */
static int chain_is_cross(const hsmca_config *c, X509 *prev)
{
    hsmca_err e;
    STACK_OF(X509) *chain = c->chain[0] ? certfile_load(c->chain, "ca.chain", &e) : NULL;
    int all = chain != NULL;
    for (int i = 0; chain && i < sk_X509_num(chain); i++)
        all = all && X509_check_issued(prev, sk_X509_value(chain, i)) == X509_V_OK;
    sk_X509_pop_free(chain, X509_free);
    return all;
}

/* The root to take out of the bundle: the old CA itself when it was a root; else the
 * root it chained to (through ca.previous_chain), unless the new CA chains to that
 * root too (a rotation under the same offline root): then none (*old NULL). */
static int old_root(rot_ctx *r, X509 *prev, STACK_OF(X509) * bundle, X509 **old)
{
    const hsmca_config *c = r->s.cfg;
    hsmca_err e;
    *old = NULL;
    if (X509_check_issued(prev, prev) == X509_V_OK)
        return X509_up_ref(prev) ? (*old = prev, 0) : 1;
    X509 *cur = rot_load_one(c->ca_cert, "ca.cert", &e), *now = NULL;
    X509 *was = cur ? rot_root_of(prev, c->ca_previous_chain, bundle, &e) : NULL;
    if (was)
        now = rot_root_of(cur, c->chain, bundle, &e);
    X509_free(cur);
    if (!now) {
        fprintf(stderr, "%s: %s: %s\n", r->step, was ? "ca.cert" : "ca.previous_cert", e.msg);
        X509_free(was);
        return 1;
    }
    if (X509_cmp(was, now) != 0)
        *old = was;
    else
        X509_free(was);
    X509_free(now);
    return 0;
}

static int finish(rot_ctx *r, int early)
{
    hsmca_config *c = r->s.cfg;
    hsmca_err e;
    rot_state st = rot_state_of(c, NULL, &e); /* no bundle: SWITCHED does not look at it */
    if (st != ROT_SWITCHED) {
        if (st == ROT_UNCLEAR)
            fprintf(stderr, "%s: %s\n", r->step, e.msg);
        else
            fprintf(stderr,
                    "%s: no switch done (ca.previous_key and ca.previous_cert are set by "
                    "hsmca ca rotate switch)\n",
                    r->step);
        return 1;
    }
    if (rot_too_soon(r, r->au.switched, "rotate switch", early))
        return 1;
    X509 *prev = rot_load_one(c->ca_previous_cert, "ca.previous_cert", &e), *old = NULL;
    STACK_OF(X509) *bundle = prev ? certfile_load(c->root_bundle, "ca.root_bundle", &e) : NULL;
    int rc = bundle ? 0 : 1, at;
    if (rc)
        fprintf(stderr, "%s: %s\n", r->step, e.msg);
    else
        rc = old_root(r, prev, bundle, &old);
    while (rc == 0 && old && (at = rot_find(bundle, old)) >= 0)
        X509_free(sk_X509_delete(bundle, at));
    int cross = rc == 0 && chain_is_cross(c, prev);
    rot_cfg_set sets[] = {{"ca", "previous_key", ""},
                          {"ca", "previous_cert", ""},
                          {"ca", "previous_chain", ""},
                          {"ca", "chain", ""}};
    if (rc == 0 && sk_X509_num(bundle) == 0) {
        fprintf(stderr, "%s: ca.root_bundle would hold no root\n", r->step);
        rc = 1;
    } else if (rc == 0 &&
               (ca_audit_record(&r->au, "rotate-finish", c->ca_previous_key, X509_get0_pubkey(prev),
                                prev, &e) != HSMCA_OK ||
                (old &&
                 rot_write_certs(c->root_bundle, "ca.root_bundle", bundle, &e) != HSMCA_OK) ||
                rot_cfg_apply(r->s.config, sets, cross ? 4 : 3, &e) != HSMCA_OK)) {
        fprintf(stderr, "%s: %s\n", r->step, e.msg);
        rc = 1;
    } else if (rc == 0) {
        printf("%s%s; config: ca.previous_* cleared\n"
               "next: restart hsmca serve. The old key stays in the token (%s): delete it "
               "when nothing needs it (pkcs11-tool --delete-object)\n",
               old ? "the old root left ca.root_bundle"
                   : "the new CA is under the old CA's root: ca.root_bundle is unchanged",
               cross ? ", and the cross-signed certificate ca.chain" : "", c->ca_previous_key);
    }
    X509_free(prev);
    X509_free(old);
    sk_X509_pop_free(bundle, X509_free);
    return rc;
}

static const char overlap_help[] =
    "usage: hsmca ca rotate overlap --config FILE\n\n"
    "Adds the new CA's root (ca.next_root after import-next, else ca.next_cert) to\n"
    "ca.root_bundle, unless it is there already (a new CA under the same offline root);\n"
    "recorded either way: switch waits issuance.max_ttl after it. Restart hsmca serve.";
static const char switch_help[] =
    "usage: hsmca ca rotate switch --config FILE [--early]\n\n"
    "Makes ca.next_key, ca.next_cert and ca.next_chain the CA (pkcs11.ca_key, ca.cert,\n"
    "ca.chain) after checking the key opens as serve opens it and is the certificate's;\n"
    "the old ones become ca.previous_key, ca.previous_cert, ca.previous_chain. Refused before issuance.max_ttl has passed\n"
    "since rotate overlap (by the signing log), unless --early. Between two self-signed\n"
    "roots the old key first cross-signs the new root (LABEL-cross.pem beside\n"
    "ca.next_cert), which becomes ca.chain until finish: a client that trusts only the\n"
    "old root still verifies the serving certificate and new leaves. Restart hsmca serve after.";
static const char finish_help[] =
    "usage: hsmca ca rotate finish --config FILE [--early]\n\n"
    "Takes the old root out of ca.root_bundle (ca.previous_cert, or the root it chained\n"
    "to unless the new CA is under it too) and a cross-signed ca.chain; clears\n"
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

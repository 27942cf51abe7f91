/* config_rot.c - `hsmca config check`'s checks of a rotation's keys (config_check.h,
 * docs/ROTATION.md): each certificate file present, parsed and a CA; ca.next_cert as
 * serve will take it at switch (ca_cert_check) and for another key than ca.cert's; the
 * keys a step writes together set together. */
#include "config_check.h"

#include <string.h>

#include <openssl/x509v3.h>

#include "ca_cert_rules.h"
#include "ca_util.h"
#include "certasm.h"
#include "p11.h"

/* The one CA certificate in path, or NULL after reporting against key. */
static X509 *load_ca(cc_report *r, const char *key, const char *path)
{
    hsmca_err e;
    STACK_OF(X509) *certs = certfile_load(path, path, &e);
    if (!certs) {
        cc_problem(r, key, "%s", e.msg);
        return NULL;
    }
    X509 *x = sk_X509_num(certs) == 1 ? sk_X509_shift(certs) : NULL;
    if (!x)
        cc_problem(r, key, "%s holds %d certificates, not one", path, sk_X509_num(certs));
    else if (X509_check_ca(x) != 1)
        cc_problem(r, key, "%s is not a CA certificate", path);
    sk_X509_pop_free(certs, X509_free);
    if (x && X509_check_ca(x) != 1) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static void check_chain(cc_report *r, const char *key, const char *path)
{
    hsmca_err e;
    STACK_OF(X509) *certs = path[0] ? certfile_load(path, path, &e) : NULL;
    if (path[0] && !certs)
        cc_problem(r, key, "%s", e.msg);
    sk_X509_pop_free(certs, X509_free);
}

static void check_uri(cc_report *r, const char *key, const char *uri)
{
    p11_uri u;
    hsmca_err e;
    if (uri[0] && p11_uri_parse(uri, &u, &e) != HSMCA_OK)
        cc_problem(r, key, "%s", e.msg);
}

/* ca.next_cert: what serve checks of ca.cert once switch makes it so, and a new key. */
static void check_next_cert(const hsmca_config *c, cc_report *r)
{
    hsmca_err e;
    X509 *next = load_ca(r, "ca.next_cert", c->ca_next_cert);
    if (!next)
        return;
    if (ca_cert_check(next, c->ca_next_cert, NULL, &e) != HSMCA_OK)
        cc_problem(r, "ca.next_cert", "%s", e.msg);
    X509 *cur = c->ca_cert[0] ? certasm_load_pem(c->ca_cert, &e) : NULL;
    if (cur && EVP_PKEY_eq(X509_get0_pubkey(cur), X509_get0_pubkey(next)) == 1)
        cc_problem(r, "ca.next_cert",
                   "%s certifies the key of ca.cert (%s): a rotation needs a new key "
                   "(hsmca ca rotate prepare)",
                   c->ca_next_cert, c->ca_cert);
    X509_free(cur);
    X509_free(next);
}

void cc_check_rotation(const hsmca_config *c, cc_report *r)
{
    check_uri(r, "ca.next_key", c->ca_next_key);
    check_uri(r, "ca.previous_key", c->ca_previous_key);
    if (c->ca_next_cert[0])
        check_next_cert(c, r);
    X509 *x;
    if (c->ca_next_root[0] && (x = load_ca(r, "ca.next_root", c->ca_next_root)))
        X509_free(x);
    if (c->ca_previous_cert[0] && (x = load_ca(r, "ca.previous_cert", c->ca_previous_cert)))
        X509_free(x);
    check_chain(r, "ca.next_chain", c->ca_next_chain);
    check_chain(r, "ca.previous_chain", c->ca_previous_chain);
    if (!c->ca_next_key[0] && (c->ca_next_cert[0] || c->ca_next_chain[0] || c->ca_next_root[0]))
        cc_problem(r, "ca.next_key",
                   "not set, but ca.next_cert, ca.next_chain or ca.next_root is: "
                   "hsmca ca rotate prepare sets it first");
    if (c->ca_previous_key[0] && !c->ca_previous_cert[0])
        cc_problem(r, "ca.previous_cert",
                   "not set, but ca.previous_key is: rotate switch sets both (the old CA's "
                   "certificate), rotate finish clears both");
    if (c->ca_previous_cert[0] && !c->ca_previous_key[0])
        cc_problem(r, "ca.previous_key",
                   "not set, but ca.previous_cert is: rotate switch sets both, rotate "
                   "finish clears both");
    if ((c->ca_next_key[0] || c->ca_next_cert[0]) &&
        (c->ca_previous_key[0] || c->ca_previous_cert[0]))
        cc_problem(r, "ca.next_key",
                   "ca.next_* and ca.previous_* are both set: no rotation step leaves both "
                   "(finish the rotation under way before preparing another)");
}

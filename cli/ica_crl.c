/* ica_crl.c - see ica_crl.h. */
#include "ica_crl.h"
#include "admin_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "certasm.h"
#include "config.h"
#include "util.h"

/* The digest for key (NULL: the key's own, Ed25519). */
static const EVP_MD *md_for(EVP_PKEY *key)
{
    if (EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519)
        return NULL;
    return EVP_PKEY_get_bits(key) == 384 ? EVP_sha384() : EVP_sha256();
}

static const char *ca_problem(X509 *x, EVP_PKEY *key)
{
    if (X509_check_private_key(x, key) != 1)
        return "the key is not the certificate's (X509_check_private_key)";
    if (X509_check_ca(x) < 1)
        return "the certificate is not a CA (basicConstraints CA:TRUE)";
    if (!(X509_get_extension_flags(x) & EXFLAG_KUSAGE) || !(X509_get_key_usage(x) & KU_CRL_SIGN))
        return "the certificate's keyUsage lacks cRLSign";
    if (X509_cmp_time(X509_get0_notAfter(x), NULL) <= 0)
        return "the certificate has expired";
    return NULL;
}

/* An empty v2 CRL by x's key: AKI, cRLNumber the unix time (a later one is greater),
 * nextUpdate the certificate's notAfter (an empty CRL that outlives nothing it covers). */
static X509_CRL *empty_crl(X509 *x, EVP_PKEY *key)
{
    int64_t now = (int64_t)time(NULL);
    X509_CRL *c = certasm_crl_new(x, now, X509_get0_notAfter(x), (uint64_t)now);
    int ok = c && X509_CRL_sign(c, key, md_for(key)) > 0 && X509_CRL_verify(c, key) == 1;
    if (!ok) {
        X509_CRL_free(c);
        return NULL;
    }
    return c;
}

/* text written to a new temp file, then renamed over path (never a link: refused). */
static int write_atomic(const char *path, const char *text, const char *cmd)
{
    hsmca_err e;
    if (util_write_out(path, text, strlen(text), 0644, &e) != HSMCA_OK) {
        fprintf(stderr, "%s: %s\n", cmd, e.msg);
        return 0;
    }
    return 1;
}

int ica_crl_make(const char *cert, const char *keyfile, const char *out)
{
    static const char cmd[] = "hsmca intermediate crl";
    if (!cert || !keyfile || !out) {
        fprintf(stderr, "%s: --cert, --key and --out are required\n", cmd);
        return 2;
    }
    hsmca_err e;
    X509 *x = certasm_load_pem(cert, &e);
    FILE *kf = x ? fopen(keyfile, "r") : NULL;
    EVP_PKEY *key = kf ? PEM_read_PrivateKey(kf, NULL, NULL, NULL) : NULL;
    if (kf)
        fclose(kf);
    const char *why = !x ? e.msg : !kf ? strerror(errno) : !key ? "not a PEM private key" : ca_problem(x, key);
    X509_CRL *c = why ? NULL : empty_crl(x, key);
    if (!why && !c)
        why = "the CRL cannot be built or signed";
    BIO *b = c ? BIO_new(BIO_s_mem()) : NULL;
    char *pem = b && PEM_write_bio_X509_CRL(b, c) ? certasm_bio_string(b) : NULL;
    int rc = 1;
    if (why)
        fprintf(stderr, "%s: refused: %s (%s)\n", cmd, why, !x || !kf || !key ? (x ? keyfile : cert) : cert);
    else if (pem && write_atomic(out, pem, cmd)) {
        printf("wrote %s: an empty CRL signed by the key of %s, next update at its notAfter\n",
               out, cert);
        rc = 0;
    }
    free(pem);
    BIO_free(b);
    X509_CRL_free(c);
    EVP_PKEY_free(key);
    X509_free(x);
    return rc;
}

/* Every certificate in the PEM text (NULL text: none). */
static void add_certs(STACK_OF(X509) *sk, const char *text)
{
    BIO *b = text ? BIO_new_mem_buf(text, -1) : NULL;
    X509 *x;
    while (b && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
        if (!sk_X509_push(sk, x))
            X509_free(x);
    BIO_free(b);
    ERR_clear_error();
}

/* The one CRL in pem verifies under one of issuers (its issuer name and signature) and
 * is current (thisUpdate past, nextUpdate ahead): NULL, else why not. */
static const char *crl_problem(const char *pem, STACK_OF(X509) *issuers)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509_CRL *c = b ? PEM_read_bio_X509_CRL(b, NULL, NULL, NULL) : NULL;
    X509_CRL *more = c ? PEM_read_bio_X509_CRL(b, NULL, NULL, NULL) : NULL;
    const char *why = !c ? "not a PEM CRL" : more ? "more than one CRL" : "no issuer verifies it";
    for (int i = 0; c && !more && i < sk_X509_num(issuers); i++) {
        X509 *x = sk_X509_value(issuers, i);
        if (X509_NAME_cmp(X509_get_subject_name(x), X509_CRL_get_issuer(c)) == 0 &&
            X509_CRL_verify(c, X509_get0_pubkey(x)) == 1)
            why = NULL;
    }
    if (!why && (X509_cmp_time(X509_CRL_get0_lastUpdate(c), NULL) > 0 ||
                 !X509_CRL_get0_nextUpdate(c) ||
                 X509_cmp_time(X509_CRL_get0_nextUpdate(c), NULL) <= 0))
        why = "not current (thisUpdate in the future or nextUpdate past)";
    X509_CRL_free(more);
    X509_CRL_free(c);
    BIO_free(b);
    ERR_clear_error();
    return why;
}

/* The CA's CRL from crl.path when this user may read it (a CRL of any size), else from
 * the signer (crl-get: at most a reply's 64 KiB); NULL (said why) when there is none. */
static char *ca_crl_of(const char *config, const char *sock)
{
    hsmca_config *cfg = config ? calloc(1, sizeof(*cfg)) : NULL;
    char *text = NULL;
    size_t len;
    hsmca_err e;
    if (cfg && config_load(config, cfg, &e) == HSMCA_OK && cfg->crl_path[0] &&
        util_read_file(cfg->crl_path, 1 << 26, &text, &len, &e) != HSMCA_OK)
        text = NULL;
    free(cfg);
    if (text)
        return text;
    json_t *req = json_pack("{s:s}", "op", "crl-get"), *r = NULL;
    hsmca_code rc = req ? admin_call(config, sock, req, &r, &e)
                        : hsmca_fail(&e, HSMCA_ENOMEM, "out of memory");
    json_decref(req);
    const char *pem = rc == HSMCA_OK ? json_string_value(json_object_get(r, "crl")) : NULL;
    char *out = pem ? strdup(pem) : NULL;
    if (!pem)
        printf("the CA's CRL is not available: %s\n", rc == HSMCA_OK ? "no crl in the reply" : e.msg);
    json_decref(r);
    return out;
}

static int check_one(const char *what, const char *pem, STACK_OF(X509) *issuers)
{
    const char *why = crl_problem(pem, issuers);
    if (why)
        fprintf(stderr, "hsmca intermediate fetch: %s: %s; ca-crl.pem not written\n", what, why);
    return !why;
}

int ica_crl_fetch(const char *config, const char *sock, json_t *reply, const char *ica_crl,
                  const char *dir)
{
    STACK_OF(X509) *up = sk_X509_new_null(), *own = sk_X509_new_null();
    char *ca = ca_crl_of(config, sock), *mine = NULL, *all = NULL;
    size_t len;
    hsmca_err e;
    int ok = up && own;
    if (ok) {
        add_certs(up, json_string_value(json_object_get(reply, "cert_chain")));
        add_certs(up, json_string_value(json_object_get(reply, "root_cert")));
        add_certs(own, json_string_value(json_object_get(reply, "ca_cert")));
    }
    if (ok && ica_crl && util_read_file(ica_crl, 1 << 24, &mine, &len, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca intermediate fetch: --intermediate-crl: %s\n", e.msg);
        ok = 0;
    }
    ok = ok && (!ca || check_one("the CA's CRL", ca, up)) &&
         (!mine || check_one("--intermediate-crl", mine, own));
    if (ok && !ca && !mine)
        printf("no CRL available: ca-crl.pem is not written\n");
    if (ok && (ca || mine)) {
        all = malloc((ca ? strlen(ca) : 0) + (mine ? strlen(mine) : 0) + 2);
        ok = all != NULL;
        if (ok)
            snprintf(all, strlen(ca ? ca : "") + strlen(mine ? mine : "") + 2, "%s%s", ca ? ca : "",
                     mine ? mine : "");
        char path[4096];
        snprintf(path, sizeof(path), "%s/ca-crl.pem", dir);
        ok = ok && write_atomic(path, all, "hsmca intermediate fetch");
        if (ok)
            printf("wrote %s: %s%s%s\n", path, ca ? "the CA's CRL" : "", ca && mine ? " and " : "",
                   mine ? "the intermediate's own CRL" : "");
        if (ok && !mine)
            printf("note: Istio ignores the CA's CRL unless the intermediate's own comes with it:\n"
                   "  make it where istiod's key is (hsmca intermediate crl) and fetch again\n"
                   "  with --intermediate-crl\n");
    }
    free(all);
    free(ca);
    free(mine);
    sk_X509_pop_free(up, X509_free);
    sk_X509_pop_free(own, X509_free);
    return ok ? 0 : 1;
}

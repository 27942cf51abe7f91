/* ca_show.c - `hsmca ca show`: the CA certificate, its chain up to the root bundle
 * (verified now), the key URI and whether the token's key is the certificate's. One
 * JSON document is built and printed as is (--json) or as text. */
#include "ca_show.h"
#include "ca.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/x509v3.h>

#include "ca_util.h"
#include "cli_opts.h"

const char ca_show_help[] =
    "usage: hsmca ca show --config FILE [--json]\n"
    "\n"
    "Prints the CA certificate (ca.cert: subject, issuer, serial, validity and days\n"
    "left, key type, SHA-256 of the certificate and of its public key), its chain\n"
    "through ca.chain to a root in ca.root_bundle (verified now), the roots in the\n"
    "bundle, the key URI, and whether the token's key (opened as serve opens it,\n"
    "with the PIN from pkcs11.pin_file) is the certificate's. --json prints the same\n"
    "as one JSON object. While a rotation is under way (ca.next_* or ca.previous_*\n"
    "set), a rotation section: its state and next step, the next key in the token,\n"
    "the next and previous certificates (docs/ROTATION.md). Exit status: 0 the token\n"
    "key matches and the chain verifies, 1 not, 2 bad usage, 78 the config does not load.";

static json_t *certs_json(STACK_OF(X509) * certs, int from)
{
    json_t *a = json_array();
    for (int i = from; i < sk_X509_num(certs); i++)
        json_array_append_new(a, ca_show_cert_json(sk_X509_value(certs, i)));
    return a;
}

/* "chain": the verified path above the CA certificate, up to its root, or "chain_error". */
static void put_chain(json_t *o, X509 *ca, STACK_OF(X509) * chain, STACK_OF(X509) * roots)
{
    X509_STORE *st = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int ok = st && ctx && roots;
    for (int i = 0; ok && i < sk_X509_num(roots); i++)
        ok = X509_STORE_add_cert(st, sk_X509_value(roots, i));
    if (ok && X509_STORE_CTX_init(ctx, st, ca, chain) && X509_verify_cert(ctx) == 1) {
        json_object_set_new(o, "chain", certs_json(X509_STORE_CTX_get0_chain(ctx), 1));
    } else {
        int err = ctx ? X509_STORE_CTX_get_error(ctx) : 0;
        json_object_set_new(o, "chain_error",
                            json_string(!roots ? "no root bundle"
                                        : err  ? X509_verify_cert_error_string(err)
                                               : "cannot verify"));
    }
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
}

/* "token_key": "match", "mismatch" (with the token key's fingerprint) or "error". */
static void put_token(json_t *o, ca_session *s, X509 *ca)
{
    p11_pool *pool = NULL;
    hsmca_err e;
    char hex[CA_HEX_LEN] = "";
    if (ca_session_token(s) != 0) {
        json_object_set_new(o, "token_key", json_string("error"));
        json_object_set_new(o, "token_error",
                            json_string("the token's module does not load, "
                                        "or the PIN file does not read"));
        return;
    }
    if (ca_session_open_key(s, &pool, &e) != HSMCA_OK) {
        json_object_set_new(o, "token_key", json_string("error"));
        json_object_set_new(o, "token_error", json_string(e.msg));
        return;
    }
    EVP_PKEY *key = p11_pool_public_key(pool);
    int match = key && EVP_PKEY_eq(key, X509_get0_pubkey(ca)) == 1;
    ca_spki_sha256(key, hex);
    json_object_set_new(o, "token_key", json_string(match ? "match" : "mismatch"));
    json_object_set_new(o, "token_spki_sha256", json_string(hex));
    EVP_PKEY_free(key);
    p11_pool_close(pool);
}

static void print_text(json_t *o)
{
    size_t i;
    json_t *c;
    printf("CA certificate %s (ca.cert)\n", ca_show_str(o, "ca_cert"));
    ca_show_print_cert(json_object_get(o, "cert"), "  ");
    if (json_object_get(o, "chain")) {
        printf("chain to the root (verified now, %s):\n",
               ca_show_str(o, "chain_file")[0] ? ca_show_str(o, "chain_file") : "no ca.chain");
        json_array_foreach(json_object_get(o, "chain"), i, c)
        {
            printf("  [%zu]\n", i + 1);
            ca_show_print_cert(c, "    ");
        }
    } else {
        printf("chain to the root: DOES NOT VERIFY: %s\n", ca_show_str(o, "chain_error"));
    }
    printf("root bundle %s (ca.root_bundle): %zu root%s\n", ca_show_str(o, "root_bundle"),
           json_array_size(json_object_get(o, "roots")),
           json_array_size(json_object_get(o, "roots")) == 1 ? "" : "s");
    json_array_foreach(json_object_get(o, "roots"), i, c)
        printf("  %s, not after %s, sha256 %s\n", ca_show_str(c, "subject"),
               ca_show_str(c, "not_after"), ca_show_str(c, "sha256"));
    printf("key %s (pkcs11.ca_key)\n", ca_show_str(o, "key_uri"));
    const char *tk = ca_show_str(o, "token_key");
    if (!strcmp(tk, "match"))
        puts("token key: matches the certificate");
    else if (!strcmp(tk, "mismatch"))
        printf("token key: DOES NOT MATCH the certificate: the token key's spki sha256 is %s\n",
               ca_show_str(o, "token_spki_sha256"));
    else
        printf("token key: cannot open: %s\n", ca_show_str(o, "token_error"));
    ca_show_rotation_text(json_object_get(o, "rotation"));
}

/* Everything but the token into o; 0, else 1 after saying why. */
static int show_files(json_t *o, const hsmca_config *c, X509 **ca)
{
    hsmca_err e;
    STACK_OF(X509) *certs = certfile_load(c->ca_cert, "ca.cert", &e), *chain = NULL, *roots;
    if (!certs) {
        fprintf(stderr, "hsmca ca show: %s\n", e.msg);
        return 1;
    }
    *ca = sk_X509_shift(certs);
    sk_X509_pop_free(certs, X509_free);
    if (c->chain[0] && !(chain = certfile_load(c->chain, "ca.chain", &e))) {
        fprintf(stderr, "hsmca ca show: %s\n", e.msg);
        return 1;
    }
    roots = certfile_load(c->root_bundle, "ca.root_bundle", &e);
    json_object_set_new(o, "ca_cert", json_string(c->ca_cert));
    json_object_set_new(o, "chain_file", json_string(c->chain));
    json_object_set_new(o, "root_bundle", json_string(c->root_bundle));
    json_object_set_new(o, "key_uri", json_string(c->ca_key_uri));
    json_object_set_new(o, "cert", ca_show_cert_json(*ca));
    put_chain(o, *ca, chain, roots);
    json_object_set_new(o, "roots", roots ? certs_json(roots, 0) : json_array());
    if (!roots)
        json_object_set_new(o, "roots_error", json_string(e.msg));
    sk_X509_pop_free(chain, X509_free);
    sk_X509_pop_free(roots, X509_free);
    return 0;
}

int ca_show(int argc, char **argv)
{
    static const struct option flags[] = {{"config", required_argument, 0, 'c'},
                                          {"json", no_argument, 0, 'j'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    const char *config = NULL;
    int as_json = 0, rc;
    cli_opts o;
    cli_opts_init(&o, "hsmca ca show", flags, NULL, 0);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(ca_show_help); return 0;
        case 'c': config = optarg; break;
        case 'j': as_json = 1; break;
        default: return 2;
        }
    }
    if (!config) {
        fputs("hsmca ca show: --config FILE is required\n", stderr);
        return 2;
    }
    ca_session s = {0};
    X509 *ca = NULL;
    json_t *doc = json_object();
    if ((rc = ca_session_config(&s, "hsmca ca show", config)) == 0 && !doc)
        rc = 1;
    if (rc == 0 && (rc = show_files(doc, s.cfg, &ca)) == 0) {
        put_token(doc, &s, ca);
        ca_show_rotation(doc, &s);
        if (as_json) {
            json_dumpf(doc, stdout, JSON_INDENT(2));
            putchar('\n');
        } else {
            print_text(doc);
        }
        rc = strcmp(ca_show_str(doc, "token_key"), "match") || json_object_get(doc, "chain_error");
    }
    json_decref(doc);
    X509_free(ca);
    ca_session_end(&s);
    return rc;
}

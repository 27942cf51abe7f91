/* ca_init.c - `hsmca ca init`: the CA key made in the configured token with hsmca's
 * template (or an existing one taken with --existing-key), checked as serve checks it,
 * then a self-signed root or a CSR signed by it in the token (cert_build.h). */
#include "ca.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ca_audit.h"
#include "ca_util.h"
#include "cert_build.h"
#include "cli_opts.h"
#include "key_kinds.h"
#include "util.h"

const char ca_init_help[] =
    "usage: hsmca ca init --config FILE --subject NAME\n"
    "                     (--self-signed [--ttl 10y] | --csr OUT.csr)\n"
    "                     [--type ec-p256|ec-p384|rsa-2048|rsa-3072|rsa-4096]\n"
    "                     [--existing-key] [--force]\n"
    "\n"
    "Makes the CA key pkcs11.ca_key names in its token, with hsmca's template (as\n"
    "`hsmca token keygen --key ca`: CKA_SENSITIVE, CKA_EXTRACTABLE false, CKA_SIGN\n"
    "and no other use), and opens it as serve does (a key failing serve's checks is\n"
    "refused). A key already there is refused unless --existing-key, which takes it\n"
    "after the same checks. Then, signed in the token by hsmca's own PKCS#11 code:\n"
    "\n"
    "  --self-signed  a root CA certificate (CA:TRUE and keyUsage keyCertSign,\n"
    "                 cRLSign, digitalSignature, both critical; SKI/AKI; a random\n"
    "                 128-bit serial) written to ca.cert, and to ca.root_bundle when\n"
    "                 that is set elsewhere and absent\n"
    "  --ttl          its validity: years (10y, the default) or days (3650d, 3650)\n"
    "  --csr OUT.csr  a PKCS#10 CSR for a root CA to sign (then `hsmca ca import`)\n"
    "  --subject      the name, as \"/O=Example/CN=Example Mesh CA\"\n"
    "  --type         the new key's type (default ec-p256); with --existing-key, the\n"
    "                 type the key must have\n"
    "  --force        replace ca.cert (or OUT.csr) when it exists; else refused\n"
    "                 before any key is made\n"
    "\n"
    "Prints the public key's SHA-256 (of its DER SubjectPublicKeyInfo), and the\n"
    "certificate's. Exit status: 0 done, 1 refused or failed, 2 bad usage, 78 the\n"
    "config does not load or names no CA key.";

#define TTL_MAX_DAYS (100LL * 365)

typedef struct {
    const char *config, *csr, *subject, *ttl;
    const key_kind *kind; /* --type; NULL: ec-p256 for a new key, any for an existing one */
    int self_signed, existing_key, force;
    long long validity; /* seconds */
    X509_NAME *name;
    ca_audit *au; /* where the step is recorded */
} init_args;

int ca_parse_ttl(const char *s, long long *secs)
{
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno || end == s || *s == '-' || *s == '+')
        return 0;
    if (*end == 'y')
        n *= 365, end++;
    else if (*end == 'd')
        end++;
    if (*end || n < 1 || n > TTL_MAX_DAYS)
        return 0;
    *secs = n * 86400;
    return 1;
}

static int init_flags(int argc, char **argv, init_args *a, const char **type)
{
    static const struct option flags[] = {{"config", required_argument, 0, 'c'},
                                          {"type", required_argument, 0, 't'},
                                          {"self-signed", no_argument, 0, 's'},
                                          {"csr", required_argument, 0, 'r'},
                                          {"subject", required_argument, 0, 'j'},
                                          {"ttl", required_argument, 0, 'l'},
                                          {"existing-key", no_argument, 0, 'x'},
                                          {"force", no_argument, 0, 'f'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    cli_opts o;
    cli_opts_init(&o, "hsmca ca init", flags, NULL, 0);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(ca_init_help); return -1;
        case 'c': a->config = optarg; break;
        case 't': *type = optarg; break;
        case 's': a->self_signed = 1; break;
        case 'r': a->csr = optarg; break;
        case 'j': a->subject = optarg; break;
        case 'l': a->ttl = optarg; break;
        case 'x': a->existing_key = 1; break;
        case 'f': a->force = 1; break;
        default: return 2;
        }
    }
    return 0;
}

/* 0 to go on, -1 after --help, else the exit status (after a message). */
static int init_parse(int argc, char **argv, init_args *a)
{
    const char *type = NULL;
    int rc = init_flags(argc, argv, a, &type);
    if (rc)
        return rc;
    hsmca_err e;
    if (!a->config || !a->subject || a->self_signed == (a->csr != NULL)) {
        fputs("hsmca ca init: --config FILE, --subject NAME and one of --self-signed or "
              "--csr FILE are required\n", stderr);
        return 2;
    }
    a->kind = key_kind_find(type);
    if (type && (!a->kind || !a->kind->ca)) {
        fprintf(stderr, "hsmca ca init: --type must be %s\n", key_kind_names(0));
        return 2;
    }
    if (a->ttl && !a->self_signed) {
        fputs("hsmca ca init: --ttl goes with --self-signed (the root CA that signs the CSR "
              "chooses the validity)\n", stderr);
        return 2;
    }
    if (a->self_signed && !ca_parse_ttl(a->ttl ? a->ttl : "10y", &a->validity)) {
        fputs("hsmca ca init: --ttl must be years (10y) or days (3650d, 3650), from 1 day to "
              "100 years\n", stderr);
        return 2;
    }
    if (cert_build_parse_subject(a->subject, &a->name, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca ca init: %s\n", e.msg);
        return 2;
    }
    return 0;
}

/* Refuses up front, before any key is made, a file the command would have to replace. */
static int init_targets_free(const ca_session *s, const init_args *a)
{
    const char *path = a->csr ? a->csr : s->cfg->ca_cert;
    if (a->force || access(path, F_OK) != 0)
        return 1;
    fprintf(stderr, "hsmca ca init: %s (%s) exists: pass --force to replace it%s; nothing "
                    "done\n", path, a->csr ? "--csr" : "ca.cert",
            a->csr ? "" : ", or point ca.cert elsewhere");
    return 0;
}

hsmca_code ca_make_key(ca_session *s, const key_kind *kind, p11_pool **pool, hsmca_err *e)
{
    const key_kind *k = kind ? kind : key_kind_of(P11_KEY_EC_P256);
    uint8_t id[16];
    util_random(id, sizeof(id));
    hsmca_err why;
    hsmca_err_clear(&why);
    if (!p11_token_can_generate(s->m, s->uri.token, k->type))
        return hsmca_fail(e, HSMCA_EPERM, "token '%s' cannot generate %s keys (no such "
                          "key-pair mechanism in its list, or no such token): pick another "
                          "--type", s->uri.token, k->what);
    hsmca_code rc = p11_generate_key_id(s->m, s->uri.token, s->pin, s->uri.object,
                                        s->uri.id_len ? s->uri.id : id,
                                        s->uri.id_len ? s->uri.id_len : sizeof(id), k->type, &why);
    if (rc != HSMCA_OK)
        return hsmca_fail(e, rc, "refused, nothing made: %s", why.msg);
    printf("made the CA key %s: %s\n", s->cfg->ca_key_uri, k->what);
    /* SoftHSM keeps each object in a file of the user that made it. */
    if (geteuid() == 0 && strstr(s->cfg->module_path, "softhsm"))
        printf("note: SoftHSM wrote the key's files as root: give the token directory to "
               "signer.user (%s), e.g. chown -R %s TOKENDIR, or the signer cannot use the key "
               "once it has switched to that user\n", s->cfg->signer_user, s->cfg->signer_user);
    if ((rc = ca_session_open_key(s, pool, &why)) != HSMCA_OK)
        return hsmca_fail(e, rc, "the new key does not pass serve's checks, do not use it: %s",
                          why.msg);
    return HSMCA_OK;
}

/* The CA key: made, or with --existing-key the one the token holds; either way it
 * opened as serve opens it and is of the --type asked for. */
static HSMCA_MUSTCHECK hsmca_code init_key(ca_session *s, const init_args *a, p11_pool **pool,
                                           hsmca_err *e)
{
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = ca_session_open_key(s, pool, &why);
    if (rc == HSMCA_ENOTFOUND && !a->existing_key) {
        rc = ca_make_key(s, a->kind, pool, e);
    } else if (rc == HSMCA_ENOTFOUND) {
        return hsmca_fail(e, rc, "pkcs11.ca_key: --existing-key, but %s", why.msg);
    } else if (rc == HSMCA_EPERM) {
        return hsmca_fail(e, rc, "pkcs11.ca_key: the key is there and fails serve's checks: %s",
                          why.msg);
    } else if (rc != HSMCA_OK) {
        return hsmca_fail(e, rc, "pkcs11.ca_key: %s%s; nothing done", why.msg,
                          rc == HSMCA_EAUTH ? " (the PIN in pkcs11.pin_file)" : "");
    } else if (!a->existing_key) {
        p11_pool_close(*pool);
        *pool = NULL;
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11.ca_key: the token already holds %s: pass "
                          "--existing-key to use it, or name a new key there; nothing done",
                          s->cfg->ca_key_uri);
    } else {
        printf("using the existing CA key %s\n", s->cfg->ca_key_uri);
    }
    if (rc != HSMCA_OK)
        return rc;
    char desc[64];
    EVP_PKEY *pub = p11_pool_public_key(*pool);
    ca_key_desc(pub, desc, sizeof(desc));
    EVP_PKEY_free(pub);
    if (a->kind && strcmp(desc, a->kind->what) != 0) {
        p11_pool_close(*pool);
        *pool = NULL;
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11.ca_key: the key is %s, not %s (--type)", desc,
                          a->kind->what);
    }
    printf("key checked as serve checks it: %s, sensitive, never extractable, signs\n", desc);
    return HSMCA_OK;
}

static void print_fingerprints(p11_pool *pool, X509 *cert)
{
    char hex[CA_HEX_LEN];
    EVP_PKEY *pub = p11_pool_public_key(pool);
    if (ca_spki_sha256(pub, hex))
        printf("public key sha256: %s\n", hex);
    EVP_PKEY_free(pub);
    if (cert && ca_cert_sha256(cert, hex))
        printf("certificate sha256: %s\n", hex);
}

static HSMCA_MUSTCHECK hsmca_code write_root(ca_session *s, const init_args *a, p11_pool *pool,
                                             hsmca_err *e)
{
    X509 *root = NULL;
    hsmca_code rc = cert_build_root(pool, a->name, a->validity, &root, e);
    if (rc != HSMCA_OK)
        return rc;
    STACK_OF(X509) *one = sk_X509_new_null();
    char *pem = one && sk_X509_push(one, root) ? certfile_pem(one) : NULL;
    sk_X509_free(one);
    const hsmca_config *c = s->cfg;
    EVP_PKEY *pub = p11_pool_public_key(pool);
    if (!pem)
        rc = hsmca_fail(e, HSMCA_ENOMEM, "cannot encode the root");
    else if ((rc = ca_audit_record(a->au, "init", c->ca_key_uri, pub, root, e)) == HSMCA_OK &&
             (rc = ca_install(c->ca_cert, "ca.cert", pem, a->force, NULL, e)) == HSMCA_OK) {
        printf("wrote the self-signed root, signed in the token, to %s (ca.cert)\n", c->ca_cert);
        if (strcmp(c->root_bundle, c->ca_cert) != 0 && access(c->root_bundle, F_OK) != 0 &&
            (rc = ca_install(c->root_bundle, "ca.root_bundle", pem, 0, NULL, e)) == HSMCA_OK)
            printf("wrote it to %s (ca.root_bundle) as well\n", c->root_bundle);
        else if (rc == HSMCA_OK && strcmp(c->root_bundle, c->ca_cert) != 0)
            printf("note: %s (ca.root_bundle) exists and was left as it is: add this root to "
                   "it, or clients will not trust the certificates serve issues\n",
                   c->root_bundle);
        print_fingerprints(pool, root);
    }
    EVP_PKEY_free(pub);
    free(pem);
    X509_free(root);
    return rc;
}

static HSMCA_MUSTCHECK hsmca_code write_csr(const ca_session *s, const init_args *a,
                                            p11_pool *pool, hsmca_err *e)
{
    char *pem = NULL;
    hsmca_code rc = cert_build_csr_pem(pool, a->name, &pem, e);
    if (rc != HSMCA_OK)
        return rc;
    EVP_PKEY *pub = p11_pool_public_key(pool);
    rc = ca_audit_record(a->au, "init", s->cfg->ca_key_uri, pub, NULL, e);
    EVP_PKEY_free(pub);
    if (rc == HSMCA_OK && (rc = ca_install(a->csr, "--csr", pem, a->force, NULL, e)) == HSMCA_OK) {
        printf("wrote the CSR, signed in the token, to %s\n", a->csr);
        print_fingerprints(pool, NULL);
        printf("next: compare that fingerprint with what the root CA's operator sees, have the\n"
               "  root CA sign the CSR as a CA certificate, then:\n"
               "  hsmca ca import --config %s --cert CA.pem --root ROOT.pem [--chain CHAIN.pem]\n",
               a->config);
    }
    free(pem);
    return rc;
}

int ca_init(int argc, char **argv)
{
    init_args a = {0};
    ca_session s = {0};
    ca_audit au = {.lock_fd = -1};
    hsmca_err e;
    a.au = &au;
    int rc = init_parse(argc, argv, &a);
    if (rc) {
        X509_NAME_free(a.name);
        return rc < 0 ? 0 : rc;
    }
    if ((rc = ca_session_config(&s, "hsmca ca init", a.config)) == 0 &&
        ca_audit_open(s.cfg, &au, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca ca init: %s; nothing done\n", e.msg);
        rc = 1;
    }
    if (rc == 0)
        rc = !init_targets_free(&s, &a) || ca_session_token(&s) ? 1 : 0;
    if (rc == 0) {
        p11_pool *pool = NULL;
        if (init_key(&s, &a, &pool, &e) != HSMCA_OK ||
            (a.self_signed ? write_root(&s, &a, pool, &e) : write_csr(&s, &a, pool, &e)) !=
                HSMCA_OK) {
            fprintf(stderr, "hsmca ca init: %s\n", e.msg);
            rc = 1;
        }
        p11_pool_close(pool);
    }
    ca_audit_close(&au);
    ca_session_end(&s);
    X509_NAME_free(a.name);
    return rc;
}

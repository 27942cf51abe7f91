/* token_cmd.c - `hsmca token keygen` (ca.h): the CA key or the audit key made in the
 * token with hsmca's template. A ceremony step an operator runs once, here, not in the
 * confined signer; `hsmca token check` runs the signer program (cli/token_check.c). */
#include "ca.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "ca_audit.h"
#include "ca_util.h"
#include "cli_opts.h"
#include "config.h"
#include "key_kinds.h"
#include "log.h"
#include "module_env.h"
#include "p11.h"
#include "util.h"

static const char keygen_help[] =
    "usage: hsmca token keygen --config FILE --key ca|audit\n"
    "                          [--type ec-p256|ec-p384|rsa-2048|ed25519]\n"
    "\n"
    "Makes the key the config names (--key ca: pkcs11.ca_key, --key audit:\n"
    "pkcs11.audit_key) in its token: the URI's object= is the label, its id= (else a\n"
    "random one) the CKA_ID. Every attribute is set, not left to the token's defaults:\n"
    "private half CKA_TOKEN, CKA_PRIVATE, CKA_SENSITIVE, CKA_EXTRACTABLE false,\n"
    "CKA_SIGN, and CKA_DECRYPT, CKA_UNWRAP, CKA_DERIVE, CKA_SIGN_RECOVER false;\n"
    "public half CKA_VERIFY only. Refuses when an object with that label (or a\n"
    "private key with that id) exists. The PIN is read from pkcs11.pin_file.\n"
    "\n"
    "  --type  CA key: ec-p256 (default), ec-p384 or rsa-2048;\n"
    "          audit key: ed25519 (default; the token must have\n"
    "          CKM_EC_EDWARDS_KEY_PAIR_GEN), ec-p256 or ec-p384\n"
    "\n"
    "Then opens the key as serve does and prints its public key (PEM) and its\n"
    "SHA-256 fingerprint (of the DER SubjectPublicKeyInfo). Exit status: 0 made,\n"
    "1 refused or failed, 2 bad usage, 78 the config does not load or names no key.";

/* ---- keygen ---------------------------------------------------------------------------- */

typedef struct {
    const char *config;
    int audit;            /* --key audit */
    const key_kind *kind; /* --type, or the role's default */
    ca_audit *au;         /* a key's generation is a ca-key entry (ca_audit.h) */
} keygen_args;

/* 0 to go on, else the exit status (after usage or a message). */
static int keygen_parse(int argc, char **argv, keygen_args *a)
{
    static const struct option flags[] = {{"config", required_argument, 0, 'c'},
                                          {"key", required_argument, 0, 'k'},
                                          {"type", required_argument, 0, 't'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    const char *key = NULL, *type = NULL;
    cli_opts o;
    cli_opts_init(&o, "hsmca token keygen", flags, NULL, 0);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(keygen_help); return -1;
        case 'c': a->config = optarg; break;
        case 'k': key = optarg; break;
        case 't': type = optarg; break;
        default: return 2;
        }
    }
    if (!a->config || !key || (strcmp(key, "ca") != 0 && strcmp(key, "audit") != 0)) {
        fputs("hsmca token keygen: --config FILE and --key ca|audit are required\n", stderr);
        return 2;
    }
    a->audit = !strcmp(key, "audit");
    if (!type)
        type = a->audit ? "ed25519" : "ec-p256";
    a->kind = key_kind_find(type);
    if (!a->kind || !(a->audit ? a->kind->audit : a->kind->ca)) {
        fprintf(stderr, "hsmca token keygen: --type for the %s key must be %s\n",
                a->audit ? "audit" : "CA", key_kind_names(a->audit));
        return 2;
    }
    return 0;
}

/* Opens the new key as serve does (its checks, a signature verified) and prints its
 * public key; 0 on success, else 1 after saying why. */
static int keygen_report(p11_module *m, const hsmca_config *cfg, const keygen_args *a,
                         const char *uri, const char *pin)
{
    hsmca_err e;
    p11_pool *pool = NULL;
    p11_signkey *k = NULL;
    hsmca_code rc =
        a->audit ? p11_signkey_open(m, uri, pin, &k, &e) : p11_pool_open(m, uri, pin, 1, &pool, &e);
    if (rc != HSMCA_OK) {
        fprintf(stderr, "hsmca token keygen: the new key does not open as serve opens it: %s\n",
                e.msg);
        return 1;
    }
    EVP_PKEY *pub = a->audit ? p11_signkey_public_key(k) : p11_pool_public_key(pool);
    char hex[CA_HEX_LEN];
    int ok = ca_spki_sha256(pub, hex);
    if (ok && ca_audit_record(a->au, a->audit ? "audit-keygen" : "keygen", uri, pub, NULL, &e) !=
                  HSMCA_OK) {
        fprintf(stderr, "hsmca token keygen: the key is made but not recorded: %s\n", e.msg);
        ok = 0;
    } else if (ok) {
        printf("made the %s key %s: %s, sensitive, never extractable, sign only\n",
               a->audit ? "audit" : "CA", uri, a->kind->what);
        printf("public key sha256: %s\n", hex);
        PEM_write_PUBKEY(stdout, pub);
        if (a->audit)
            printf("next: hsmca token check --config %s; the log's verifier key is then\n"
                   "  `hsmca audit vkey %s` once serve has started\n",
                   a->config, cfg->audit_dir[0] ? cfg->audit_dir : "AUDIT_DIR");
        else
            printf("next: make the CA certificate of this key (a root signed by this key, or\n"
                   "  an intermediate your root CA signs from a CSR this key signs), write it\n"
                   "  to ca.cert (%s), then run hsmca token check --config %s\n",
                   cfg->ca_cert, a->config);
    } else {
        fputs("hsmca token keygen: cannot encode the new public key\n", stderr);
    }
    EVP_PKEY_free(pub);
    p11_signkey_close(k);
    p11_pool_close(pool);
    return ok ? 0 : 1;
}

/* The key made in the token the URI names; 0, or 1 after saying why. */
static int keygen_make(const hsmca_config *cfg, const keygen_args *a, const char *uri,
                       const p11_uri *u, const char *pin)
{
    p11_module *m = NULL;
    hsmca_err e;
    if (p11_module_load(cfg->module_path, &m, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca token keygen: pkcs11.module: %s\n", e.msg);
        return 1;
    }
    int rc = 1;
    uint8_t id[16];
    util_random(id, sizeof(id));
    if (!p11_token_can_generate(m, u->token, a->kind->type)) {
        fprintf(stderr,
                "hsmca token keygen: token '%s' cannot generate %s keys (no such "
                "key-pair mechanism in its list, or no such token)%s\n",
                u->token, a->kind->what,
                a->kind->type == P11_KEY_ED25519 ? ": use --type ec-p256" : "");
    } else if (p11_generate_key_id(m, u->token, pin, u->object, u->id_len ? u->id : id,
                                   u->id_len ? u->id_len : sizeof(id), a->kind->type,
                                   &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca token keygen: refused, nothing made: %s\n", e.msg);
    } else {
        rc = keygen_report(m, cfg, a, uri, pin);
        /* SoftHSM keeps each object in a file of the user that made it. */
        if (rc == 0 && geteuid() == 0 && strstr(cfg->module_path, "softhsm"))
            printf("note: SoftHSM wrote the key's files as root: give the token directory "
                   "to signer.user (%s), e.g. chown -R %s TOKENDIR, or the signer cannot "
                   "use the key once it has switched to that user\n",
                   cfg->signer_user, cfg->signer_user);
    }
    p11_module_unload(m);
    return rc;
}

int token_keygen(int argc, char **argv)
{
    ca_audit au = {.lock_fd = -1};
    keygen_args a = {.au = &au};
    int rc = keygen_parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    hsmca_config *cfg = calloc(1, sizeof(*cfg));
    hsmca_err e;
    p11_uri u;
    if (!cfg) {
        fputs("hsmca token keygen: out of memory\n", stderr);
        return 1;
    }
    const char *key = a.audit ? "pkcs11.audit_key" : "pkcs11.ca_key";
    const char *uri = a.audit ? cfg->audit_key_uri : cfg->ca_key_uri;
    rc = EXIT_CONFIG;
    if (config_load(a.config, cfg, &e) != HSMCA_OK || config_validate(cfg, &e) != HSMCA_OK)
        fprintf(stderr, "hsmca token keygen: %s\n", e.msg);
    else if (!uri[0])
        fprintf(stderr, "hsmca token keygen: %s is not set: write the key's URI there\n", key);
    else if (p11_uri_parse(uri, &u, &e) != HSMCA_OK)
        fprintf(stderr, "hsmca token keygen: %s: %s\n", key, e.msg);
    else if (!u.object[0] || (u.type[0] && strcmp(u.type, "private") != 0))
        fprintf(stderr,
                "hsmca token keygen: %s must name the key's label (object=) and no "
                "type but private\n",
                key);
    else
        rc = 0;
    char pin[UTIL_PIN_MAX + 1];
    if (rc == 0 && util_read_secret(cfg->pin_file, pin, sizeof(pin), &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca token keygen: pkcs11.pin_file: %s\n", e.msg);
        rc = 1;
    } else if (rc == 0 && ca_audit_open(cfg, a.au, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca token keygen: %s; nothing made\n", e.msg);
        rc = 1;
    } else if (rc == 0) {
        module_env_apply(cfg);
        rc = keygen_make(cfg, &a, uri, &u, pin);
    }
    OPENSSL_cleanse(pin, sizeof(pin));
    ca_audit_close(a.au);
    free(cfg);
    return rc;
}

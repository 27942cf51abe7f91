/* ca_util.h - what the `hsmca ca` commands share: the config and its CA key URI, the
 * token opened in this process with the config's module (and the module's environment,
 * set in one place), fingerprints, certificate files read and installed. */
#ifndef HSMCA_CA_UTIL_H
#define HSMCA_CA_UTIL_H

#include <openssl/sha.h>
#include <openssl/x509.h>

#include "certfile.h"
#include "config.h"
#include "hsmca_err.h"
#include "key_kinds.h"
#include "p11.h"
#include "util.h"

#define CA_HEX_LEN (2 * SHA256_DIGEST_LENGTH + 1)

typedef struct {
    const char *cmd;    /* "hsmca ca init": the start of every message */
    const char *config; /* --config */
    hsmca_config *cfg;
    p11_uri uri;        /* pkcs11.ca_key */
    p11_module *m;      /* loaded by ca_session_token */
    char pin[UTIL_PIN_MAX + 1]; /* from pkcs11.pin_file, wiped by ca_session_end */
    int have_pin;
} ca_session;

/* Loads and validates the config and parses pkcs11.ca_key (it must name the key's
 * label: object=). 0, else EXIT_CONFIG after saying why on stderr. */
int ca_session_config(ca_session *s, const char *cmd, const char *config);

/* Reads pkcs11.pin_file, sets the module's environment (module_env_apply) and loads
 * pkcs11.module in this process. 0, else 1 after saying why. */
int ca_session_token(ca_session *s);

/* Opens the CA key as serve's signer does (p11_pool_open: CKA_SENSITIVE,
 * !CKA_EXTRACTABLE, CKA_SIGN, the key's type and size, a signature verified). */
HSMCA_MUSTCHECK hsmca_code ca_session_open_key(ca_session *s, p11_pool **pool, hsmca_err *e);

/* Unloads the module, wipes the PIN, frees the config. Safe on a zeroed session. */
void ca_session_end(ca_session *s);

/* SHA-256 of the key's DER SubjectPublicKeyInfo / of the certificate's DER, in hex: the
 * log's fingerprints, certasm_spki_sha256 / certasm_cert_sha256 (the signer's too). */
int ca_spki_sha256(EVP_PKEY *key, char hex[CA_HEX_LEN]);
int ca_cert_sha256(X509 *x, char hex[CA_HEX_LEN]);

/* "EC P-256", "EC P-384", "RSA-3072", ... (into buf). */
const char *ca_key_desc(EVP_PKEY *key, char *buf, size_t size);

/* 1 when path exists and holds other bytes than data[0..len), 0 when it does not
 * exist or holds these bytes. A file that cannot be read counts as different. */
int ca_file_differs(const char *path, const char *data, size_t len);

/* Writes data to path (mode 0644) atomically: a temporary file in its directory,
 * fsync, rename. A file already there with other content is replaced only with
 * force, else HSMCA_EINVAL naming key (the config key) and --force. *changed (may
 * be NULL) is 0 when the file already held these bytes (nothing written). */
HSMCA_MUSTCHECK hsmca_code ca_install(const char *path, const char *key, const char *data,
                                      int force, int *changed, hsmca_err *e);

/* "10y", "3650d" or "3650" (days): 1 day to 100 years, into *secs. 0 when not. */
int ca_parse_ttl(const char *s, long long *secs);

/* A new key of kind (NULL: EC P-256) in the token under s->cfg->ca_key_uri (s->uri: its
 * label, and its id when the URI has one, else a random CKA_ID), then opened as serve
 * opens it into *pool (ca_init.c). */
HSMCA_MUSTCHECK hsmca_code ca_make_key(ca_session *s, const key_kind *kind, p11_pool **pool,
                                       hsmca_err *e);

/* A CA certificate made elsewhere and what it chains through, as `ca import` and `ca
 * rotate import-next` check it (ca_import.c). The names are for messages: the flags or
 * files they came from, and the config key of the token key. */
typedef struct {
    X509 *ca;
    const char *cert;
    STACK_OF(X509) *untrusted; /* may be NULL */
    const char *chain;         /* NULL when no chain */
    STACK_OF(X509) *roots;     /* the only trust anchors */
    const char *root;          /* NULL: the certificate is its own root */
    const char *key;           /* "pkcs11.ca_key" */
} ca_candidate;

/* The certificate certifies token_key, is a CA by serve's rule (ca_cert_rules.h) and
 * explicitly (CA:TRUE, keyCertSign), and chains now to one of roots through untrusted.
 * *top (may be NULL) gets the root it chains to (a new reference). Each check passed
 * is printed ("ok   key: ..."). */
HSMCA_MUSTCHECK hsmca_code ca_candidate_check(const ca_candidate *c, EVP_PKEY *token_key,
                                              X509 **top, hsmca_err *e);

/* Days (rounded down; negative once past) from now until t. */
long ca_days_left(const ASN1_TIME *t);

#endif

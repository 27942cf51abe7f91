/* ca_rotate.h - what the `hsmca ca rotate` steps share (docs/ROTATION.md): the rotation's
 * state read from the config (ca.next_* after prepare, ca.previous_* after switch), the
 * root bundle as a list of certificates, and each step's start (config, audit lock). */
#ifndef HSMCA_CA_ROTATE_H
#define HSMCA_CA_ROTATE_H

#include <openssl/x509.h>

#include "ca_audit.h"
#include "ca_util.h"

typedef struct {
    ca_session s;     /* the config (a private copy) and, once opened, the token */
    ca_audit au;      /* audit.dir's lock and log, held for the step */
    const char *step; /* "hsmca ca rotate switch": the start of every message */
} rot_ctx;

/* Loads the config and takes the audit log (refused while a signer runs). 0, else the
 * exit status after saying why. */
int rot_begin(rot_ctx *r, const char *cmd, const char *config);
void rot_end(rot_ctx *r);

/* The key URI uri with its label (object=) set to label and any id= dropped. 0 when
 * the result does not fit or label is not [A-Za-z0-9._-]. */
int rot_uri_with_label(const char *uri, const char *label, char *out, size_t cap);

/* The one certificate in path (NULL with e when none or several). */
X509 *rot_load_one(const char *path, const char *key, hsmca_err *e);

/* The index of x in certs, or -1. */
int rot_find(STACK_OF(X509) * certs, X509 *x);

/* Writes certs to path (atomically), saying so with key (the config key). */
HSMCA_MUSTCHECK hsmca_code rot_write_certs(const char *path, const char *key,
                                           STACK_OF(X509) * certs, hsmca_err *e);

/* Refuses (1, after saying why) a step taken sooner than issuance.max_ttl after the
 * step at `since` (0: not in the log), unless early: certificates live at most that
 * long, so by then every workload has renewed once and holds what the step before
 * gave it. */
int rot_too_soon(const rot_ctx *r, int64_t since, const char *after, int early);

/* Opens ca.next_key as serve opens it (the token loaded here) and returns its public
 * half in *pub (new); r->s.uri is then ca.next_key's. */
HSMCA_MUSTCHECK hsmca_code rot_open_next(rot_ctx *r, EVP_PKEY **pub, hsmca_err *e);

/* The same for a session of its own (hsmca ca show); s->uri is then ca.next_key's. */
HSMCA_MUSTCHECK hsmca_code rot_session_next_key(ca_session *s, EVP_PKEY **pub, hsmca_err *e);

/* Where a rotation is, read from the config and the root bundle (docs/ROTATION.md):
 * NONE (no ca.next_* nor ca.previous_* set), PREPARED (ca.next_key; ca.next_cert too when
 * prepare made a self-signed root), IMPORTED (import-next set ca.next_cert and
 * ca.next_root), OVERLAP (the new CA's root is in ca.root_bundle: switch is next),
 * SWITCHED (ca.previous_key and ca.previous_cert: finish is next), UNCLEAR (keys set that
 * no step writes together, or a file that does not load; *why says which). */
typedef enum { ROT_NONE, ROT_PREPARED, ROT_IMPORTED, ROT_OVERLAP, ROT_SWITCHED, ROT_UNCLEAR } rot_state;
rot_state rot_state_of(const hsmca_config *c, STACK_OF(X509) * bundle, hsmca_err *why);
const char *rot_state_name(rot_state st);
/* The step to run next in st ("import-next", "overlap", ...), "" when none. */
const char *rot_state_next(const hsmca_config *c, rot_state st);

/* Fails e with rc and "what: " before why's message, or with why's message alone when
 * both would not fit in e: a reason is never cut short to make room for its context. */
HSMCA_MUSTCHECK hsmca_code rot_fail_in(hsmca_err *e, hsmca_code rc, const char *what,
                                       const hsmca_err *why);

/* The root a prepared CA chains to: ca.next_root (import-next), else ca.next_cert (a
 * self-signed root). NULL with e. */
X509 *rot_next_root(const hsmca_config *c, hsmca_err *e);

/* The root of roots that x chains to through the certificates in chain_path (may be
 * "": none), validity times not checked (a path is looked for, not a certificate
 * judged). A new reference, or NULL with e. */
X509 *rot_root_of(X509 *x, const char *chain_path, STACK_OF(X509) * roots, hsmca_err *e);

/* Signs, with old_key (opened as serve opens it; the token loaded here unless it is),
 * a certificate with new_root's subject, key and SKI issued by old_root: *cross, new. */
HSMCA_MUSTCHECK hsmca_code rot_cross_sign(rot_ctx *r, const char *old_key, X509 *old_root,
                                          X509 *new_root, X509 **cross, hsmca_err *e);

/* At switch, between two self-signed roots (ca.cert, next): next cross-signed by the
 * old key (pkcs11.ca_key), recorded (rotate-cross-sign), written beside ca.next_cert as
 * LABEL-cross.pem, its path in path (for ca.chain), so that a peer trusting only the old
 * root still verifies the serving certificate and new leaves. Otherwise path is "" and,
 * when the new CA does not chain to the old CA's root in bundle, a note says so. */
HSMCA_MUSTCHECK hsmca_code rot_switch_cross(rot_ctx *r, X509 *next, STACK_OF(X509) * bundle,
                                            char *path, size_t cap, hsmca_err *e);

int ca_rotate_prepare(int argc, char **argv);
int ca_rotate_import_next(int argc, char **argv);
int ca_rotate_overlap(int argc, char **argv);
int ca_rotate_switch(int argc, char **argv);
int ca_rotate_cross(int argc, char **argv);
int ca_rotate_finish(int argc, char **argv);

#endif

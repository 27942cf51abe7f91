/* key_kinds.h - the key types hsmca makes in a token, by the names its commands take
 * (`--type`, `--ca-key`, `--audit-key`): one table for token keygen, ca init and dev. */
#ifndef HSMCA_KEY_KINDS_H
#define HSMCA_KEY_KINDS_H

#include "p11.h"

typedef struct {
    const char *name;  /* "ec-p256", as on the command line */
    p11_key_type type;
    int ca, audit;     /* the roles serve takes a key of this type for */
    const char *what;  /* "EC P-256", for messages */
    const char *alg;   /* p11_signkey_alg's name for an audit key of this type, or NULL */
} key_kind;

/* The kind named name, or NULL when hsmca makes no such key. */
const key_kind *key_kind_find(const char *name);
/* The kind of type, or NULL. */
const key_kind *key_kind_of(p11_key_type type);
/* The kind of an audit key p11_signkey_alg names ("ecdsa-p384"), or NULL. */
const key_kind *key_kind_of_alg(const char *alg);
/* The names a role takes, for usage lines: "ec-p256, ec-p384, rsa-2048, rsa-3072 or
 * rsa-4096" (audit: "ed25519, ec-p256 or ec-p384"); a static string. */
const char *key_kind_names(int audit);

#endif

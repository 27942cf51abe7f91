/* ca_show.h - what `hsmca ca show` (ca_show.c) and its rotation section (ca_show_rot.c)
 * share: one certificate's facts as JSON and as text (ca_show_cert.c). */
#ifndef HSMCA_CA_SHOW_H
#define HSMCA_CA_SHOW_H

#include <jansson.h>
#include <openssl/x509.h>

#include "ca_util.h"

/* subject, issuer, serial, validity, key type, is_ca, sha256, spki_sha256. */
json_t *ca_show_cert_json(X509 *x);
void ca_show_print_cert(json_t *c, const char *indent);
/* The string member key of o, "" when missing. */
const char *ca_show_str(json_t *o, const char *key);

/* "rotation" (when any ca.next_* or ca.previous_* is set): the state of the rotation
 * (rot_state_of), the next key and whether the token holds it, the next and previous
 * certificates, and which roots of the bundle are the old and the new. Its problems are
 * members of it ("error", "next_token_key": "error"), never a failure of show. */
void ca_show_rotation(json_t *doc, ca_session *s);
void ca_show_rotation_text(json_t *rot);

#endif

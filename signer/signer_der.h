/* signer_der.h - a bounds-checked, strict DER cursor for the signer's TBS
 * validator, in the style of BoringSSL's CBS.
 *
 * A cursor is a view of a buffer; each verb reads one element off its front and
 * returns false on anything that is not DER (high tag numbers, indefinite or
 * non-minimal lengths, a length beyond the input, the wrong tag). Nothing is
 * copied or allocated: cursors point into the caller's buffer. The cursor knows
 * no invariant and writes no message: the caller names the rule that failed. */
#ifndef HSMCA_SIGNER_DER_H
#define HSMCA_SIGNER_DER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "der_tags.h" /* the tags the verbs take */

/* A read position: the bytes not yet read. */
typedef struct {
    const uint8_t *p;
    size_t len;
} der_cur;

/* A cursor over buf[0..len) (NULL buf: an empty cursor). */
der_cur der_cur_init(const uint8_t *buf, size_t len);

/* True when nothing is left to read. */
bool der_empty(const der_cur *c);

/* True when the next element has this tag (false at the end). */
bool der_peek(const der_cur *c, uint8_t tag);

/* True when the next element's tag is in the high-tag-number form (a tag number of 31 or
 * more, in more than one octet), which no verb reads: the caller can name it. */
bool der_peek_high_tag(const der_cur *c);

/* Reads the next element, which must have tag; *out views its contents. */
bool der_get(der_cur *c, uint8_t tag, der_cur *out);

/* As der_get, but *out views the whole element, header included. */
bool der_get_element(der_cur *c, uint8_t tag, der_cur *out);

/* Reads the next element whatever its tag: *tag and its contents. */
bool der_get_any(der_cur *c, uint8_t *tag, der_cur *out);

/* When the next element has tag, reads it (*present = true); otherwise reads
 * nothing (*present = false). False only when a present element is malformed. */
bool der_get_optional(der_cur *c, uint8_t tag, der_cur *out, bool *present);

/* Reads the next element, which must have tag and be the last one in c. */
bool der_get_only(der_cur *c, uint8_t tag, der_cur *out);

/* Reads a BOOLEAN: contents exactly 0x00 or 0xFF. */
bool der_get_bool(der_cur *c, bool *v);

/* Reads an INTEGER with minimal contents (X.690 8.3.2); *out views them. */
bool der_get_integer(der_cur *c, der_cur *out);

/* Reads an OBJECT IDENTIFIER with well-formed, minimal contents; *out views them. */
bool der_get_oid(der_cur *c, der_cur *out);

/* True when c's bytes equal (b, n) exactly. */
bool der_eq(const der_cur *c, const uint8_t *b, size_t n);

#endif

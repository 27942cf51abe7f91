/* signer_der.h - a small strict DER reader for the signer's TBS validator.
 *
 * Accepts only DER: low-tag-number identifiers, definite lengths in minimal
 * form, every read bounds-checked against an explicit length. Nothing is
 * copied: a TLV points into the caller's buffer. Errors name the invariant
 * the cursor is checking ("invariant N: <what>: <reason>"), code HSMCA_EINVAL. */
#ifndef HSMCA_SIGNER_DER_H
#define HSMCA_SIGNER_DER_H

#include "hsmca_err.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Universal and context tags used by the TBS profile (identifier octets). */
#define DER_BOOLEAN 0x01
#define DER_INTEGER 0x02
#define DER_BIT_STRING 0x03
#define DER_OCTET_STRING 0x04
#define DER_NULL 0x05
#define DER_OID 0x06
#define DER_UTCTIME 0x17
#define DER_GENTIME 0x18
#define DER_SEQUENCE 0x30
#define DER_CTX(n) (0x80 | (n))      /* [n] IMPLICIT, primitive */
#define DER_CTX_CONS(n) (0xA0 | (n)) /* [n] constructed / EXPLICIT */

/* A read position in a buffer; inv is the invariant number used in messages. */
typedef struct {
    const uint8_t *p;
    size_t len;
    int inv;
} der_cur;

/* One element: tag, contents, and the whole encoding (for byte comparisons). */
typedef struct {
    uint8_t tag;
    const uint8_t *val;
    size_t len;
    const uint8_t *raw;
    size_t raw_len;
} der_tlv;

/* A cursor over buf[0..len) reporting under invariant inv. */
der_cur der_cur_init(const uint8_t *buf, size_t len, int inv);

/* A cursor over the contents of t, reporting under invariant inv. */
der_cur der_cur_of(const der_tlv *t, int inv);

/* True when nothing is left to read. */
bool der_at_end(const der_cur *c);

/* The next identifier octet, or -1 at the end (does not validate it). */
int der_peek_tag(const der_cur *c);

/* Reads the next TLV of any tag; what names the field in the message. */
hsmca_code der_next(der_cur *c, der_tlv *t, const char *what, hsmca_err *e);

/* Reads the next TLV and requires tag. */
hsmca_code der_expect(der_cur *c, uint8_t tag, der_tlv *t, const char *what, hsmca_err *e);

/* Requires that c is exhausted ("trailing bytes in <what>" otherwise). */
hsmca_code der_expect_end(const der_cur *c, const char *what, hsmca_err *e);

/* Checks an INTEGER's contents are minimal (X.690 8.3.2); does not check sign. */
hsmca_code der_check_integer(const der_cur *c, const der_tlv *t, const char *what, hsmca_err *e);

/* Checks an OBJECT IDENTIFIER's contents are well formed and minimal. */
hsmca_code der_check_oid(const der_cur *c, const der_tlv *t, const char *what, hsmca_err *e);

/* Reads a DER BOOLEAN's value: 0x00 or 0xFF only, length 1. */
hsmca_code der_read_bool(const der_cur *c, const der_tlv *t, bool *v, const char *what,
                         hsmca_err *e);

/* True when t's contents equal (b, n) byte for byte. */
bool der_val_eq(const der_tlv *t, const uint8_t *b, size_t n);

/* True when t's whole encoding equals (b, n) byte for byte. */
bool der_raw_eq(const der_tlv *t, const uint8_t *b, size_t n);

#endif

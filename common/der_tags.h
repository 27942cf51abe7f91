/* der_tags.h - the DER identifier octets the certificate profiles use: one set for the
 * front end's TBS writer and the signer's TBS reader, so the two cannot disagree. */
#ifndef HSMCA_DER_TAGS_H
#define HSMCA_DER_TAGS_H

/* Universal tags. */
#define DER_BOOLEAN 0x01
#define DER_INTEGER 0x02
#define DER_BIT_STRING 0x03
#define DER_OCTET_STRING 0x04
#define DER_NULL 0x05
#define DER_OID 0x06
#define DER_UTCTIME 0x17
#define DER_GENTIME 0x18
#define DER_SEQUENCE 0x30

/* Context tags. */
#define DER_CTX(n) (0x80 | (n))      /* [n] IMPLICIT, primitive */
#define DER_CTX_CONS(n) (0xA0 | (n)) /* [n] constructed / EXPLICIT */

/* GeneralName choices (RFC 5280 4.2.1.6). */
#define DER_GN_DNS DER_CTX(2) /* dNSName [2] IA5String */
#define DER_GN_URI DER_CTX(6) /* uniformResourceIdentifier [6] IA5String */
#define DER_GN_IP DER_CTX(7)  /* iPAddress [7] OCTET STRING */

#endif

/* signer_der.c - see signer_der.h. */
#include "signer_der.h"

#include <string.h>

/* TBSs are at most PROFILE_TBS_MAX (16 KiB): two length octets are enough, and
 * refusing more keeps every length far from overflow. */
#define DER_MAX_LEN_OCTETS 2

der_cur der_cur_init(const uint8_t *buf, size_t len)
{
    der_cur c = {buf, buf ? len : 0};
    return c;
}

bool der_empty(const der_cur *c)
{
    return c->len == 0;
}

bool der_peek(const der_cur *c, uint8_t tag)
{
    return c->len > 0 && c->p[0] == tag;
}

bool der_peek_high_tag(const der_cur *c)
{
    return c->len > 0 && (c->p[0] & 0x1f) == 0x1f;
}

/* Splits the next element off c: its tag, the length of its header, and the
 * length of its contents. Definite lengths in minimal form only. */
static bool der_parse_header(const der_cur *c, uint8_t *tag, size_t *hdr, size_t *vlen)
{
    if (c->len < 2 || der_peek_high_tag(c)) /* no high-tag-number form */
        return false;
    uint8_t l0 = c->p[1];
    size_t v = 0, k = 0;
    if (l0 < 0x80) {
        v = l0;
    } else {
        k = l0 & 0x7f; /* 0x80 alone is the indefinite form: k == 0 */
        if (k == 0 || k > DER_MAX_LEN_OCTETS || c->len < 2 + k || c->p[2] == 0)
            return false;
        for (size_t i = 0; i < k; i++)
            v = (v << 8) | c->p[2 + i];
        if (v < 0x80) /* the short form was required */
            return false;
    }
    if (v > c->len - 2 - k)
        return false;
    *tag = c->p[0];
    *hdr = 2 + k;
    *vlen = v;
    return true;
}

static bool der_take(der_cur *c, uint8_t *tag, der_cur *contents, der_cur *whole)
{
    size_t hdr, vlen;
    if (!der_parse_header(c, tag, &hdr, &vlen))
        return false;
    if (contents)
        *contents = der_cur_init(c->p + hdr, vlen);
    if (whole)
        *whole = der_cur_init(c->p, hdr + vlen);
    c->p += hdr + vlen;
    c->len -= hdr + vlen;
    return true;
}

bool der_get_any(der_cur *c, uint8_t *tag, der_cur *out)
{
    return der_take(c, tag, out, NULL);
}

/* Reads the next element if it has tag: its contents and/or its whole
 * encoding; on failure c is left where it was. */
static bool der_get_tagged(der_cur *c, uint8_t tag, der_cur *contents, der_cur *whole)
{
    uint8_t t;
    der_cur save = *c;
    if (!der_peek(c, tag) || !der_take(c, &t, contents, whole)) {
        *c = save;
        return false;
    }
    return true;
}

bool der_get(der_cur *c, uint8_t tag, der_cur *out)
{
    return der_get_tagged(c, tag, out, NULL);
}

bool der_get_element(der_cur *c, uint8_t tag, der_cur *out)
{
    return der_get_tagged(c, tag, NULL, out);
}

bool der_get_optional(der_cur *c, uint8_t tag, der_cur *out, bool *present)
{
    *present = der_peek(c, tag);
    return !*present || der_get(c, tag, out);
}

bool der_get_only(der_cur *c, uint8_t tag, der_cur *out)
{
    return der_get(c, tag, out) && der_empty(c);
}

bool der_get_bool(der_cur *c, bool *v)
{
    der_cur b;
    if (!der_get(c, DER_BOOLEAN, &b) || b.len != 1 || (b.p[0] != 0x00 && b.p[0] != 0xff))
        return false;
    *v = b.p[0] == 0xff;
    return true;
}

bool der_get_integer(der_cur *c, der_cur *out)
{
    der_cur v;
    if (!der_get(c, DER_INTEGER, &v) || v.len == 0)
        return false;
    /* Minimal: no leading 0x00 before a byte < 0x80, no 0xFF before one >= 0x80. */
    if (v.len >= 2 && ((v.p[0] == 0x00 && !(v.p[1] & 0x80)) || (v.p[0] == 0xff && (v.p[1] & 0x80))))
        return false;
    *out = v;
    return true;
}

bool der_get_oid(der_cur *c, der_cur *out)
{
    der_cur v;
    if (!der_get(c, DER_OID, &v) || v.len == 0 || v.len > 64)
        return false;
    /* Each subidentifier: base 128, no leading 0x80 octet, last octet below 0x80. */
    bool start = true;
    for (size_t i = 0; i < v.len; i++) {
        if (start && v.p[i] == 0x80)
            return false;
        start = !(v.p[i] & 0x80);
    }
    if (!start)
        return false;
    *out = v;
    return true;
}

bool der_eq(const der_cur *c, const uint8_t *b, size_t n)
{
    return c->len == n && memcmp(c->p, b, n) == 0;
}

/* signer_der.c - see signer_der.h. */
#include "signer_der.h"

#include <string.h>

der_cur der_cur_init(const uint8_t *buf, size_t len, int inv)
{
    der_cur c = {buf, buf ? len : 0, inv};
    return c;
}

der_cur der_cur_of(const der_tlv *t, int inv)
{
    return der_cur_init(t->val, t->len, inv);
}

bool der_at_end(const der_cur *c)
{
    return c->len == 0;
}

int der_peek_tag(const der_cur *c)
{
    return c->len ? c->p[0] : -1;
}

/* Decodes a definite length at p (n bytes available) in minimal form only:
 * short form below 128, else 0x81..0x84 followed by as few octets as needed. */
static hsmca_code der_read_len(const der_cur *c, const uint8_t *p, size_t n, size_t *out,
                               size_t *used, const char *what, hsmca_err *e)
{
    if (n < 1)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: truncated length", c->inv, what);
    if (p[0] < 0x80) {
        *out = p[0];
        *used = 1;
        return HSMCA_OK;
    }
    if (p[0] == 0x80)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: indefinite length (not DER)", c->inv,
                          what);
    size_t k = p[0] & 0x7f;
    /* TBS_MAX_LEN is far below 2^32: four length octets are more than enough. */
    if (k > 4)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: length too long", c->inv, what);
    if (n < 1 + k)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: truncated length", c->inv, what);
    if (p[1] == 0)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "invariant %d: %s: non-minimal length (leading zero octet)", c->inv,
                          what);
    size_t v = 0;
    for (size_t i = 1; i <= k; i++)
        v = (v << 8) | p[i];
    if (v < 0x80)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "invariant %d: %s: non-minimal length (long form below 128)", c->inv,
                          what);
    *out = v;
    *used = 1 + k;
    return HSMCA_OK;
}

hsmca_code der_next(der_cur *c, der_tlv *t, const char *what, hsmca_err *e)
{
    if (c->len < 2)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: truncated", c->inv, what);
    uint8_t tag = c->p[0];
    /* High-tag-number form never occurs in a certificate profile we sign. */
    if ((tag & 0x1f) == 0x1f)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: high tag number form", c->inv, what);
    size_t vlen = 0, used = 0;
    hsmca_code rc = der_read_len(c, c->p + 1, c->len - 1, &vlen, &used, what, e);
    if (rc != HSMCA_OK)
        return rc;
    size_t hdr = 1 + used;
    if (vlen > c->len - hdr)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: length exceeds the input", c->inv,
                          what);
    t->tag = tag;
    t->raw = c->p;
    t->raw_len = hdr + vlen;
    t->val = c->p + hdr;
    t->len = vlen;
    c->p += t->raw_len;
    c->len -= t->raw_len;
    return HSMCA_OK;
}

hsmca_code der_expect(der_cur *c, uint8_t tag, der_tlv *t, const char *what, hsmca_err *e)
{
    if (c->len == 0)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: missing", c->inv, what);
    if (c->p[0] != tag)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: tag 0x%02x, expected 0x%02x", c->inv,
                          what, c->p[0], tag);
    return der_next(c, t, what, e);
}

hsmca_code der_expect_end(const der_cur *c, const char *what, hsmca_err *e)
{
    if (c->len != 0)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: %zu trailing bytes", c->inv, what,
                          c->len);
    return HSMCA_OK;
}

hsmca_code der_check_integer(const der_cur *c, const der_tlv *t, const char *what, hsmca_err *e)
{
    if (t->len == 0)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: empty INTEGER", c->inv, what);
    if (t->len >= 2 &&
        ((t->val[0] == 0x00 && !(t->val[1] & 0x80)) || (t->val[0] == 0xff && (t->val[1] & 0x80))))
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: non-minimal INTEGER", c->inv, what);
    return HSMCA_OK;
}

hsmca_code der_check_oid(const der_cur *c, const der_tlv *t, const char *what, hsmca_err *e)
{
    if (t->len == 0 || t->len > 64)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: bad OID length", c->inv, what);
    /* Each subidentifier: base 128, no leading 0x80 octet, last octet below 0x80. */
    bool start = true;
    for (size_t i = 0; i < t->len; i++) {
        if (start && t->val[i] == 0x80)
            return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: non-minimal OID", c->inv, what);
        start = !(t->val[i] & 0x80);
    }
    if (!start)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: truncated OID", c->inv, what);
    return HSMCA_OK;
}

hsmca_code der_read_bool(const der_cur *c, const der_tlv *t, bool *v, const char *what,
                         hsmca_err *e)
{
    if (t->tag != DER_BOOLEAN || t->len != 1 || (t->val[0] != 0x00 && t->val[0] != 0xff))
        return hsmca_fail(e, HSMCA_EINVAL, "invariant %d: %s: BOOLEAN not 0x00/0xFF", c->inv, what);
    *v = t->val[0] == 0xff;
    return HSMCA_OK;
}

bool der_val_eq(const der_tlv *t, const uint8_t *b, size_t n)
{
    return t->len == n && memcmp(t->val, b, n) == 0;
}

bool der_raw_eq(const der_tlv *t, const uint8_t *b, size_t n)
{
    return t->raw_len == n && memcmp(t->raw, b, n) == 0;
}

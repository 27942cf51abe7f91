/* p11_uri.c - RFC 7512 "pkcs11:" URIs, the subset hsmca needs.
 *
 * The URI comes from config, so it is outside input: the whole string is
 * capped, every value is capped, each attribute may appear once, and anything
 * we do not understand is refused rather than ignored (a key URI that is
 * silently widened could select a different key). */
#include "p11.h"
#include <string.h>
#include <strings.h>

#define P11_URI_MAX 1024

/* RFC 7512 p11-pchar without ';' (the separator): unreserved, pct-encoded
 * (handled by the caller), ":" / "[" / "]" / "@" / "!" / "$" / "'" / "(" / ")"
 * / "*" / "+" / "," / "=" / "&". */
static int uri_pchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c != '\0' && strchr("-._~:[]@!$'()*+,=&", c) != NULL;
}

static int uri_hex(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes v[0..vlen) into out (capacity cap). Returns the decoded length
 * or -1 (bad char / bad escape), -2 (longer than cap). */
static long uri_decode(const char *v, size_t vlen, uint8_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < vlen; i++) {
        unsigned char c = (unsigned char)v[i];
        int b;
        if (c == '%') {
            if (i + 2 >= vlen)
                return -1;
            int hi = uri_hex((unsigned char)v[i + 1]), lo = uri_hex((unsigned char)v[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            b = hi * 16 + lo;
            i += 2;
        } else if (uri_pchar(c)) {
            b = c;
        } else {
            return -1;
        }
        if (n >= cap)
            return -2;
        out[n++] = (uint8_t)b;
    }
    return (long)n;
}

/* Decodes a text value (token / object / type) into a NUL-terminated string. */
static HSMCA_MUSTCHECK hsmca_code uri_text(const char *name, const char *v, size_t vlen, char *out, size_t outsz,
                           hsmca_err *e)
{
    long n = uri_decode(v, vlen, (uint8_t *)out, outsz - 1);
    if (n == -2)
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: %s longer than %zu bytes", name, outsz - 1);
    if (n < 0)
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: %s has a bad character or escape", name);
    if (memchr(out, '\0', (size_t)n))
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: %s contains a NUL byte", name);
    out[n] = '\0';
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code uri_attr(const char *a, size_t alen, p11_uri *u, unsigned *seen, hsmca_err *e)
{
    static const char *const known[] = {"token", "object", "id", "type"};
    const char *eq = memchr(a, '=', alen);
    if (!eq)
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: attribute without '='");
    size_t nlen = (size_t)(eq - a);
    const char *v = eq + 1;
    size_t vlen = alen - nlen - 1;
    unsigned k;
    for (k = 0; k < 4; k++)
        if (strlen(known[k]) == nlen && memcmp(known[k], a, nlen) == 0)
            break;
    if (k == 4) {
        if ((nlen == 9 && memcmp(a, "pin-value", 9) == 0) ||
            (nlen == 10 && memcmp(a, "pin-source", 10) == 0))
            return hsmca_fail(e, HSMCA_EINVAL,
                              "pkcs11 URI: PIN in the URI refused (use pin-source in config)");
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: unsupported attribute '%.*s'",
                          (int)(nlen > 32 ? 32 : nlen), a);
    }
    if (*seen & (1u << k))
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: %s given twice", known[k]);
    *seen |= 1u << k;
    if (vlen == 0)
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: %s is empty", known[k]);

    switch (k) {
    case 0: return uri_text("token", v, vlen, u->token, sizeof(u->token), e);
    case 1: return uri_text("object", v, vlen, u->object, sizeof(u->object), e);
    case 2: {
        long n = uri_decode(v, vlen, u->id, sizeof(u->id));
        if (n == -2)
            return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: id longer than %zu bytes",
                              sizeof(u->id));
        if (n < 0)
            return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: id has a bad character or escape");
        u->id_len = (size_t)n;
        return HSMCA_OK;
    }
    default: {
        hsmca_code c = uri_text("type", v, vlen, u->type, sizeof(u->type), e);
        if (c != HSMCA_OK)
            return c;
        if (strcmp(u->type, "private") && strcmp(u->type, "public") && strcmp(u->type, "cert"))
            return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: type must be private, public or cert");
        return HSMCA_OK;
    }
    }
}

hsmca_code p11_uri_parse(const char *s, p11_uri *u, hsmca_err *e)
{
    memset(u, 0, sizeof(*u));
    if (!s)
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: missing");
    size_t len = strnlen(s, P11_URI_MAX + 1);
    if (len > P11_URI_MAX)
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: longer than %d bytes", P11_URI_MAX);
    if (len < 7 || strncasecmp(s, "pkcs11:", 7) != 0)
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: does not start with 'pkcs11:'");
    const char *p = s + 7, *end = s + len;
    /* Query attributes (module-path, pin-source, ...) come from config instead;
     * a query part here would be a second, conflicting source. */
    if (memchr(p, '?', (size_t)(end - p)) || memchr(p, '#', (size_t)(end - p)))
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: query or fragment part refused");
    if (p == end)
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: no attributes");

    unsigned seen = 0;
    hsmca_code c = HSMCA_OK;
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *aend = semi ? semi : end;
        if (aend == p) {
            c = hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: empty attribute");
            break;
        }
        c = uri_attr(p, (size_t)(aend - p), u, &seen, e);
        if (c != HSMCA_OK)
            break;
        p = semi ? semi + 1 : end;
        if (semi && p == end) {
            c = hsmca_fail(e, HSMCA_EINVAL, "pkcs11 URI: trailing ';'");
            break;
        }
    }
    if (c != HSMCA_OK)
        memset(u, 0, sizeof(*u));
    return c;
}

/* policy_spiffe.c - see policy_spiffe.h. */
#include "policy_spiffe.h"

#include <string.h>

static const char SPIFFE_SCHEME[] = "spiffe://";

static int spiffe_td_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

static int spiffe_path_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '-' || c == '_';
}

/* The trust domain: s[0..n), up to the first '/'. Characters outside the
 * grammar get a message naming what they would have meant in a URI. */
static HSMCA_MUSTCHECK hsmca_code spiffe_check_td(const char *s, size_t n, size_t off, hsmca_err *e)
{
    HSMCA_ENSURE(n > 0, e, HSMCA_EPERM, "SPIFFE ID: empty trust domain");
    HSMCA_ENSURE(n <= SPIFFE_TD_MAX, e, HSMCA_EPERM,
                 "SPIFFE ID: trust domain of %zu bytes (at most %d)", n, SPIFFE_TD_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        HSMCA_ENSURE(c != '@', e, HSMCA_EPERM, "SPIFFE ID: userinfo ('@') not allowed");
        HSMCA_ENSURE(c != ':', e, HSMCA_EPERM, "SPIFFE ID: port (':') not allowed");
        HSMCA_ENSURE(c != '?' && c != '#', e, HSMCA_EPERM,
                     "SPIFFE ID: query or fragment not allowed");
        HSMCA_ENSURE(c != '%', e, HSMCA_EPERM, "SPIFFE ID: percent-encoding not allowed");
        HSMCA_ENSURE(!(c >= 'A' && c <= 'Z'), e, HSMCA_EPERM,
                     "SPIFFE ID: trust domain must be lowercase");
        HSMCA_ENSURE(spiffe_td_char(c), e, HSMCA_EPERM,
                     "SPIFFE ID: trust domain byte 0x%02x at offset %zu is not [a-z0-9._-]", c,
                     off + i);
    }
    return HSMCA_OK;
}

/* The path: s[0..n) starting with '/', one or more segments. */
static HSMCA_MUSTCHECK hsmca_code spiffe_check_path(const char *s, size_t n, size_t off, hsmca_err *e)
{
    HSMCA_ENSURE(n > 0, e, HSMCA_EPERM, "SPIFFE ID: no path (a workload ID needs one)");
    int seg_no = 0;
    for (size_t i = 0; i < n;) {
        size_t start = ++i; /* past the '/' */
        while (i < n && s[i] != '/') {
            unsigned char c = (unsigned char)s[i];
            HSMCA_ENSURE(c != '?' && c != '#', e, HSMCA_EPERM,
                         "SPIFFE ID: query or fragment not allowed");
            HSMCA_ENSURE(c != '%', e, HSMCA_EPERM, "SPIFFE ID: percent-encoding not allowed");
            HSMCA_ENSURE(spiffe_path_char(c), e, HSMCA_EPERM,
                         "SPIFFE ID: path byte 0x%02x at offset %zu is not [A-Za-z0-9._-]", c,
                         off + i);
            i++;
        }
        size_t seg = i - start;
        seg_no++;
        HSMCA_ENSURE(seg > 0, e, HSMCA_EPERM, "SPIFFE ID: path segment %d is empty", seg_no);
        HSMCA_ENSURE(!(seg == 1 && s[start] == '.'), e, HSMCA_EPERM,
                     "SPIFFE ID: path segment %d is '.'", seg_no);
        HSMCA_ENSURE(!(seg == 2 && s[start] == '.' && s[start + 1] == '.'), e, HSMCA_EPERM,
                     "SPIFFE ID: path segment %d is '..'", seg_no);
    }
    return HSMCA_OK;
}

hsmca_code policy_spiffe_id_check(const char *s, size_t len, const char *const *tds, int n_tds,
                                  hsmca_err *e)
{
    const size_t pfx = sizeof(SPIFFE_SCHEME) - 1;
    HSMCA_ENSURE(s && len > 0, e, HSMCA_EPERM, "SPIFFE ID: empty");
    HSMCA_ENSURE(len <= SPIFFE_ID_MAX, e, HSMCA_EPERM,
                 "SPIFFE ID: %zu bytes (at most %d)", len, SPIFFE_ID_MAX);
    HSMCA_ENSURE(memchr(s, '\0', len) == NULL, e, HSMCA_EPERM, "SPIFFE ID: contains a NUL byte");
    HSMCA_ENSURE(len >= pfx && memcmp(s, SPIFFE_SCHEME, pfx) == 0, e, HSMCA_EPERM,
                 "SPIFFE ID: scheme must be spiffe:// (lowercase)");
    const char *td = s + pfx;
    const char *slash = memchr(td, '/', len - pfx);
    size_t td_len = slash ? (size_t)(slash - td) : len - pfx;
    HSMCA_GUARD(spiffe_check_td(td, td_len, pfx, e));
    HSMCA_GUARD(spiffe_check_path(td + td_len, len - pfx - td_len, pfx + td_len, e));
    if (n_tds <= 0)
        return HSMCA_OK;
    for (int i = 0; i < n_tds; i++)
        if (tds[i] && strlen(tds[i]) == td_len && memcmp(tds[i], td, td_len) == 0)
            return HSMCA_OK;
    return hsmca_fail(e, HSMCA_EPERM, "SPIFFE ID: trust domain is not a configured one");
}

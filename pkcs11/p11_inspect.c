/* p11_inspect.c - read-only inspection of the module, its tokens and a configured key,
 * for `hsmca token check`: every finding is reported, none refuses. The checks that
 * decide whether the key may serve stay p11_key.c's (p11_pool_open, p11_signkey_open);
 * the FAIL lines here name the same attributes those checks refuse. */
#include "p11_int.h"
#include "util.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INSPECT_MAX_SLOTS 64
#define INSPECT_LINE_MAX 768

static void say(p11_check_fn fn, void *ctx, p11_check_status st, const char *subject,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void say(p11_check_fn fn, void *ctx, p11_check_status st, const char *subject,
                const char *fmt, ...)
{
    char text[INSPECT_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    fn(ctx, st, subject, text);
}

/* A space-padded CK_*_INFO field as a C string, trailing spaces cut, other bytes
 * outside printable ASCII shown as '?'. */
static void fixed_str(const unsigned char *in, size_t n, char *out)
{
    while (n && (in[n - 1] == ' ' || in[n - 1] == '\0'))
        n--;
    for (size_t i = 0; i < n; i++)
        out[i] = in[i] >= 0x20 && in[i] < 0x7f ? (char)in[i] : '?';
    out[n] = '\0';
}

static void token_flags(CK_FLAGS f, char *out, size_t outsz)
{
    static const struct {
        CK_FLAGS bit;
        const char *name;
    } names[] = {
        {CKF_TOKEN_INITIALIZED, "initialized"},  {CKF_LOGIN_REQUIRED, "login-required"},
        {CKF_USER_PIN_INITIALIZED, "user-pin-set"}, {CKF_RNG, "rng"},
        {CKF_WRITE_PROTECTED, "write-protected"}, {CKF_PROTECTED_AUTHENTICATION_PATH, "pin-pad"},
        {CKF_USER_PIN_COUNT_LOW, "user-pin-count-low"}, {CKF_USER_PIN_FINAL_TRY, "user-pin-final-try"},
        {CKF_USER_PIN_LOCKED, "user-pin-LOCKED"}, {CKF_USER_PIN_TO_BE_CHANGED, "user-pin-to-be-changed"},
    };
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!(f & names[i].bit))
            continue;
        int w = snprintf(out + used, outsz - used, "%s%s", used ? "," : "", names[i].name);
        if (w < 0 || (size_t)w >= outsz - used)
            return;
        used += (size_t)w;
    }
}

int p11_token_list(p11_module *m, p11_check_fn fn, void *ctx)
{
    CK_INFO info;
    char a[80], b[80], c[80], d[80], flags[256];
    if (m->fl->C_GetInfo(&info) == CKR_OK) {
        fixed_str(info.manufacturerID, sizeof(info.manufacturerID), a);
        fixed_str(info.libraryDescription, sizeof(info.libraryDescription), b);
        say(fn, ctx, P11_CHECK_INFO, "pkcs11.module", "'%s' by '%s', library %u.%u, PKCS#11 %u.%u",
            b, a, info.libraryVersion.major, info.libraryVersion.minor,
            info.cryptokiVersion.major, info.cryptokiVersion.minor);
    }
    CK_SLOT_ID slots[INSPECT_MAX_SLOTS];
    CK_ULONG n = INSPECT_MAX_SLOTS;
    CK_RV rv = m->fl->C_GetSlotList(CK_TRUE, slots, &n);
    if (rv != CKR_OK) {
        say(fn, ctx, P11_CHECK_FAIL, "pkcs11.module", "C_GetSlotList: %s", p11_rv_name(rv));
        return 0;
    }
    int tokens = 0;
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        rv = m->fl->C_GetTokenInfo(slots[i], &ti);
        if (rv != CKR_OK) {
            say(fn, ctx, P11_CHECK_INFO, "pkcs11.module", "slot %lu: C_GetTokenInfo: %s",
                (unsigned long)slots[i], p11_rv_name(rv));
            continue;
        }
        tokens++;
        fixed_str(ti.label, sizeof(ti.label), a);
        fixed_str(ti.manufacturerID, sizeof(ti.manufacturerID), b);
        fixed_str(ti.model, sizeof(ti.model), c);
        fixed_str(ti.serialNumber, sizeof(ti.serialNumber), d);
        token_flags(ti.flags, flags, sizeof(flags));
        say(fn, ctx, P11_CHECK_INFO, "pkcs11.module",
            "slot %lu: token '%s' manufacturer '%s' model '%s' serial '%s' flags %s",
            (unsigned long)slots[i], a, b, c, d, flags[0] ? flags : "none");
    }
    if (!tokens)
        say(fn, ctx, P11_CHECK_FAIL, "pkcs11.module", "no slot holds a token");
    return tokens;
}

/* The curve a CKA_EC_PARAMS names, or NULL for one serve does not take. */
static const char *curve_name(const uint8_t *p, size_t n)
{
    if (n == sizeof(p11_oid_p256) && memcmp(p, p11_oid_p256, n) == 0)
        return "P-256";
    if (n == sizeof(p11_oid_p384) && memcmp(p, p11_oid_p384, n) == 0)
        return "P-384";
    if ((n == sizeof(p11_oid_ed25519) && memcmp(p, p11_oid_ed25519, n) == 0) ||
        (n == sizeof(p11_name_ed25519) && memcmp(p, p11_name_ed25519, n) == 0))
        return "edwards25519";
    return NULL;
}

/* Key type and curve or size, against what the role accepts (p11_key.c check_type,
 * ec_pub, ed25519_pub, rsa_pub). */
static void inspect_type(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h, const char *subj,
                         int audit, p11_check_fn fn, void *ctx)
{
    CK_KEY_TYPE kt;
    CK_RV rv = p11_get_ulong(m, s, h, CKA_KEY_TYPE, &kt);
    if (rv != CKR_OK) {
        say(fn, ctx, P11_CHECK_FAIL, subj, "CKA_KEY_TYPE not readable: %s", p11_rv_name(rv));
        return;
    }
    const char *want = audit ? "CKK_EC_EDWARDS (Ed25519) or CKK_EC (P-256, P-384)"
                             : "CKK_EC (P-256, P-384) or CKK_RSA (>= 2048 bits)";
    uint8_t *v = NULL;
    size_t len = 0;
    if (kt == CKK_RSA && !audit) {
        rv = p11_get_attr(m, s, h, CKA_MODULUS, &v, &len, 1024);
        size_t i = 0;
        while (rv == CKR_OK && i < len && v[i] == 0)
            i++;
        int bits = rv == CKR_OK && i < len ? (int)(len - i) * 8 : 0;
        for (uint8_t top = bits ? v[i] : 0x80; !(top & 0x80); top = (uint8_t)(top << 1))
            bits--;
        say(fn, ctx, bits >= 2048 ? P11_CHECK_OK : P11_CHECK_FAIL, subj,
            "key type CKK_RSA, %d bits%s", bits, bits >= 2048 ? "" : " (serve wants >= 2048)");
    } else if (kt == CKK_EC || (kt == CKK_EC_EDWARDS && audit)) {
        rv = p11_get_attr(m, s, h, CKA_EC_PARAMS, &v, &len, 64);
        const char *curve = rv == CKR_OK ? curve_name(v, len) : NULL;
        int ok = curve && (kt == CKK_EC) == (strcmp(curve, "edwards25519") != 0);
        say(fn, ctx, ok ? P11_CHECK_OK : P11_CHECK_FAIL, subj, "key type %s, curve %s%s",
            kt == CKK_EC ? "CKK_EC" : "CKK_EC_EDWARDS", curve ? curve : "unknown",
            ok ? "" : " (serve takes P-256, P-384 or, for the audit key, edwards25519)");
    } else {
        say(fn, ctx, P11_CHECK_FAIL, subj, "key type 0x%lx: serve takes %s", (unsigned long)kt,
            want);
    }
    free(v);
}

/* The boolean attributes: want 1 or 0; fail: a wrong value stops serve (else a warning). */
static void inspect_flags(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h, const char *subj,
                          p11_check_fn fn, void *ctx)
{
    static const struct {
        CK_ATTRIBUTE_TYPE t;
        const char *name;
        int want, fail;
        const char *why;
    } attrs[] = {
        {CKA_SENSITIVE, "CKA_SENSITIVE", 1, 1, "serve refuses a key that can be read"},
        {CKA_EXTRACTABLE, "CKA_EXTRACTABLE", 0, 1, "serve refuses a key that can be exported"},
        {CKA_SIGN, "CKA_SIGN", 1, 1, "serve needs a key that signs"},
        {CKA_ALWAYS_SENSITIVE, "CKA_ALWAYS_SENSITIVE", 1, 0,
         "the key was readable once: a copy may exist"},
        {CKA_NEVER_EXTRACTABLE, "CKA_NEVER_EXTRACTABLE", 1, 0,
         "the key was exportable once: a copy may exist"},
        {CKA_DECRYPT, "CKA_DECRYPT", 0, 0, "the key should only sign; hsmca token keygen sets it FALSE"},
        {CKA_UNWRAP, "CKA_UNWRAP", 0, 0, "the key should only sign; hsmca token keygen sets it FALSE"},
        {CKA_DERIVE, "CKA_DERIVE", 0, 0, "the key should only sign; hsmca token keygen sets it FALSE"},
    };
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        int v;
        CK_RV rv = p11_get_bool(m, s, h, attrs[i].t, &v);
        p11_check_status bad = attrs[i].fail ? P11_CHECK_FAIL : P11_CHECK_WARN;
        if (rv != CKR_OK)
            say(fn, ctx, bad, subj, "%s not readable: %s", attrs[i].name, p11_rv_name(rv));
        else if (v == attrs[i].want)
            say(fn, ctx, P11_CHECK_OK, subj, "%s %s", attrs[i].name, v ? "TRUE" : "FALSE");
        else
            say(fn, ctx, bad, subj, "%s %s: %s", attrs[i].name, v ? "TRUE" : "FALSE",
                attrs[i].why);
    }
}

/* The public half, found as p11_key_find_checked finds it: by CKA_ID, else by label. */
static void inspect_public(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h,
                           const p11_uri *u, const char *subj, p11_check_fn fn, void *ctx)
{
    uint8_t *id = NULL;
    size_t id_len = 0;
    CK_OBJECT_HANDLE hs[2];
    CK_ULONG n = 0;
    CK_RV rv;
    int by_id = p11_get_attr(m, s, h, CKA_ID, &id, &id_len, 256) == CKR_OK && id_len;
    if (by_id)
        rv = p11_find_objects(m, s, CKO_PUBLIC_KEY, NULL, id, id_len, hs, 2, &n);
    else
        rv = p11_find_objects(m, s, CKO_PUBLIC_KEY, u->object, NULL, 0, hs, 2, &n);
    free(id);
    if (rv != CKR_OK)
        say(fn, ctx, P11_CHECK_FAIL, subj, "public key search: %s", p11_rv_name(rv));
    else if (n == 1)
        say(fn, ctx, P11_CHECK_OK, subj, "public key found (by %s)", by_id ? "CKA_ID" : "label");
    else
        say(fn, ctx, P11_CHECK_FAIL, subj, "%s public key with the private key's %s",
            n ? "more than one" : "no", by_id ? "CKA_ID" : "label");
}

/* Opens a session on the URI's token and logs in; 0 when it could not (reported). */
static int inspect_login(p11_module *m, const p11_uri *u, const char *subj, const char *pin,
                         p11_check_fn fn, void *ctx, CK_SESSION_HANDLE *s, int *did_login,
                         p11_inspect_result *r)
{
    CK_SLOT_ID slot;
    hsmca_err e;
    if (p11_find_token(m, u->token, &slot, NULL, &e) != HSMCA_OK) {
        say(fn, ctx, P11_CHECK_FAIL, subj, "%s (the token= of the URI; the slots are listed above)",
            e.msg);
        return 0;
    }
    say(fn, ctx, P11_CHECK_OK, subj, "token '%s' found in slot %lu", u->token, (unsigned long)slot);
    CK_RV rv = m->fl->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, s);
    if (rv != CKR_OK) {
        say(fn, ctx, P11_CHECK_FAIL, subj, "C_OpenSession: %s", p11_rv_name(rv));
        return 0;
    }
    if (p11_login_user(m, *s, pin, &rv, did_login, &e) == HSMCA_OK) {
        say(fn, ctx, P11_CHECK_OK, "pkcs11.pin_file", "the token took the PIN");
        return 1;
    }
    r->pin_refused = p11_rv_classify(rv) == P11_RV_PIN;
    say(fn, ctx, P11_CHECK_FAIL, "pkcs11.pin_file", "login refused: %s%s", e.msg,
        r->pin_refused ? " (the PIN is not tried again: fix the PIN file, then check again)"
                       : "");
    m->fl->C_CloseSession(*s);
    return 0;
}

/* Counts the lines of one inspection as they pass to the caller's function. */
typedef struct {
    p11_check_fn fn;
    void *ctx;
    p11_inspect_result *r;
} counter;

static void count_line(void *ctx, p11_check_status st, const char *subject, const char *text)
{
    counter *c = ctx;
    c->r->fails += st == P11_CHECK_FAIL;
    c->r->warns += st == P11_CHECK_WARN;
    c->fn(c->ctx, st, subject, text);
}

void p11_key_inspect(p11_module *m, const char *subject, const char *key_uri, const char *pin,
                     int audit, p11_check_fn fn, void *ctx, p11_inspect_result *r)
{
    memset(r, 0, sizeof(*r));
    counter c = {fn, ctx, r};
    p11_uri u;
    hsmca_err e;
    if (p11_uri_parse(key_uri, &u, &e) != HSMCA_OK) {
        say(count_line, &c, P11_CHECK_FAIL, subject, "%s", e.msg);
        return;
    }
    if (!u.object[0] && !u.id_len) {
        say(count_line, &c, P11_CHECK_FAIL, subject, "the URI names neither object nor id");
        return;
    }
    CK_SESSION_HANDLE s;
    int did_login = 0;
    if (!inspect_login(m, &u, subject, pin, count_line, &c, &s, &did_login, r))
        return;
    CK_OBJECT_HANDLE hs[2];
    CK_ULONG n = 0;
    CK_RV rv = p11_find_objects(m, s, CKO_PRIVATE_KEY, u.object[0] ? u.object : NULL, u.id,
                                u.id_len, hs, 2, &n);
    if (rv != CKR_OK)
        say(count_line, &c, P11_CHECK_FAIL, subject, "private key search: %s", p11_rv_name(rv));
    else if (n != 1)
        say(count_line, &c, P11_CHECK_FAIL, subject, "%s private key matches %s in token '%s'",
            n ? "more than one" : "no", key_uri, u.token);
    if (rv == CKR_OK && n == 1) {
        say(count_line, &c, P11_CHECK_OK, subject, "private key found: %s", key_uri);
        inspect_type(m, s, hs[0], subject, audit, count_line, &c);
        inspect_flags(m, s, hs[0], subject, count_line, &c);
        inspect_public(m, s, hs[0], &u, subject, count_line, &c);
    }
    /* Log out only if this call logged in: the opens that follow log in as serve does. */
    if (did_login)
        m->fl->C_Logout(s);
    m->fl->C_CloseSession(s);
}

/* p11_keygen.c - dev/CI set-up: token initialization and key-pair generation.
 * Keys are generated inside the token and marked so they can never leave it. */
#include "p11_int.h"
#include "util.h"
#include <string.h>

static HSMCA_MUSTCHECK hsmca_code check_pin(const char *what, const char *pin, hsmca_err *e)
{
    size_t n = pin ? strnlen(pin, UTIL_PIN_MAX + 1) : 0;
    if (n == 0 || n > UTIL_PIN_MAX)
        return hsmca_fail(e, HSMCA_EINVAL, "%s must be 1..%d bytes", what, UTIL_PIN_MAX);
    return HSMCA_OK;
}

/* The first slot with a token present that is not initialized yet. */
static HSMCA_MUSTCHECK hsmca_code find_free_slot(p11_module *m, CK_SLOT_ID *slot, hsmca_err *e)
{
    CK_SLOT_ID slots[256];
    CK_ULONG n = 256;
    CK_RV rv = m->fl->C_GetSlotList(CK_TRUE, slots, &n);
    if (rv != CKR_OK)
        return p11_fail_rv(e, HSMCA_EUNAVAIL, "C_GetSlotList", rv);
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (m->fl->C_GetTokenInfo(slots[i], &ti) == CKR_OK && !(ti.flags & CKF_TOKEN_INITIALIZED)) {
            *slot = slots[i];
            return HSMCA_OK;
        }
    }
    return hsmca_fail(e, HSMCA_EUNAVAIL, "init token: no slot with an uninitialized token");
}

static HSMCA_MUSTCHECK hsmca_code set_user_pin(p11_module *m, CK_SLOT_ID slot, const char *so_pin,
                               const char *user_pin, hsmca_err *e)
{
    CK_SESSION_HANDLE s;
    CK_RV rv = m->fl->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s);
    if (rv != CKR_OK)
        return p11_fail_rv(e, HSMCA_EINTERNAL, "init token: C_OpenSession", rv);
    hsmca_code c = HSMCA_OK;
    rv = m->fl->C_Login(s, CKU_SO, (CK_UTF8CHAR_PTR)so_pin, strlen(so_pin));
    if (rv != CKR_OK) {
        c = p11_fail_rv(e, HSMCA_EINTERNAL, "init token: C_Login (SO)", rv);
    } else {
        rv = m->fl->C_InitPIN(s, (CK_UTF8CHAR_PTR)user_pin, strlen(user_pin));
        if (rv != CKR_OK)
            c = p11_fail_rv(e, HSMCA_EINTERNAL, "init token: C_InitPIN", rv);
        m->fl->C_Logout(s);
    }
    m->fl->C_CloseSession(s);
    return c;
}

hsmca_code p11_init_token(p11_module *m, const char *label, const char *so_pin,
                          const char *user_pin, hsmca_err *e)
{
    unsigned char padded[P11_LABEL_MAX];
    CK_SLOT_ID slot;
    hsmca_code c;
    if (p11_pad_label(label, padded) != 0)
        return hsmca_fail(e, HSMCA_EINVAL, "init token: label must be 1..%d bytes", P11_LABEL_MAX);
    if ((c = check_pin("init token: SO PIN", so_pin, e)) != HSMCA_OK ||
        (c = check_pin("init token: user PIN", user_pin, e)) != HSMCA_OK)
        return c;
    if (p11_token_exists(m, label))
        return hsmca_fail(e, HSMCA_EINVAL, "init token: token '%s' already exists", label);
    if ((c = find_free_slot(m, &slot, e)) != HSMCA_OK)
        return c;
    CK_RV rv = m->fl->C_InitToken(slot, (CK_UTF8CHAR_PTR)so_pin, strlen(so_pin), padded);
    if (rv != CKR_OK)
        return p11_fail_rv(e, HSMCA_EINTERNAL, "init token: C_InitToken", rv);
    /* SoftHSM renumbers its slots once a token is initialized: find it again. */
    if ((c = p11_find_token(m, label, &slot, NULL, e)) != HSMCA_OK)
        return c;
    return set_user_pin(m, slot, so_pin, user_pin, e);
}

/* 1 when any object (key, certificate, data) in the token carries this label. */
static int label_taken(p11_module *m, CK_SESSION_HANDLE s, const char *label)
{
    static const CK_OBJECT_CLASS classes[] = {CKO_PRIVATE_KEY, CKO_PUBLIC_KEY, CKO_CERTIFICATE,
                                              CKO_SECRET_KEY, CKO_DATA};
    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
        CK_OBJECT_HANDLE h;
        CK_ULONG n = 0;
        if (p11_find_objects(m, s, classes[i], label, NULL, 0, &h, 1, &n) != CKR_OK || n)
            return 1; /* a failed search counts as taken: fail closed */
    }
    return 0;
}

static CK_RV generate_pair(p11_module *m, CK_SESSION_HANDLE s, const char *label,
                           const uint8_t *id, size_t id_len, p11_key_type type)
{
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_ULONG bits = type == P11_KEY_RSA_4096 ? 4096 : type == P11_KEY_RSA_3072 ? 3072 : 2048;
    static const uint8_t f4[] = {0x01, 0x00, 0x01};
    CK_ULONG llen = strlen(label);

    /* A CA key or an audit key signs and does nothing else: every other use
     * is switched off explicitly, since tokens differ in their defaults
     * (SoftHSM sets unwrap). */
    CK_ATTRIBUTE pub[9] = {
        {CKA_TOKEN, &yes, sizeof(yes)},    {CKA_VERIFY, &yes, sizeof(yes)},
        {CKA_ENCRYPT, &no, sizeof(no)},    {CKA_WRAP, &no, sizeof(no)},
        {CKA_VERIFY_RECOVER, &no, sizeof(no)},
        {CKA_LABEL, (void *)label, llen},  {CKA_ID, (void *)id, id_len},
    };
    CK_ULONG npub = 7;
    CK_ATTRIBUTE priv[] = {
        {CKA_TOKEN, &yes, sizeof(yes)},      {CKA_PRIVATE, &yes, sizeof(yes)},
        {CKA_SENSITIVE, &yes, sizeof(yes)},  {CKA_EXTRACTABLE, &no, sizeof(no)},
        {CKA_SIGN, &yes, sizeof(yes)},       {CKA_DECRYPT, &no, sizeof(no)},
        {CKA_UNWRAP, &no, sizeof(no)},       {CKA_DERIVE, &no, sizeof(no)},
        {CKA_SIGN_RECOVER, &no, sizeof(no)}, {CKA_LABEL, (void *)label, llen},
        {CKA_ID, (void *)id, id_len},
    };
    CK_MECHANISM mech = {0, NULL, 0};
    if (type == P11_KEY_EC_P256) {
        mech.mechanism = CKM_EC_KEY_PAIR_GEN;
        pub[npub++] = (CK_ATTRIBUTE){CKA_EC_PARAMS, (void *)p11_oid_p256, sizeof(p11_oid_p256)};
    } else if (type == P11_KEY_EC_P384) {
        mech.mechanism = CKM_EC_KEY_PAIR_GEN;
        pub[npub++] = (CK_ATTRIBUTE){CKA_EC_PARAMS, (void *)p11_oid_p384, sizeof(p11_oid_p384)};
    } else if (type == P11_KEY_ED25519) {
        /* PKCS#11 3.0 names the curve by the RFC 8410 OID or by the printable
         * string; SoftHSM 2.6.1 takes both, keeps the OID on the public half
         * and reports the string on the private half. */
        mech.mechanism = CKM_EC_EDWARDS_KEY_PAIR_GEN;
        pub[npub++] =
            (CK_ATTRIBUTE){CKA_EC_PARAMS, (void *)p11_oid_ed25519, sizeof(p11_oid_ed25519)};
    } else {
        mech.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
        pub[npub++] = (CK_ATTRIBUTE){CKA_MODULUS_BITS, &bits, sizeof(bits)};
        pub[npub++] = (CK_ATTRIBUTE){CKA_PUBLIC_EXPONENT, (void *)f4, sizeof(f4)};
    }
    CK_OBJECT_HANDLE hpub, hpriv;
    return m->fl->C_GenerateKeyPair(s, &mech, pub, npub, priv, sizeof(priv) / sizeof(priv[0]),
                                    &hpub, &hpriv);
}

hsmca_code p11_generate_key(p11_module *m, const char *token_label, const char *user_pin,
                            const char *label, p11_key_type type, hsmca_err *e)
{
    uint8_t id[16];
    util_random(id, sizeof(id));
    return p11_generate_key_id(m, token_label, user_pin, label, id, sizeof(id), type, e);
}

static CK_MECHANISM_TYPE gen_mechanism(p11_key_type type)
{
    switch (type) {
    case P11_KEY_EC_P256:
    case P11_KEY_EC_P384: return CKM_EC_KEY_PAIR_GEN;
    case P11_KEY_ED25519: return CKM_EC_EDWARDS_KEY_PAIR_GEN;
    case P11_KEY_RSA_2048:
    case P11_KEY_RSA_3072:
    case P11_KEY_RSA_4096: return CKM_RSA_PKCS_KEY_PAIR_GEN;
    default: return CKM_VENDOR_DEFINED;
    }
}

int p11_token_can_generate(p11_module *m, const char *token_label, p11_key_type type)
{
    CK_SLOT_ID slot;
    hsmca_err e;
    CK_MECHANISM_TYPE mechs[512];
    CK_ULONG n = sizeof(mechs) / sizeof(mechs[0]);
    if (p11_find_token(m, token_label, &slot, NULL, &e) != HSMCA_OK ||
        m->fl->C_GetMechanismList(slot, mechs, &n) != CKR_OK)
        return 0;
    for (CK_ULONG i = 0; i < n; i++)
        if (mechs[i] == gen_mechanism(type))
            return 1;
    return 0;
}

hsmca_code p11_generate_key_id(p11_module *m, const char *token_label, const char *user_pin,
                               const char *label, const uint8_t *id, size_t id_len,
                               p11_key_type type, hsmca_err *e)
{
    CK_SLOT_ID slot;
    CK_SESSION_HANDLE s;
    hsmca_code c;
    int did_login = 0;
    if (!label || !*label || strlen(label) > 255)
        return hsmca_fail(e, HSMCA_EINVAL, "generate key: label must be 1..255 bytes");
    if (gen_mechanism(type) == CKM_VENDOR_DEFINED)
        return hsmca_fail(e, HSMCA_EINVAL, "generate key: unknown key type %d", (int)type);
    if (!id || id_len == 0 || id_len > 64)
        return hsmca_fail(e, HSMCA_EINVAL, "generate key: CKA_ID must be 1..64 bytes");
    if ((c = p11_find_token(m, token_label, &slot, NULL, e)) != HSMCA_OK)
        return c;
    CK_RV rv = m->fl->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s);
    if (rv != CKR_OK)
        return p11_fail_rv(e, HSMCA_EINTERNAL, "generate key: C_OpenSession", rv);
    if ((c = p11_login_user(m, s, user_pin, NULL, &did_login, e)) != HSMCA_OK)
        goto out;
    if (label_taken(m, s, label)) {
        c = hsmca_fail(e, HSMCA_EINVAL, "generate key: an object labelled '%s' already exists",
                       label);
        goto out;
    }
    CK_OBJECT_HANDLE h;
    CK_ULONG n = 0;
    if (p11_find_objects(m, s, CKO_PRIVATE_KEY, NULL, id, id_len, &h, 1, &n) != CKR_OK || n) {
        c = hsmca_fail(e, HSMCA_EINVAL, "generate key: a private key with that CKA_ID already "
                                        "exists");
        goto out;
    }
    rv = generate_pair(m, s, label, id, id_len, type);
    if (rv != CKR_OK)
        c = p11_fail_rv(e, HSMCA_EINTERNAL, "generate key: C_GenerateKeyPair", rv);
out:
    /* Log out only if we logged in: a pool in this process may share the login. */
    if (did_login)
        m->fl->C_Logout(s);
    m->fl->C_CloseSession(s);
    return c;
}

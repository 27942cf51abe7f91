/* hostile_tbs.c - TBS certificates built the way a front end would, with one
 * knob per rule of the profile. */
#include "hostile.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certasm.h"

static void add_ext_i2d(X509 *x, int nid, void *value, int crit)
{
    assert_non_null(value);
    assert_int_equal(X509_add1_ext_i2d(x, nid, value, crit, X509V3_ADD_DEFAULT), 1);
}

static void add_ext_raw(X509 *x, ASN1_OBJECT *obj, int crit, const uint8_t *der, int len)
{
    ASN1_OCTET_STRING *os = ASN1_OCTET_STRING_new();
    assert_non_null(os);
    assert_int_equal(ASN1_OCTET_STRING_set(os, der, len), 1);
    X509_EXTENSION *ext = X509_EXTENSION_create_by_OBJ(NULL, obj, crit, os);
    assert_non_null(ext);
    assert_int_equal(X509_add_ext(x, ext, -1), 1);
    X509_EXTENSION_free(ext);
    ASN1_OCTET_STRING_free(os);
}

static void set_serial(X509 *x)
{
    uint8_t b[16];
    assert_int_equal(RAND_bytes(b, sizeof(b)), 1);
    b[0] = (uint8_t)((b[0] & 0x7f) | 0x01); /* positive, exactly 16 content octets */
    ASN1_INTEGER *sn = X509_get_serialNumber(x);
    assert_int_equal(ASN1_STRING_set(sn, b, sizeof(b)), 1);
}

static void set_names_and_time(X509 *x, const tbs_spec *s)
{
    assert_int_equal(X509_set_version(x, X509_VERSION_3), 1);
    set_serial(x);
    if (s->issuer_cn) {
        X509_NAME *n = X509_NAME_new();
        assert_non_null(n);
        assert_int_equal(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                                                    (const unsigned char *)s->issuer_cn, -1, -1, 0),
                         1);
        assert_int_equal(X509_set_issuer_name(x, n), 1);
        X509_NAME_free(n);
    } else {
        assert_int_equal(X509_set_issuer_name(x, X509_get_subject_name(hf.ca)), 1);
    }
    /* The subject stays X509_new's empty name. */
    time_t now = time(NULL);
    assert_non_null(ASN1_TIME_set(X509_getm_notBefore(x), now - 120));
    assert_non_null(
        ASN1_TIME_set(X509_getm_notAfter(x), now + (s->not_after ? s->not_after : 3600)));
}

static void add_constraint_exts(X509 *x, const tbs_spec *s)
{
    BASIC_CONSTRAINTS *bc = BASIC_CONSTRAINTS_new();
    assert_non_null(bc);
    bc->ca = s->ca_true ? 0xff : 0;
    add_ext_i2d(x, NID_basic_constraints, bc, 1);
    BASIC_CONSTRAINTS_free(bc);

    ASN1_BIT_STRING *ku = ASN1_BIT_STRING_new();
    assert_non_null(ku);
    assert_int_equal(ASN1_BIT_STRING_set_bit(ku, 0, 1), 1); /* digitalSignature */
    assert_int_equal(ASN1_BIT_STRING_set_bit(ku, 2, 1), 1); /* keyEncipherment */
    if (s->ku_cert_sign)
        assert_int_equal(ASN1_BIT_STRING_set_bit(ku, 5, 1), 1);
    add_ext_i2d(x, NID_key_usage, ku, 1);
    ASN1_BIT_STRING_free(ku);

    EXTENDED_KEY_USAGE *eku = sk_ASN1_OBJECT_new_null();
    assert_non_null(eku);
    assert_true(sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_server_auth)) > 0);
    assert_true(sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_client_auth)) > 0);
    add_ext_i2d(x, NID_ext_key_usage, eku, 0);
    sk_ASN1_OBJECT_free(eku); /* static table objects */
}

static void add_key_id_exts(X509 *x)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    assert_int_equal(X509_pubkey_digest(x, EVP_sha1(), md, &mdlen), 1);
    ASN1_OCTET_STRING *ski = ASN1_OCTET_STRING_new();
    assert_non_null(ski);
    assert_int_equal(ASN1_OCTET_STRING_set(ski, md, (int)mdlen), 1);
    add_ext_i2d(x, NID_subject_key_identifier, ski, 0);
    ASN1_OCTET_STRING_free(ski);

    const ASN1_OCTET_STRING *ca_ski = X509_get0_subject_key_id(hf.ca);
    assert_non_null(ca_ski);
    AUTHORITY_KEYID *aki = AUTHORITY_KEYID_new();
    assert_non_null(aki);
    aki->keyid = ASN1_OCTET_STRING_dup(ca_ski);
    assert_non_null(aki->keyid);
    add_ext_i2d(x, NID_authority_key_identifier, aki, 0);
    AUTHORITY_KEYID_free(aki);
}

static void push_ia5_name(GENERAL_NAMES *gens, int type, const char *text)
{
    GENERAL_NAME *g = GENERAL_NAME_new();
    ASN1_IA5STRING *v = ASN1_IA5STRING_new();
    assert_non_null(g);
    assert_non_null(v);
    assert_int_equal(ASN1_STRING_set(v, text, -1), 1);
    GENERAL_NAME_set0_value(g, type, v);
    assert_true(sk_GENERAL_NAME_push(gens, g) > 0);
}

static void add_san_and_extra(X509 *x, const tbs_spec *s)
{
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    assert_non_null(gens);
    if (!s->uri || *s->uri)
        push_ia5_name(gens, GEN_URI, s->uri ? s->uri : HF_SPIFFE_ID);
    if (s->dns)
        push_ia5_name(gens, GEN_DNS, s->dns);
    add_ext_i2d(x, NID_subject_alt_name, gens, 1);
    GENERAL_NAMES_free(gens);

    if (s->extra == EXTRA_PRIVATE_OID) {
        static const uint8_t null_der[] = {0x05, 0x00};
        ASN1_OBJECT *o = OBJ_txt2obj("1.3.6.1.4.1.55555.1.1", 1);
        assert_non_null(o);
        add_ext_raw(x, o, 0, null_der, sizeof(null_der));
        ASN1_OBJECT_free(o);
    } else if (s->extra == EXTRA_NAME_CONSTRAINTS) {
        /* NameConstraints { permittedSubtrees [0] { { dNSName "evil" } } }, critical
         * as RFC 5280 wants: well formed, so only the allowlist can refuse it. */
        static const uint8_t nc_der[] = {0x30, 0x0a, 0xa0, 0x08, 0x30, 0x06,
                                         0x82, 0x04, 'e',  'v',  'i',  'l'};
        add_ext_raw(x, OBJ_nid2obj(NID_name_constraints), 1, nc_der, sizeof(nc_der));
    }
}

/* A DER TBSCertificate per spec (OPENSSL_malloc'd). */
uint8_t *hf_build_tbs(const tbs_spec *s, size_t *len)
{
    EVP_PKEY *key = s->key ? s->key : EVP_EC_gen("P-256");
    assert_non_null(key);
    X509 *x = X509_new();
    assert_non_null(x);
    set_names_and_time(x, s);
    assert_int_equal(X509_set_pubkey(x, key), 1);
    add_constraint_exts(x, s);
    add_key_id_exts(x);
    add_san_and_extra(x, s);
    uint8_t *der = NULL;
    hsmca_err e;
    hsmca_code rc =
        certasm_tbs_der(x, s->sig_nid ? s->sig_nid : NID_ecdsa_with_SHA256, &der, len, &e);
    if (rc != HSMCA_OK)
        fail_msg("certasm_tbs_der: %s", e.msg);
    X509_free(x);
    if (!s->key)
        EVP_PKEY_free(key);
    return der;
}

uint8_t *hf_valid_tbs(size_t *len)
{
    tbs_spec s = {0};
    return hf_build_tbs(&s, len);
}

/* ca_show_cert.c - one certificate's facts as JSON and as text, for `hsmca ca show`
 * (ca_show.c) and its rotation section (ca_show_rot.c); see ca_show.h. */
#include "ca_show.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/x509v3.h>

#include "ca_util.h"

static void put_time(json_t *o, const char *key, const ASN1_TIME *t)
{
    struct tm tm;
    char buf[32] = "?";
    if (ASN1_TIME_to_tm(t, &tm))
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(o, key, json_string(buf));
}

static void put_name(json_t *o, const char *key, const X509_NAME *n)
{
    char buf[1024] = "";
    BIO *b = BIO_new(BIO_s_mem());
    if (b && X509_NAME_print_ex(b, n, 0,
                                XN_FLAG_ONELINE & ~XN_FLAG_SPC_EQ & ~ASN1_STRFLGS_ESC_MSB) >= 0) {
        int len = BIO_read(b, buf, sizeof(buf) - 1);
        buf[len > 0 ? len : 0] = '\0';
    }
    BIO_free(b);
    json_object_set_new(o, key, json_string(buf));
}

/* One certificate's facts. */
json_t *ca_show_cert_json(X509 *x)
{
    json_t *o = json_object();
    char hex[CA_HEX_LEN] = "", desc[64];
    put_name(o, "subject", X509_get_subject_name(x));
    put_name(o, "issuer", X509_get_issuer_name(x));
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    char *serial = bn ? BN_bn2hex(bn) : NULL;
    json_object_set_new(o, "serial", json_string(serial ? serial : "?"));
    OPENSSL_free(serial);
    BN_free(bn);
    put_time(o, "not_before", X509_get0_notBefore(x));
    put_time(o, "not_after", X509_get0_notAfter(x));
    json_object_set_new(o, "days_left", json_integer(ca_days_left(X509_get0_notAfter(x))));
    json_object_set_new(o, "key_type",
                        json_string(ca_key_desc(X509_get0_pubkey(x), desc, sizeof(desc))));
    json_object_set_new(o, "is_ca", json_boolean(X509_check_ca(x) == 1));
    ca_cert_sha256(x, hex);
    json_object_set_new(o, "sha256", json_string(hex));
    ca_spki_sha256(X509_get0_pubkey(x), hex);
    json_object_set_new(o, "spki_sha256", json_string(hex));
    return o;
}

const char *ca_show_str(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

void ca_show_print_cert(json_t *c, const char *indent)
{
    printf("%ssubject      %s\n%sissuer       %s\n%sserial       %s\n", indent,
           ca_show_str(c, "subject"), indent, ca_show_str(c, "issuer"), indent,
           ca_show_str(c, "serial"));
    printf("%snot before   %s\n%snot after    %s (%lld days left)\n", indent,
           ca_show_str(c, "not_before"), indent, ca_show_str(c, "not_after"),
           (long long)json_integer_value(json_object_get(c, "days_left")));
    printf("%skey          %s\n%ssha256       %s\n%sspki sha256  %s\n", indent,
           ca_show_str(c, "key_type"), indent, ca_show_str(c, "sha256"), indent,
           ca_show_str(c, "spki_sha256"));
}

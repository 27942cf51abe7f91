/* ca_util.c - see ca_util.h. */
#include "ca_util.h"
#include "module_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "certasm.h"
#include "log.h"
#include "util.h"

int ca_session_config(ca_session *s, const char *cmd, const char *config)
{
    hsmca_err e;
    s->cmd = cmd;
    s->config = config;
    if (!(s->cfg = calloc(1, sizeof(*s->cfg)))) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        return EXIT_CONFIG;
    }
    const char *uri = s->cfg->ca_key_uri;
    if (config_load(config, s->cfg, &e) != HSMCA_OK || config_validate(s->cfg, &e) != HSMCA_OK)
        fprintf(stderr, "%s: %s\n", cmd, e.msg);
    else if (!uri[0])
        fprintf(stderr, "%s: pkcs11.ca_key is not set: write the CA key's URI there\n", cmd);
    else if (p11_uri_parse(uri, &s->uri, &e) != HSMCA_OK)
        fprintf(stderr, "%s: pkcs11.ca_key: %s\n", cmd, e.msg);
    else if (!s->uri.object[0] || (s->uri.type[0] && strcmp(s->uri.type, "private") != 0))
        fprintf(stderr, "%s: pkcs11.ca_key must name the key's label (object=) and no type "
                        "but private\n", cmd);
    else
        return 0;
    return EXIT_CONFIG;
}

int ca_session_token(ca_session *s)
{
    hsmca_err e;
    if (util_read_secret(s->cfg->pin_file, s->pin, sizeof(s->pin), &e) != HSMCA_OK) {
        fprintf(stderr, "%s: pkcs11.pin_file: %s\n", s->cmd, e.msg);
        return 1;
    }
    s->have_pin = 1;
    module_env_apply(s->cfg);
    if (p11_module_load(s->cfg->module_path, &s->m, &e) != HSMCA_OK) {
        fprintf(stderr, "%s: pkcs11.module: %s\n", s->cmd, e.msg);
        return 1;
    }
    return 0;
}

hsmca_code ca_session_open_key(ca_session *s, p11_pool **pool, hsmca_err *e)
{
    return p11_pool_open(s->m, s->cfg->ca_key_uri, s->pin, 1, pool, e);
}

void ca_session_end(ca_session *s)
{
    p11_module_unload(s->m);
    s->m = NULL;
    OPENSSL_cleanse(s->pin, sizeof(s->pin));
    free(s->cfg);
    s->cfg = NULL;
}

int ca_spki_sha256(EVP_PKEY *key, char hex[CA_HEX_LEN])
{
    return certasm_spki_sha256(key, hex);
}

int ca_cert_sha256(X509 *x, char hex[CA_HEX_LEN])
{
    return certasm_cert_sha256(x, hex);
}

const char *ca_key_desc(EVP_PKEY *key, char *buf, size_t size)
{
    char group[64] = "";
    size_t glen = 0;
    if (!key)
        snprintf(buf, size, "none");
    else if (EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA)
        snprintf(buf, size, "RSA-%d", EVP_PKEY_get_bits(key));
    else if (EVP_PKEY_get_base_id(key) == EVP_PKEY_EC &&
             EVP_PKEY_get_group_name(key, group, sizeof(group), &glen))
        snprintf(buf, size, "EC %s", !strcmp(group, "prime256v1")  ? "P-256"
                                     : !strcmp(group, "secp384r1") ? "P-384"
                                                                   : group);
    else
        snprintf(buf, size, "%s", OBJ_nid2sn(EVP_PKEY_get_base_id(key)));
    return buf;
}

int ca_file_differs(const char *path, const char *data, size_t len)
{
    if (access(path, F_OK) != 0)
        return 0;
    char *old = NULL;
    size_t old_len = 0;
    hsmca_err ignored;
    if (util_read_file(path, CERTFILE_MAX, &old, &old_len, &ignored) != HSMCA_OK)
        return 1;
    int differs = old_len != len || memcmp(old, data, len) != 0;
    free(old);
    return differs;
}

hsmca_code ca_install(const char *path, const char *key, const char *data, int force,
                      int *changed, hsmca_err *e)
{
    size_t len = strlen(data);
    if (changed)
        *changed = 1;
    if (access(path, F_OK) == 0 && !ca_file_differs(path, data, len)) {
        if (changed)
            *changed = 0;
        return HSMCA_OK;
    }
    if (access(path, F_OK) == 0 && !force)
        return hsmca_fail(e, HSMCA_EINVAL, "%s: %s exists and holds something else: pass "
                                           "--force to replace it, or point %s elsewhere",
                          key, path, key);
    /* A path named on the command line (--out, --csr) may be in a directory others can
     * write: a link planted there is refused, never replaced or followed. */
    if (key[0] == '-')
        return util_write_out(path, data, len, 0644, e);
    return util_write_file_atomic(path, data, len, 0644, e);
}

long ca_days_left(const ASN1_TIME *t)
{
    int days = 0, secs = 0;
    if (!ASN1_TIME_diff(&days, &secs, NULL, t))
        return 0;
    return days - (secs < 0 ? 1 : 0);
}

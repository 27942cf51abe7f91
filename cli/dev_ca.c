/* dev_ca.c - see dev_ca.h. */
#include "dev_ca.h"
#include "key_kinds.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "ca_util.h"
#include "cert_build.h"
#include "certasm.h"
#include "config.h"
#include "dev_jwt.h"
#include "dev_signer.h"
#include "log.h"
#include "util.h"

#define ROOT_VALIDITY (10LL * 365 * 24 * 3600)

static int file_exists(const char *dir, const char *name)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static HSMCA_MUSTCHECK hsmca_code write_in(const char *dir, const char *name, const char *data, unsigned mode,
                           hsmca_err *e)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return util_write_file_atomic(p, data, strlen(data), mode, e);
}

/* A random PIN as 32 hex characters (128 bits). */
static HSMCA_MUSTCHECK hsmca_code make_pin_file(const char *dir, const char *name, hsmca_err *e)
{
    if (file_exists(dir, name))
        return HSMCA_OK;
    uint8_t raw[16];
    char hex[34];
    util_random(raw, sizeof(raw));
    util_hex(raw, sizeof(raw), hex);
    strcat(hex, "\n");
    hsmca_code rc = write_in(dir, name, hex, 0600, e);
    OPENSSL_cleanse(raw, sizeof(raw));
    OPENSSL_cleanse(hex, sizeof(hex));
    return rc;
}

static HSMCA_MUSTCHECK hsmca_code make_softhsm_conf(const char *dir, hsmca_err *e)
{
    char tokens[PATH_MAX], conf[PATH_MAX + 200];
    snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
    if (mkdir(tokens, 0700) != 0 && errno != EEXIST)
        return hsmca_fail(e, HSMCA_EIO, "mkdir %s: %s", tokens, strerror(errno));
    if (!file_exists(dir, "softhsm2.conf")) {
        snprintf(conf, sizeof(conf),
                 "# SoftHSM2 configuration of this hsmca dev CA (written by hsmca dev).\n"
                 "directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n"
                 "slots.removable = false\n",
                 tokens);
        hsmca_code rc = write_in(dir, "softhsm2.conf", conf, 0600, e);
        if (rc != HSMCA_OK)
            return rc;
    }
    snprintf(conf, sizeof(conf), "%s/softhsm2.conf", dir);
    setenv("SOFTHSM2_CONF", conf, 1);
    return HSMCA_OK;
}

/* Self-signed root (cert_build.h): the TBS is built here, the signature comes from
 * the token. */
static HSMCA_MUSTCHECK hsmca_code make_root(const char *dir, p11_pool *pool, hsmca_err *e)
{
    uint8_t rnd[4];
    char cn[64], hex[9];
    util_random(rnd, sizeof(rnd));
    util_hex(rnd, sizeof(rnd), hex);
    snprintf(cn, sizeof(cn), "hsmca dev root CA %s", hex);
    X509_NAME *name = X509_NAME_new();
    X509 *root = NULL;
    if (!name ||
        !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                    (const unsigned char *)"hsmca development", -1, -1, 0) ||
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1,
                                    -1, 0)) {
        X509_NAME_free(name);
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot build the root certificate's name");
    }
    hsmca_code rc = cert_build_root(pool, name, ROOT_VALIDITY, &root, e);
    X509_NAME_free(name);
    if (rc != HSMCA_OK)
        return rc;
    BIO *b = BIO_new(BIO_s_mem());
    char *pem = b && PEM_write_bio_X509(b, root) ? certasm_bio_string(b) : NULL;
    BIO_free(b);
    X509_free(root);
    if (!pem)
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot encode the root certificate");
    rc = write_in(dir, "root-cert.pem", pem, 0644, e);
    free(pem);
    return rc;
}

/* The audit key (Ed25519 unless type says EC P-256 or P-384): made with a new CA, and in a
 * directory made before hsmca had one (said in the log); an existing key must
 * pass the signer's checks, and be of type when one was asked for. */
static HSMCA_MUSTCHECK hsmca_code ensure_audit_key(p11_module *m, const char *pin, int new_ca,
                                                   p11_key_type type, hsmca_err *e)
{
    const char *uri =
        "pkcs11:token=" DEV_TOKEN_LABEL ";object=" DEV_AUDIT_KEY_LABEL ";type=private";
    p11_key_type make = type == P11_KEY_UNSET ? P11_KEY_ED25519 : type;
    p11_signkey *k = NULL;
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = p11_signkey_open(m, uri, pin, &k, &why);
    if (rc == HSMCA_ENOTFOUND) {
        if (new_ca)
            LOG_EVENT(LOG_LVL_INFO, "generating the audit key in the token",
                      LOG_STR("kind", key_kind_of(make)->what),
                      LOG_STR("label", DEV_AUDIT_KEY_LABEL));
        else
            LOG_EVENT(LOG_LVL_INFO,
                      "this dev directory has no audit key yet: generating the audit key in the "
                      "token",
                      LOG_STR("kind", key_kind_of(make)->what),
                      LOG_STR("label", DEV_AUDIT_KEY_LABEL));
        rc = p11_generate_key(m, DEV_TOKEN_LABEL, pin, DEV_AUDIT_KEY_LABEL, make, &why);
        if (rc == HSMCA_OK)
            rc = p11_signkey_open(m, uri, pin, &k, &why);
    } else if (rc == HSMCA_OK && type != P11_KEY_UNSET) {
        const key_kind *have = key_kind_of_alg(p11_signkey_alg(k));
        if (!have || have->type != type) {
            p11_signkey_close(k);
            return hsmca_fail(e, HSMCA_EINVAL,
                              "the token's audit key is %s, not %s: use another --dir",
                              have ? have->name : p11_signkey_alg(k), key_kind_of(type)->name);
        }
    }
    p11_signkey_close(k);
    if (rc != HSMCA_OK)
        return hsmca_fail(e, rc, "audit key: %s", why.msg);
    return HSMCA_OK;
}

/* Token, CA key, audit key and root: the part that loads the PKCS#11 module. */
static HSMCA_MUSTCHECK hsmca_code init_token_and_ca(const char *dir, p11_key_type type,
                                                    p11_key_type audit_type, hsmca_err *e)
{
    char pin[UTIL_PIN_MAX + 1], so_pin[UTIL_PIN_MAX + 1], path[PATH_MAX];
    p11_module *m = NULL;
    p11_pool *pool = NULL;
    snprintf(path, sizeof(path), "%s/pin", dir);
    hsmca_code rc = util_read_secret(path, pin, sizeof(pin), e);
    snprintf(path, sizeof(path), "%s/so-pin", dir);
    if (rc == HSMCA_OK)
        rc = util_read_secret(path, so_pin, sizeof(so_pin), e);
    if (rc == HSMCA_OK)
        rc = p11_module_load(DEV_SOFTHSM_MODULE, &m, e);
    if (rc == HSMCA_OK && !p11_token_exists(m, DEV_TOKEN_LABEL)) {
        LOG_EVENT(LOG_LVL_INFO, "creating the SoftHSM token", LOG_STR("token", DEV_TOKEN_LABEL),
                  LOG_STR("dir", dir));
        rc = p11_init_token(m, DEV_TOKEN_LABEL, so_pin, pin, e);
    }
    const char *uri = "pkcs11:token=" DEV_TOKEN_LABEL ";object=" DEV_CA_KEY_LABEL ";type=private";
    hsmca_code open_rc = rc == HSMCA_OK ? p11_pool_open(m, uri, pin, 1, &pool, e) : rc;
    if (open_rc != HSMCA_OK && open_rc != HSMCA_ENOTFOUND) {
        rc = open_rc; /* wrong PIN, unsafe key...: never paper over with a new key */
    } else if (open_rc == HSMCA_ENOTFOUND) {
        LOG_EVENT(LOG_LVL_INFO, "generating the CA key in the token",
                  LOG_STR("kind", key_kind_of(type)->what));
        rc = p11_generate_key(m, DEV_TOKEN_LABEL, pin, DEV_CA_KEY_LABEL, type, e);
        if (rc == HSMCA_OK)
            rc = p11_pool_open(m, uri, pin, 1, &pool, e);
    } else {
        EVP_PKEY *k = p11_pool_public_key(pool);
        char have[64];
        ca_key_desc(k, have, sizeof(have));
        EVP_PKEY_free(k);
        if (strcmp(have, key_kind_of(type)->what) != 0)
            rc = hsmca_fail(e, HSMCA_EINVAL, "%s already holds a %s CA key, not %s: use another --dir",
                            dir, have, key_kind_of(type)->what);
    }
    if (rc == HSMCA_OK)
        rc = ensure_audit_key(m, pin, open_rc == HSMCA_ENOTFOUND, audit_type, e);
    if (rc == HSMCA_OK && !file_exists(dir, "root-cert.pem"))
        rc = make_root(dir, pool, e);
    OPENSSL_cleanse(pin, sizeof(pin));
    OPENSSL_cleanse(so_pin, sizeof(so_pin));
    p11_pool_close(pool);
    p11_module_unload(m);
    return rc;
}

static HSMCA_MUSTCHECK hsmca_code write_config(const char *dir, const char *listen,
                                               const char *metrics, hsmca_err *e)
{
    char conf[4096], origin[CONFIG_MAX_STR], path[PATH_MAX];
    /* The origin names the log its checkpoints were signed for: a restart keeps the one
     * written before, even if the hostname (a container's) has changed since. */
    hsmca_config *old = calloc(1, sizeof(*old));
    hsmca_err ignored;
    snprintf(path, sizeof(path), "%s/hsmca.yaml", dir);
    if (old && config_load(path, old, &ignored) == HSMCA_OK && old->audit_origin[0])
        snprintf(origin, sizeof(origin), "%s", old->audit_origin);
    else
        config_default_origin("cluster.local", origin, sizeof(origin));
    free(old);
    snprintf(conf, sizeof(conf),
             "# hsmca configuration of the dev CA in this directory (written by hsmca dev;\n"
             "# rewritten at every start). Run it with: hsmca serve --config %s/hsmca.yaml\n"
             "server:\n  listen: \"%s\"\n"
             "pkcs11:\n  module: %s\n  pin_file: pin\n"
             "  ca_key: \"pkcs11:token=%s;object=%s;type=private\"\n"
             "  audit_key: \"pkcs11:token=%s;object=%s;type=private\"\n"
             "  softhsm2_conf: softhsm2.conf\n  sessions: 2\n"
             "  # The signer inherits no environment: its module's variables go here.\n"
             "  # env:\n  #   TPM2_PKCS11_TCTI: \"tabrmd:bus_type=system\"\n"
             "ca:\n  cert: root-cert.pem\n  root_bundle: root-cert.pem\n"
             "issuance:\n  trust_domain: cluster.local\n  default_ttl: 24h\n  max_ttl: 24h\n"
             "auth:\n  jwt:\n    issuer: \"%s\"\n    audiences: [istio-ca]\n"
             "    jwks_file: dev-jwks.json\n"
             "# Started as root, the signer switches to this user once the token is open.\n"
             "signer:\n  user: %s\n"
             "  # Supplementary groups it keeps after the switch (a device's, a socket's).\n"
             "  # groups: [tss]\n"
             "  # What the signer's seccomp filter lets the PKCS#11 module reach: none, unix\n"
             "  # (a local daemon) or inet (a network HSM); SysV IPC for opencryptoki.\n"
             "  sandbox:\n    network: none\n    sysv_ipc: false\n"
             "# The signing log: an intent entry is durable here before every signature.\n"
             "audit:\n  dir: audit\n"
             "  # The checkpoints' origin line and the audit key's name: unique per replica.\n"
             "  origin: \"%s\"\n"
             "# The signer's admin socket (hsmca admin, hsmca intermediate): root, this\n"
             "# directory's user when not root, and members of admin.group may use it.\n"
             "admin:\n  socket: admin.sock\n  # group: hsmca-admin\n"
             "# The CA's CRL, signed in the token and rewritten before its nextUpdate (in a\n"
             "# directory of its own that signer.user may write).\n"
             "crl:\n  path: crl/ca-crl.pem\n"
             "# /metrics (Prometheus), /healthz and /readyz over plain HTTP; \"\" turns it off.\n"
             "metrics:\n  listen: \"%s\"\n",
             dir, listen, DEV_SOFTHSM_MODULE, DEV_TOKEN_LABEL, DEV_CA_KEY_LABEL, DEV_TOKEN_LABEL,
             DEV_AUDIT_KEY_LABEL, DEV_JWT_ISSUER, DEV_SIGNER_USER, origin, metrics);
    return write_in(dir, "hsmca.yaml", conf, 0644, e);
}

hsmca_code dev_ca_init(const char *dir, p11_key_type key_type, p11_key_type audit_type,
                       const char *listen, const char *metrics, hsmca_err *e)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return hsmca_fail(e, HSMCA_EIO, "mkdir %s: %s", dir, strerror(errno));
    hsmca_code rc = make_softhsm_conf(dir, e);
    if (rc == HSMCA_OK)
        rc = make_pin_file(dir, "pin", e);
    if (rc == HSMCA_OK)
        rc = make_pin_file(dir, "so-pin", e);
    if (rc != HSMCA_OK)
        return rc;

    /* The module is loaded only in a child: `hsmca dev` goes on to supervise,
     * and the supervisor holds no secret and no PKCS#11 state. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return hsmca_fail(e, HSMCA_EIO, "fork: %s", strerror(errno));
    if (pid == 0) {
        hsmca_err ce;
        if (init_token_and_ca(dir, key_type, audit_type, &ce) != HSMCA_OK) {
            LOG_EVENT(LOG_LVL_ERROR, "dev: cannot make the token and the CA",
                      LOG_STR("error", ce.msg));
            _exit(1);
        }
        _exit(0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "setting up the token and CA in %s failed (see above)", dir);
    if ((rc = dev_signer_crl_dir(dir, e)) != HSMCA_OK)
        return rc;
    if ((rc = dev_signer_grant(dir, e)) != HSMCA_OK)
        return rc;
    if ((rc = dev_jwt_setup(dir, e)) != HSMCA_OK)
        return rc;
    return write_config(dir, listen, metrics, e);
}

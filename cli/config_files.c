/* config_files.c - `hsmca config check`'s checks of the CA's certificates, the PKCS#11
 * files, the users and groups, audit.dir and the listen address (config_check.h). Each
 * uses the function serve's processes use where one exists (ca_cert_check,
 * sandbox_user_lookup, sandbox_group_lookup, p11_uri_parse); the module is looked at,
 * never loaded: loading runs its code, which is the token check's job (hsmca token
 * check). */
#include "config_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "ca_cert_rules.h"
#include "ca_util.h"
#include "certasm.h"
#include "p11.h"
#include "sandbox.h"

/* path exists and is a regular file (symbolic links followed); 0 when so. */
static int check_regular(cc_report *r, const char *key, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        cc_problem(r, key, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        cc_problem(r, key, "%s is not a regular file", path);
        return -1;
    }
    return 0;
}

/* ca.cert as the signer takes it (ca_cert_check, without the token's key: that is hsmca
 * token check's part). NULL when it does not load or serve would refuse it (its chain
 * is not looked at then: the same fault again). */
static X509 *check_ca_cert(const hsmca_config *c, cc_report *r)
{
    hsmca_err e;
    if (!c->ca_cert[0])
        return NULL; /* config_validate said so */
    X509 *x = certasm_load_pem(c->ca_cert, &e);
    if (!x) {
        cc_problem(r, "ca.cert", "%s", e.msg);
        return NULL;
    }
    if (ca_cert_check(x, c->ca_cert, NULL, &e) != HSMCA_OK) {
        cc_problem(r, "ca.cert", "%s", e.msg);
        X509_free(x);
        return NULL;
    }
    return x;
}

/* ca.cert links to a root of ca.root_bundle through ca.chain, verified now. */
static void check_links(X509 *ca, STACK_OF(X509) * roots, STACK_OF(X509) * chain,
                        const hsmca_config *c, cc_report *r)
{
    X509_STORE *st = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int ok = st && ctx;
    for (int i = 0; ok && i < sk_X509_num(roots); i++)
        ok = X509_STORE_add_cert(st, sk_X509_value(roots, i));
    const char *key = c->chain[0] ? "ca.chain" : "ca.root_bundle";
    if (!ok || !X509_STORE_CTX_init(ctx, st, ca, chain)) {
        cc_problem(r, key, "cannot set up the chain check (out of memory)");
    } else if (X509_verify_cert(ctx) != 1) {
        int err = X509_STORE_CTX_get_error(ctx);
        cc_problem(r, key, "%s does not chain to a root in %s%s%s: %s (at depth %d)", c->ca_cert,
                   c->root_bundle, c->chain[0] ? " through " : "", c->chain,
                   X509_verify_cert_error_string(err), X509_STORE_CTX_get_error_depth(ctx));
    }
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
}

void cc_check_ca(const hsmca_config *c, cc_report *r)
{
    hsmca_err e;
    X509 *ca = check_ca_cert(c, r);
    STACK_OF(X509) *roots = NULL, *chain = NULL;
    int chain_ok = 1;
    /* The root bundle defaults to ca.cert, whose problems are reported once. */
    if (c->root_bundle[0] && (ca || strcmp(c->root_bundle, c->ca_cert) != 0) &&
        !(roots = certfile_load(c->root_bundle, c->root_bundle, &e)))
        cc_problem(r, "ca.root_bundle", "%s", e.msg);
    if (c->chain[0] && !(chain = certfile_load(c->chain, c->chain, &e))) {
        cc_problem(r, "ca.chain", "%s", e.msg);
        chain_ok = 0;
    }
    if (ca && roots && chain_ok)
        check_links(ca, roots, chain, c, r);
    sk_X509_pop_free(chain, X509_free);
    sk_X509_pop_free(roots, X509_free);
    X509_free(ca);
}

/* A module path: a file that exists. A bare name is the dynamic loader's to find. */
static void check_module(cc_report *r, const char *key, const char *path)
{
    if (!strchr(path, '/')) {
        cc_warn(r, key,
                "'%s' is not a path: the dynamic loader searches for it when serve "
                "starts; not checked",
                path);
        return;
    }
    check_regular(r, key, path);
}

/* A PIN file: there, and not for every user to read. Its content is not read. */
static void check_secret(cc_report *r, const char *key, const char *path)
{
    struct stat st;
    if (check_regular(r, key, path) != 0 || stat(path, &st) != 0)
        return;
    if (st.st_mode & S_IROTH)
        cc_warn(r, key, "%s is readable by every user (mode %04o): chmod o-r %s", path,
                (unsigned)(st.st_mode & 07777), path);
}

static void check_uri(cc_report *r, const char *key, const char *uri)
{
    p11_uri u;
    hsmca_err e;
    if (uri[0] && p11_uri_parse(uri, &u, &e) != HSMCA_OK)
        cc_problem(r, key, "%s", e.msg);
}

void cc_check_pkcs11(const hsmca_config *c, cc_report *r)
{
    if (c->module_path[0])
        check_module(r, "pkcs11.module", c->module_path);
    if (c->audit_module[0])
        check_module(r, "pkcs11.audit_module", c->audit_module);
    if (c->pin_file[0])
        check_secret(r, "pkcs11.pin_file", c->pin_file);
    if (c->audit_pin_file[0])
        check_secret(r, "pkcs11.audit_pin_file", c->audit_pin_file);
    if (c->softhsm2_conf[0])
        check_regular(r, "pkcs11.softhsm2_conf", c->softhsm2_conf);
    check_uri(r, "pkcs11.ca_key", c->ca_key_uri);
    check_uri(r, "pkcs11.audit_key", c->audit_key_uri);
}

/* A user as the sandbox looks it up when serve starts as root; by name alone otherwise
 * (the config is likely meant for a serve started as root). */
static void check_user(cc_report *r, const char *key, const char *user)
{
    sandbox_user u;
    hsmca_err e;
    if (!user[0])
        return;
    if (sandbox_user_lookup(key, user, &u, &e) != HSMCA_OK)
        cc_problem(r, key, "%s", e.msg);
    else if (geteuid() != 0 && !getpwnam(user))
        cc_problem(r, key, "%s '%s' does not exist (serve started as root would refuse it)", key,
                   user);
}

static void check_groups(const hsmca_config *c, cc_report *r)
{
    gid_t gid;
    hsmca_err e;
    for (int i = 0; i < c->signer_groups.n; i++)
        if (sandbox_group_lookup("signer.groups", c->signer_groups.items[i], &gid, &e) != HSMCA_OK)
            cc_problem(r, "signer.groups", "%s", e.msg);
    if (c->admin_group[0] &&
        sandbox_group_lookup("admin.group", c->admin_group, &gid, &e) != HSMCA_OK)
        cc_problem(r, "admin.group", "%s", e.msg);
}

/* audit.dir: there (a directory), or made at start in a writable parent. Owned by root
 * while the signer runs as signer.user, it cannot write there once it switched. */
static void check_audit_dir(const hsmca_config *c, cc_report *r)
{
    struct stat st;
    if (!c->audit_dir[0] || c->audit_disabled)
        return;
    if (stat(c->audit_dir, &st) == 0) {
        const struct passwd *pw = c->signer_user[0] ? getpwnam(c->signer_user) : NULL;
        if (!S_ISDIR(st.st_mode))
            cc_problem(r, "audit.dir", "%s is not a directory", c->audit_dir);
        else if (st.st_uid == 0 && pw && pw->pw_uid != 0)
            cc_warn(r, "audit.dir",
                    "%s is owned by root and the signer runs as signer.user "
                    "'%s' when started as root: chown -R %s %s",
                    c->audit_dir, c->signer_user, c->signer_user, c->audit_dir);
        return;
    }
    if (errno != ENOENT) {
        cc_problem(r, "audit.dir", "%s: %s", c->audit_dir, strerror(errno));
        return;
    }
    char copy[PATH_MAX];
    snprintf(copy, sizeof(copy), "%s", c->audit_dir);
    const char *parent = dirname(copy);
    /* Not root, the check cannot tell what a serve started as root could make. */
    if (access(parent, W_OK | X_OK) != 0 && errno == EACCES && geteuid() != 0)
        cc_warn(r, "audit.dir", "%s does not exist and this user cannot make it in %s: %s",
                c->audit_dir, parent, strerror(EACCES));
    else if (access(parent, W_OK | X_OK) != 0)
        cc_problem(r, "audit.dir", "%s does not exist and cannot be made in %s: %s", c->audit_dir,
                   parent, strerror(errno));
}

/* The admin socket is made at start in a directory that must be there. */
static void check_admin_socket(const hsmca_config *c, cc_report *r)
{
    struct stat st;
    char copy[PATH_MAX];
    if (!c->admin_socket[0])
        return;
    snprintf(copy, sizeof(copy), "%s", c->admin_socket);
    const char *parent = dirname(copy);
    if (stat(parent, &st) != 0)
        cc_problem(r, "admin.socket", "%s: %s", parent, strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        cc_problem(r, "admin.socket", "%s is not a directory", parent);
}

/* A listen address's host beyond config_validate's shape: one written as an IP address
 * must be one (999.1.1.1 or [::g] would only fail at bind). Names are resolved at start;
 * nothing is resolved or bound here. */
static void check_listen(cc_report *r, const char *key, const char *addr)
{
    char host[CONFIG_MAX_STR];
    unsigned char bin[16];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr)
        return; /* config_validate said so */
    size_t n = (size_t)(colon - addr);
    if (addr[0] == '[' && n >= 2 && addr[n - 1] == ']') {
        snprintf(host, sizeof(host), "%.*s", (int)(n - 2), addr + 1);
        if (inet_pton(AF_INET6, host, bin) != 1)
            cc_problem(r, key, "'%s': %s is not an IPv6 address", addr, host);
        return;
    }
    snprintf(host, sizeof(host), "%.*s", (int)n, addr);
    if (strspn(host, "0123456789.") == n && inet_pton(AF_INET, host, bin) != 1)
        cc_problem(r, key, "'%s': %s is not an IPv4 address", addr, host);
}

void cc_check_system(const hsmca_config *c, cc_report *r)
{
    check_user(r, "signer.user", c->signer_user);
    check_user(r, "frontend.user", c->fe_user);
    check_groups(c, r);
    check_audit_dir(c, r);
    check_admin_socket(c, r);
    check_listen(r, "server.listen", c->listen);
    if (c->metrics_user[0])
        check_user(r, "metrics.user", c->metrics_user);
    if (c->metrics_listen[0])
        check_listen(r, "metrics.listen", c->metrics_listen);
    if (c->publish_enabled && c->publish_user[0])
        check_user(r, "publish.user", c->publish_user);
}

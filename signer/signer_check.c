/* signer_check.c - see signer_check.h.
 *
 * The steps are the signer's own (signer_main.c, signer_core.c): the same config
 * reading, signer_sandbox_prepare before the PIN, the same key opens (p11_pool_open,
 * p11_signkey_open) and signer_sandbox_enter, so a module that needs what the sandbox
 * refuses fails here as it would in serve. What serve also does and a check must not
 * (the audit log's lock, replay and start entry) is left out. */
#include "signer_check.h"
#include "signer_sandbox.h"
#include "signer_tokens.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certasm.h"
#include "config.h"
#include "log.h"
#include "p11.h"
#include "util.h"

#define CHECK_MAX_ITEMS 24
#define CHECK_ITEM_MAX 400
/* As signer_self_test: a token fault at that moment gets a reconnect or two; a module
 * the filter stops fails every time. */
#define CHECK_SELF_TEST_S 2.5

typedef struct {
    FILE *out;
    int fails, warns;
    int n_items;
    char items[CHECK_MAX_ITEMS][CHECK_ITEM_MAX]; /* the FAIL lines, for the verdict */
} check_report;

typedef struct {
    hsmca_config cfg;
    signer_sandbox sb;
    p11_module *m;
    p11_pool *pool;      /* the CA key, opened as serve opens it */
    p11_signkey *audit;  /* the audit key, likewise; NULL when not set or not opened */
    p11_module *audit_m; /* pkcs11.audit_module when it is another module, else NULL */
    int pin_refused;     /* the token refused the PIN: nothing logs in again */
} check_state;

static void report(void *ctx, p11_check_status st, const char *subject, const char *text)
{
    static const char *const word[] = {"info", "ok", "WARN", "FAIL"};
    check_report *r = ctx;
    fprintf(r->out, "%-4s %s: %s\n", word[st], subject, text);
    fflush(r->out);
    r->warns += st == P11_CHECK_WARN;
    if (st != P11_CHECK_FAIL)
        return;
    if (r->n_items < CHECK_MAX_ITEMS)
        snprintf(r->items[r->n_items++], CHECK_ITEM_MAX, "%s: %s", subject, text);
    r->fails++;
}

static void say(check_report *r, p11_check_status st, const char *subject, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void say(check_report *r, p11_check_status st, const char *subject, const char *fmt, ...)
{
    char text[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    report(r, st, subject, text);
}

static int verdict(check_report *r)
{
    if (!r->fails) {
        fprintf(r->out, "verdict: serve would start (%d warning%s)\n", r->warns,
                r->warns == 1 ? "" : "s");
        fflush(r->out);
        return 0;
    }
    fprintf(r->out, "verdict: serve would not start: %d problem%s to fix:\n", r->fails,
            r->fails == 1 ? "" : "s");
    for (int i = 0; i < r->n_items; i++)
        fprintf(r->out, "  - %s\n", r->items[i]);
    if (r->fails > r->n_items)
        fprintf(r->out, "  - and %d more above\n", r->fails - r->n_items);
    fflush(r->out);
    return 1;
}

/* The CA key opened as serve opens it, inspected first. */
static void check_ca_key(check_state *st, const char *pin, check_report *r)
{
    const hsmca_config *cfg = &st->cfg;
    p11_inspect_result ir;
    hsmca_err e;
    p11_key_inspect(st->m, "pkcs11.ca_key", cfg->ca_key_uri, pin, 0, report, r, &ir);
    st->pin_refused = ir.pin_refused;
    if (st->pin_refused) {
        say(r, P11_CHECK_INFO, "pkcs11.ca_key", "not opened: the token refused the PIN");
        return;
    }
    if (p11_pool_open(st->m, cfg->ca_key_uri, pin, 1, &st->pool, &e) == HSMCA_OK)
        say(r, P11_CHECK_OK, "pkcs11.ca_key",
            "opened as serve opens it: its checks passed and a signature verified");
    else
        say(r, P11_CHECK_FAIL, "pkcs11.ca_key", "serve would refuse it: %s", e.msg);
}

/* The audit key, in its own module and with its own PIN when configured (signer_tokens.h),
 * inspected and then opened as serve opens it. */
static void check_audit_key(check_state *st, check_report *r)
{
    const hsmca_config *cfg = &st->cfg;
    p11_module *m;
    p11_inspect_result ir;
    char pin[UTIL_PIN_MAX + 1];
    hsmca_err e;
    if (!cfg->audit_key_uri[0]) {
        say(r, P11_CHECK_WARN, "pkcs11.audit_key",
            "not set: serve writes the audit log but signs no checkpoint");
        return;
    }
    if (signer_audit_module_load(cfg, st->m, &st->audit_m, &m, &e) != HSMCA_OK) {
        say(r, P11_CHECK_FAIL, "pkcs11.audit_module", "%s", e.msg);
        return;
    }
    if (st->audit_m)
        say(r, P11_CHECK_OK, "pkcs11.audit_module", "%s loaded", cfg->audit_module);
    if (util_read_secret(signer_audit_pin_path(cfg), pin, sizeof(pin), &e) != HSMCA_OK) {
        say(r, P11_CHECK_FAIL, signer_audit_pin_key(cfg), "%s", e.msg);
        return;
    }
    p11_key_inspect(m, "pkcs11.audit_key", cfg->audit_key_uri, pin, 1, report, r, &ir);
    if (ir.pin_refused)
        say(r, P11_CHECK_INFO, "pkcs11.audit_key", "not opened: the token refused the PIN (%s)",
            signer_audit_pin_key(cfg));
    else if (p11_signkey_open(m, cfg->audit_key_uri, pin, &st->audit, &e) == HSMCA_OK)
        say(r, P11_CHECK_OK, "pkcs11.audit_key",
            "opened as serve opens it: %s, sha256 %s, a signature verified",
            p11_signkey_alg(st->audit), p11_signkey_fingerprint(st->audit));
    else
        say(r, P11_CHECK_FAIL, "pkcs11.audit_key", "serve would refuse it: %s", e.msg);
    OPENSSL_cleanse(pin, sizeof(pin));
}

/* ca.cert by serve's rules (ca_cert_check), against the CA key when it opened. */
static void check_ca_cert(const check_state *st, check_report *r)
{
    const char *path = st->cfg.ca_cert;
    hsmca_err e;
    X509 *x = certasm_load_pem(path, &e);
    if (!x) {
        say(r, P11_CHECK_FAIL, "ca.cert",
            "%s (serve needs the certificate of the token's CA key: make it, then set ca.cert)",
            e.msg);
        return;
    }
    EVP_PKEY *token_key = st->pool ? p11_pool_public_key(st->pool) : NULL;
    if (ca_cert_check(x, path, token_key, &e) != HSMCA_OK)
        say(r, P11_CHECK_FAIL, "ca.cert", "%s", e.msg);
    else if (!token_key)
        say(r, P11_CHECK_INFO, "ca.cert", "%s not compared with the CA key, which did not open",
            path);
    else
        say(r, P11_CHECK_OK, "ca.cert", "%s certifies the token's CA key", path);
    EVP_PKEY_free(token_key);
    X509_free(x);
}

/* The self-test signer_self_test runs: one signature with each key, verified. */
static hsmca_code self_test_once(check_state *st, const char **which, hsmca_err *e)
{
    *which = "CA key (pkcs11.ca_key)";
    HSMCA_GUARD(p11_pool_self_test(st->pool, e));
    *which = "audit key (pkcs11.audit_key)";
    if (st->audit)
        HSMCA_GUARD(p11_signkey_self_test(st->audit, e));
    return HSMCA_OK;
}

/* As serve's signer: switch user, enter the sandbox, then sign with each key. */
static void check_sandbox(check_state *st, check_report *r)
{
    const signer_sandbox *sb = &st->sb;
    char mode[128];
    snprintf(mode, sizeof(mode), "signer.sandbox.network: %s, signer.sandbox.sysv_ipc: %s",
             config_net_name(sb->network), sb->sysv_ipc ? "true" : "false");
    if (!st->pool) {
        say(r, P11_CHECK_INFO, "signer.sandbox", "not tried (%s): the CA key did not open", mode);
        return;
    }
    hsmca_err e;
    if (signer_sandbox_enter(sb, &e) != HSMCA_OK) {
        say(r, P11_CHECK_FAIL, sb->user.active ? "signer.user" : "signer.sandbox", "%s", e.msg);
        return;
    }
    const char *which = "PKCS#11 module", *what = "failed its re-initialization (as after a "
                                                  "token fault)";
    /* As serve (signer_self_test): the recovery from a token fault first, then a signature
     * with each key, retried while the pool reconnects; the first failure is reported. */
    hsmca_code rc = signer_rehearse_recovery(st->pool, st->audit, st->audit_m != NULL, &e);
    if (rc == HSMCA_OK) {
        what = "failed its signature";
        rc = self_test_once(st, &which, &e);
    }
    double end = util_mono_now() + CHECK_SELF_TEST_S;
    while (rc == HSMCA_EUNAVAIL && util_mono_now() < end) {
        struct timespec pause = {0, 100 * 1000 * 1000};
        nanosleep(&pause, NULL);
        const char *again_which;
        hsmca_err again;
        rc = self_test_once(st, &again_which, &again);
    }
    if (rc != HSMCA_OK) {
        /* The switch of user came with the filter: either may be what the module lacks. */
        char user[256] = "";
        if (sb->user.active)
            snprintf(user, sizeof(user), "; or, as signer.user '%s', it cannot reach its "
                     "token's files (SoftHSM's token directory must belong to that user)",
                     sb->user.name);
        say(r, P11_CHECK_FAIL, "signer.sandbox.network",
            "the %s %s inside the signer's sandbox (%s): %s; %s%s", which, what, mode, e.msg,
            signer_sandbox_hint(sb), user);
        return;
    }
    say(r, P11_CHECK_OK, "signer.sandbox", "as %s (%s): the CA key%s signed and verified inside "
        "the sandbox", sb->user.active ? sb->user.name : "the current user (not root)", mode,
        st->audit ? " and the audit key" : "");
}

/* The PIN read, the module loaded and listed, the keys and ca.cert checked, the sandbox. */
static void check_token(check_state *st, check_report *r)
{
    const hsmca_config *cfg = &st->cfg;
    char pin[UTIL_PIN_MAX + 1];
    hsmca_err e;
    if (cfg->softhsm2_conf[0])
        setenv("SOFTHSM2_CONF", cfg->softhsm2_conf, 1);
    if (util_read_secret(cfg->pin_file, pin, sizeof(pin), &e) != HSMCA_OK) {
        say(r, P11_CHECK_FAIL, "pkcs11.pin_file", "%s", e.msg);
        return;
    }
    if (p11_module_load(cfg->module_path, &st->m, &e) != HSMCA_OK) {
        say(r, P11_CHECK_FAIL, "pkcs11.module", "%s", e.msg);
        OPENSSL_cleanse(pin, sizeof(pin));
        return;
    }
    say(r, P11_CHECK_OK, "pkcs11.module", "%s loaded", cfg->module_path);
    p11_token_list(st->m, report, r);
    check_ca_key(st, pin, r);
    OPENSSL_cleanse(pin, sizeof(pin));
    /* A PIN the token refused is never tried again; an audit key with its own PIN is. */
    if (!st->pin_refused || st->cfg.audit_pin_file[0])
        check_audit_key(st, r);
    check_ca_cert(st, r);
    check_sandbox(st, r);
}

static void check_usage(FILE *f)
{
    fputs("usage: hsmca-signer --check --config FILE\n"
          "\n"
          "What `hsmca token check` runs: the signer's start-up on the token FILE names,\n"
          "without serving; one line per check on stdout, then a verdict.\n",
          f);
}

/* --check --config FILE: the config's path, or NULL after usage (*code set). */
static const char *check_args(int argc, char **argv, int *code)
{
    static const struct option opts[] = {{"check", no_argument, 0, 'k'},
                                         {"config", required_argument, 0, 'c'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *config = NULL;
    int c;
    opterr = 0;
    *code = 2;
    while ((c = getopt_long(argc, argv, ":c:h", opts, NULL)) != -1) {
        if (c == 'h') {
            check_usage(stdout);
            *code = 0;
            return NULL;
        }
        if (c == 'c')
            config = optarg;
        else if (c != 'k')
            break;
    }
    if (c != -1 || optind < argc || !config) {
        check_usage(stderr);
        return NULL;
    }
    return config;
}

int signer_check_main(int argc, char **argv)
{
    int code;
    log_init("signer");
    const char *path = check_args(argc, argv, &code);
    if (!path)
        return code;
    check_report r = {.out = stdout};
    check_state *st = calloc(1, sizeof(*st));
    hsmca_err e;
    if (!st) {
        fputs("FAIL out of memory\n", stdout);
        return 1;
    }
    say(&r, P11_CHECK_INFO, "config", "%s", path);
    if (config_load(path, &st->cfg, &e) != HSMCA_OK || config_validate(&st->cfg, &e) != HSMCA_OK ||
        signer_sandbox_prepare(&st->cfg, &st->sb, &e) != HSMCA_OK) {
        say(&r, P11_CHECK_FAIL, "config", "%s", e.msg);
        verdict(&r);
        free(st);
        return EXIT_CONFIG;
    }
    if (st->sb.user.active)
        say(&r, P11_CHECK_INFO, "signer.user", "'%s' (uid %d): switched to once the token is open",
            st->sb.user.name, (int)st->sb.user.uid);
    else
        say(&r, P11_CHECK_INFO, "signer.user", "not switched to (not started as root): uid %d",
            (int)getuid());
    check_token(st, &r);
    code = verdict(&r);
    p11_signkey_close(st->audit);
    p11_module_unload(st->audit_m);
    p11_pool_close(st->pool);
    p11_module_unload(st->m);
    free(st);
    return code;
}

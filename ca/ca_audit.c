/* ca_audit.c - see ca_audit.h. */
#include "ca_audit.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit_lock.h"
#include "ca_util.h"
#include "sigalg.h"

static hsmca_code on_entry(void *ctx, const audit_entry *ent, uint64_t off, hsmca_err *e)
{
    ca_audit *a = ctx;
    (void)off;
    (void)e;
    if (ent->kind == AUDIT_CA_KEY && !strcmp(ent->step, "rotate-switch"))
        a->switched = ent->time;
    if (ent->kind == AUDIT_CA_KEY && !strcmp(ent->step, "rotate-overlap"))
        a->overlapped = ent->time;
    return HSMCA_OK;
}

hsmca_code ca_audit_open(const hsmca_config *cfg, ca_audit *a, hsmca_err *e)
{
    memset(a, 0, sizeof(*a));
    a->lock_fd = -1;
    if (!cfg->audit_dir[0])
        return HSMCA_OK;
    /* What a root command creates is the signer's, as the signer would have made it. */
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    struct passwd *pw = geteuid() == 0 ? getpwnam(cfg->signer_user) : NULL;
    if (pw)
        uid = pw->pw_uid, gid = pw->pw_gid;
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = audit_lock_take(cfg->audit_dir, uid, gid, 0, NULL, &a->lock_fd, &why);
    if (rc == HSMCA_EPERM)
        return hsmca_fail(e, rc,
                          "the step goes into the signing log, which a running signer "
                          "holds: stop hsmca serve, run the step, start it again (%.200s)",
                          why.msg);
    if (rc != HSMCA_OK)
        return hsmca_fail(e, rc, "audit.dir: %s", why.msg);
    audit_replay_stats st;
    rc = audit_log_open(cfg->audit_dir, uid, gid, on_entry, a, &a->log, &st, &why);
    if (rc != HSMCA_OK) {
        ca_audit_close(a);
        return hsmca_fail(e, rc, "audit.dir: %s", why.msg);
    }
    return HSMCA_OK;
}

/* The unix user running the command (and who became root through sudo). */
static void who(char *out, size_t cap)
{
    struct passwd *pw = getpwuid(getuid());
    const char *sudo = getenv("SUDO_USER");
    if (pw && sudo && getuid() == 0)
        snprintf(out, cap, "%s (sudo from %s)", pw->pw_name, sudo);
    else if (pw)
        snprintf(out, cap, "%s", pw->pw_name);
    else
        snprintf(out, cap, "uid %u", (unsigned)getuid());
}

hsmca_code ca_audit_record(ca_audit *a, const char *step, const char *key_uri, EVP_PKEY *key,
                           X509 *cert, hsmca_err *e)
{
    if (!a->log) {
        printf("not recorded in a signing log: audit.dir is not set (step %s)\n", step);
        return HSMCA_OK;
    }
    audit_entry ent;
    memset(&ent, 0, sizeof(ent));
    ent.kind = AUDIT_CA_KEY;
    snprintf(ent.step, sizeof(ent.step), "%s", step);
    const sigalg *alg = key ? sigalg_for_key(key) : NULL;
    /* An audit key (audit-keygen) may be Ed25519, which no CA key is. */
    const char *alg_name = alg                                                   ? alg->name
                           : key && EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519 ? "ed25519"
                                                                                 : NULL;
    if (!alg_name || !ca_spki_sha256(key, ent.ca_spki_sha256) ||
        (cert && !ca_cert_sha256(cert, ent.ca_cert_sha256)))
        return hsmca_fail(e, HSMCA_EINTERNAL, "audit: cannot describe the CA key of step %s", step);
    snprintf(ent.ca_key_alg, sizeof(ent.ca_key_alg), "%s", alg_name);
    sigalg_key_type(key, ent.ca_key_type, sizeof(ent.ca_key_type));
    const char *q = strchr(key_uri, '?');
    ent.ca_key_uri = (audit_str){key_uri, q ? (size_t)(q - key_uri) : strlen(key_uri), 0};
    char user[300];
    who(user, sizeof(user));
    ent.requester = (audit_str){user, strlen(user), 0};
    uint64_t seq;
    hsmca_err why;
    hsmca_err_clear(&why);
    if (audit_log_append(a->log, &ent, &seq, &why) != HSMCA_OK ||
        audit_log_sync_through(a->log, seq, &why) != HSMCA_OK)
        return hsmca_fail(e, why.code, "audit.dir: cannot record step %s: %s", step, why.msg);
    printf("recorded: signing log seq %llu (ca-key, step %s)\n", (unsigned long long)seq, step);
    return HSMCA_OK;
}

void ca_audit_close(ca_audit *a)
{
    audit_log_close(a->log);
    a->log = NULL;
    if (a->lock_fd >= 0)
        audit_lock_release(a->lock_fd);
    a->lock_fd = -1;
}

/* signer_policy.c - see signer_policy.h. */
#include "signer_policy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ipc_frame.h"
#include "log.h"
#include "policy_live.h"
#include "signer_audit.h"
#include "signer_ctx.h"
#include "util.h"

/* The last reload's outcome, for `hsmca admin status`; the main thread's only. */
static struct {
    int failed;
    char why[SIGNER_RELOAD_WHY_MAX];
    uint64_t failures;
    int64_t ok_at;
} reload_state;

static void reload_outcome(const char *why)
{
    reload_state.failed = why != NULL;
    snprintf(reload_state.why, sizeof(reload_state.why), "%s", why ? why : "");
    if (why)
        reload_state.failures++;
    else
        reload_state.ok_at = util_wall_now();
}

int signer_policy_reload_state(char *why, size_t cap, uint64_t *failures, int64_t *ok_at)
{
    snprintf(why, cap, "%s", reload_state.why);
    *failures = reload_state.failures;
    *ok_at = reload_state.ok_at;
    return reload_state.failed;
}

void signer_policy_on_failed(int fd)
{
    char why[SIGNER_RELOAD_WHY_MAX];
    ssize_t n = pread(fd, why, sizeof(why) - 1, 0);
    if (n <= 0)
        n = snprintf(why, sizeof(why), "the reload failed (see the supervisor's log)");
    why[n] = 0;
    for (ssize_t i = 0; i < n; i++) /* it goes into a JSON string and a terminal */
        if ((unsigned char)why[i] < ' ' || why[i] == 0x7f)
            why[i] = ' ';
    LOG_EVENT(LOG_LVL_WARN, "reload failed, keeping the policy in force", LOG_STR("reason", why));
    reload_outcome(why);
}

hsmca_code signer_policy_init(signer_ctx *s, hsmca_err *e)
{
    reload_state.ok_at = util_wall_now();
    /* s->policy keeps pointing into the start-time file: our own reference keeps it. */
    s->policies = policy_live_new(s->policy_file);
    s->policy_file_given = 1; /* freed by policy_live_new when it fails */
    HSMCA_ENSURE(s->policies, e, HSMCA_ENOMEM, "out of memory");
    s->policy_start = policy_live_acquire(s->policies);
    return HSMCA_OK;
}

void signer_policy_free(signer_ctx *s)
{
    policy_live_release(s->policy_start);
    policy_live_free(s->policies);
    s->policy_start = NULL;
    s->policies = NULL;
}

/* s->policy with set's rules and trust domain aliases in place of the start-time file's. */
static void view_of(const signer_ctx *s, const policy_set *set, tbs_policy *out)
{
    *out = s->policy;
    out->policy_file = set;
    out->n_trust_domains = 1; /* issuance.trust_domain, then the aliases */
    for (int i = 0; i < policy_set_n_aliases(set) && out->n_trust_domains < PROFILE_MAX_NAMES; i++)
        out->trust_domains[out->n_trust_domains++] = policy_set_alias(set, i);
}

static HSMCA_MUSTCHECK hsmca_code check_under(signer_ctx *s, const policy_set *set,
                                              const Hsmca__Ipc__SignRequest *req, tbs_facts *facts,
                                              int *bound, hsmca_err *e)
{
    tbs_policy pol;
    view_of(s, set, &pol);
    HSMCA_GUARD(tbs_validate(req->tbs.data, req->tbs.len, (profile_id)req->profile, &pol,
                             util_wall_now(), facts, e));
    /* Identity binding: a workload TBS names the forwarded token's identity (the serving
     * profile is the front end's own certificate, already held to the configured names). */
    *bound = 0;
    if (req->profile != PROFILE_WORKLOAD)
        return HSMCA_OK;
    return signer_bind_check(s->bind, &pol, req->authenticator, req->token, strlen(req->token),
                             req->cluster, facts->sans, util_wall_now(), bound, e);
}

hsmca_code signer_policy_check(signer_ctx *s, const Hsmca__Ipc__SignRequest *req, tbs_facts *facts,
                               int *bound, hsmca_err *e)
{
    policy_version *v = policy_live_acquire(s->policies);
    hsmca_code rc = check_under(s, policy_version_set(v), req, facts, bound, e);
    policy_live_release(v);
    if (rc != HSMCA_EPERM)
        return rc;
    policy_version *old = policy_live_acquire_prev(s->policies, util_mono_now());
    if (!old)
        return rc;
    hsmca_err e_old;
    hsmca_code rc_old = check_under(s, policy_version_set(old), req, facts, bound, &e_old);
    policy_live_release(old);
    if (rc_old != HSMCA_OK) {
        memset(facts, 0, sizeof(*facts)); /* the refusal is the new policy's */
        return rc;
    }
    /* Said once per request, only during a reload's grace: what the new policy refused. */
    LOG_EVENT(LOG_LVL_INFO, "accepted under the replaced policy file (reload grace)",
              LOG_STR("req", req->request_id && req->request_id[0] ? req->request_id : "-"),
              LOG_STR("new_policy_refusal", e->msg));
    return HSMCA_OK;
}

static void answer(signer_ctx *s, char b)
{
    if (s->ctl_fd >= 0 && write(s->ctl_fd, &b, 1) != 1)
        LOG_EVENT(LOG_LVL_WARN, "cannot answer the supervisor's reload",
                  LOG_STR("error", strerror(errno)));
}

void signer_policy_on_push(signer_ctx *s, int fd)
{
    hsmca_err e;
    policy_set *next = NULL;
    const char *name = s->cfg.policy_file[0] ? s->cfg.policy_file : "issuance.policy_file";
    hsmca_code rc = policy_file_load_fd(name, fd, &next, &e);
    char hex[65] = "";
    if (rc == HSMCA_OK) {
        util_hex(policy_set_sha256(next), 32, hex);
        rc = policy_live_replace(s->policies, next, util_mono_now() + SIGNER_POLICY_GRACE_S, &e);
    }
    if (rc != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "reload: policy file not taken, keeping the one in force",
                  LOG_STR("reason", e.msg));
        reload_outcome(e.msg);
        answer(s, CTL_RELOAD_FAILED);
        return;
    }
    LOG_EVENT(LOG_LVL_INFO, "policy file reloaded", LOG_STR("path", name), LOG_STR("sha256", hex),
              LOG_STR("old_accepted_s", SIGNER_POLICY_GRACE_TEXT));
    /* The signing log names the policy its next entries were checked under. */
    policy_version *v = policy_live_acquire(s->policies);
    tbs_policy view;
    view_of(s, policy_version_set(v), &view);
    if (signer_audit_policy(s, &view, &e) != HSMCA_OK)
        LOG_EVENT(LOG_LVL_ERROR, "audit: the reloaded policy's config entry not written",
                  LOG_STR("error", e.msg));
    policy_live_release(v);
    reload_outcome(NULL);
    answer(s, CTL_POLICY);
}

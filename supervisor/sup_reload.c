/* sup_reload.c - see sup_reload.h. */
#include "sup_reload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc_frame.h"
#include "log.h"
#include "policy_file.h"
#include "sup_keys.h"
#include "util.h"

static struct {
    const char *path;
    char *doc; /* the bytes on their way, while waiting for the signer */
    size_t len;
    int waiting;
    double deadline;
} R;

void sup_reload_init(const char *policy_file)
{
    R.path = policy_file;
}

static void forget(void)
{
    free(R.doc);
    R.doc = NULL;
    R.len = 0;
    R.waiting = 0;
}

/* Sends type with a sealed memfd of doc[0..len) over ctl; 0 when sent. */
static int send_doc(int ctl, char type, const char *name, const char *doc, size_t len)
{
    int fd = sup_sealed_memfd(name, doc, len);
    hsmca_err e;
    if (fd < 0) {
        LOG_EVENT(LOG_LVL_WARN, "reload: cannot make a memfd", LOG_STR("what", name));
        return -1;
    }
    hsmca_code rc = ipc_send_ctl_fd(ctl, type, fd, &e);
    close(fd);
    if (rc != HSMCA_OK)
        LOG_EVENT(LOG_LVL_WARN, "reload: cannot send", LOG_STR("what", name),
                  LOG_STR("error", e.msg));
    return rc == HSMCA_OK ? 0 : -1;
}

/* The child keeps its policy and records why (the front end for /readyz and the
 * metrics, the signer for admin status). */
static void tell_failed(int ctl, const char *why)
{
    if (ctl >= 0)
        (void)send_doc(ctl, CTL_RELOAD_FAILED, "hsmca-reload-error", why, strlen(why));
}

static void to_frontend(int frontend_ctl)
{
    if (frontend_ctl >= 0 && send_doc(frontend_ctl, CTL_POLICY, "hsmca-policy", R.doc, R.len) == 0)
        log_event(LOG_LVL_INFO, "reload: policy file sent to the front end", NULL, 0);
    forget();
}

void sup_reload_begin(int signer_ctl, int frontend_ctl)
{
    forget(); /* a reload still waiting is overtaken: the file read now is the newer */
    if (!R.path || !R.path[0]) {
        log_event(LOG_LVL_INFO,
                  "SIGHUP: no issuance.policy_file to reload; the issuer keys are read again", NULL,
                  0);
        return;
    }
    hsmca_err e;
    policy_set *p = NULL;
    hsmca_code rc = util_read_file(R.path, POLICY_FILE_MAX, &R.doc, &R.len, &e);
    if (rc == HSMCA_OK)
        rc = policy_file_load_buf(R.path, R.doc, R.len, &p, &e);
    if (rc != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR,
                  "SIGHUP: policy file not reloaded, both processes keep the policy in force",
                  LOG_STR("error", e.msg));
        tell_failed(signer_ctl, e.msg); /* the signer never saw the file: for admin status */
        tell_failed(frontend_ctl, e.msg);
        forget();
        return;
    }
    char hex[65];
    util_hex(policy_set_sha256(p), 32, hex);
    policy_set_free(p);
    LOG_EVENT(LOG_LVL_INFO, "SIGHUP: reloading the policy file", LOG_STR("path", R.path),
              LOG_STR("sha256", hex));
    if (signer_ctl < 0) {
        to_frontend(frontend_ctl); /* a signer started later reads the file itself */
        return;
    }
    if (send_doc(signer_ctl, CTL_POLICY, "hsmca-policy", R.doc, R.len) != 0) {
        tell_failed(frontend_ctl, "reload: the policy file could not be sent to the "
                                           "signer; both processes keep the policy in force");
        forget();
        return;
    }
    R.waiting = 1;
    R.deadline = util_mono_now() + SUP_RELOAD_SIGNER_WAIT_S;
}

void sup_reload_signer_said(char b, int frontend_ctl)
{
    if (!R.waiting)
        return;
    if (b == CTL_POLICY) {
        to_frontend(frontend_ctl);
        return;
    }
    log_event(LOG_LVL_ERROR,
              "SIGHUP: the signer kept its policy (see its log line); the front end keeps its "
              "own too",
              NULL, 0);
    tell_failed(frontend_ctl, "reload: the signer refused the new policy file (see its "
                                       "log); both processes keep the policy in force");
    forget();
}

void sup_reload_tick(int signer_ctl, int frontend_ctl)
{
    if (!R.waiting)
        return;
    if (signer_ctl < 0) {
        log_event(LOG_LVL_INFO,
                  "reload: the signer went away before answering; its successor reads the file",
                  NULL, 0);
        to_frontend(frontend_ctl);
    } else if (util_mono_now() > R.deadline) {
        char wait_s[32];
        snprintf(wait_s, sizeof(wait_s), "%.0f", SUP_RELOAD_SIGNER_WAIT_S);
        LOG_EVENT(LOG_LVL_ERROR,
                  "SIGHUP: the signer did not answer the reload in time; the front end keeps its "
                  "policy",
                  LOG_STR("wait_s", wait_s));
        tell_failed(frontend_ctl, "reload: the signer did not answer in time; the front "
                                           "end keeps the policy in force");
        forget();
    }
}

/* fe_reload.c - see fe_reload.h. */
#include "fe_reload.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fe_app.h"
#include "ipc_frame.h"
#include "log.h"
#include "policy_live.h"
#include "util.h"

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static int state_failed;
static char state_why[FE_RELOAD_WHY_MAX];
static uint64_t state_failures;
static int64_t state_ok_at; /* wall time of the policy's last load or reload */

static void set_state(int failed, const char *why)
{
    pthread_mutex_lock(&state_lock);
    state_failed = failed;
    snprintf(state_why, sizeof(state_why), "%s", failed ? why : "");
    if (failed)
        state_failures++;
    else
        state_ok_at = util_wall_now();
    pthread_mutex_unlock(&state_lock);
}

void fe_reload_loaded(void)
{
    pthread_mutex_lock(&state_lock);
    state_ok_at = util_wall_now();
    pthread_mutex_unlock(&state_lock);
}

int fe_reload_stats(uint64_t *failures, int64_t *ok_at)
{
    pthread_mutex_lock(&state_lock);
    int failed = state_failed;
    *failures = state_failures;
    *ok_at = state_ok_at;
    pthread_mutex_unlock(&state_lock);
    return failed;
}

int fe_reload_failed(char *why, size_t cap)
{
    pthread_mutex_lock(&state_lock);
    int failed = state_failed;
    if (cap)
        snprintf(why, cap, "%s%s", failed ? "last reload failed: " : "", state_why);
    pthread_mutex_unlock(&state_lock);
    return failed;
}

/* The reason in a CTL_RELOAD_FAILED memfd, cut to FE_RELOAD_WHY_MAX - 1 bytes; control
 * characters become spaces (it goes into a probe's body). */
static void read_why(int fd, char *why, size_t cap)
{
    ssize_t n = pread(fd, why, cap - 1, 0);
    if (n <= 0) {
        snprintf(why, cap, "the reload failed (see the supervisor's log)");
        return;
    }
    why[n] = 0;
    for (ssize_t i = 0; i < n; i++)
        if ((unsigned char)why[i] < ' ' || why[i] == 0x7f)
            why[i] = ' ';
}

static void reload_policy(fe_app *app, int fd)
{
    hsmca_err e;
    policy_set *next = NULL;
    const char *name = app->cfg->policy_file[0] ? app->cfg->policy_file : "issuance.policy_file";
    hsmca_code rc = policy_file_load_fd(name, fd, &next, &e);
    char hex[65] = "";
    if (rc == HSMCA_OK) {
        util_hex(policy_set_sha256(next), 32, hex);
        rc = policy_live_replace(app->policies, next, 0, &e);
    }
    if (rc != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "reload: policy file not taken, keeping the one in force",
                  LOG_STR("reason", e.msg));
        set_state(1, e.msg);
        return;
    }
    set_state(0, "");
    LOG_EVENT(LOG_LVL_INFO, "policy file reloaded", LOG_STR("path", name), LOG_STR("sha256", hex));
}

void fe_reload_on_ctl(void *arg, char type, int memfd)
{
    fe_app *app = arg;
    if (type == CTL_POLICY) {
        reload_policy(app, memfd);
        return;
    }
    char why[FE_RELOAD_WHY_MAX];
    read_why(memfd, why, sizeof(why));
    LOG_EVENT(LOG_LVL_WARN, "reload failed, keeping the policy in force", LOG_STR("reason", why));
    set_state(1, why);
}

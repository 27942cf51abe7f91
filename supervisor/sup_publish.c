/* sup_publish.c - see sup_publish.h. */
#include "sup_publish.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "kubeconfig.h"
#include "log.h"
#include "sup_exec.h"
#include "util.h"

/* The API server's settings load as the child will load them: a broken
 * publish.kubeconfig stops serve at start, not a child restarted in a loop. */
static HSMCA_MUSTCHECK hsmca_code check_target(const hsmca_config *cfg, hsmca_err *e)
{
    k8s_target t = {0};
    hsmca_err le;
    if (cfg->publish_kubeconfig[0]) {
        if (kubeconfig_load(cfg->publish_kubeconfig, &t, &le) != HSMCA_OK)
            return hsmca_fail(e, HSMCA_EINVAL,
                              "publish.kubeconfig %s: %s (publish.enabled is true)",
                              cfg->publish_kubeconfig, le.msg);
        k8s_target_clear(&t);
        return HSMCA_OK;
    }
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    if (!host || !host[0])
        return hsmca_fail(e, HSMCA_EINVAL,
                          "publish.enabled is true and publish.kubeconfig is empty, but this is "
                          "not a pod (KUBERNETES_SERVICE_HOST unset): set publish.kubeconfig");
    if (k8s_incluster(NULL, &t, &le) != HSMCA_OK)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "publish.enabled: the in-cluster config does not load: %s (or set "
                          "publish.kubeconfig)",
                          le.msg);
    k8s_target_clear(&t);
    return HSMCA_OK;
}

hsmca_code sup_publish_prepare(const hsmca_config *cfg, const char *self, sup_publish *p,
                               hsmca_err *e)
{
    memset(p, 0, sizeof(*p));
    if (!cfg->publish_enabled)
        return HSMCA_OK;
    HSMCA_GUARD(sup_exec_find(self, "publish", p->program, sizeof(p->program), e));
    const char *key = cfg->publish_user[0] ? "publish.user" : "frontend.user";
    const char *name = cfg->publish_user[0] ? cfg->publish_user : cfg->fe_user;
    HSMCA_GUARD(sandbox_user_lookup(key, name, &p->user, e));
    HSMCA_GUARD(check_target(cfg, e));
    snprintf(p->failed, sizeof(p->failed),
             "hsmca: publish-roots: cannot switch to %s '%.64s' or set no_new_privs\n", key, name);
    HSMCA_GUARD(sup_env_build(cfg, SUP_ENV_PUBLISH, &p->env, e));
    p->on = 1;
    return HSMCA_OK;
}

/* In the forked child, before exec: only system calls (the supervisor has threads; a
 * forked copy of it must not take their locks). The user's rights, never root's again,
 * and no way to gain any (a set-user-ID program) from here on. 0, or -1. */
static int drop_rights(const sandbox_user *u)
{
    if (u->active) {
        if (setgroups(0, NULL) != 0 || setresgid(u->gid, u->gid, u->gid) != 0 ||
            setresuid(u->uid, u->uid, u->uid) != 0)
            return -1;
        if (setresuid(0, 0, 0) == 0 || setresgid(0, 0, 0) == 0)
            return -1;
    }
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

pid_t sup_publish_spawn(const sup_publish *p, const char *config, hsmca_err *e)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        hsmca_fail(e, HSMCA_EIO, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid > 0)
        return pid;
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (drop_rights(&p->user) != 0) {
        ssize_t w = write(2, p->failed, strlen(p->failed));
        (void)w;
        _exit(EXIT_CONFIG);
    }
    /* After the switch: a change of credentials clears the parent-death signal. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(0);
    execle(p->program, p->program, "--config", config, (char *)NULL, p->env.envp);
    _exit(127);
}

void sup_publish_free(sup_publish *p)
{
    sup_env_free(&p->env);
    p->on = 0;
}

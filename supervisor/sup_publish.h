/* sup_publish.h - the root-distribution child of `hsmca serve` (publish.enabled): the
 * supervisor runs the program hsmca-publish (publish/, what `hsmca k8s publish-roots`
 * runs) as `hsmca-publish --config FILE`, restarted like the other children when it dies.
 *
 * That child holds the API server's credentials (publish.kubeconfig, or the pod's
 * service account) and nothing of the CA's: no PIN, no key, no IPC channel. It is
 * started as publish.user (frontend.user when unset) when the supervisor runs as root,
 * with no supplementary groups and PR_SET_NO_NEW_PRIVS, before its program runs. It is
 * not chrooted: it reads ca.root_bundle, crl.path and its kubeconfig at every round and
 * loads libcurl, none of which an empty root holds. */
#ifndef HSMCA_SUP_PUBLISH_H
#define HSMCA_SUP_PUBLISH_H

#include <limits.h>
#include <sys/types.h>

#include "config.h"
#include "hsmca_err.h"
#include "sandbox.h"
#include "sup_env.h"

typedef struct {
    int on;                 /* publish.enabled */
    sandbox_user user;      /* resolved before any fork (getpwnam is not for a forked child) */
    sup_env env;            /* its whole environment (sup_env.h, SUP_ENV_PUBLISH) */
    char failed[256];       /* what the forked child writes when it cannot drop its rights */
    char program[PATH_MAX]; /* hsmca-publish (sup_exec.h), found before any fork */
} sup_publish;

/* With publish.enabled: finds the program hsmca-publish from self (the hsmca program, an
 * absolute path; sup_exec_find), resolves the child's user, checks that
 * publish.kubeconfig loads (or, when it is empty, that the in-cluster config does) and
 * builds the child's environment. Otherwise p->on = 0. An error for what no restart
 * cures, naming the config key or the missing program (the caller exits EXIT_CONFIG).
 * Release with sup_publish_free. */
HSMCA_MUSTCHECK hsmca_code sup_publish_prepare(const hsmca_config *cfg, const char *self,
                                               sup_publish *p, hsmca_err *e);

/* Forks the child: p's user and no_new_privs, then p->program run as
 * `hsmca-publish --config config` with p's environment. Returns its pid, or -1 with e
 * set (fork failed). */
pid_t sup_publish_spawn(const sup_publish *p, const char *config, hsmca_err *e);

void sup_publish_free(sup_publish *p);

#endif

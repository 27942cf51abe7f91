/* kf_main.c - see keyfetch.h. */
#include "keyfetch.h"
#include "kf_fetch.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "config.h"
#include "ipc_frame.h"
#include "log.h"
#include "sandbox.h"
#include "sup_keys.h"

static void usage(FILE *f)
{
    fputs("usage: hsmca-keyfetch --config FILE --ctl-fd N\n"
          "\n"
          "The key fetcher the supervisor starts when an issuer's keys come by OpenID\n"
          "discovery: fetches them and hands them to the supervisor on fd N.\n"
          "Not meant to be run by hand.\n",
          f);
}

/* -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, const char **config, int *ctl)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"ctl-fd", required_argument, 0, 'k'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    char *end = NULL;
    *config = NULL;
    *ctl = -1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:k:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': *config = optarg; break;
        case 'k':
            errno = 0;
            long v = strtol(optarg, &end, 10);
            *ctl = errno || *end || v < 3 || v > 1024 ? -1 : (int)v;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || !*config || !**config || *ctl < 0) {
        usage(stderr);
        return 2;
    }
    return -1;
}

static void fetchers_stop(sup_keys **k)
{
    for (int i = 0; i < IPC_KEYSETS; i++)
        sup_keys_stop(k[i]);
}

/* One fetcher per cluster whose keys come from its issuer, each on its cluster's view of
 * the config (views must outlive them). */
static HSMCA_MUSTCHECK hsmca_code fetchers_start(const hsmca_config *cfg, hsmca_config *views,
                                                 sup_keys **k, hsmca_err *e)
{
    for (int i = 0; i <= cfg->n_clusters && i < IPC_KEYSETS; i++) {
        if (!sup_keys_from_issuer(cfg, i))
            continue;
        config_cluster_view(cfg, i, &views[i]);
        if (!(k[i] = sup_keys_start(&views[i], kf_fetch, e))) {
            fetchers_stop(k);
            return e->code;
        }
    }
    return HSMCA_OK;
}

/* Until the supervisor goes: its refresh requests, and each newly accepted JWKS sent up. */
static int serve(int ctl, sup_keys **k)
{
    uint64_t sent[IPC_KEYSETS] = {0};
    for (;;) {
        struct pollfd p = {ctl, POLLIN, 0};
        if (poll(&p, 1, 200) < 0 && errno != EINTR) {
            LOG_EVENT(LOG_LVL_ERROR, "poll failed", LOG_STR("error", strerror(errno)));
            return 1;
        }
        if (p.revents) {
            char b;
            ssize_t r = read(ctl, &b, 1);
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
                return 0; /* the supervisor is gone */
            for (int i = 0; r == 1 && b == CTL_KEYS_REFRESH && i < IPC_KEYSETS; i++)
                if (k[i])
                    sup_keys_refresh(k[i]);
        }
        for (int i = 0; i < IPC_KEYSETS; i++) {
            hsmca_err e;
            if (!k[i] || sup_keys_generation(k[i]) == sent[i])
                continue;
            if (sup_keys_push_type(k[i], ctl, CTL_KEYS_CLUSTER(i), &sent[i], &e) != HSMCA_OK)
                LOG_EVENT(LOG_LVL_WARN, "cannot hand the supervisor the issuer keys",
                          LOG_INT("cluster_index", i), LOG_STR("error", e.msg));
        }
    }
}

int keyfetch_main(int argc, char **argv)
{
    const char *config;
    int ctl;
    int rc = parse_args(argc, argv, &config, &ctl);
    if (rc >= 0)
        return rc;
    log_init("keyfetch");
    static hsmca_config cfg, views[IPC_KEYSETS];
    hsmca_err e;
    sandbox_user u;
    if (config_load(config, &cfg, &e) != HSMCA_OK || config_validate(&cfg, &e) != HSMCA_OK ||
        sandbox_user_lookup("frontend.user", cfg.fe_user, &u, &e) != HSMCA_OK ||
        sandbox_drop_user(&u, NULL, &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "keyfetch: cannot start", LOG_STR("error", e.msg));
        return EXIT_CONFIG;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        LOG_EVENT(LOG_LVL_ERROR, "keyfetch: PR_SET_NO_NEW_PRIVS failed",
                  LOG_STR("error", strerror(errno)));
        return EXIT_CONFIG;
    }
    sup_keys *k[IPC_KEYSETS] = {0};
    if (kf_fetch_init(&e) != HSMCA_OK || fetchers_start(&cfg, views, k, &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "keyfetch: cannot start the fetchers", LOG_STR("error", e.msg));
        return EXIT_CONFIG;
    }
    rc = serve(ctl, k);
    fetchers_stop(k);
    return rc;
}

/* sup_procs.h - the supervisor's children, one table (procs[] in sup_procs.c): each row
 * a role, its program, its environment and what it is linked to. Starting, restarting,
 * stopping and routing walk that table, so a new child is a folder, its main.c and a
 * row. One process-wide set of children: the supervisor's loop is its only user. */
#ifndef HSMCA_SUP_PROCS_H
#define HSMCA_SUP_PROCS_H

#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "hsmca_err.h"
#include "ipc_contract.h"
#include "sup_env.h"

#define SUP_CLUSTERS IPC_KEYSETS /* the local cluster, then auth.clusters (ipc_contract.h) */
#define SUP_PROCS_MAX 8          /* rows the table may have (a poll set holds them all) */

/* What a child is joined to besides its control channel (fd 4, --ctl-fd 4), and what
 * the supervisor does for it. */
enum {
    /* fd 3 (--ipc-fd 3): the signer-front end connection. The two LINK_PEER children
     * start together on one socketpair; when one restarts, the running other is handed
     * the other end of a new one (CTL_NEW_PEER). */
    LINK_PEER = 1 << 0,
    /* fd 3: the metrics end of the link to the front end (metrics.listen); started only
     * once a front end was (the link exists), handed each new front end's link. */
    LINK_METRICS = 1 << 1,
    /* fd 5 (--metrics-fd 5), with metrics.listen: the front end's end of that link. */
    LINK_METRICS_FE = 1 << 2,
    /* Gets the issuer keys (CTL_KEYS...), in the table's order: the signer first, so a
     * rotated key reaches it no later than the front end, and a token the front end
     * accepts with a new key is not refused by a signer that has only the old set. */
    LINK_KEYS = 1 << 3,
    /* SIGHUP's policy file (sup_reload.h): first, and answers (the signer) ... */
    LINK_POLICY_FIRST = 1 << 4,
    /* ... or once the first took it (the front end). */
    LINK_POLICY = 1 << 5,
    /* SIGHUP is passed on: publish-roots makes a full pass at once (publish/k8s_publish.c). */
    LINK_SIGHUP = 1 << 6,
    /* No channel at all: started by sup_publish_spawn as its own user (sup_publish.h). */
    LINK_OWN_USER = 1 << 7,
    /* The key fetcher (keyfetch/): no fd 3; sends each cluster's accepted JWKS up
     * (CTL_KEYS_CLUSTER(idx) with a sealed memfd), gets CTL_KEYS_REFRESH down. */
    LINK_FETCHER = 1 << 8,
};

/* A row of the table. */
typedef struct {
    const char *role;    /* its name in log lines */
    const char *program; /* hsmca-PROGRAM (sup_exec.h) */
    sup_env_role env;    /* the environment it gets (sup_env.h) */
    unsigned links;      /* LINK_* */
    char says[4];        /* the control bytes (ctl_byte) it may send up; others are ignored */
    int (*wanted)(const hsmca_config *cfg); /* whether this config runs it; NULL: always */
} sup_proc;

/* A child's state. */
typedef struct {
    const sup_proc *proc;
    int on;    /* wanted under this config */
    pid_t pid; /* 0 when not running */
    int ctl;   /* our end of its control channel, -1 when none */
    double started, restart_at, backoff;
    uint64_t keys_sent[SUP_CLUSTERS]; /* per cluster, the issuer keys' generation it has
                                         (0: none) */
    sup_env env; /* its whole environment (sup_env.h), built once before any fork */
} sup_child;

/* One child per row, with its environment (nothing inherited but what it reads,
 * sup_env.h; publish-roots' from sup_publish_prepare). cli is the hsmca program (an
 * absolute path: the children's programs are found from it) and config the config's
 * absolute path; both kept, not copied. HSMCA_ENOTFOUND when the program of a child this
 * config runs is missing (sup_exec_find), HSMCA_EINVAL naming the key for what else no
 * restart cures. Release with sup_procs_free, also after an error. */
HSMCA_MUSTCHECK hsmca_code sup_procs_prepare(const hsmca_config *cfg, const char *cli,
                                             const char *config, hsmca_err *e);

/* Frees what sup_procs_prepare built. */
void sup_procs_free(void);

/* How many children there are (rows of the table). */
int sup_procs_count(void);

/* Child i (0 <= i < sup_procs_count()), in the table's order; owned by sup_procs. */
sup_child *sup_procs_kid(int i);

/* The other LINK_PEER child of c, or NULL. */
sup_child *sup_procs_peer(const sup_child *c);

/* The control channel of the running child with one of links, or -1. */
int sup_procs_ctl(unsigned links);

/* Starts each child this config runs that is not running and whose restart is due. */
void sup_procs_start_due(void);

/* Reaps dead children and schedules their restart. Returns -1 when one exited
 * with EXIT_CONFIG: a restart would fail the same way (or lock a PIN). */
int sup_procs_reap(void);

/* SIGTERM to every running child; SIGKILL to those still running after the grace. */
void sup_procs_stop(void);

#endif

/* fe_reload.h - the front end's side of SIGHUP's reload (docs/OPERATIONS.md "Reload";
 * the supervisor's side is supervisor/sup_reload.h).
 *
 * What the front end reloads: the policy file, whose bytes the supervisor sends once
 * the signer took them (a sandboxed front end cannot open the path), parsed here again
 * and put in force for the next request (policy_live.h: a request in flight finishes
 * under the version it started with). The issuer keys (JWKS) come as they always do,
 * by the supervisor's key pushes. The serving certificate is the signer's to issue:
 * nothing to re-read. A reload that kept the policy in force, here or in the supervisor
 * or the signer, is remembered with its reason until one succeeds: /readyz shows it as a
 * warning line (still ready: the policy in force is a good one) and the metrics count it. */
#ifndef HSMCA_FE_RELOAD_H
#define HSMCA_FE_RELOAD_H

#include <stddef.h>
#include <stdint.h>

#define FE_RELOAD_WHY_MAX 1024 /* bytes of a failed reload's reason kept */

/* The fe_ipc_ctl_fn for the reload's messages; arg is the fe_app. */
void fe_reload_on_ctl(void *arg, char type, int memfd);

/* 1 when the last reload failed, with "last reload failed: <why>" in why[0..cap) (cut
 * to fit, NUL-terminated); 0 (why "") when none failed since the last that succeeded.
 * Thread-safe. */
int fe_reload_failed(char *why, size_t cap);

/* The policy was loaded at start: the time of the last successful load for the metrics. */
void fe_reload_loaded(void);

/* For the metrics: the failed reloads this process learnt of in *failures, the wall time
 * of the last successful load or reload in *ok_at (0: none yet); returns 1 while the last
 * reload failed. Thread-safe. */
int fe_reload_stats(uint64_t *failures, int64_t *ok_at);

#endif

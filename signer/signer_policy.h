/* signer_policy.h - the policy file in force in the signer, and its reload (SIGHUP,
 * docs/OPERATIONS.md "Reload"; the supervisor's side is supervisor/sup_reload.h).
 *
 * The checker validates each TBS against the policy in force at that moment
 * (policy_live.h). A reload comes from the supervisor before the front end has it: for
 * SIGNER_POLICY_GRACE_S after it, a workload TBS the new policy refuses is accepted when
 * the one it replaced allows it, since the front end may have checked it under that one
 * just before its own switch. A reload writes a config entry with the new policy to the
 * signing log. Intermediate CA name constraints keep the aliases of the file read at
 * start until a restart (s->policy, which our reference to that version keeps valid). */
#ifndef HSMCA_SIGNER_POLICY_H
#define HSMCA_SIGNER_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "hsmca_err.h"
#include "signer.pb-c.h"
#include "signer_tbs.h"

#define SIGNER_POLICY_GRACE_S 30.0
#define SIGNER_POLICY_GRACE_TEXT "30" /* the same, for the log line */

typedef struct signer_ctx signer_ctx;

/* After build_policy: s->policy_file goes into the live holder (which then owns it).
 * HSMCA_ENOMEM on failure. */
HSMCA_MUSTCHECK hsmca_code signer_policy_init(signer_ctx *s, hsmca_err *e);
void signer_policy_free(signer_ctx *s);

/* Invariants 1-5 of req's TBS under the policy in force (or, during a grace, the one
 * replaced) and, for a workload, identity binding (*bound as signer_bind_check's). */
HSMCA_MUSTCHECK hsmca_code signer_policy_check(signer_ctx *s, const Hsmca__Ipc__SignRequest *req,
                                               tbs_facts *facts, int *bound, hsmca_err *e);

/* A CTL_POLICY push (main thread): the file's bytes in memfd fd parsed and put in force,
 * or refused with the file's line logged; the supervisor gets the answer on s->ctl_fd. */
void signer_policy_on_push(signer_ctx *s, int fd);

#define SIGNER_RELOAD_WHY_MAX 1024 /* bytes of a failed reload's reason kept */

/* A CTL_RELOAD_FAILED from the supervisor (main thread): it refused the file itself, so
 * the signer never saw it; why (memfd fd) is logged and kept for admin status. */
void signer_policy_on_failed(int fd);

/* For admin status (main thread): 1 while the last reload failed, its reason in
 * why[0..cap) ("" otherwise); the failed reloads since start in *failures; the wall time
 * of the policy's last load or reload in *ok_at. */
int signer_policy_reload_state(char *why, size_t cap, uint64_t *failures, int64_t *ok_at);

#endif

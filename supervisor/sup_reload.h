/* sup_reload.h - SIGHUP's reload of the policy file (docs/OPERATIONS.md "Reload").
 *
 * The supervisor reads issuance.policy_file and parses it; a file it refuses is named
 * with its line (policy_file_parse) and kept out of both children, which go on with the
 * policy in force. A good one goes, as the bytes read, to the signer first (CTL_POLICY,
 * common/ipc_frame.h), and to the front end only once the signer answers that it took
 * it: the signer then accepts a TBS under the old policy or the new for a grace period
 * (signer_policy.h), so neither a request the front end checked just before its switch
 * nor one it checks just after is refused. The front end learns of a reload that kept
 * the old policy (CTL_RELOAD_FAILED, with why) for its readiness (fe_reload.h). The
 * children parse the bytes themselves: each still never takes the other's word for the
 * policy. One process-wide state: the supervisor's loop is its only user. */
#ifndef HSMCA_SUP_RELOAD_H
#define HSMCA_SUP_RELOAD_H

/* How long the signer has to answer before the reload counts as failed. */
#define SUP_RELOAD_SIGNER_WAIT_S 10.0

/* The policy file's path (issuance.policy_file, "" for none); kept, not copied. */
void sup_reload_init(const char *policy_file);

/* SIGHUP: reads and checks the file and sends it on. A control fd is -1 when that child
 * is not running (a child started later loads the file itself). */
void sup_reload_begin(int signer_ctl, int frontend_ctl);

/* The signer's answer (CTL_POLICY or CTL_RELOAD_FAILED): the front end follows, or learns
 * the reload failed. */
void sup_reload_signer_said(char b, int frontend_ctl);

/* Each turn of the supervisor's loop: a signer that did not answer in time fails the
 * reload; one that went away meanwhile is no reason to hold the front end back (its
 * successor reads the file at its start). */
void sup_reload_tick(int signer_ctl, int frontend_ctl);

#endif

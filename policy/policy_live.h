/* policy_live.h - the policy file in force, replaceable while other threads use it
 * (SIGHUP, docs/OPERATIONS.md "Reload").
 *
 * A user takes a reference to a version for the length of one check and gives it back;
 * a replacement is seen by the next check, and the version it replaced is freed when
 * its last user is done, so a request never sees half of one file and half of another.
 * The version replaced may be kept acceptable for a grace period: the signer takes a new
 * policy before the front end does, and a TBS the front end built under the old one just
 * before its switch must not then be refused. Thread-safe. */
#ifndef HSMCA_POLICY_LIVE_H
#define HSMCA_POLICY_LIVE_H

#include "hsmca_err.h"
#include "policy_file.h"

typedef struct policy_live policy_live;
typedef struct policy_version policy_version;

/* A holder of initial (taken; NULL: no policy file). NULL when out of memory (initial
 * is freed then). */
policy_live *policy_live_new(policy_set *initial);

/* The version in force. Never NULL; give it back with policy_live_release. */
policy_version *policy_live_acquire(policy_live *l);

/* The version replaced last while its grace lasts (now, monotonic seconds, before the
 * grace's end), else NULL. */
policy_version *policy_live_acquire_prev(policy_live *l, double now);

/* The policy of a version: NULL when it is "no policy file". */
const policy_set *policy_version_set(const policy_version *v);

/* Gives back v (NULL is fine). */
void policy_live_release(policy_version *v);

/* Puts next (taken) in force; the version it replaces stays acceptable through
 * policy_live_acquire_prev until grace_until (monotonic seconds; 0: not at all).
 * HSMCA_ENOMEM (next freed, the old one kept) when out of memory. */
HSMCA_MUSTCHECK hsmca_code policy_live_replace(policy_live *l, policy_set *next, double grace_until,
                                               hsmca_err *e);

/* Frees l and the versions no one holds (every user must be done). NULL is fine. */
void policy_live_free(policy_live *l);

#endif

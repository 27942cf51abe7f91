/* policy_spiffe.h - the one SPIFFE-ID validator (SPIFFE-ID spec §2), used by
 * the policy, the front end and the signer, so that the three cannot disagree
 * on what a SPIFFE ID is. Pure: no I/O, no allocation. */
#ifndef HSMCA_POLICY_SPIFFE_H
#define HSMCA_POLICY_SPIFFE_H

#include <stddef.h>
#include "hsmca_err.h"

#define SPIFFE_ID_MAX 2048 /* bytes, SPIFFE-ID spec §2.3 */
#define SPIFFE_TD_MAX 255  /* bytes, SPIFFE-ID spec §2.1 */

/* Checks that s[0..len) is a workload SPIFFE ID: "spiffe://", a trust domain of
 * [a-z0-9._-], then a non-empty path of "/"-separated segments of
 * [A-Za-z0-9._-], none empty, "." or ".."; so no percent-encoding, query,
 * fragment, userinfo, port or uppercase trust domain; at most SPIFFE_ID_MAX
 * bytes. The trust domain must be one of tds[0..n_tds) (n_tds 0: any).
 * HSMCA_EPERM with a message that names the broken rule and shows no byte of
 * s but as hex ("SPIFFE ID: path byte 0x2c at offset 31 is not [A-Za-z0-9._-]"). */
HSMCA_MUSTCHECK hsmca_code policy_spiffe_id_check(const char *s, size_t len,
                                                  const char *const *tds, int n_tds,
                                                  hsmca_err *e);

#endif

/* dev_signer.h - `hsmca dev` run as root: the signer's own user, and what that
 * user must be able to reach once the signer has switched to it. */
#ifndef HSMCA_DEV_SIGNER_H
#define HSMCA_DEV_SIGNER_H

#include "hsmca_err.h"

/* The signer.user that `hsmca dev` writes into DIR/hsmca.yaml. */
#define DEV_SIGNER_USER "hsmca-signer"

/* As root: creates the system user DEV_SIGNER_USER (useradd --system, its own
 * group, no home, no login shell) when it does not exist, and sets *created.
 * As any other user: nothing (the signer keeps that user's uid). */
HSMCA_MUSTCHECK hsmca_code dev_signer_user_ensure(int *created, hsmca_err *e);

/* As root: gives DEV_SIGNER_USER what SoftHSM re-reads after the signer has
 * switched to it: DIR/tokens (chown -R), DIR/softhsm2.conf (root:group 0640) and
 * search access to DIR (root:group 0710). The PIN files stay root's, 0600: the
 * signer reads them before the switch. Then checks, as that user, that it can
 * reach them (a parent directory such as /root may not let it). As any other
 * user: nothing. */
HSMCA_MUSTCHECK hsmca_code dev_signer_grant(const char *dir, hsmca_err *e);

/* DIR/crl (crl.path's directory in the dev config), mode 0755: the signer writes the CRL
 * there after its switch, so as root it is DEV_SIGNER_USER's; otherwise the caller's. */
HSMCA_MUSTCHECK hsmca_code dev_signer_crl_dir(const char *dir, hsmca_err *e);

#endif

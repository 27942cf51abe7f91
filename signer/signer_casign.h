/* signer_casign.h - the CA profile's own signatures (an istiod intermediate, a CRL) on a
 * thread of their own, never on the main loop (see signer_casign.c). Private to signer/. */
#ifndef HSMCA_SIGNER_CASIGN_H
#define HSMCA_SIGNER_CASIGN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "hsmca_err.h"

typedef struct signer_caops signer_caops;

/* What an admin op returns for "answered later": its connection waits, unread, until the
 * signature's completion sets ca->ca_reply (json_true() is a singleton no op returns
 * otherwise). */
#define SIGNER_REPLY_LATER json_true()

/* Run on the main loop when the signature is back (why->code HSMCA_OK: sig and sig_len
 * hold it, not yet verified), failed (why says how) or overdue (HSMCA_EUNAVAIL, sig NULL);
 * at a stop, with the signer stopping. Owns arg. Returns the reply for the admin caller
 * that waits for it, or NULL when none does. */
typedef json_t *(*signer_casign_done)(signer_caops *ca, void *arg, const uint8_t *sig,
                                      size_t sig_len, const hsmca_err *why);

/* The thread (fatal when it cannot start). */
void signer_casign_init(signer_caops *ca);

/* Refusals up front: HSMCA_EUNAVAIL when the CA key's token is reconnecting or the
 * previous CA signature has not returned; HSMCA_EPERM when the CA profile is closed. */
HSMCA_MUSTCHECK hsmca_code signer_casign_ready(signer_caops *ca, hsmca_err *e);

/* Closes the CA profile: the log breaks a CA-profile rule (intermediates, CRLs) at seq,
 * why says which. From then on CA signatures and intermediate and revocation steps are
 * refused naming it; workloads are still signed. */
void signer_ca_close(signer_caops *ca, uint64_t seq, const char *why);

/* HSMCA_OK while the CA profile is open, else HSMCA_EPERM naming the broken rule. */
HSMCA_MUSTCHECK hsmca_code signer_ca_open(signer_caops *ca, hsmca_err *e);

/* 1 when the CA profile is closed, *seq the log's entry that closed it; else 0. */
int signer_ca_closed(const signer_caops *ca, uint64_t *seq);

/* 1 while a CA signature is out (a hung one included). */
int signer_casign_busy(signer_caops *ca);

/* Hands the digest md to the thread; done(arg) runs on the main loop once it is signed,
 * failed or overdue. On a refusal arg stays the caller's. */
HSMCA_MUSTCHECK hsmca_code signer_casign_start(signer_caops *ca, const uint8_t *md, size_t md_len,
                                               signer_casign_done done, void *arg,
                                               hsmca_err *e);

/* The main loop's look (every pass): a returned signature's completion, or an overdue
 * one's (past pkcs11.sign_timeout); the waiting admin caller's reply goes to ca->ca_reply. */
void signer_casign_poll(signer_caops *ca);

/* At a stop: the thread joined within timeout_s (0 when it hangs in the token: the
 * caller leaves the token to the process's exit). */
int signer_casign_stop(signer_caops *ca, int timeout_s);

/* After signer_casign_stop, with the audit log still open: a signature still pending gets
 * its completion (not signed: the signer is stopping); everything freed. */
void signer_casign_free(signer_caops *ca);

#endif

/* signer_caops.c - the CA profile's context made and freed (see signer_caops.h). */
#include "signer_caops.h"
#include "signer_crl.h"

#include <stdlib.h>

#include "audit_ica.h"

signer_caops *signer_caops_new(void)
{
    signer_caops *ca = calloc(1, sizeof(*ca));
    if (!ca)
        return NULL;
    pthread_mutex_init(&ca->rev_lock, NULL); /* the revocations the log holds (signer_revoke.h) */
    ca->admin_uid = -1;
    return ca;
}

void signer_caops_free(signer_caops *ca)
{
    if (!ca)
        return;
    audit_ica_free(ca->ica);
    signer_crl_free(ca);
    free(ca->ica_ca_pem);
    free(ca->ica_chain_pem);
    free(ca->ica_roots_pem);
    pthread_mutex_destroy(&ca->rev_lock);
    free(ca);
}

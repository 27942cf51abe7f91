/* fe_ready_signer.c - see fe_ready_signer.h. */
#include "fe_ready_signer.h"

int fe_ready_signer(const fe_app *app, int connected, mbuf *b)
{
    (void)app;
    (void)b;
    return connected;
}

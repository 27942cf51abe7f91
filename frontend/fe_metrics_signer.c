/* fe_metrics_signer.c - see fe_metrics_signer.h. */
#include "fe_metrics_signer.h"

void fe_metrics_signer_render(mbuf *b, const fe_app *app)
{
    (void)b;
    (void)app;
}

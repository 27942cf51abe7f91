/* fe_tlsmem.c - see fe_tlsmem.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fe_tlsmem.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

#include <openssl/ssl.h>

typedef SSL *(*ssl_new_fn)(SSL_CTX *);

static _Atomic(ssl_new_fn) real_ssl_new;
static atomic_ulong made;

int fe_tlsmem_init(void)
{
    /* RTLD_NEXT: the next definition after this executable's, libssl's. */
    ssl_new_fn f = (ssl_new_fn)(void (*)(void))dlsym(RTLD_NEXT, "SSL_new");
    atomic_store(&real_ssl_new, f);
    return f ? 0 : -1;
}

unsigned long fe_tlsmem_count(void)
{
    return atomic_load(&made);
}

/* Every SSL_new in the process comes here: gRPC's server handshaker (and the
 * client's in `hsmca request`). Same contract as libssl's. */
SSL *SSL_new(SSL_CTX *ctx)
{
    ssl_new_fn f = atomic_load(&real_ssl_new);
    if (!f && fe_tlsmem_init() != 0)
        return NULL;
    SSL *s = atomic_load(&real_ssl_new)(ctx);
    if (s) {
        SSL_set_mode(s, SSL_MODE_RELEASE_BUFFERS);
        atomic_fetch_add(&made, 1);
    }
    return s;
}

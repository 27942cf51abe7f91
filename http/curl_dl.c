/* curl_dl.c - see curl_dl.h. */
#include "curl_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The first size a growing body gets; it doubles from there, up to its max. */
#define CURL_DL_BODY_FIRST 16384

static curl_dl_api table;
static _Atomic(const curl_dl_api *) ready; /* &table once the table is complete */
static hsmca_err load_err;                 /* why the one load failed */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void *sym(void *lib, const char *name, int *missing)
{
    void *p = dlsym(lib, name);
    *missing |= p == NULL;
    return p;
}

/* The handle stays open for the life of the process: the table points into it. */
static void load(void)
{
    void *lib = dlopen(CURL_DL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        hsmca_fail(&load_err, HSMCA_EINVAL, "needs %s: %s", CURL_DL_LIBRARY, dlerror());
        return;
    }
    int missing = 0;
    *(void **)&table.global_init = sym(lib, "curl_global_init", &missing);
    *(void **)&table.easy_init = sym(lib, "curl_easy_init", &missing);
    *(void **)&table.easy_reset = sym(lib, "curl_easy_reset", &missing);
    *(void **)&table.easy_setopt = sym(lib, "curl_easy_setopt", &missing);
    *(void **)&table.easy_perform = sym(lib, "curl_easy_perform", &missing);
    *(void **)&table.easy_getinfo = sym(lib, "curl_easy_getinfo", &missing);
    *(void **)&table.easy_cleanup = sym(lib, "curl_easy_cleanup", &missing);
    *(void **)&table.easy_strerror = sym(lib, "curl_easy_strerror", &missing);
    *(void **)&table.slist_append = sym(lib, "curl_slist_append", &missing);
    *(void **)&table.slist_free_all = sym(lib, "curl_slist_free_all", &missing);
    if (missing || table.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        hsmca_fail(&load_err, HSMCA_EINVAL, "cannot initialise %s", CURL_DL_LIBRARY);
        return;
    }
    atomic_store_explicit(&ready, &table, memory_order_release);
}

hsmca_code curl_dl_load(hsmca_err *e)
{
    pthread_once(&load_once, load);
    if (curl_dl())
        return HSMCA_OK;
    return hsmca_fail(e, load_err.code, "%s", load_err.msg);
}

const curl_dl_api *curl_dl(void)
{
    return atomic_load_explicit(&ready, memory_order_acquire);
}

curl_socket_t curl_dl_open_cloexec(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

size_t curl_dl_body_write(char *p, size_t size, size_t n, void *arg)
{
    curl_dl_body *b = arg;
    size_t add = size * n; /* libcurl passes size 1: no overflow */
    if (add > b->max - b->len) {
        b->too_big = 1;
        return 0; /* aborts the transfer */
    }
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : CURL_DL_BODY_FIRST;
        while (cap < b->len + add + 1)
            cap *= 2;
        if (cap > b->max + 1)
            cap = b->max + 1;
        char *nb = realloc(b->buf, cap);
        if (!nb) {
            b->no_mem = 1;
            return 0;
        }
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, p, add);
    b->len += add;
    b->buf[b->len] = '\0';
    return add;
}

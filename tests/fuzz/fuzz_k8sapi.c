/* fuzz_k8sapi.c - libFuzzer target for the Kubernetes API answers publish-roots reads
 * (k8s/k8s.h, publish/k8s_publish.h): the Lease (k8s_lease_step, k8s_lease_release),
 * the namespace list with its pages (kp_namespaces), the ConfigMap (kp_put_configmap)
 * and the ClusterTrustBundle (kp_put_ctb), each through the real k8s_call.
 *
 * Only the transport is replaced: the build links this target with
 * -Wl,--wrap=curl_dl_load,--wrap=curl_dl, so k8s_call's libcurl table is the one
 * below, whose easy_perform hands the next answer of the input to k8s_call's own
 * write callback (in two pieces) and reports its HTTP status. The input is a sequence
 * of answers, each a 2-byte big-endian HTTP status (0: no answer, a transport
 * failure), a 2-byte big-endian length and that many body bytes; once they run out,
 * every call fails as an unreachable server would. The calls, in order: two Lease
 * rounds, the namespace list, the root ConfigMap in up to four of the namespaces
 * listed, the ClusterTrustBundle, the Lease's release.
 *
 * Checked on every request the code sends: a write's body is a JSON object that puts
 * exactly our roots in the ConfigMap (data[root-cert.pem]) or the ClusterTrustBundle
 * (spec.trustBundle, spec.signerName), or our identity (or "", releasing) as the
 * Lease's holder; a write reported done was answered 200 or 201; a listed namespace
 * name is a string that is not empty; a failure names its check. */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "curl_dl.h"
#include "k8s_publish.h"
#include "log.h"

#define FUZZ_ID "publish-roots-0"
/* Our roots: a real CA certificate (an API server that checks a ClusterTrustBundle
 * accepts it), the one seeds_k8s.py reads from here. */
#define FUZZ_ROOTS \
    "-----BEGIN CERTIFICATE-----\n" \
    "MIIBqTCCAU+gAwIBAgIUfH1AHFEjO0l3R3EntA1ZxF/R8aIwCgYIKoZIzj0EAwIw\n" \
    "KjEOMAwGA1UECgwFaHNtY2ExGDAWBgNVBAMMD2hzbWNhIGZ1enogcm9vdDAeFw0y\n" \
    "NjExMjgyMDM5MzNaFw0zNjExMjUyMDM5MzNaMCoxDjAMBgNVBAoMBWhzbWNhMRgw\n" \
    "FgYDVQQDDA9oc21jYSBmdXp6IHJvb3QwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC\n" \
    "AAQrz1eAcENRC+40q2Qh8bIv3CTqxXtqtK0ueuhnap5eyjRvbUdkjLY5/1fTbiwk\n" \
    "vzQZ0gtnpZZVyc3SrS4LLPyjo1MwUTAdBgNVHQ4EFgQU+NBA5MZ6giHc3/HHh360\n" \
    "DRtPd5swHwYDVR0jBBgwFoAU+NBA5MZ6giHc3/HHh360DRtPd5swDwYDVR0TAQH/\n" \
    "BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiABXWQToqfBOWpcWcMQ9kFuCowTCI4E\n" \
    "IDjteit5mHYoCwIhAKRxEB9xtvTR/7aqF4+k1Rb62GWfGRQYAih5EghJr33H\n" \
    "-----END CERTIFICATE-----\n"

/* The answers left, and the request being made. */
static const uint8_t *in;
static size_t in_left;
static struct {
    char url[4096];
    char method[8];
    const char *body;
    curl_write_callback write_fn;
    void *write_data;
    char *errbuf;
    long status;
    int is_write; /* the last request sent a body */
} req;

static CURL *f_easy_init(void)
{
    return (CURL *)&req;
}

static void f_easy_reset(CURL *c)
{
    (void)c;
    memset(&req, 0, sizeof(req));
}

static CURLcode f_easy_setopt(CURL *c, CURLoption opt, ...)
{
    (void)c;
    va_list ap;
    va_start(ap, opt);
    if (opt == CURLOPT_URL)
        snprintf(req.url, sizeof(req.url), "%s", va_arg(ap, const char *));
    else if (opt == CURLOPT_CUSTOMREQUEST)
        snprintf(req.method, sizeof(req.method), "%s", va_arg(ap, const char *));
    else if (opt == CURLOPT_POSTFIELDS)
        req.body = va_arg(ap, const char *);
    else if (opt == CURLOPT_WRITEFUNCTION)
        req.write_fn = va_arg(ap, curl_write_callback);
    else if (opt == CURLOPT_WRITEDATA)
        req.write_data = va_arg(ap, void *);
    else if (opt == CURLOPT_ERRORBUFFER)
        req.errbuf = va_arg(ap, char *);
    va_end(ap);
    return CURLE_OK;
}

static const char *str_at(json_t *o, const char *k1, const char *k2)
{
    return json_string_value(json_object_get(json_object_get(o, k1), k2));
}

/* What a write may carry (see the top of the file). */
static void check_write(const char *url, const char *body)
{
    json_t *o = json_loads(body, 0, NULL);
    if (!json_is_object(o))
        abort(); /* a write sends one JSON object */
    const char *v;
    if (strstr(url, "/configmaps")) {
        if (!(v = str_at(o, "data", KP_ROOT_KEY)) || strcmp(v, FUZZ_ROOTS) != 0)
            abort(); /* the ConfigMap gets our roots, whatever the read one held */
    } else if (strstr(url, "/clustertrustbundles")) {
        if (!(v = str_at(o, "spec", "trustBundle")) || strcmp(v, FUZZ_ROOTS) != 0 ||
            !(v = str_at(o, "spec", "signerName")) || strcmp(v, KP_CTB_SIGNER) != 0)
            abort();
    } else if (strstr(url, "/leases")) {
        if (!(v = str_at(o, "spec", "holderIdentity")) || (strcmp(v, FUZZ_ID) && v[0]))
            abort(); /* we take the Lease for ourselves, or give it up */
    } else {
        abort(); /* nothing else is ever written */
    }
    json_decref(o);
}

static unsigned take(size_t n)
{
    unsigned v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | in[i];
    in += n;
    in_left -= n;
    return v;
}

static CURLcode f_easy_perform(CURL *c)
{
    (void)c;
    req.is_write = req.body != NULL;
    if (req.body)
        check_write(req.url, req.body);
    if (in_left < 4 || !req.write_fn) {
        in_left = 0;
        snprintf(req.errbuf, CURL_ERROR_SIZE, "fuzz: no answer left");
        return CURLE_COULDNT_CONNECT;
    }
    unsigned status = take(2), len = take(2);
    if (len > in_left)
        len = (unsigned)in_left;
    const uint8_t *body = in;
    in += len, in_left -= len;
    if (status == 0) {
        snprintf(req.errbuf, CURL_ERROR_SIZE, "fuzz: connection reset");
        return CURLE_RECV_ERROR;
    }
    req.status = (long)status;
    /* Two pieces, as a body arrives over TLS: the callback appends. A private copy each,
     * so a read past a piece is ASan's to see. */
    size_t half = len / 2, pieces[2] = {half, len - half};
    for (int i = 0; i < 2; i++) {
        if (!pieces[i])
            continue;
        char *p = malloc(pieces[i]);
        if (!p)
            abort();
        memcpy(p, body, pieces[i]);
        size_t took = req.write_fn(p, 1, pieces[i], req.write_data);
        free(p);
        body += pieces[i];
        if (took != pieces[i])
            return CURLE_WRITE_ERROR;
    }
    return CURLE_OK;
}

static CURLcode f_easy_getinfo(CURL *c, CURLINFO info, ...)
{
    (void)c;
    va_list ap;
    va_start(ap, info);
    if (info == CURLINFO_RESPONSE_CODE)
        *va_arg(ap, long *) = req.status;
    va_end(ap);
    return CURLE_OK;
}

static void f_easy_cleanup(CURL *c)
{
    (void)c;
}

static const char *f_easy_strerror(CURLcode cc)
{
    (void)cc;
    return "fuzz: transport error";
}

static struct curl_slist *f_slist_append(struct curl_slist *l, const char *s)
{
    struct curl_slist *n = calloc(1, sizeof(*n));
    if (!n || !(n->data = strdup(s))) {
        free(n);
        return NULL;
    }
    if (!l)
        return n;
    struct curl_slist *t = l;
    while (t->next)
        t = t->next;
    t->next = n;
    return l;
}

static void f_slist_free_all(struct curl_slist *l)
{
    while (l) {
        struct curl_slist *n = l->next;
        free(l->data);
        free(l);
        l = n;
    }
}

static const curl_dl_api fake = {NULL,           f_easy_init,     f_easy_reset,
                                 f_easy_setopt,  f_easy_perform,  f_easy_getinfo,
                                 f_easy_cleanup, f_easy_strerror, f_slist_append,
                                 f_slist_free_all};

hsmca_code __wrap_curl_dl_load(hsmca_err *e);
const curl_dl_api *__wrap_curl_dl(void);

hsmca_code __wrap_curl_dl_load(hsmca_err *e)
{
    (void)e;
    return HSMCA_OK;
}

const curl_dl_api *__wrap_curl_dl(void)
{
    return &fake;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    log_set_level(LOG_LVL_ERROR);
    return 0;
}

static void check_wrote(hsmca_code rc, int wrote, const hsmca_err *e)
{
    if (rc != HSMCA_OK && (e->msg[0] == '\0' || wrote))
        abort(); /* a failure names its check, and reports no write */
    if (wrote && !(req.is_write && (req.status == 200 || req.status == 201)))
        abort(); /* a write is done when the API server said so */
}

static void publish(k8s_client *a)
{
    char **names = NULL;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = kp_namespaces(a, "istio-injection=enabled,!hsmca.io/skip", &names, &e);
    if (rc != HSMCA_OK ? (!e.msg[0] || names != NULL) : names == NULL)
        abort();
    for (size_t i = 0; names && names[i]; i++) {
        if (!names[i][0])
            abort(); /* a namespace is named */
        if (i >= 4)
            continue;
        int wrote = 0;
        hsmca_err_clear(&e);
        rc = kp_put_configmap(a, names[i], KP_ROOT_CM, KP_ROOT_KEY, FUZZ_ROOTS, &wrote, &e);
        check_wrote(rc, wrote, &e);
    }
    kp_names_free(names);
    kp_roots r = {.pem = FUZZ_ROOTS, .ctb_problem = ""};
    int wrote = 0;
    hsmca_err_clear(&e);
    rc = kp_put_ctb(a, &r, &wrote, &e);
    check_wrote(rc, wrote, &e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in = data;
    in_left = size;
    k8s_target t = {.server = "https://10.96.0.1:443", .ca_pem = "ca", .ca_len = 2};
    k8s_client *a = NULL;
    hsmca_err e;
    if (k8s_client_new(&t, 5, "fuzz", &a, &e) != HSMCA_OK)
        abort();
    k8s_lease l = {.ns = "hsmca-system", .name = "hsmca-publish-roots", .identity = FUZZ_ID,
                  .duration = 15};
    double now = 1000.0;
    for (int round = 0; round < 2; round++, now += 20.0) {
        int held = k8s_lease_step(a, &l, now);
        if (held != l.held || (held && !k8s_lease_valid(&l, now)))
            abort(); /* held right after a renewal means writes are allowed */
    }
    publish(a);
    k8s_lease_release(a, &l);
    if (l.held)
        abort(); /* released, whatever the answers said */
    k8s_client_free(a);
    return 0;
}

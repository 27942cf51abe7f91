/* audit_ica_renew.c - see audit_ica_renew.h. Clusters and revoked keys are few (at most
 * one each per request of the log): arrays searched in order. */
#include "audit_ica_renew.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "util.h"

typedef struct {
    char cluster[AUDIT_CLUSTER_MAX + 1];
    uint64_t current; /* its newest issued request */
    int stopped;      /* current was revoked; no request issued with approvals since */
} renew_cluster;

struct audit_ica_renew {
    renew_cluster *c;
    size_t nc, capc;
    char (*keys)[65]; /* key_sha256 of revoked intermediates */
    size_t nk, capk;
};

hsmca_code audit_ica_renew_new(audit_ica_renew **out, hsmca_err *e)
{
    *out = calloc(1, sizeof(**out));
    HSMCA_ENSURE(*out, e, HSMCA_ENOMEM, "out of memory");
    return HSMCA_OK;
}

void audit_ica_renew_free(audit_ica_renew *s)
{
    if (!s)
        return;
    free(s->c);
    free(s->keys);
    free(s);
}

static renew_cluster *cluster_of(const audit_ica_renew *s, const char *cluster)
{
    for (size_t i = 0; s && i < s->nc; i++)
        if (strcmp(s->c[i].cluster, cluster) == 0)
            return &s->c[i];
    return NULL;
}

int audit_ica_renew_current(const audit_ica_renew *s, const char *cluster, uint64_t *id)
{
    const renew_cluster *c = cluster_of(s, cluster);
    if (c)
        *id = c->current;
    return c != NULL;
}

static int key_revoked(const audit_ica_renew *s, const char *key_sha256)
{
    for (size_t i = 0; s && i < s->nk; i++)
        if (strcmp(s->keys[i], key_sha256) == 0)
            return 1;
    return 0;
}

/* Room for one more element of size sz in *v (n used of *cap). */
static HSMCA_MUSTCHECK hsmca_code grow(void **v, size_t n, size_t *cap, size_t sz, hsmca_err *e)
{
    if (n < *cap)
        return HSMCA_OK;
    size_t ncap = *cap ? 2 * *cap : 8;
    void *nv = realloc(*v, ncap * sz);
    HSMCA_ENSURE(nv, e, HSMCA_ENOMEM, "out of memory");
    *v = nv;
    *cap = ncap;
    return HSMCA_OK;
}

hsmca_code audit_ica_renew_issued(audit_ica_renew *s, const audit_ica_req *r, hsmca_err *e)
{
    renew_cluster *c = cluster_of(s, r->cluster);
    if (!c) {
        HSMCA_GUARD(grow((void **)&s->c, s->nc, &s->capc, sizeof(*s->c), e));
        c = &s->c[s->nc++];
        memset(c, 0, sizeof(*c));
        snprintf(c->cluster, sizeof(c->cluster), "%s", r->cluster);
    }
    c->current = r->id;
    if (!r->auto_renews)
        c->stopped = 0;
    return HSMCA_OK;
}

hsmca_code audit_ica_renew_revoked(audit_ica_renew *s, const audit_ica_req *r, hsmca_err *e)
{
    renew_cluster *c = cluster_of(s, r->cluster);
    if (c && c->current == r->id)
        c->stopped = 1;
    if (key_revoked(s, r->key_sha256))
        return HSMCA_OK;
    HSMCA_GUARD(grow((void **)&s->keys, s->nk, &s->capk, sizeof(*s->keys), e));
    memcpy(s->keys[s->nk++], r->key_sha256, 65);
    return HSMCA_OK;
}

uint8_t *audit_ica_renew_message(const char *origin, uint64_t id, const char *cluster,
                                 const uint8_t *csr_der, size_t len, size_t *out_len)
{
    static const char tag[] = "hsmca intermediate renewal v2";
    char num[24];
    snprintf(num, sizeof(num), "%llu", (unsigned long long)id);
    size_t ol = strlen(origin) + 1, nl = strlen(num) + 1, cl = strlen(cluster) + 1;
    size_t n = sizeof(tag) + ol + nl + cl + len;
    uint8_t *m = malloc(n);
    if (!m)
        return NULL;
    uint8_t *p = m;
    memcpy(p, tag, sizeof(tag)); /* each part with its NUL */
    memcpy(p += sizeof(tag), origin, ol);
    memcpy(p += ol, num, nl);
    memcpy(p += nl, cluster, cl);
    memcpy(p + cl, csr_der, len);
    *out_len = n;
    return m;
}

int audit_ica_renew_verify(const audit_ica_req *p, const uint8_t *msg, size_t len,
                           const uint8_t *proof, size_t plen)
{
    size_t cn = 0;
    uint8_t *cder = util_b64_decode(p->cert_b64, strlen(p->cert_b64), &cn);
    const unsigned char *cp = cder;
    X509 *x = cder ? d2i_X509(NULL, &cp, (long)cn) : NULL;
    EVP_PKEY *key = x ? X509_get0_pubkey(x) : NULL;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = key && msg && ctx && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
             EVP_DigestVerify(ctx, proof, plen, msg, len) == 1;
    EVP_MD_CTX_free(ctx);
    X509_free(x);
    free(cder);
    return ok;
}

/* Whether proof verifies under the key of p's certificate over r's renewal message. */
static int proof_ok(const audit_ica_req *p, const audit_ica_req *r, const char *origin,
                    const uint8_t *proof, size_t plen)
{
    size_t qn = 0, mn = 0;
    uint8_t *qder = util_b64_decode(r->csr_b64, strlen(r->csr_b64), &qn);
    uint8_t *msg = qder ? audit_ica_renew_message(origin, r->id, r->cluster, qder, qn, &mn) : NULL;
    int ok = msg && audit_ica_renew_verify(p, msg, mn, proof, plen);
    free(msg);
    free(qder);
    return ok;
}

/* Whether p, the current intermediate of r's cluster, may renew: issued, not revoked, not
 * expired at now, its cluster not stopped, its key not revoked; 0 with e. */
static int renewable(const audit_ica_renew *s, const audit_ica_req *r, const audit_ica_req *p,
                     int64_t now, hsmca_err *e)
{
    const renew_cluster *c = cluster_of(s, r->cluster);
    unsigned long long id = (unsigned long long)r->id;
    if (p && (!c || c->current != p->id)) {
        hsmca_fail(e, HSMCA_EPERM, "intermediate request %llu: request %llu is not the current "
                   "intermediate of cluster %s", id, (unsigned long long)p->id, r->cluster);
    } else if (!p || !p->cert_b64) {
        hsmca_fail(e, HSMCA_EPERM, "intermediate request %llu: cluster %s has no issued "
                   "intermediate to renew", id, r->cluster);
    } else if (c->stopped || p->revoked) {
        hsmca_fail(e, HSMCA_EPERM, "intermediate request %llu: auto-renewal of cluster %s "
                   "stopped when its current intermediate (request %llu) was revoked; a "
                   "request issued with its approvals starts it again", id, r->cluster,
                   (unsigned long long)p->id);
    } else if (now >= p->not_after) {
        hsmca_fail(e, HSMCA_EPERM, "intermediate request %llu: the current intermediate of "
                   "cluster %s (request %llu) has expired", id, r->cluster,
                   (unsigned long long)p->id);
    } else if (key_revoked(s, p->key_sha256)) {
        hsmca_fail(e, HSMCA_EPERM, "intermediate request %llu: the key of cluster %s's current "
                   "intermediate (request %llu) is a revoked intermediate's key: a revoked "
                   "key renews nothing", id, r->cluster, (unsigned long long)p->id);
    } else {
        return 1;
    }
    return 0;
}

hsmca_code audit_ica_renew_check(const audit_ica_renew *s, const audit_ica_req *r,
                                 const audit_ica_req *p, const char *origin, const uint8_t *proof,
                                 size_t plen, int64_t now, hsmca_err *e)
{
    uint64_t id = r->id;
    HSMCA_ENSURE(audit_ica_state_of(r, now) == ICA_PENDING, e, HSMCA_EPERM,
                 "an auto-approval of intermediate request %llu, which is %s, not pending",
                 (unsigned long long)id, audit_ica_state_name(audit_ica_state_of(r, now)));
    hsmca_err why;
    hsmca_err_clear(&why);
    if (!renewable(s, r, p, now, &why))
        return hsmca_fail(e, HSMCA_EPERM, "%s", why.msg);
    HSMCA_ENSURE(!key_revoked(s, r->key_sha256), e, HSMCA_EPERM,
                 "intermediate request %llu: its key is a revoked intermediate's key: a revoked "
                 "key renews nothing",
                 (unsigned long long)id);
    HSMCA_ENSURE(plen > 0, e, HSMCA_EPERM,
                 "intermediate request %llu: no proof of possession (a renewal is signed by the "
                 "current intermediate's key: --renew-with-key)",
                 (unsigned long long)id);
    HSMCA_ENSURE(origin && origin[0] && proof_ok(p, r, origin, proof, plen), e, HSMCA_EPERM,
                 "intermediate request %llu: its renewal proof does not verify under the key of "
                 "request %llu's certificate (cluster %s's current intermediate) for this "
                 "request of log %s",
                 (unsigned long long)id, (unsigned long long)p->id, r->cluster,
                 origin ? origin : "");
    return HSMCA_OK;
}

/* fe_trcache.h - the TokenReview authenticator's cache of positive answers
 * (fe_tokenreview.h): keyed by SHA-256 of the token (the token itself is never
 * kept), each entry valid until the earlier of the token's exp and the
 * configured TTL, at most a configured number of entries. Thread-safe. */
#ifndef HSMCA_FE_TRCACHE_H
#define HSMCA_FE_TRCACHE_H

#include <stddef.h>
#include <stdint.h>

/* Who a TokenReview said the caller is. */
typedef struct {
    char ns[64];        /* namespace: a DNS-1123 label */
    char sa[254];       /* service account: a DNS-1123 subdomain */
    char pod_name[254]; /* extra authentication.kubernetes.io/pod-name, "" when absent */
    char pod_uid[64];   /* extra authentication.kubernetes.io/pod-uid, "" when absent */
} fe_tr_identity;

typedef struct fe_trcache fe_trcache;

/* A cache of at most max_entries (0: a cache that never holds anything). NULL
 * when out of memory. */
fe_trcache *fe_trcache_new(uint32_t max_entries);
void fe_trcache_free(fe_trcache *c);

/* 1 and *id when key is cached and now < its expiry; 0 otherwise (an expired
 * entry is dropped). */
int fe_trcache_get(fe_trcache *c, const uint8_t key[32], int64_t now, fe_tr_identity *id);

/* Caches id under key until expires (Unix seconds; nothing when <= now). When
 * full, the expired entries go first, else the one that expires soonest. */
void fe_trcache_put(fe_trcache *c, const uint8_t key[32], int64_t now, int64_t expires,
                    const fe_tr_identity *id);

/* Entries held (tests). */
size_t fe_trcache_size(fe_trcache *c);

#endif

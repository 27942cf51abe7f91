/* fe_keys.c - see fe_keys.h.
 *
 * A reader-writer lock rather than reference counts: a verification is short
 * (one signature check) and readers never block each other; a swap waits for
 * the readers of the old set, which is then freed with nobody holding it.
 * Writer preference, so a stream of calls cannot hold a new set back. */
#include "fe_keys.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fe_jwks.h"
#include "fe_jwt_cache.h"

struct fe_keys {
    pthread_rwlock_t lock;
    fe_jwks *cur; /* NULL until the first push */
    uint64_t generation;
    fe_jwt_cache *verified; /* tokens that verified against cur; cleared at each swap */
};

fe_keys *fe_keys_new(void)
{
    fe_keys *k = calloc(1, sizeof(*k));
    hsmca_err e;
    if (!k ||
        fe_jwt_cache_new(FE_JWT_CACHE_ENTRIES, FE_JWT_CACHE_CAP, &k->verified, &e) != HSMCA_OK) {
        free(k);
        return NULL;
    }
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&k->lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    return k;
}

void fe_keys_set(fe_keys *k, fe_jwks *ks)
{
    pthread_rwlock_wrlock(&k->lock);
    fe_jwks *old = k->cur;
    k->cur = ks;
    k->generation++;
    fe_jwt_cache_clear(k->verified); /* what verified against old must verify again */
    pthread_rwlock_unlock(&k->lock);
    fe_jwks_free(old); /* no reader can hold it: they all came and went under the lock */
}

uint64_t fe_keys_generation(fe_keys *k)
{
    pthread_rwlock_rdlock(&k->lock);
    uint64_t g = k->generation;
    pthread_rwlock_unlock(&k->lock);
    return g;
}

hsmca_code fe_keys_load_fd(fe_keys *k, int fd, hsmca_err *e)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return hsmca_fail(e, HSMCA_EINVAL, "keys push: not a memory file");
    if (st.st_size <= 0 || st.st_size > FE_JWKS_MAX_LEN)
        return hsmca_fail(e, HSMCA_EINVAL, "keys push: %lld bytes, not 1-%d", (long long)st.st_size,
                          FE_JWKS_MAX_LEN);
    /* Without these seals the sender could change the bytes between our read and
     * our parse, or shrink the file under a read (SIGBUS for a mapping). */
    int seals = fcntl(fd, F_GET_SEALS);
    int want = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
    if (seals < 0 || (seals & want) != want)
        return hsmca_fail(e, HSMCA_EINVAL, "keys push: the memfd is not sealed");
    size_t len = (size_t)st.st_size, got = 0;
    char *buf = malloc(len);
    if (!buf)
        return hsmca_fail(e, HSMCA_ENOMEM, "keys push: out of memory");
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)got);
        if (r <= 0) {
            free(buf);
            return hsmca_fail(e, HSMCA_EIO, "keys push: short read");
        }
        got += (size_t)r;
    }
    fe_jwks *ks = NULL;
    hsmca_code rc = fe_jwks_parse(buf, len, &ks, e);
    free(buf);
    if (rc != HSMCA_OK)
        return rc;
    fe_keys_set(k, ks);
    return HSMCA_OK;
}

hsmca_code fe_keys_verify(fe_keys *k, const fe_jwt_rules *rules, const char *token, size_t len,
                          int64_t now, fe_jwt_identity *id, int *unknown_kid, hsmca_err *e)
{
    *unknown_kid = 0;
    pthread_rwlock_rdlock(&k->lock);
    hsmca_code rc;
    if (!k->cur)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "JWT issuer keys not loaded yet");
    else if (fe_jwt_cache_get(k->verified, k->cur, token, len, now, id))
        rc = HSMCA_OK; /* these bytes verified against this set, within their exp */
    else if ((rc = fe_jwt_verify_kid(k->cur, rules, token, len, now, id, unknown_kid, e)) ==
             HSMCA_OK)
        fe_jwt_cache_record(k->verified, k->cur, token, len, now, id);
    pthread_rwlock_unlock(&k->lock);
    return rc;
}

void fe_keys_free(fe_keys *k)
{
    if (!k)
        return;
    fe_jwks_free(k->cur);
    fe_jwt_cache_free(k->verified);
    pthread_rwlock_destroy(&k->lock);
    free(k);
}

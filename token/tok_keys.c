/* tok_keys.c - see tok_keys.h.
 *
 * A reader-writer lock rather than reference counts: a verification is short
 * (one signature check) and readers never block each other; a swap waits for
 * the readers of the old set, which is then freed with nobody holding it.
 * Writer preference, so a stream of calls cannot hold a new set back. */
#include "tok_keys.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tok_jwks.h"
#include "tok_cache.h"

struct tok_keys {
    pthread_rwlock_t lock;
    tok_jwks *cur; /* NULL until the first push */
    uint64_t generation;
    tok_cache *verified; /* tokens that verified against cur; cleared at each swap */
};

tok_keys *tok_keys_new(void)
{
    tok_keys *k = calloc(1, sizeof(*k));
    hsmca_err e;
    if (!k ||
        tok_cache_new(TOK_CACHE_ENTRIES, TOK_CACHE_CAP, &k->verified, &e) != HSMCA_OK) {
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

void tok_keys_set(tok_keys *k, tok_jwks *ks)
{
    pthread_rwlock_wrlock(&k->lock);
    tok_jwks *old = k->cur;
    k->cur = ks;
    k->generation++;
    tok_cache_clear(k->verified); /* what verified against old must verify again */
    pthread_rwlock_unlock(&k->lock);
    tok_jwks_free(old); /* no reader can hold it: they all came and went under the lock */
}

uint64_t tok_keys_generation(tok_keys *k)
{
    pthread_rwlock_rdlock(&k->lock);
    uint64_t g = k->generation;
    pthread_rwlock_unlock(&k->lock);
    return g;
}

hsmca_code tok_keys_load_fd(tok_keys *k, int fd, hsmca_err *e)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return hsmca_fail(e, HSMCA_EINVAL, "keys push: not a memory file");
    if (st.st_size <= 0 || st.st_size > TOK_JWKS_MAX_LEN)
        return hsmca_fail(e, HSMCA_EINVAL, "keys push: %lld bytes, not 1-%d", (long long)st.st_size,
                          TOK_JWKS_MAX_LEN);
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
    tok_jwks *ks = NULL;
    hsmca_code rc = tok_jwks_parse(buf, len, &ks, e);
    free(buf);
    if (rc != HSMCA_OK)
        return rc;
    tok_keys_set(k, ks);
    return HSMCA_OK;
}

hsmca_code tok_keys_verify(tok_keys *k, const tok_jwt_rules *rules, const char *token, size_t len,
                          int64_t now, tok_jwt_identity *id, int *unknown_kid, hsmca_err *e)
{
    *unknown_kid = 0;
    pthread_rwlock_rdlock(&k->lock);
    hsmca_code rc;
    if (!k->cur)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "JWT issuer keys not loaded yet");
    else if (tok_cache_get(k->verified, k->cur, token, len, now, id))
        rc = HSMCA_OK; /* these bytes verified against this set, within their exp */
    else if ((rc = tok_jwt_verify_kid(k->cur, rules, token, len, now, id, unknown_kid, e)) ==
             HSMCA_OK)
        tok_cache_record(k->verified, k->cur, token, len, now, id);
    pthread_rwlock_unlock(&k->lock);
    return rc;
}

void tok_keys_free(tok_keys *k)
{
    if (!k)
        return;
    tok_jwks_free(k->cur);
    tok_cache_free(k->verified);
    pthread_rwlock_destroy(&k->lock);
    free(k);
}

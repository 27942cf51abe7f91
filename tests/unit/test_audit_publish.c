/* test_audit_publish.c - the checkpoint publisher (audit/audit_publish.h) over a real log
 * (audit_log.h) and a software Ed25519 key: tiles, bundles and checkpoints on disk equal what
 * audit/ computes from the leaves in memory at many sizes (0, 1, 255-257, 65535-65537 and
 * more); every checkpoint is kept; a restart resumes without a new checkpoint; a log changed,
 * cut short, or a checkpoint of another key or origin refuses the start naming why; tiles
 * missing or damaged (a crash between a tile's write and the checkpoint's) are repaired; the
 * thread checkpoints while lines arrive and a hung audit key never stops appends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit_log.h"
#include "audit_publish.h"
#include "audit_tiles.h"
#include "audit_tu.h"
#include "testutil.h"
#include "util.h"

#define ORIGIN "test.example/hsmca/cluster.local"

typedef struct {
    char *dir;
    EVP_PKEY *key;
    uint8_t pub[32];
    uint8_t key_type;             /* AUDIT_SIG_TYPE_ECDSA: key is a P-256 key, spki its SPKI */
    uint8_t spki[AUDIT_KEY_MAX];
    size_t spki_len;
    audit_log *log;
    audit_publish *p;
    uint64_t appended;
} fx;

static hsmca_code open_with(fx *f, const uint8_t *pub, const char *origin, audit_note_signer sign,
                            void *sign_ctx, hsmca_err *e)
{
    int ec = f->key_type == AUDIT_SIG_TYPE_ECDSA;
    audit_publish_cfg pc = {.dir = f->dir, .origin = origin, .key_type = f->key_type,
                            .pub = ec ? f->spki : pub, .pub_len = ec ? f->spki_len : 0,
                            .sign = sign, .sign_ctx = sign_ctx, .owner = (uid_t)-1,
                            .group = (gid_t)-1};
    hsmca_code rc = audit_publish_open(&pc, &f->p, e);
    if (rc == HSMCA_OK)
        rc = audit_log_open_ex(f->dir, (uid_t)-1, (gid_t)-1, NULL, NULL, audit_publish_replay_line,
                               f->p, &f->log, NULL, e);
    if (rc == HSMCA_OK)
        rc = audit_publish_attach(f->p, f->log, e);
    if (rc != HSMCA_OK) {
        audit_log_close(f->log);
        audit_publish_free(f->p);
        f->log = NULL;
        f->p = NULL;
    }
    return rc;
}

static hsmca_code open_fx(fx *f, hsmca_err *e)
{
    return open_with(f, f->pub, ORIGIN,
                     f->key_type == AUDIT_SIG_TYPE_ECDSA ? atu_ecdsa_sign : atu_ed25519_sign,
                     f->key, e);
}

static void close_fx(fx *f)
{
    assert_int_equal(audit_publish_stop(f->p, 5), 0);
    audit_publish_free(f->p);
    audit_log_close(f->log);
    f->p = NULL;
    f->log = NULL;
}

static void new_fx(fx *f, const char *name)
{
    memset(f, 0, sizeof(*f));
    f->dir = tu_mkdtemp(name);
    f->key = atu_ed25519_key(f->pub);
    hsmca_err e;
    assert_int_equal(open_fx(f, &e), HSMCA_OK);
}

static void free_fx(fx *f)
{
    if (f->p)
        close_fx(f);
    EVP_PKEY_free(f->key);
    tu_system("rm -rf '%s'", f->dir);
    free(f->dir);
}

/* n more entries of varied lengths, durable. */
static void append_n(fx *f, uint64_t n)
{
    static char reason[400];
    uint64_t seq = 0;
    for (uint64_t i = 0; i < n; i++, f->appended++) {
        size_t len = 1 + (size_t)(f->appended * 7919 % 300);
        memset(reason, 'a' + (int)(f->appended % 26), len);
        audit_entry a = {.kind = AUDIT_RECOVERY, .reason = {reason, len, 0}};
        hsmca_err e;
        assert_int_equal(audit_log_append(f->log, &a, &seq, &e), HSMCA_OK);
    }
    hsmca_err e;
    if (n)
        assert_int_equal(audit_log_sync_through(f->log, seq, &e), HSMCA_OK);
}

static uint8_t *read_rel(const fx *f, const char *rel, size_t *len)
{
    char path[4400];
    snprintf(path, sizeof(path), "%s/%s", f->dir, rel);
    char *buf = NULL;
    hsmca_err e;
    if (util_read_file(path, 64u << 20, &buf, len, &e) != HSMCA_OK)
        return NULL;
    return (uint8_t *)buf;
}

/* The log's lines in memory, for the expected tiles. */
typedef struct {
    uint8_t *raw;
    audit_bundle_entry *line;
    audit_hash *leaf;
    uint64_t n;
    atu_tree tree;
} lines;

static void load_lines(const fx *f, lines *l)
{
    size_t len;
    l->raw = read_rel(f, "log", &len);
    assert_non_null(l->raw);
    uint64_t cap = 1;
    for (size_t i = 0; i < len; i++)
        cap += l->raw[i] == '\n';
    l->line = calloc(cap, sizeof(*l->line));
    l->leaf = calloc(cap, sizeof(*l->leaf));
    l->n = 0;
    for (size_t at = 0; at < len;) {
        uint8_t *nl = memchr(l->raw + at, '\n', len - at);
        assert_non_null(nl);
        size_t n = (size_t)(nl - (l->raw + at));
        l->line[l->n] = (audit_bundle_entry){l->raw + at, n};
        assert_int_equal(audit_hash_leaf(l->raw + at, n, &l->leaf[l->n], NULL), HSMCA_OK);
        l->n++;
        at += n + 1;
    }
    atu_tree_build(&l->tree, l->leaf, l->n);
}

static void free_lines(lines *l)
{
    atu_tree_free(&l->tree);
    free(l->raw);
    free(l->line);
    free(l->leaf);
}

typedef struct {
    const fx *f;
    lines *l;
    unsigned tiles;
} check_ctx;

static hsmca_code check_tile(void *ctx, unsigned level, uint64_t index, unsigned width,
                             hsmca_err *e)
{
    check_ctx *c = ctx;
    static uint8_t want[AUDIT_TILE_BYTES];
    char rel[AUDIT_TILE_PATH_MAX];
    HSMCA_GUARD(audit_tile_build(level, index, width, atu_source, &c->l->tree, want, e));
    HSMCA_GUARD(audit_tile_path(level, index, width, rel, e));
    size_t len;
    uint8_t *got = read_rel(c->f, rel, &len);
    HSMCA_ENSURE(got && len == (size_t)width * 32 && memcmp(got, want, len) == 0, e,
                 HSMCA_EINTERNAL, "%s is missing or differs", rel);
    free(got);
    c->tiles++;
    if (level != 0)
        return HSMCA_OK;
    uint8_t *b;
    size_t blen;
    HSMCA_GUARD(audit_bundle_encode(c->l->line + index * 256, width, &b, &blen, e));
    HSMCA_GUARD(audit_bundle_path(index, width, rel, e));
    got = read_rel(c->f, rel, &len);
    int same = got && len == blen && memcmp(got, b, len) == 0;
    free(got);
    free(b);
    HSMCA_ENSURE(same, e, HSMCA_EINTERNAL, "%s is missing or differs", rel);
    return HSMCA_OK;
}

/* Everything a checkpoint of `size` publishes is on disk and right. */
static void check_published(const fx *f, uint64_t size)
{
    lines l;
    load_lines(f, &l);
    assert_true(l.n >= size);
    atu_tree_free(&l.tree);
    atu_tree_build(&l.tree, l.leaf, size);
    check_ctx c = {f, &l, 0};
    hsmca_err e;
    if (audit_tiles_new(0, size, check_tile, &c, &e) != HSMCA_OK)
        fail_msg("size %llu: %s", (unsigned long long)size, e.msg);
    size_t len, alen, vlen;
    uint8_t *note = read_rel(f, "checkpoint", &len);
    assert_non_null(note);
    audit_vkey vk;
    if (f->key_type == AUDIT_SIG_TYPE_ECDSA)
        assert_int_equal(audit_vkey_from_spki(ORIGIN, f->spki, f->spki_len, &vk, &e), HSMCA_OK);
    else
        assert_int_equal(audit_vkey_from_pub(ORIGIN, f->pub, &vk, &e), HSMCA_OK);
    audit_checkpoint cp;
    assert_int_equal(audit_checkpoint_open((char *)note, len, &vk, &cp, &e), HSMCA_OK);
    assert_int_equal(cp.size, size);
    audit_hash want;
    assert_int_equal(audit_root_from_source(size, atu_source, &l.tree, &want, &e), HSMCA_OK);
    assert_true(audit_hash_equal(&cp.root, &want));
    char rel[40];
    snprintf(rel, sizeof(rel), "checkpoints/%llu", (unsigned long long)size);
    uint8_t *arch = read_rel(f, rel, &alen);
    assert_non_null(arch);
    assert_int_equal(alen, len);
    assert_memory_equal(arch, note, len);
    char *vs;
    assert_int_equal(audit_vkey_format(&vk, &vs, &e), HSMCA_OK);
    uint8_t *vfile = read_rel(f, "vkey", &vlen);
    assert_non_null(vfile);
    assert_int_equal(vlen, strlen(vs) + 1);
    assert_memory_equal(vfile, vs, vlen - 1);
    free(vs);
    free(vfile);
    free(arch);
    free(note);
    free_lines(&l);
}

static uint64_t round_ok(fx *f)
{
    uint64_t size = 0;
    hsmca_err e;
    if (audit_publish_round(f->p, &size, &e) != HSMCA_OK)
        fail_msg("round: %s", e.msg);
    return size;
}

/* Tiles equal audit_tile_build over the leaves at each size, through the tile boundaries of
 * levels 0, 1 and 2; every checkpoint stays in checkpoints/. */
static void test_sizes(void **state)
{
    (void)state;
    fx f;
    new_fx(&f, "pub_sizes");
    static const uint64_t sizes[] = {0,     1,     2,      255,    256,   257,   511,
                                     512,   513,   1000,   65535,  65536, 65537, 65792,
                                     65793, 70000, 131071, 131072, 131073};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        append_n(&f, sizes[i] - f.appended);
        assert_int_equal(round_ok(&f), sizes[i]);
        check_published(&f, sizes[i]);
    }
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char rel[40];
        size_t len;
        snprintf(rel, sizeof(rel), "checkpoints/%llu", (unsigned long long)sizes[i]);
        uint8_t *b = read_rel(&f, rel, &len);
        assert_non_null(b);
        free(b);
    }
    /* Only published files where clients look: temp files stay in .tmp/. */
    assert_int_equal(
        tu_system("cd '%s' && test -z \"$(find tile checkpoints -name '*tmp*')\"", f.dir), 0);
    free_fx(&f);
}

/* Under an ECDSA P-256 audit key: the checkpoints are type-0x02 notes, DIR/vkey its vkey,
 * and a restart verifies the latest checkpoint under that key before going on. */
static void test_ecdsa_key(void **state)
{
    (void)state;
    fx f;
    memset(&f, 0, sizeof(f));
    f.dir = tu_mkdtemp("pub_ecdsa");
    f.key_type = AUDIT_SIG_TYPE_ECDSA;
    f.key = atu_ec_key("P-256", f.spki, &f.spki_len);
    hsmca_err e;
    assert_int_equal(open_fx(&f, &e), HSMCA_OK);
    append_n(&f, 300);
    assert_int_equal(round_ok(&f), 300);
    check_published(&f, 300);
    close_fx(&f);
    if (open_fx(&f, &e) != HSMCA_OK)
        fail_msg("reopen under the ECDSA key: %s", e.msg);
    append_n(&f, 10);
    assert_int_equal(round_ok(&f), 310);
    check_published(&f, 310);
    close_fx(&f);
    /* The same directory under another P-256 key: its checkpoint is not that key's. */
    EVP_PKEY_free(f.key);
    f.key = atu_ec_key("P-256", f.spki, &f.spki_len);
    assert_int_equal(open_fx(&f, &e), HSMCA_EINVAL);
    free_fx(&f);
}

/* A restart rebuilds the edge from the replay: no checkpoint when nothing is new, and the
 * next ones continue the tiles. */
static void test_restart_resumes(void **state)
{
    (void)state;
    fx f;
    new_fx(&f, "pub_restart");
    hsmca_err e;
    /* From a size-0 checkpoint, with lines after it that no checkpoint covers yet. */
    assert_int_equal(round_ok(&f), 0);
    close_fx(&f);
    assert_int_equal(open_fx(&f, &e), HSMCA_OK);
    append_n(&f, 7);
    close_fx(&f);
    if (open_fx(&f, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    append_n(&f, 293);
    assert_int_equal(round_ok(&f), 300);
    close_fx(&f);
    assert_int_equal(open_fx(&f, &e), HSMCA_OK);
    assert_int_equal(round_ok(&f), 300);
    struct stat st;
    char p[4400];
    snprintf(p, sizeof(p), "%s/checkpoints/301", f.dir);
    assert_int_not_equal(stat(p, &st), 0);
    append_n(&f, 500);
    assert_int_equal(round_ok(&f), 800);
    check_published(&f, 800);
    close_fx(&f);
    assert_int_equal(open_fx(&f, &e), HSMCA_OK);
    append_n(&f, 65536 - 800 + 3);
    assert_int_equal(round_ok(&f), 65539);
    check_published(&f, 65539);
    free_fx(&f);
}

static uint64_t latest(fx *f)
{
    uint64_t size;
    audit_hash root;
    audit_publish_latest(f->p, &size, &root);
    return size;
}

/* Flips one byte of line `line` of the log, keeping it a valid entry (a letter of its
 * reason). */
static void flip_in_line(const fx *f, uint64_t line)
{
    size_t len;
    uint8_t *b = read_rel(f, "log", &len);
    assert_non_null(b);
    size_t at = 0;
    for (uint64_t i = 0; i < line; i++)
        at = (size_t)((uint8_t *)memchr(b + at, '\n', len - at) - b) + 1;
    uint8_t *r = (uint8_t *)strstr((char *)b + at, "\"reason\":\"") + 10;
    *r = *r == 'z' ? 'y' : (uint8_t)(*r + 1);
    char path[4400];
    snprintf(path, sizeof(path), "%s/log", f->dir);
    hsmca_err e;
    assert_int_equal(util_write_file_atomic(path, b, len, 0600, &e), HSMCA_OK);
    free(b);
}

static void test_root_mismatch_refused(void **state)
{
    (void)state;
    fx f;
    new_fx(&f, "pub_mismatch");
    append_n(&f, 40);
    assert_int_equal(round_ok(&f), 40);
    close_fx(&f);
    size_t n1, n2;
    uint8_t *before = read_rel(&f, "tile/0/000.p/40", &n1);
    flip_in_line(&f, 17);
    hsmca_err e;
    assert_int_equal(open_fx(&f, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "root mismatch at size 40"));
    assert_non_null(strstr(e.msg, "refusing to start"));
    /* The tiles still show the signed tree: a tampered log does not "repair" them. */
    uint8_t *after = read_rel(&f, "tile/0/000.p/40", &n2);
    assert_non_null(before);
    assert_non_null(after);
    assert_int_equal(n1, n2);
    assert_memory_equal(before, after, n1);
    free(before);
    free(after);
    free_fx(&f);
}

/* An entry beyond the checkpoint may change (it was never signed); a cut below it may not. */
static void test_shorter_log_refused(void **state)
{
    (void)state;
    fx f;
    new_fx(&f, "pub_short");
    append_n(&f, 40);
    assert_int_equal(round_ok(&f), 40);
    append_n(&f, 5);
    close_fx(&f);
    flip_in_line(&f, 42); /* past the checkpoint: fine */
    hsmca_err e;
    assert_int_equal(open_fx(&f, &e), HSMCA_OK);
    close_fx(&f);
    size_t len;
    uint8_t *b = read_rel(&f, "log", &len);
    size_t at = 0;
    for (int i = 0; i < 39; i++)
        at = (size_t)((uint8_t *)memchr(b + at, '\n', len - at) - b) + 1;
    char path[4400];
    snprintf(path, sizeof(path), "%s/log", f.dir);
    assert_int_equal(truncate(path, (off_t)at), 0);
    free(b);
    assert_int_equal(open_fx(&f, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "has 39 entries, fewer than the 40"));
    free_fx(&f);
}

static void test_other_key_or_origin_refused(void **state)
{
    (void)state;
    fx f;
    new_fx(&f, "pub_otherkey");
    append_n(&f, 3);
    assert_int_equal(round_ok(&f), 3);
    close_fx(&f);
    uint8_t pub2[32];
    EVP_PKEY *k2 = atu_ed25519_key(pub2);
    hsmca_err e;
    assert_int_equal(open_with(&f, pub2, ORIGIN, atu_ed25519_sign, k2, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "is not signed by the configured audit key"));
    assert_int_equal(open_with(&f, f.pub, "other.example/log", atu_ed25519_sign, f.key, &e),
                     HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "has origin '" ORIGIN "', but audit.origin is"));
    assert_int_equal(open_with(&f, f.pub, "bad origin", atu_ed25519_sign, f.key, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "audit.origin"));
    EVP_PKEY_free(k2);
    /* DIR/checkpoint gone: the largest in checkpoints/ stands in for it. */
    char path[4400];
    snprintf(path, sizeof(path), "%s/checkpoint", f.dir);
    assert_int_equal(unlink(path), 0);
    flip_in_line(&f, 1);
    assert_int_equal(open_fx(&f, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "checkpoints/3"));
    free_fx(&f);
}

/* A crash after tiles were written but before the checkpoint, and damage: missing tiles and
 * bundles, a wrong byte, a stale temp file, a lost checkpoints/<n> copy; the next open puts
 * them right, and the checkpoint that follows covers the new lines. */
static void test_crash_repair(void **state)
{
    (void)state;
    fx f;
    new_fx(&f, "pub_crash");
    append_n(&f, 600);
    assert_int_equal(round_ok(&f), 600);
    append_n(&f, 100);       /* durable, no checkpoint yet: the "crash" comes before it */
    audit_publish_free(f.p); /* no stop: the thread never ran, nothing more is written */
    audit_log_close(f.log);
    f.p = NULL;
    f.log = NULL;
    assert_int_equal(tu_system("cd '%s' && rm tile/0/001 tile/entries/000 tile/0/002.p/88 "
                               "checkpoints/600 && printf x > tile/0/000 && "
                               "mkdir -p .tmp && printf junk > .tmp/tile_entries_001",
                               f.dir),
                     0);
    hsmca_err e;
    assert_int_equal(open_fx(&f, &e), HSMCA_OK);
    check_published(&f, 600);
    assert_int_equal(round_ok(&f), 700);
    check_published(&f, 700);
    free_fx(&f);
}

/* A tile that cannot be written (here: a directory in its place) fails the round and no
 * checkpoint is published; the edge stays whole, and once the cause is gone the next round
 * writes the tile, the lines that came meanwhile, and the checkpoint. */
static void test_write_failure_resumes(void **state)
{
    (void)state;
    fx f;
    new_fx(&f, "pub_wfail");
    append_n(&f, 200);
    assert_int_equal(round_ok(&f), 200);
    assert_int_equal(tu_system("mkdir -p '%s/tile/0/000/x'", f.dir), 0);
    append_n(&f, 100);
    uint64_t size = 0;
    hsmca_err e;
    assert_int_not_equal(audit_publish_round(f.p, &size, &e), HSMCA_OK);
    if (!strstr(e.msg, "to tile/0/000"))
        fail_msg("%s", e.msg);
    assert_int_equal(latest(&f), 200);
    append_n(&f, 300);
    assert_int_not_equal(audit_publish_round(f.p, &size, &e), HSMCA_OK);
    assert_int_equal(tu_system("rm -r '%s/tile/0/000'", f.dir), 0);
    assert_int_equal(round_ok(&f), 600);
    check_published(&f, 600);
    free_fx(&f);
}

/* ---- the thread -------------------------------------------------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int hang, hung;
    EVP_PKEY *key;
} hang_signer;

static hsmca_code hanging_sign(void *ctx, const uint8_t *msg, size_t len,
                               uint8_t sig[AUDIT_SIG_MAX], size_t *siglen, hsmca_err *e)
{
    hang_signer *h = ctx;
    pthread_mutex_lock(&h->mu);
    while (h->hang) {
        h->hung = 1;
        pthread_cond_wait(&h->cv, &h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return atu_ed25519_sign(h->key, msg, len, sig, siglen, e);
}

static void test_thread_checkpoints(void **state)
{
    (void)state;
    fx f;
    new_fx(&f, "pub_thread");
    hsmca_err e;
    assert_int_equal(audit_publish_start(f.p, 0.05, &e), HSMCA_OK);
    for (int i = 0; i < 10; i++) {
        append_n(&f, 7);
        usleep(30 * 1000);
    }
    for (int i = 0; i < 200 && latest(&f) < 70; i++)
        usleep(10 * 1000);
    assert_int_equal(latest(&f), 70);
    append_n(&f, 5);
    assert_int_equal(audit_publish_stop(f.p, 5), 0); /* the last round covers them */
    assert_int_equal(latest(&f), 75);
    check_published(&f, 75);
    free_fx(&f);
}

/* A token call on the audit key that never returns holds the publisher's thread only:
 * appends and syncs go on, and the stop gives up within its bound. */
static void test_hung_key_never_blocks_appends(void **state)
{
    (void)state;
    fx f;
    memset(&f, 0, sizeof(f));
    f.dir = tu_mkdtemp("pub_hung");
    f.key = atu_ed25519_key(f.pub);
    hang_signer h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, 0, f.key};
    hsmca_err e;
    assert_int_equal(open_with(&f, f.pub, ORIGIN, hanging_sign, &h, &e), HSMCA_OK);
    assert_int_equal(audit_publish_start(f.p, 0.05, &e), HSMCA_OK);
    append_n(&f, 3);
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&h.mu);
        int hung = h.hung;
        pthread_mutex_unlock(&h.mu);
        if (hung)
            break;
        usleep(10 * 1000);
    }
    double t0 = util_mono_now();
    append_n(&f, 500); /* issuance's path: append and sync */
    assert_true(util_mono_now() - t0 < 2.0);
    t0 = util_mono_now();
    assert_int_equal(audit_publish_stop(f.p, 0.2), -1);
    assert_true(util_mono_now() - t0 < 1.0);
    pthread_mutex_lock(&h.mu);
    h.hang = 0;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    assert_int_equal(audit_publish_stop(f.p, 5), 0);
    assert_int_equal(latest(&f), 503);
    check_published(&f, 503);
    free_fx(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_restart_resumes),
        cmocka_unit_test(test_root_mismatch_refused),
        cmocka_unit_test(test_shorter_log_refused),
        cmocka_unit_test(test_other_key_or_origin_refused),
        cmocka_unit_test(test_crash_repair),
        cmocka_unit_test(test_write_failure_resumes),
        cmocka_unit_test(test_thread_checkpoints),
        cmocka_unit_test(test_hung_key_never_blocks_appends),
        cmocka_unit_test(test_ecdsa_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

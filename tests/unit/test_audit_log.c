/* test_audit_log.c - the log writer (audit/audit_log.h): append and replay, the Merkle root
 * over the lines, a torn last line cut with a recovery entry, a corrupt line refusing the
 * open, group commit under concurrent signers, and fail-closed on a write error
 * (RLIMIT_FSIZE in a forked child) with resumption once the cause is gone. */
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit_log.h"
#include "testutil.h"

static audit_entry intent(uint64_t id)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_ISSUE_INTENT;
    a.request_id = id;
    memset(a.tbs_sha256, 'a', 64);
    snprintf(a.serial, sizeof(a.serial), "01%016llx", (unsigned long long)id);
    strcpy(a.profile, "workload");
    a.not_before = 1;
    a.not_after = 2;
    a.requester = (audit_str){"spiffe://td/ns/a/sa/b", 21, 0};
    a.sans = (audit_str){"uri:x", 5, 0};
    return a;
}

typedef struct {
    uint64_t n, intents;
} counts;

static hsmca_code count(void *ctx, const audit_entry *ent, uint64_t off, hsmca_err *e)
{
    (void)off;
    (void)e;
    counts *c = ctx;
    c->n++;
    c->intents += ent->kind == AUDIT_ISSUE_INTENT;
    return HSMCA_OK;
}

static char *log_path(const char *dir)
{
    static char p[4200];
    snprintf(p, sizeof(p), "%.4000s/log", dir);
    return p;
}

/* The RFC 9162 root of the file's lines, computed here from the bytes. */
static void file_root(const char *dir, uint64_t *size, audit_hash *root)
{
    FILE *f = fopen(log_path(dir), "rb");
    assert_non_null(f);
    static audit_hash leaves[4096];
    static char line[AUDIT_LINE_MAX + 2];
    uint64_t n = 0;
    while (fgets(line, sizeof(line), f)) {
        size_t len = strlen(line);
        assert_int_equal(line[len - 1], '\n');
        assert_int_equal(audit_hash_leaf((uint8_t *)line, len - 1, &leaves[n++], NULL), HSMCA_OK);
    }
    fclose(f);
    *size = n;
    assert_int_equal(audit_root_of_leaves(leaves, n, root, NULL), HSMCA_OK);
}

static void test_append_replay(void **state)
{
    char *dir = tu_mkdtemp("auditlog");
    char sub[4200];
    snprintf(sub, sizeof(sub), "%.4000s/audit", dir);
    audit_log *l;
    audit_replay_stats st;
    hsmca_err e;
    assert_int_equal(audit_log_open(sub, (uid_t)-1, (gid_t)-1, NULL, NULL, &l, &st, &e), HSMCA_OK);
    assert_int_equal(st.entries, 0);
    struct stat sb;
    assert_int_equal(stat(log_path(sub), &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    audit_entry a = {.kind = AUDIT_START};
    uint64_t seq;
    assert_int_equal(audit_log_append(l, &a, &seq, &e), HSMCA_OK);
    assert_int_equal(seq, 0);
    for (uint64_t i = 1; i <= 5; i++) {
        a = intent(i);
        assert_int_equal(audit_log_append(l, &a, &seq, &e), HSMCA_OK);
        assert_int_equal(seq, i);
    }
    assert_int_equal(audit_log_sync_through(l, seq, &e), HSMCA_OK);
    uint64_t size, fsize;
    audit_hash root, froot;
    assert_int_equal(audit_log_root(l, &size, &root, &e), HSMCA_OK);
    audit_log_close(l);
    file_root(sub, &fsize, &froot);
    assert_int_equal(size, 6);
    assert_int_equal(fsize, 6);
    assert_true(audit_hash_equal(&root, &froot));

    counts c = {0, 0};
    assert_int_equal(audit_log_open(sub, (uid_t)-1, (gid_t)-1, count, &c, &l, &st, &e), HSMCA_OK);
    assert_int_equal(c.n, 6);
    assert_int_equal(c.intents, 5);
    assert_int_equal(st.intents, 5);
    assert_int_equal(st.cut_bytes, 0);
    a = (audit_entry){.kind = AUDIT_STOP};
    assert_int_equal(audit_log_append(l, &a, &seq, &e), HSMCA_OK);
    assert_int_equal(seq, 6); /* numbering goes on where the file ended */
    assert_int_equal(audit_log_root(l, &size, &root, &e), HSMCA_OK);
    assert_int_equal(audit_log_sync_through(l, seq, &e), HSMCA_OK);
    audit_log_close(l);
    file_root(sub, &fsize, &froot);
    assert_int_equal(fsize, 7);
    assert_true(audit_hash_equal(&root, &froot)); /* the tree was rebuilt by the replay */
    free(dir);
}

/* Lines nobody synced reach the file at audit_log_flush and at close. */
static void test_flush_and_close(void **state)
{
    char *dir = tu_mkdtemp("auditlog");
    audit_log *l;
    audit_replay_stats st;
    hsmca_err e;
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, &l, &st, &e), HSMCA_OK);
    audit_entry a = intent(1);
    uint64_t seq;
    struct stat sb;
    assert_int_equal(audit_log_append(l, &a, &seq, &e), HSMCA_OK);
    assert_int_equal(stat(log_path(dir), &sb), 0);
    assert_int_equal(sb.st_size, 0); /* buffered */
    assert_int_equal(audit_log_flush(l, &e), HSMCA_OK);
    assert_int_equal(stat(log_path(dir), &sb), 0);
    assert_true(sb.st_size > 0);
    a = intent(2);
    assert_int_equal(audit_log_append(l, &a, &seq, &e), HSMCA_OK);
    audit_log_close(l);
    counts c = {0, 0};
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, count, &c, &l, &st, &e), HSMCA_OK);
    assert_int_equal(c.n, 2);
    audit_log_close(l);
    free(dir);
}

static void test_torn_and_corrupt(void **state)
{
    char *dir = tu_mkdtemp("auditlog");
    audit_log *l;
    audit_replay_stats st;
    hsmca_err e;
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, &l, &st, &e), HSMCA_OK);
    audit_entry a = intent(1);
    uint64_t seq;
    assert_int_equal(audit_log_append(l, &a, &seq, &e), HSMCA_OK);
    assert_int_equal(audit_log_sync_through(l, seq, &e), HSMCA_OK);
    audit_log_close(l);
    FILE *f = fopen(log_path(dir), "ab");
    fputs("{\"kind\":\"issue-int", f);
    fclose(f);
    counts c = {0, 0};
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, count, &c, &l, &st, &e), HSMCA_OK);
    assert_int_equal(c.n, 1);
    assert_int_equal(st.cut_bytes, 18);
    audit_log_close(l);
    /* the recovery entry is line 2, and the file is whole again */
    c = (counts){0, 0};
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, count, &c, &l, &st, &e), HSMCA_OK);
    assert_int_equal(c.n, 2);
    assert_int_equal(st.cut_bytes, 0);
    audit_log_close(l);

    /* a corrupt line in the middle refuses the open, naming the entry */
    f = fopen(log_path(dir), "ab");
    fputs("{\"kind\":\"start\", \"seq\":2,\"time\":1}\n", f);
    fclose(f);
    hsmca_err_clear(&e);
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, &l, &st, &e),
                     HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "entry 2"));
    free(dir);
}

#define GC_THREADS 8
#define GC_EACH 100

static audit_log *g_log;
static uint64_t g_seqs[GC_THREADS][GC_EACH];

static void *signer_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < GC_EACH; i++) {
        audit_entry a = intent((uint64_t)(t * GC_EACH + i));
        hsmca_err e;
        if (audit_log_append(g_log, &a, &g_seqs[t][i], &e) != HSMCA_OK ||
            audit_log_sync_through(g_log, g_seqs[t][i], &e) != HSMCA_OK)
            return (void *)1;
    }
    return NULL;
}

static void test_group_commit(void **state)
{
    char *dir = tu_mkdtemp("auditlog");
    audit_replay_stats st;
    hsmca_err e;
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, &g_log, &st, &e),
                     HSMCA_OK);
    pthread_t th[GC_THREADS];
    for (int t = 0; t < GC_THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, signer_thread, (void *)(intptr_t)t), 0);
    for (int t = 0; t < GC_THREADS; t++) {
        void *r;
        assert_int_equal(pthread_join(th[t], &r), 0);
        assert_null(r);
    }
    uint64_t syncs = audit_log_syncs(g_log);
    print_message("group commit: %d appends, %llu fdatasync calls\n", GC_THREADS * GC_EACH,
                  (unsigned long long)syncs);
    assert_true(syncs >= 1 && syncs < GC_THREADS * GC_EACH);
    audit_log_close(g_log);
    /* every seq handed out once, and the file holds them all in order */
    static uint8_t seen[GC_THREADS * GC_EACH];
    for (int t = 0; t < GC_THREADS; t++)
        for (int i = 0; i < GC_EACH; i++) {
            assert_true(g_seqs[t][i] < GC_THREADS * GC_EACH);
            assert_int_equal(seen[g_seqs[t][i]]++, 0);
        }
    counts c = {0, 0};
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, count, &c, &g_log, &st, &e),
                     HSMCA_OK);
    assert_int_equal(c.n, GC_THREADS * GC_EACH);
    audit_log_close(g_log);
    free(dir);
}

/* In a child (the limit is per process): past RLIMIT_FSIZE every append and sync fails
 * with EUNAVAIL and the reason, without a retry inside the interval, except an
 * issue-result, which is kept; once the limit is raised the next append after the
 * interval reopens, writes the kept lines and goes on. Exit code = the step. */
static int fsize_child(const char *dir)
{
    audit_log *l;
    hsmca_err e;
    if (audit_log_open(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, &l, NULL, &e) != HSMCA_OK)
        return 1;
    audit_log_set_retry_interval(l, 0.3);
    audit_entry a = {.kind = AUDIT_START};
    uint64_t seq, seq0;
    if (audit_log_append(l, &a, &seq0, &e) != HSMCA_OK ||
        audit_log_sync_through(l, seq0, &e) != HSMCA_OK)
        return 2;
    struct stat sb;
    struct rlimit old, lim;
    if (stat(log_path(dir), &sb) != 0 || getrlimit(RLIMIT_FSIZE, &old) != 0)
        return 3;
    lim = old;
    lim.rlim_cur = (rlim_t)sb.st_size + 40; /* part of the next line fits */
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
        return 4;
    a = intent(1); /* buffered; its sync writes it and fails part-way */
    if (audit_log_append(l, &a, &seq, &e) != HSMCA_OK || seq != seq0 + 1)
        return 5;
    if (audit_log_sync_through(l, seq, &e) != HSMCA_EUNAVAIL ||
        strcmp(e.msg, "audit log: write failed: File too large") != 0)
        return 6;
    if (audit_log_sync_through(l, seq0, &e) != HSMCA_OK) /* what was durable stays so */
        return 7;
    /* The failed intent's outcome is kept, not refused: written after it on recovery. */
    uint64_t intent_seq = seq;
    audit_entry r = {.kind = AUDIT_ISSUE_RESULT, .request_id = 1, .intent_seq = intent_seq};
    snprintf(r.code, sizeof(r.code), "UNAVAILABLE");
    r.error = (audit_str){"audit log: write failed", 23, 0};
    if (audit_log_append(l, &r, &seq, &e) != HSMCA_OK || seq != intent_seq + 1)
        return 12;
    if (setrlimit(RLIMIT_FSIZE, &old) != 0)
        return 8;
    a = intent(2);
    if (audit_log_append(l, &a, &seq, &e) != HSMCA_EUNAVAIL || /* within the interval */
        strcmp(e.msg, "audit log: write failed: File too large") != 0)
        return 9;
    usleep(350 * 1000);
    a = intent(3); /* the reopen writes intent 1 again after the last whole line, then this */
    if (audit_log_append(l, &a, &seq, &e) != HSMCA_OK || seq != seq0 + 3 ||
        audit_log_sync_through(l, seq, &e) != HSMCA_OK)
        return 10;
    audit_log_close(l);
    /* no partial line was left behind */
    audit_replay_stats st;
    counts c = {0, 0};
    if (audit_log_open(dir, (uid_t)-1, (gid_t)-1, count, &c, &l, &st, &e) != HSMCA_OK ||
        st.entries != 4 || st.cut_bytes != 0 || c.intents != 2)
        return 11;
    audit_log_close(l);
    return 0;
}

static void test_write_failure_resumes(void **state)
{
    char *dir = tu_mkdtemp("auditlog");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(fsize_child(dir));
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_replay),         cmocka_unit_test(test_flush_and_close),
        cmocka_unit_test(test_torn_and_corrupt),      cmocka_unit_test(test_group_commit),
        cmocka_unit_test(test_write_failure_resumes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_audit_verify.c - the offline verifier (audit/audit_verify.h) on fixture
 * directories (audit_fx.h): a good one verifies; each kind of tampering (an edited,
 * deleted, swapped or cut line, an edited, swapped or foreign checkpoint, an edited tile
 * or bundle, a broken pairing, a duplicate serial, an auditor's state from a longer or
 * forked log) fails with a message that names the place. And the tile-backed hash source
 * proves what the checkpoints sign. The good case, the checkpoint tampering and the vkey
 * run again under an ECDSA P-256 audit key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_fx.h"
#include "audit_tu.h"
#include "audit_verify.h"
#include "testutil.h"
#include "util.h"

#define N 600
static const uint64_t SIZES[] = {0, 1, 100, 256, 300, 513, 580};
#define NS (sizeof(SIZES) / sizeof(SIZES[0]))
#define LATEST 580

typedef afx_fixture fx;

static int setup(void **state)
{
    fx *f = afx_fixture_new("verify", N);
    afx_write(f->dir, &f->log, SIZES, NS, f->key, &f->vk);
    *state = f;
    return 0;
}

/* The same fixture under an ECDSA P-256 audit key (signed-note type 0x02). */
static int setup_ec(void **state)
{
    fx *f = afx_fixture_new("verify-ec", N);
    EVP_PKEY_free(f->key);
    f->key = afx_ec_key(&f->vk);
    afx_write(f->dir, &f->log, SIZES, NS, f->key, &f->vk);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    afx_fixture_free(*state);
    return 0;
}

static hsmca_code run(fx *f, const char *statef, audit_verify_report *r, hsmca_err *e)
{
    audit_verify_opts o = {.dir = f->dir, .vkey = &f->vk, .state = statef};
    return audit_verify(&o, r, e);
}

/* verify fails and its message holds each of the strings given (NULL-terminated). */
static void expect_fail(fx *f, const char *statef, ...)
{
    audit_verify_report r;
    hsmca_err e = {0};
    hsmca_code rc = run(f, statef, &r, &e);
    if (rc == HSMCA_OK)
        fail_msg("verify passed; expected a failure");
    va_list ap;
    va_start(ap, statef);
    for (const char *s; (s = va_arg(ap, const char *));)
        if (!strstr(e.msg, s))
            fail_msg("message \"%s\" does not name \"%s\"", e.msg, s);
    va_end(ap);
    assert_int_equal(rc, HSMCA_EPERM);
}

static char *path_of(fx *f, const char *rel)
{
    static char p[4096];
    snprintf(p, sizeof(p), "%s/%s", f->dir, rel);
    return p;
}

static void write_at(fx *f, const char *rel, const void *data, size_t len)
{
    FILE *o = fopen(path_of(f, rel), "wb");
    assert_non_null(o);
    assert_int_equal(fwrite(data, 1, len, o), len);
    assert_int_equal(fclose(o), 0);
}

static char *read_at(fx *f, const char *rel, size_t *len)
{
    char *buf;
    hsmca_err e;
    assert_int_equal(util_read_file(path_of(f, rel), 64u << 20, &buf, len, &e), HSMCA_OK);
    return buf;
}

/* The log file again from f->log with line i replaced (NULL: deleted). */
static void rewrite_log(fx *f, uint64_t i, const char *line)
{
    FILE *o = fopen(path_of(f, "log"), "wb");
    assert_non_null(o);
    for (uint64_t s = 0; s < f->log.n; s++) {
        if (s == i && !line)
            continue;
        const char *l = s == i ? line : f->log.lines[s];
        fputs(l, o);
    }
    assert_int_equal(fclose(o), 0);
}

static uint64_t offset_of(fx *f, uint64_t seq)
{
    uint64_t off = 0;
    for (uint64_t s = 0; s < seq; s++)
        off += f->log.lens[s];
    return off;
}

static void test_good(void **state)
{
    fx *f = *state;
    audit_verify_report r;
    hsmca_err e = {0};
    hsmca_code rc = run(f, NULL, &r, &e);
    if (rc != HSMCA_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(r.entries, N);
    assert_int_equal(r.checkpoints, NS);
    assert_int_equal(r.size, LATEST);
    assert_true(r.certificates > 200 && r.denies > 30 && r.failed > 10);
    assert_int_equal(r.intents, r.certificates + r.failed + r.open_intents);
    /* the fixture's last entry is an intent still open: a warning, not a failure */
    assert_int_equal(r.open_intents, 1);
    assert_int_equal(r.first_open, N - 1);
    char *note = read_at(f, "checkpoint", &(size_t){0});
    audit_checkpoint c;
    assert_int_equal(audit_checkpoint_open(note, strlen(note), &f->vk, &c, &e), HSMCA_OK);
    assert_true(audit_hash_equal(&c.root, &r.root));
    free(note);
}

static void test_edited_byte(void **state)
{
    fx *f = *state;
    /* still a canonical entry: the bundle holds the original line */
    char *l = strdup(f->log.lines[150]);
    char *p = strstr(l, "/sa/sa");
    assert_non_null(p);
    p[5] = p[5] == '1' ? '2' : '1';
    rewrite_log(f, 150, l);
    char at[64];
    snprintf(at, sizeof(at), "(byte %llu)", (unsigned long long)offset_of(f, 150));
    expect_fail(f, NULL, "log seq 150 ", at, "tile/entries/000", NULL);
    /* not canonical any more */
    p[5] = '"';
    rewrite_log(f, 150, l);
    expect_fail(f, NULL, "log seq 150 ", at, "audit line:", NULL);
    free(l);
}

static void test_deleted_line(void **state)
{
    fx *f = *state;
    rewrite_log(f, 120, NULL);
    expect_fail(f, NULL, "log seq 120 ", "says seq 121", NULL);
}

static void test_swapped_lines(void **state)
{
    fx *f = *state;
    char *t = f->log.lines[200];
    f->log.lines[200] = f->log.lines[201];
    f->log.lines[201] = t;
    rewrite_log(f, UINT64_MAX, NULL);
    f->log.lines[201] = f->log.lines[200];
    f->log.lines[200] = t;
    expect_fail(f, NULL, "log seq 200 ", "says seq 201", NULL);
}

static void test_truncated(void **state)
{
    fx *f = *state;
    uint64_t off = offset_of(f, 400);
    assert_int_equal(tu_system("truncate -s %llu '%s'", (unsigned long long)off, path_of(f, "log")),
                     0);
    expect_fail(f, NULL, "checkpoints/513", "log has only 400", NULL);
    rewrite_log(f, UINT64_MAX, NULL);
    assert_int_equal(
        tu_system("truncate -s %llu '%s'", (unsigned long long)off + 10, path_of(f, "log")), 0);
    char at[64];
    snprintf(at, sizeof(at), "(byte %llu)", (unsigned long long)off);
    expect_fail(f, NULL, at, "no newline", NULL);
}

static void test_edited_checkpoint(void **state)
{
    fx *f = *state;
    size_t len;
    char *note = read_at(f, "checkpoints/256", &len);
    char *root = strchr(strchr(note, '\n') + 1, '\n') + 1;
    root[3] = root[3] == 'A' ? 'B' : 'A';
    write_at(f, "checkpoints/256", note, len);
    free(note);
    expect_fail(f, NULL, "checkpoints/256:", "signed-note", NULL);
}

static void test_swapped_checkpoints(void **state)
{
    fx *f = *state;
    size_t la, lb;
    char *a = read_at(f, "checkpoints/100", &la), *b = read_at(f, "checkpoints/256", &lb);
    write_at(f, "checkpoints/100", b, lb);
    write_at(f, "checkpoints/256", a, la);
    free(a);
    free(b);
    expect_fail(f, NULL, "checkpoints/100:", "size 256", NULL);
}

static void test_foreign_checkpoints(void **state)
{
    fx *f = *state;
    /* the same name under another key */
    audit_vkey ovk;
    EVP_PKEY *other = afx_key(1, &ovk);
    char *note = afx_checkpoint(&f->log, 300, other, &ovk);
    write_at(f, "checkpoints/300", note, strlen(note));
    free(note);
    EVP_PKEY_free(other);
    expect_fail(f, NULL, "checkpoints/300:", "no signature by", NULL);
    /* our key, but another log's root */
    afx_log fork;
    afx_entries(&fork, N, 7, NULL);
    note = afx_checkpoint(&fork, 300, f->key, &f->vk);
    write_at(f, "checkpoints/300", note, strlen(note));
    free(note);
    afx_log_free(&fork);
    expect_fail(f, NULL, "checkpoints/300:", "not the log's root over seq 0..299", NULL);
}

static void test_latest_mismatch(void **state)
{
    fx *f = *state;
    size_t len;
    char *note = read_at(f, "checkpoints/513", &len);
    write_at(f, "checkpoint", note, len);
    free(note);
    expect_fail(f, NULL, "checkpoint:", "checkpoints/580", NULL);
    remove(path_of(f, "checkpoint"));
    expect_fail(f, NULL, "checkpoint:", "missing", NULL);
}

static void flip_file(fx *f, const char *rel, size_t at)
{
    size_t len;
    char *b = read_at(f, rel, &len);
    assert_true(at < len);
    b[at] ^= 0x40;
    write_at(f, rel, b, len);
    free(b);
}

static void test_edited_tiles(void **state)
{
    fx *f = *state;
    flip_file(f, "tile/0/000", 5 * 32 + 7);
    expect_fail(f, NULL, "tile/0/000:", "hash 5 ", "seq 5)", NULL);
    flip_file(f, "tile/0/000", 5 * 32 + 7);
    /* 580 = 2·256 + 68: a level-1 tile of 2 hashes, a level-0 partial of 68 */
    flip_file(f, "tile/1/000.p/2", 32 + 1);
    expect_fail(f, NULL, "tile/1/000.p/2:", "hash 1 ", "seq 256)", NULL);
    flip_file(f, "tile/1/000.p/2", 32 + 1);
    flip_file(f, "tile/0/002.p/68", 67 * 32);
    expect_fail(f, NULL, "tile/0/002.p/68:", "hash 67 ", "seq 579)", NULL);
    flip_file(f, "tile/0/002.p/68", 67 * 32);
    flip_file(f, "tile/entries/001", 2 + 10);
    expect_fail(f, NULL, "log seq 256 ", "entry 0 of tile/entries/001", NULL);
    flip_file(f, "tile/entries/001", 2 + 10);
    remove(path_of(f, "tile/0/001"));
    expect_fail(f, NULL, "tile/0/001:", "missing", NULL);
}

/* A log rebuilt with one entry replaced by ent, written whole (its checkpoints agree). */
static void rebuild(fx *f, uint64_t seq, audit_entry *ent)
{
    afx_set(&f->log, seq, ent);
    tu_system("rm -rf '%s'", f->dir);
    afx_write(f->dir, &f->log, SIZES, NS, f->key, &f->vk);
}

static void parse_line(fx *f, uint64_t seq, audit_entry *ent, audit_entry_buf *buf)
{
    afx_parse(&f->log, seq, ent, buf);
}

static void test_duplicate_serial(void **state)
{
    fx *f = *state;
    static audit_entry_buf b1, b2;
    audit_entry first, dup;
    parse_line(f, 1, &first, &b1);
    parse_line(f, 3, &dup, &b2);
    assert_int_equal(first.kind, AUDIT_ISSUE_INTENT);
    assert_int_equal(dup.kind, AUDIT_ISSUE_INTENT);
    memcpy(dup.serial, first.serial, sizeof(dup.serial));
    rebuild(f, 3, &dup);
    expect_fail(f, NULL, "log seq 3 ", "already in the intent at seq 1", NULL);
}

static void test_pairs(void **state)
{
    fx *f = *state;
    static audit_entry_buf b;
    audit_entry res;
    parse_line(f, 4, &res, &b);
    assert_int_equal(res.kind, AUDIT_ISSUE_RESULT);
    assert_int_equal(res.intent_seq, 3);
    res.request_id++;
    rebuild(f, 4, &res);
    expect_fail(f, NULL, "log seq 4 ", "request_id", "intent seq 3", NULL);
    res.request_id--;
    res.intent_seq = 1; /* already has its result */
    rebuild(f, 4, &res);
    expect_fail(f, NULL, "log seq 4 ", "intent seq 1", NULL);
}

static void test_open_intent_before_start(void **state)
{
    fx *f = *state;
    uint64_t open = f->log.n - 1; /* the fixture ends in an intent without result */
    afx_add(&f->log, &(audit_entry){.kind = AUDIT_START});
    uint64_t sizes[NS + 1];
    memcpy(sizes, SIZES, sizeof(SIZES));
    sizes[NS] = f->log.n;
    tu_system("rm -rf '%s'", f->dir);
    afx_write(f->dir, &f->log, sizes, NS + 1, f->key, &f->vk);
    char want[64];
    snprintf(want, sizeof(want), "intent at seq %llu has no result", (unsigned long long)open);
    expect_fail(f, NULL, "log seq 600 ", "a start", want, NULL);
}

static void test_state(void **state)
{
    fx *f = *state;
    char statef[4200];
    snprintf(statef, sizeof(statef), "%s.state", f->dir);
    remove(statef);
    audit_verify_report r;
    hsmca_err e = {0};
    assert_int_equal(run(f, statef, &r, &e), HSMCA_OK);
    assert_true(r.state_new);
    assert_int_equal(run(f, statef, &r, &e), HSMCA_OK);
    assert_false(r.state_new);
    assert_int_equal(r.state_size, LATEST);
    /* the body the verifier saved is the latest checkpoint's */
    size_t len;
    char *saved, *note = read_at(f, "checkpoint", &len);
    assert_int_equal(util_read_file(statef, 4096, &saved, &len, &e), HSMCA_OK);
    assert_memory_equal(saved, note, len);
    free(saved);
    free(note);

    /* saved from a longer log: this one was cut or rolled back */
    afx_log more;
    afx_entries(&more, 700, 0, NULL);
    char *longer = afx_checkpoint(&more, 650, f->key, &f->vk);
    *strstr(longer, "\n\n") = '\0';
    FILE *o = fopen(statef, "w");
    fprintf(o, "%s\n", longer);
    fclose(o);
    free(longer);
    afx_log_free(&more);
    expect_fail(f, statef, "state ", "saw size 650", NULL);

    /* saved from a fork at size 400 */
    afx_log fork;
    afx_entries(&fork, 500, 9, NULL);
    char *forked = afx_checkpoint(&fork, 400, f->key, &f->vk);
    *strstr(forked, "\n\n") = '\0';
    o = fopen(statef, "w");
    fprintf(o, "%s\n", forked);
    fclose(o);
    free(forked);
    afx_log_free(&fork);
    expect_fail(f, statef, "state ", "root at size 400", "forked", NULL);
    remove(statef);
}

static void test_tile_source(void **state)
{
    fx *f = *state;
    hsmca_err e = {0};
    audit_hash *leaves = calloc(N, sizeof(audit_hash));
    for (uint64_t i = 0; i < N; i++)
        assert_int_equal(
            audit_hash_leaf((const uint8_t *)f->log.lines[i], f->log.lens[i] - 1, &leaves[i], &e),
            HSMCA_OK);
    for (size_t c = 1; c < NS; c++) {
        uint64_t size = SIZES[c];
        audit_hash root = atu_mth(leaves, 0, size), got, proof[AUDIT_PROOF_MAX];
        audit_tile_reader t;
        audit_tile_reader_init(&t, f->dir, size);
        assert_int_equal(audit_root_from_source(size, audit_tile_reader_source, &t, &got, &e),
                         HSMCA_OK);
        assert_true(audit_hash_equal(&got, &root));
        for (uint64_t i = 0; i < size; i += 37) {
            size_t n;
            hsmca_code rc =
                audit_prove_inclusion(i, size, audit_tile_reader_source, &t, proof, &n, &e);
            if (rc != HSMCA_OK)
                fail_msg("%s", e.msg);
            assert_int_equal(audit_verify_inclusion(i, size, &leaves[i], proof, n, &root, &e),
                             HSMCA_OK);
        }
        audit_hash old = atu_mth(leaves, 0, SIZES[c - 1]);
        size_t n;
        assert_int_equal(audit_prove_consistency(SIZES[c - 1], size, audit_tile_reader_source, &t,
                                                 proof, &n, &e),
                         HSMCA_OK);
        assert_int_equal(audit_verify_consistency(SIZES[c - 1], size, &old, &root, proof, n, &e),
                         HSMCA_OK);
    }
    /* an older size's partial tiles gone: the reader uses the wider ones */
    tu_system("rm -f '%s'/tile/0/001.p/* '%s'/tile/0/000.p/*", f->dir, f->dir);
    audit_tile_reader t;
    audit_tile_reader_init(&t, f->dir, 300);
    audit_hash got, root = atu_mth(leaves, 0, 300);
    assert_int_equal(audit_root_from_source(300, audit_tile_reader_source, &t, &got, &e), HSMCA_OK);
    assert_true(audit_hash_equal(&got, &root));
    free(leaves);
}

static void test_vkey_load(void **state)
{
    fx *f = *state;
    audit_vkey k;
    hsmca_err e;
    assert_int_equal(audit_vkey_load(path_of(f, "vkey"), &k, &e), HSMCA_OK);
    assert_memory_equal(k.pub, f->vk.pub, 32);
    char *s;
    assert_int_equal(audit_vkey_format(&f->vk, &s, &e), HSMCA_OK);
    assert_int_equal(audit_vkey_load(s, &k, &e), HSMCA_OK);
    assert_int_equal(k.id, f->vk.id);
    free(s);
    assert_int_not_equal(audit_vkey_load("/nonexistent/vkey", &k, &e), HSMCA_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edited_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deleted_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_swapped_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edited_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_swapped_checkpoints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_checkpoints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_latest_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edited_tiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_serial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pairs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_intent_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tile_source, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vkey_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_good, setup_ec, teardown),
        cmocka_unit_test_setup_teardown(test_edited_checkpoint, setup_ec, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_checkpoints, setup_ec, teardown),
        cmocka_unit_test_setup_teardown(test_latest_mismatch, setup_ec, teardown),
        cmocka_unit_test_setup_teardown(test_state, setup_ec, teardown),
        cmocka_unit_test_setup_teardown(test_vkey_load, setup_ec, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

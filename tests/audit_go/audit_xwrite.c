/* audit_xwrite.c - the C half of the Go cross-check (crosscheck.sh, auditcheck.go).
 *
 *   audit_xwrite write DIR   writes, with audit/ only: entries.bin (4-byte big-endian length
 *                            and bytes, per entry), roots.txt, inclusion.txt,
 *                            consistency.txt, tiles.txt, vkey, a signed checkpoint per size
 *                            in checkpoints/, two notes Go must refuse, and log/ (a C2SP
 *                            tlog-tiles directory: checkpoint, tile/..., tile/entries/...),
 *                            and pub/: a real audit log (audit_log.h) whose vkey,
 *                            checkpoints and tiles the publisher (audit_publish.h) wrote,
 *                            with a restart in the middle.
 *   audit_xwrite check DIR   verifies what auditcheck wrote with its own key and proofs:
 *                            go.vkey, go.note, go_unknown.note, go_proofs.txt.
 *
 * Exit status 0 when every step holds; otherwise a message naming the first that did not. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audit_log.h"
#include "audit_merkle.h"
#include "audit_note.h"
#include "audit_publish.h"
#include "audit_tiles.h"
#include "audit_tu.h"
#include "util.h"

#define N_ENTRIES 70000
#define ORIGIN "hsmca.test/audit-log"
static const uint64_t CHECKPOINTS[] = {0, 1, 2, 255, 256, 300, 65535, 65536, 65537, N_ENTRIES};
#define N_CHECKPOINTS (sizeof(CHECKPOINTS) / sizeof(CHECKPOINTS[0]))

static const char *g_dir;
static uint8_t **g_entry;
static size_t *g_len;
static audit_hash *g_leaf;
static atu_tree g_mem;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "audit_xwrite: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void ok(hsmca_code rc, const hsmca_err *e, const char *what)
{
    if (rc != HSMCA_OK)
        die("%s: %s", what, e->msg);
}

/* DIR/rel, with every directory on the way made. */
static char *path_in(const char *rel)
{
    size_t n = strlen(g_dir) + 1 + strlen(rel) + 1;
    char *p = malloc(n);
    if (!p)
        die("out of memory");
    snprintf(p, n, "%s/%s", g_dir, rel);
    for (char *s = p + strlen(g_dir) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            die("mkdir %s: %s", p, strerror(errno));
        *s = '/';
    }
    return p;
}

static void put(const char *rel, const void *data, size_t len)
{
    char *p = path_in(rel);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        die("write %s: %s", p, strerror(errno));
    free(p);
}

static FILE *open_text(const char *rel, const char *mode)
{
    char *p = path_in(rel);
    FILE *f = fopen(p, mode);
    if (!f)
        die("open %s: %s", p, strerror(errno));
    free(p);
    return f;
}

static void put_hex(FILE *f, const audit_hash *h)
{
    char hex[2 * AUDIT_HASH_LEN + 1];
    util_hex(h->b, AUDIT_HASH_LEN, hex);
    fprintf(f, " %s", hex);
}

/* Entries like log lines, and some that are not: empty, binary with NULs and newlines,
 * and one at the uint16 maximum. */
static void make_entries(void)
{
    uint64_t rng = 0x5eed;
    g_entry = calloc(N_ENTRIES, sizeof(*g_entry));
    g_len = calloc(N_ENTRIES, sizeof(*g_len));
    g_leaf = calloc(N_ENTRIES, sizeof(*g_leaf));
    if (!g_entry || !g_len || !g_leaf)
        die("out of memory");
    for (size_t i = 0; i < N_ENTRIES; i++) {
        uint64_t r = atu_rand(&rng);
        size_t n = i == 7 ? AUDIT_ENTRY_MAX : i % 1000 == 3 ? 0 : 20 + (size_t)(r % 180);
        uint8_t *b = malloc(n + 1);
        if (!b)
            die("out of memory");
        if (i % 10 == 9) {
            for (size_t j = 0; j < n; j++)
                b[j] = (uint8_t)atu_rand(&rng);
        } else {
            int w =
                snprintf((char *)b, n + 1, "{\"seq\":%zu,\"type\":\"issue-intent\",\"pad\":\"", i);
            for (size_t j = w > 0 ? (size_t)w : 0; j < n; j++)
                b[j] = j + 2 >= n ? (j + 1 == n ? '}' : '"') : (uint8_t)('a' + j % 26);
        }
        g_entry[i] = b;
        g_len[i] = n;
        hsmca_err e;
        ok(audit_hash_leaf(b, n, &g_leaf[i], &e), &e, "leaf hash");
    }
    atu_tree_build(&g_mem, g_leaf, N_ENTRIES);
}

static audit_hash root_of(uint64_t size)
{
    audit_hash r;
    hsmca_err e;
    ok(audit_root_from_source(size, atu_source, &g_mem, &r, &e), &e, "root");
    return r;
}

/* ---- write ------------------------------------------------------------------------------ */

static void write_entries(void)
{
    FILE *f = open_text("entries.bin", "wb");
    for (size_t i = 0; i < N_ENTRIES; i++) {
        uint8_t be[4] = {(uint8_t)(g_len[i] >> 24), (uint8_t)(g_len[i] >> 16),
                         (uint8_t)(g_len[i] >> 8), (uint8_t)g_len[i]};
        if (fwrite(be, 1, 4, f) != 4 || fwrite(g_entry[i], 1, g_len[i], f) != g_len[i])
            die("write entries.bin");
    }
    if (fclose(f) != 0)
        die("close entries.bin");
}

/* Every root up to 700 and at sampled sizes, from the incremental tree (and checked against
 * the root served from a source). */
static void write_roots(void)
{
    FILE *f = open_text("roots.txt", "w");
    audit_tree t;
    audit_tree_init(&t);
    hsmca_err e;
    for (uint64_t n = 0; n <= N_ENTRIES; n++) {
        if (n <= 700 || n % 997 == 0 || n == N_ENTRIES) {
            audit_hash r, s = root_of(n);
            ok(audit_tree_root(&t, &r, &e), &e, "tree root");
            if (!audit_hash_equal(&r, &s))
                die("incremental root of %llu differs from the source's", (unsigned long long)n);
            fprintf(f, "%llu", (unsigned long long)n);
            put_hex(f, &r);
            fputc('\n', f);
        }
        if (n < N_ENTRIES)
            ok(audit_tree_append(&t, &g_leaf[n], &e), &e, "append");
    }
    fclose(f);
}

static void write_proofs(void)
{
    FILE *fi = open_text("inclusion.txt", "w"), *fc = open_text("consistency.txt", "w");
    uint64_t rng = 0xfeed;
    hsmca_err e;
    for (int s = 0; s < 3000; s++) {
        audit_hash p[AUDIT_PROOF_MAX], r2;
        size_t np;
        uint64_t n = s < 300 ? 1 + (uint64_t)s : 1 + atu_rand(&rng) % N_ENTRIES;
        if (s % 500 == 1)
            n = N_ENTRIES;
        uint64_t idx = s < 300 ? atu_rand(&rng) % n : atu_rand(&rng) % n;
        ok(audit_prove_inclusion(idx, n, atu_source, &g_mem, p, &np, &e), &e, "prove inclusion");
        r2 = root_of(n);
        ok(audit_verify_inclusion(idx, n, &g_leaf[idx], p, np, &r2, &e), &e, "verify inclusion");
        fprintf(fi, "%llu %llu", (unsigned long long)idx, (unsigned long long)n);
        for (size_t i = 0; i < np; i++)
            put_hex(fi, &p[i]);
        fputc('\n', fi);
        uint64_t m = s % 7 == 0 ? 0 : s % 7 == 1 ? n : atu_rand(&rng) % (n + 1);
        audit_hash r1 = root_of(m);
        ok(audit_prove_consistency(m, n, atu_source, &g_mem, p, &np, &e), &e, "prove consistency");
        ok(audit_verify_consistency(m, n, &r1, &r2, p, np, &e), &e, "verify consistency");
        fprintf(fc, "%llu %llu", (unsigned long long)m, (unsigned long long)n);
        for (size_t i = 0; i < np; i++)
            put_hex(fc, &p[i]);
        fputc('\n', fc);
    }
    fclose(fi);
    fclose(fc);
}

typedef struct {
    uint64_t old_size, new_size;
    FILE *list;
} tiles_step;

/* Writes one new tile of a checkpoint and, at level 0, its entry bundle. */
static HSMCA_MUSTCHECK hsmca_code write_tile(void *ctx, unsigned level, uint64_t index,
                                             unsigned width, hsmca_err *e)
{
    tiles_step *st = ctx;
    static uint8_t tile[AUDIT_TILE_BYTES];
    char path[AUDIT_TILE_PATH_MAX], rel[AUDIT_TILE_PATH_MAX + 8];
    HSMCA_GUARD(audit_tile_build(level, index, width, atu_source, &g_mem, tile, e));
    HSMCA_GUARD(audit_tile_path(level, index, width, path, e));
    snprintf(rel, sizeof(rel), "log/%s", path);
    put(rel, tile, (size_t)width * AUDIT_HASH_LEN);
    fprintf(st->list, "%llu %llu %u %llu %u\n", (unsigned long long)st->old_size,
            (unsigned long long)st->new_size, level, (unsigned long long)index, width);
    if (level != 0)
        return HSMCA_OK;
    audit_bundle_entry ents[AUDIT_TILE_WIDTH];
    for (unsigned i = 0; i < width; i++)
        ents[i] = (audit_bundle_entry){g_entry[index * 256 + i], g_len[index * 256 + i]};
    uint8_t *b;
    size_t blen;
    static uint8_t again[AUDIT_TILE_BYTES];
    HSMCA_GUARD(audit_bundle_encode(ents, width, &b, &blen, e));
    hsmca_code rc = audit_bundle_tile(b, blen, width, again, e);
    if (rc == HSMCA_OK && memcmp(again, tile, (size_t)width * AUDIT_HASH_LEN) != 0)
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "bundle %llu does not hash to its tile",
                        (unsigned long long)index);
    if (rc == HSMCA_OK)
        rc = audit_bundle_path(index, width, path, e);
    if (rc == HSMCA_OK) {
        snprintf(rel, sizeof(rel), "log/%s", path);
        put(rel, b, blen);
    }
    free(b);
    return rc;
}

static char *sign_checkpoint(uint64_t size, EVP_PKEY *key, const audit_vkey *vk)
{
    audit_checkpoint c;
    memset(&c, 0, sizeof(c));
    strcpy(c.origin, ORIGIN);
    c.size = size;
    c.root = root_of(size);
    char *body, *note;
    size_t len, nlen;
    hsmca_err e;
    ok(audit_checkpoint_body(&c, &body, &len, &e), &e, "checkpoint body");
    ok(audit_note_sign(body, len, vk, atu_ed25519_sign, key, &note, &nlen, &e), &e, "sign");
    free(body);
    return note;
}

static void write_log(EVP_PKEY *key, const audit_vkey *vk)
{
    tiles_step st = {0, 0, open_text("tiles.txt", "w")};
    hsmca_err e;
    for (size_t i = 0; i < N_CHECKPOINTS; i++) {
        st.old_size = i ? CHECKPOINTS[i - 1] : 0;
        st.new_size = CHECKPOINTS[i];
        ok(audit_tiles_new(st.old_size, st.new_size, write_tile, &st, &e), &e, "tiles");
        char *note = sign_checkpoint(st.new_size, key, vk), rel[64];
        snprintf(rel, sizeof(rel), "checkpoints/%llu", (unsigned long long)st.new_size);
        put(rel, note, strlen(note));
        if (i + 1 == N_CHECKPOINTS)
            put("log/checkpoint", note, strlen(note));
        free(note);
    }
    fclose(st.list);
}

/* Notes Go must refuse: one changed byte of text; the right name with another key. */
static void write_bad_notes(EVP_PKEY *key, const audit_vkey *vk)
{
    char *note = sign_checkpoint(300, key, vk);
    note[strlen(ORIGIN) + 1] ^= 1; /* the size's first digit */
    put("bad_text.note", note, strlen(note));
    free(note);
    uint8_t pub[32];
    EVP_PKEY *other = atu_ed25519_key(pub);
    audit_vkey ovk;
    hsmca_err e;
    ok(audit_vkey_from_pub(ORIGIN, pub, &ovk, &e), &e, "other vkey");
    note = sign_checkpoint(300, other, &ovk);
    put("bad_key.note", note, strlen(note));
    free(note);
    EVP_PKEY_free(other);
}

/* ---- pub/: what the publisher writes --------------------------------------------------- */

static const uint64_t PUB_ROUNDS[] = {1, 2, 255, 256, 257, 1000, 65535, 65536, 65537, 66000};
#define PUB_RESTART_AFTER 5 /* rounds, then the log and publisher are closed and reopened */

static void pub_open(const char *dir, const uint8_t *pub, EVP_PKEY *key, audit_log **log,
                     audit_publish **p)
{
    audit_publish_cfg pc = {.dir = dir, .origin = ORIGIN, .pub = pub, .sign = atu_ed25519_sign,
                            .sign_ctx = key, .owner = (uid_t)-1, .group = (gid_t)-1};
    hsmca_err e;
    ok(audit_publish_open(&pc, p, &e), &e, "publish open");
    ok(audit_log_open_ex(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, audit_publish_replay_line, *p, log,
                         NULL, &e),
       &e, "log open");
    ok(audit_publish_attach(*p, *log, &e), &e, "publish attach");
}

static void write_published(EVP_PKEY *key, const uint8_t *pub)
{
    char *dir = path_in("pub/x");
    dir[strlen(dir) - 2] = '\0';
    audit_log *log;
    audit_publish *p;
    pub_open(dir, pub, key, &log, &p);
    static char reason[300];
    uint64_t n = 0;
    hsmca_err e;
    for (size_t r = 0; r < sizeof(PUB_ROUNDS) / sizeof(PUB_ROUNDS[0]); r++) {
        uint64_t seq = 0;
        for (; n < PUB_ROUNDS[r]; n++) {
            size_t len = 1 + (size_t)(n * 7919 % 250);
            memset(reason, 'a' + (int)(n % 26), len);
            audit_entry a = {.kind = AUDIT_RECOVERY, .reason = {reason, len, 0}};
            ok(audit_log_append(log, &a, &seq, &e), &e, "append");
        }
        ok(audit_log_sync_through(log, seq, &e), &e, "sync");
        uint64_t size;
        ok(audit_publish_round(p, &size, &e), &e, "round");
        if (size != PUB_ROUNDS[r])
            die("pub: a round published %llu, not %llu", (unsigned long long)size,
                (unsigned long long)PUB_ROUNDS[r]);
        if (r + 1 == PUB_RESTART_AFTER) {
            audit_publish_free(p);
            audit_log_close(log);
            pub_open(dir, pub, key, &log, &p);
        }
    }
    audit_publish_free(p);
    audit_log_close(log);
    free(dir);
}

static void write_all(void)
{
    static const uint8_t seed[32] = "hsmca audit cross-check key 32B";
    uint8_t pub[32];
    EVP_PKEY *key = atu_ed25519_from_seed(seed, pub);
    audit_vkey vk;
    hsmca_err e;
    ok(audit_vkey_from_pub(ORIGIN, pub, &vk, &e), &e, "vkey");
    char *s, hex[65];
    ok(audit_vkey_format(&vk, &s, &e), &e, "vkey format");
    put("vkey", s, strlen(s));
    free(s);
    util_hex(pub, 32, hex);
    put("pubkey.hex", hex, 64);
    write_entries();
    write_roots();
    write_proofs();
    write_log(key, &vk);
    write_bad_notes(key, &vk);
    write_published(key, pub);
    EVP_PKEY_free(key);
}

/* ---- check -------------------------------------------------------------------------------- */

static char *read_in(const char *rel, size_t *len)
{
    char *p = path_in(rel), *buf;
    hsmca_err e;
    ok(util_read_file(p, 8u << 20, &buf, len, &e), &e, rel); /* the parsers cap notes */
    free(p);
    return buf;
}

/* Go's proofs, checked with audit/ and compared with the ones audit/ makes. */
static void check_go_proofs(void)
{
    size_t len, lines = 0;
    char *text = read_in("go_proofs.txt", &len), *save = NULL;
    hsmca_err e;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char kind[8], *save2 = NULL;
        unsigned long long a, b;
        int at = 0;
        if (sscanf(line, "%7s %llu %llu%n", kind, &a, &b, &at) != 3 || b > N_ENTRIES)
            die("go_proofs.txt: bad line \"%s\"", line);
        audit_hash p[AUDIT_PROOF_MAX], mine[AUDIT_PROOF_MAX], r2 = root_of(b);
        size_t np = 0, nm;
        for (char *tok = strtok_r(line + at, " ", &save2); tok; tok = strtok_r(NULL, " ", &save2)) {
            if (np == AUDIT_PROOF_MAX)
                die("go_proofs.txt: proof too long");
            atu_unhex(tok, p[np++].b, AUDIT_HASH_LEN);
        }
        if (strcmp(kind, "incl") == 0) {
            if (a >= b)
                die("go_proofs.txt: index %llu not below %llu", a, b);
            ok(audit_verify_inclusion(a, b, &g_leaf[a], p, np, &r2, &e), &e, "Go's inclusion");
            ok(audit_prove_inclusion(a, b, atu_source, &g_mem, mine, &nm, &e), &e, "prove");
        } else {
            audit_hash r1 = root_of(a);
            ok(audit_verify_consistency(a, b, &r1, &r2, p, np, &e), &e, "Go's consistency");
            ok(audit_prove_consistency(a, b, atu_source, &g_mem, mine, &nm, &e), &e, "prove");
        }
        if (nm != np || memcmp(mine, p, np * sizeof(audit_hash)) != 0)
            die("go_proofs.txt: Go's %s proof %llu %llu differs from ours", kind, a, b);
        lines++;
    }
    if (lines < 100)
        die("go_proofs.txt: only %zu proofs", lines);
    free(text);
}

static void check_all(void)
{
    size_t len;
    char *vks = read_in("go.vkey", &len);
    if (len && vks[len - 1] == '\n')
        len--;
    audit_vkey vk;
    hsmca_err e;
    ok(audit_vkey_parse(vks, len, &vk, &e), &e, "Go's vkey");
    free(vks);
    char *note = read_in("go.note", &len);
    audit_checkpoint c;
    ok(audit_checkpoint_open(note, len, &vk, &c, &e), &e, "Go's checkpoint");
    audit_hash want = root_of(c.size);
    if (strcmp(c.origin, ORIGIN) != 0 || !audit_hash_equal(&c.root, &want) || c.ext_len == 0)
        die("Go's checkpoint: origin, root or extension line is not what was expected");
    audit_note_sig sigs[AUDIT_NOTE_SIGS_MAX];
    size_t tlen, ns;
    ok(audit_note_parse(note, len, &tlen, sigs, &ns, &e), &e, "Go's note");
    if (ns != 2)
        die("Go's note: %zu signatures, expected Go's two", ns);
    free(note);
    /* Signed by a key we were not given: no signature of ours, so refused. */
    note = read_in("go_unknown.note", &len);
    if (audit_checkpoint_open(note, len, &vk, &c, &e) != HSMCA_EPERM ||
        !strstr(e.msg, "no signature by"))
        die("go_unknown.note: not refused as unsigned by the vkey (%s)", e.msg);
    free(note);
    check_go_proofs();
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "check")))
        die("usage: audit_xwrite write|check DIR");
    g_dir = argv[2];
    make_entries();
    if (strcmp(argv[1], "write") == 0)
        write_all();
    else
        check_all();
    for (size_t i = 0; i < N_ENTRIES; i++)
        free(g_entry[i]);
    free(g_entry);
    free(g_len);
    free(g_leaf);
    atu_tree_free(&g_mem);
    printf("audit_xwrite %s: ok\n", argv[1]);
    return 0;
}

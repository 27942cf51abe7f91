/* audit_fx.c - see audit_fx.h. */
#include "audit_fx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audit_entry.h"
#include "audit_tiles.h"
#include "audit_tu.h"
#include "testutil.h"

static void die(const char *what, const char *why)
{
    fprintf(stderr, "audit_fx: %s: %s\n", what, why);
    abort();
}

static void ok(hsmca_code rc, const hsmca_err *e, const char *what)
{
    if (rc != HSMCA_OK)
        die(what, e->msg);
}

void afx_set(afx_log *l, uint64_t seq, audit_entry *ent)
{
    static char line[AUDIT_LINE_MAX];
    size_t len;
    hsmca_err e;
    ent->seq = seq;
    ent->time = AFX_TIME0 + (int64_t)seq;
    ok(audit_entry_encode(ent, line, &len, &e), &e, "encode");
    char *copy = malloc(len + 1);
    if (!copy)
        die("entries", "out of memory");
    memcpy(copy, line, len);
    copy[len] = '\0';
    if (seq < l->n)
        free(l->lines[seq]);
    l->lines[seq] = copy;
    l->lens[seq] = len;
}

void afx_add(afx_log *l, audit_entry *ent)
{
    afx_set(l, l->n, ent);
    l->n++;
}

void afx_parse(const afx_log *l, uint64_t seq, audit_entry *ent, audit_entry_buf *buf)
{
    hsmca_err e;
    ok(audit_entry_parse(l->lines[seq], l->lens[seq] - 1, ent, buf, &e), &e, "parse");
}

afx_fixture *afx_fixture_new(const char *name, uint64_t n)
{
    afx_fixture *f = calloc(1, sizeof(*f));
    if (!f)
        die("fixture", "out of memory");
    f->dir = tu_mkdtemp(name);
    afx_entries(&f->log, n, 0, NULL);
    f->key = afx_key(0, &f->vk);
    return f;
}

void afx_fixture_free(afx_fixture *f)
{
    tu_system("rm -rf '%s'", f->dir);
    free(f->dir);
    afx_log_free(&f->log);
    EVP_PKEY_free(f->key);
    free(f);
}

static void hex_of(uint64_t v, unsigned salt, char *out, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    uint64_t s = v * 0x9E3779B97F4A7C15ULL + salt + 1;
    for (size_t i = 0; i < n; i++) {
        out[i] = digits[(atu_rand(&s) >> 7) & 15];
    }
    out[n] = '\0';
}

void afx_entries(afx_log *l, uint64_t n, unsigned salt, const char *cert_sha256)
{
    l->lines = calloc(n + AFX_EXTRA, sizeof(char *));
    l->lens = calloc(n + AFX_EXTRA, sizeof(size_t));
    l->n = 0;
    if (!l->lines || !l->lens)
        die("entries", "out of memory");
    if (n == 0)
        return;
    afx_add(l, &(audit_entry){.kind = AUDIT_START});
    int cert_used = 0;
    for (uint64_t k = 0; l->n < n; k++) {
        char who[96], sans[128];
        snprintf(who, sizeof(who), "spiffe://cluster.local/ns/%s/sa/sa%llu",
                 k % 2 ? "prod" : "default", (unsigned long long)(k % 5));
        snprintf(sans, sizeof(sans), "uri:%s", who);
        if (k % 7 == 6) {
            audit_entry d = {.kind = AUDIT_DENY, .request_id = 1000 + k};
            d.requester = (audit_str){who, strlen(who), 0};
            d.reason = (audit_str){"invariant 3: SAN not allowed", 28, 0};
            snprintf(d.code, sizeof(d.code), "PERMISSION_DENIED");
            afx_add(l, &d);
            continue;
        }
        audit_entry in = {.kind = AUDIT_ISSUE_INTENT, .request_id = 1000 + k};
        in.requester = (audit_str){who, strlen(who), 0};
        in.sans = (audit_str){sans, strlen(sans), 0};
        hex_of(k, salt, in.serial, 32);
        in.serial[0] = '4'; /* a positive serial, as the signer makes */
        hex_of(k, salt + 100, in.tbs_sha256, 64);
        hex_of(k, salt + 200, in.csr_sha256, 64);
        in.not_before = AFX_TIME0 + (int64_t)l->n - 60;
        in.not_after = in.not_before + 3600;
        snprintf(in.profile, sizeof(in.profile), "workload");
        uint64_t iseq = l->n;
        afx_add(l, &in);
        if (l->n == n)
            break;
        audit_entry res = {.kind = AUDIT_ISSUE_RESULT, .request_id = in.request_id};
        res.intent_seq = iseq;
        if (k % 11 == 10) {
            snprintf(res.code, sizeof(res.code), "UNAVAILABLE");
            res.error = (audit_str){"token: C_Sign failed", 20, 0};
        } else if (cert_sha256 && !cert_used) {
            snprintf(res.cert_sha256, sizeof(res.cert_sha256), "%s", cert_sha256);
            cert_used = 1;
        } else {
            hex_of(k, salt + 300, res.cert_sha256, 64);
        }
        afx_add(l, &res);
    }
}

void afx_log_free(afx_log *l)
{
    for (uint64_t i = 0; i < l->n; i++)
        free(l->lines[i]);
    free(l->lines);
    free(l->lens);
    memset(l, 0, sizeof(*l));
}

EVP_PKEY *afx_key(unsigned salt, audit_vkey *vk)
{
    uint8_t seed[32] = "hsmca verifier fixture key 32B.", pub[32];
    seed[0] = (uint8_t)(seed[0] + salt);
    EVP_PKEY *key = atu_ed25519_from_seed(seed, pub);
    hsmca_err e;
    ok(audit_vkey_from_pub(AFX_ORIGIN, pub, vk, &e), &e, "vkey");
    return key;
}

EVP_PKEY *afx_ec_key(audit_vkey *vk)
{
    uint8_t spki[AUDIT_KEY_MAX];
    size_t len;
    EVP_PKEY *key = atu_ec_key("P-256", spki, &len);
    hsmca_err e;
    ok(audit_vkey_from_spki(AFX_ORIGIN, spki, len, vk, &e), &e, "EC vkey");
    return key;
}

/* ---- writing ------------------------------------------------------------------------- */

typedef struct {
    const char *dir;
    const afx_log *log;
    atu_tree tree;
} fx_dir;

static void put(const char *dir, const char *rel, const void *data, size_t len)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    for (char *s = p + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            die(p, strerror(errno));
        *s = '/';
    }
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        die(p, strerror(errno));
}

static HSMCA_MUSTCHECK hsmca_code put_tile(void *ctx, unsigned level, uint64_t index,
                                           unsigned width, hsmca_err *e)
{
    fx_dir *d = ctx;
    static uint8_t tile[AUDIT_TILE_BYTES];
    char path[AUDIT_TILE_PATH_MAX];
    HSMCA_GUARD(audit_tile_build(level, index, width, atu_source, &d->tree, tile, e));
    HSMCA_GUARD(audit_tile_path(level, index, width, path, e));
    put(d->dir, path, tile, (size_t)width * AUDIT_HASH_LEN);
    if (level != 0)
        return HSMCA_OK;
    audit_bundle_entry ents[AUDIT_TILE_WIDTH];
    for (unsigned i = 0; i < width; i++) {
        uint64_t s = index * AUDIT_TILE_WIDTH + i;
        ents[i] = (audit_bundle_entry){(const uint8_t *)d->log->lines[s], d->log->lens[s] - 1};
    }
    uint8_t *b;
    size_t blen;
    HSMCA_GUARD(audit_bundle_encode(ents, width, &b, &blen, e));
    hsmca_code rc = audit_bundle_path(index, width, path, e);
    if (rc == HSMCA_OK)
        put(d->dir, path, b, blen);
    free(b);
    return rc;
}

static void leaves_of(const afx_log *l, uint64_t size, atu_tree *t)
{
    audit_hash *h = calloc(size ? size : 1, sizeof(audit_hash));
    if (!h)
        die("leaves", "out of memory");
    hsmca_err e;
    for (uint64_t i = 0; i < size; i++)
        ok(audit_hash_leaf((const uint8_t *)l->lines[i], l->lens[i] - 1, &h[i], &e), &e, "leaf");
    atu_tree_build(t, h, size);
    free(h);
}

char *afx_checkpoint(const afx_log *l, uint64_t size, EVP_PKEY *key, const audit_vkey *vk)
{
    atu_tree t;
    leaves_of(l, size, &t);
    audit_checkpoint c;
    memset(&c, 0, sizeof(c));
    snprintf(c.origin, sizeof(c.origin), "%s", vk->name);
    c.size = size;
    hsmca_err e;
    ok(audit_root_from_source(size, atu_source, &t, &c.root, &e), &e, "root");
    atu_tree_free(&t);
    char *body, *note;
    size_t len, nlen;
    ok(audit_checkpoint_body(&c, &body, &len, &e), &e, "body");
    audit_note_signer sign =
        vk->type == AUDIT_SIG_TYPE_ECDSA ? atu_ecdsa_sign : atu_ed25519_sign;
    ok(audit_note_sign(body, len, vk, sign, key, &note, &nlen, &e), &e, "sign");
    free(body);
    return note;
}

void afx_write(const char *dir, const afx_log *l, const uint64_t *sizes, size_t n, EVP_PKEY *key,
               const audit_vkey *vk)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        die(dir, strerror(errno));
    char path[4096];
    snprintf(path, sizeof(path), "%s/log", dir);
    FILE *f = fopen(path, "wb");
    for (uint64_t i = 0; f && i < l->n; i++)
        if (fwrite(l->lines[i], 1, l->lens[i], f) != l->lens[i])
            die(path, strerror(errno));
    if (!f || fclose(f) != 0)
        die(path, strerror(errno));
    char *s;
    hsmca_err e;
    ok(audit_vkey_format(vk, &s, &e), &e, "vkey format");
    char *withnl = malloc(strlen(s) + 2);
    if (!withnl)
        die("vkey", "out of memory");
    sprintf(withnl, "%s\n", s);
    put(dir, "vkey", withnl, strlen(withnl));
    free(withnl);
    free(s);
    fx_dir d = {dir, l, {0}};
    leaves_of(l, n ? sizes[n - 1] : 0, &d.tree);
    uint64_t old = 0;
    for (size_t i = 0; i < n; i++) {
        ok(audit_tiles_new(old, sizes[i], put_tile, &d, &e), &e, "tiles");
        old = sizes[i];
        char *note = afx_checkpoint(l, sizes[i], key, vk), rel[64];
        snprintf(rel, sizeof(rel), "checkpoints/%llu", (unsigned long long)sizes[i]);
        put(dir, rel, note, strlen(note));
        if (i + 1 == n)
            put(dir, "checkpoint", note, strlen(note));
        free(note);
    }
    atu_tree_free(&d.tree);
}

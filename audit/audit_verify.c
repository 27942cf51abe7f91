/* audit_verify.c - the offline verifier's replay of a log directory (audit_verify.h):
 * the checkpoints it lists, one pass over the log, the tiles, the auditor's state. The
 * serials and the open intents are audit_replay.h's, as at the signer's start. */
#include "audit_verify.h"
#include "audit_verify_int.h"

#include "audit_replay.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

hsmca_code audit_vkey_load(const char *arg, audit_vkey *k, hsmca_err *e)
{
    char *buf = NULL;
    size_t len;
    struct stat st;
    if (stat(arg, &st) == 0) {
        HSMCA_GUARD(util_read_file(arg, AUDIT_VKEY_MAX + 2, &buf, &len, e));
    } else {
        HSMCA_ENSURE(strchr(arg, '+'), e, HSMCA_EIO, "vkey %s: no such file, nor a vkey", arg);
        buf = strdup(arg);
        HSMCA_ENSURE(buf, e, HSMCA_ENOMEM, "out of memory");
        len = strlen(buf);
    }
    if (len && buf[len - 1] == '\n')
        len--;
    hsmca_code rc = audit_vkey_parse(buf, len, k, e);
    free(buf);
    return rc;
}

hsmca_code audit_checkpoint_load(const char *path, const char *what, const audit_vkey *k,
                                 audit_checkpoint *c, hsmca_err *e)
{
    char *note;
    size_t len;
    hsmca_err re;
    hsmca_code rc = util_read_file(path, AUDIT_NOTE_MAX, &note, &len, &re);
    HSMCA_ENSURE(rc == HSMCA_OK, e, rc == HSMCA_EIO ? HSMCA_EIO : HSMCA_EPERM, "%s: %s", what,
                 re.msg);
    if (k) {
        rc = audit_checkpoint_open(note, len, k, c, &re);
    } else {
        /* No key: the note's form and its body, not whose signature it carries. */
        audit_note_sig sigs[AUDIT_NOTE_SIGS_MAX];
        size_t text_len, nsigs;
        rc = audit_note_parse(note, len, &text_len, sigs, &nsigs, &re);
        if (rc == HSMCA_OK)
            rc = audit_checkpoint_parse(note, text_len, c, &re);
    }
    free(note);
    HSMCA_ENSURE(rc == HSMCA_OK, e, HSMCA_EPERM, "%s: %s", what, re.msg);
    HSMCA_ENSURE(!k || strcmp(c->origin, k->name) == 0, e, HSMCA_EPERM,
                 "%s: origin is not the key's name %s", what, k ? k->name : "");
    return HSMCA_OK;
}

/* ---- the checkpoints listed in DIR/checkpoints ------------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A canonical decimal size, as a checkpoint's own size line. */
static int parse_size_name(const char *s, uint64_t *out)
{
    size_t n = strlen(s);
    if (n == 0 || n > 19 || (s[0] == '0' && n > 1))
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return v <= AUDIT_TREE_SIZE_MAX;
}

/* The sizes of DIR/checkpoints/<size>, sorted, into a new array *sizes[0..*n). Names
 * starting with '.' or holding ".tmp" are a writer's temporary files; any other name that
 * is not a size fails. A missing directory is no checkpoints. */
static HSMCA_MUSTCHECK hsmca_code list_checkpoints(const char *dir, uint64_t **sizes, size_t *n,
                                                   hsmca_err *e)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/checkpoints", dir);
    *sizes = NULL;
    *n = 0;
    DIR *d = opendir(path);
    if (!d && errno == ENOENT)
        return HSMCA_OK;
    HSMCA_ENSURE(d, e, HSMCA_EIO, "checkpoints: cannot open: %s", strerror(errno));
    size_t cap = 0;
    hsmca_code rc = HSMCA_OK;
    struct dirent *de;
    while (rc == HSMCA_OK && (de = readdir(d))) {
        uint64_t v;
        if (de->d_name[0] == '.' || strstr(de->d_name, ".tmp"))
            continue;
        if (!parse_size_name(de->d_name, &v)) {
            rc = hsmca_fail(e, HSMCA_EPERM, "checkpoints/%.64s: the name is not a tree size",
                            de->d_name);
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            uint64_t *p = realloc(*sizes, cap * sizeof(uint64_t));
            if (!p) {
                rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
                break;
            }
            *sizes = p;
        }
        (*sizes)[(*n)++] = v;
    }
    closedir(d);
    if (rc != HSMCA_OK) {
        free(*sizes);
        *sizes = NULL;
        *n = 0;
        return rc;
    }
    if (*n)
        qsort(*sizes, *n, sizeof(uint64_t), cmp_u64);
    return HSMCA_OK;
}

/* ---- one pass ------------------------------------------------------------------------- */

typedef struct {
    const audit_verify_opts *o;
    audit_verify_report *r;
    uint64_t *sizes;     /* checkpoints/ */
    size_t nsizes, next; /* sizes[next] is the next to meet */
    int have_state;
    audit_checkpoint state; /* the auditor's saved state */
    audit_tree tree;
    vt_state *tiles;
    audit_replay *replay; /* serials and open intents: the signer's start runs the same */
    char origin[AUDIT_NAME_MAX + 1]; /* the key's name, or without a key the latest's origin */
} vrun;

/* checkpoints/<size> at the point the log has size entries with root. */
static HSMCA_MUSTCHECK hsmca_code meet_checkpoint(vrun *v, uint64_t size, const audit_hash *root,
                                                  hsmca_err *e)
{
    char what[40], path[4200];
    snprintf(what, sizeof(what), "checkpoints/%llu", (unsigned long long)size);
    snprintf(path, sizeof(path), "%s/%s", v->o->dir, what);
    audit_checkpoint c;
    HSMCA_GUARD(audit_checkpoint_load(path, what, v->o->vkey, &c, e));
    HSMCA_ENSURE(c.size == size, e, HSMCA_EPERM,
                 "%s: holds the checkpoint of size %llu (swapped or renamed)", what,
                 (unsigned long long)c.size);
    HSMCA_ENSURE(strcmp(c.origin, v->origin) == 0, e, HSMCA_EPERM,
                 "%s: origin %s is not the latest checkpoint's %s (two logs mixed)", what,
                 c.origin, v->origin);
    HSMCA_ENSURE(audit_hash_equal(&c.root, root), e, HSMCA_EPERM,
                 "%s: its root is not the log's root over seq 0..%llu (an entry before it "
                 "was changed, or the log was rewritten)",
                 what, (unsigned long long)size - (size > 0));
    v->r->checkpoints++;
    return HSMCA_OK;
}

/* What happens when the log reaches size entries (before entry seq size). */
static HSMCA_MUSTCHECK hsmca_code at_size(vrun *v, uint64_t size, hsmca_err *e)
{
    int cp = v->next < v->nsizes && v->sizes[v->next] == size;
    int st = v->have_state && v->state.size == size;
    if (!cp && !st)
        return HSMCA_OK;
    audit_hash root;
    HSMCA_GUARD(audit_tree_root(&v->tree, &root, e));
    if (cp) {
        HSMCA_GUARD(meet_checkpoint(v, size, &root, e));
        v->next++;
    }
    if (st)
        HSMCA_ENSURE(audit_hash_equal(&v->state.root, &root), e, HSMCA_EPERM,
                     "state %s: the log's root at size %llu is not the one the auditor saw "
                     "(the log was rewritten or forked)",
                     v->o->state, (unsigned long long)size);
    return HSMCA_OK;
}

/* One line: framing is done; the entry, its seq, the replay's rules, tree and tiles. */
static HSMCA_MUSTCHECK hsmca_code one_entry(vrun *v, uint64_t seq, uint64_t off, const char *line,
                                            size_t len, hsmca_err *e)
{
    static _Thread_local audit_entry_buf buf;
    audit_entry ent;
    hsmca_err pe;
    HSMCA_ENSURE(audit_entry_parse(line, len, &ent, &buf, &pe) == HSMCA_OK, e, HSMCA_EPERM,
                 "log seq %llu (byte %llu): %s", (unsigned long long)seq, (unsigned long long)off,
                 pe.msg);
    HSMCA_ENSURE(ent.seq == seq, e, HSMCA_EPERM,
                 "log seq %llu (byte %llu): the entry says seq %llu (a line was deleted, "
                 "inserted or moved)",
                 (unsigned long long)seq, (unsigned long long)off, (unsigned long long)ent.seq);
    const char *kind = audit_kind_name(ent.kind);
    size_t klen = kind ? strlen(kind) : 0;
    if (klen >= 4 && strcmp(kind + klen - 4, "deny") == 0 && ent.kind != AUDIT_ICA_DENY)
        v->r->denies++;
    HSMCA_GUARD(audit_replay_entry(v->replay, &ent, off, e));
    if (v->o->on_entry) {
        hsmca_err oe;
        hsmca_code rc = v->o->on_entry(v->o->ctx, &ent, &oe);
        HSMCA_ENSURE(rc == HSMCA_OK, e, rc == HSMCA_ENOMEM ? rc : HSMCA_EPERM,
                     "log seq %llu (byte %llu): %s", (unsigned long long)seq,
                     (unsigned long long)off, oe.msg);
    }
    if (ent.kind == AUDIT_ISSUE_INTENT)
        v->r->intents++;
    else if (ent.kind == AUDIT_ISSUE_RESULT && ent.cert_sha256[0])
        v->r->certificates++;
    else if (ent.kind == AUDIT_ISSUE_RESULT)
        v->r->failed++;
    audit_hash leaf;
    HSMCA_GUARD(audit_hash_leaf((const uint8_t *)line, len, &leaf, e));
    if (seq < v->r->size)
        HSMCA_GUARD(vt_leaf(v->tiles, seq, off, line, len, &leaf, e));
    HSMCA_GUARD(audit_tree_append(&v->tree, &leaf, e));
    return at_size(v, seq + 1, e);
}

static HSMCA_MUSTCHECK hsmca_code replay(vrun *v, hsmca_err *e)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/log", v->o->dir);
    audit_lines *lr;
    HSMCA_GUARD(audit_lines_open(path, &lr, e));
    hsmca_code rc = at_size(v, 0, e);
    uint64_t seq = 0;
    while (rc == HSMCA_OK) {
        const char *line;
        size_t len;
        uint64_t off;
        int eof;
        rc = audit_lines_next(lr, &line, &len, &off, &eof, e);
        if (rc == HSMCA_OK && eof)
            break;
        if (rc == HSMCA_OK)
            rc = one_entry(v, seq++, off, line, len, e);
    }
    audit_lines_close(lr);
    HSMCA_GUARD(rc);
    v->r->entries = seq;
    HSMCA_ENSURE(v->next == v->nsizes, e, HSMCA_EPERM,
                 "checkpoints/%llu: covers %llu entries but the log has only %llu (truncated, or "
                 "lines deleted)",
                 (unsigned long long)v->sizes[v->next], (unsigned long long)v->sizes[v->next],
                 (unsigned long long)seq);
    HSMCA_ENSURE(!v->have_state || v->state.size <= seq, e, HSMCA_EPERM,
                 "state %s: the auditor saw size %llu, the log has only %llu entries", v->o->state,
                 (unsigned long long)v->state.size, (unsigned long long)seq);
    return vt_finish(v->tiles, e);
}

/* ---- the auditor's state ------------------------------------------------------------------ */

static HSMCA_MUSTCHECK hsmca_code load_state(vrun *v, hsmca_err *e)
{
    char *text;
    size_t len;
    struct stat st;
    if (stat(v->o->state, &st) != 0 && errno == ENOENT) {
        v->r->state_new = 1;
        return HSMCA_OK;
    }
    HSMCA_GUARD(util_read_file(v->o->state, AUDIT_CHECKPOINT_MAX, &text, &len, e));
    hsmca_err pe;
    hsmca_code rc = audit_checkpoint_parse(text, len, &v->state, &pe);
    free(text);
    HSMCA_ENSURE(rc == HSMCA_OK, e, HSMCA_EPERM, "state %s: %s", v->o->state, pe.msg);
    HSMCA_ENSURE(!v->origin[0] || strcmp(v->state.origin, v->origin) == 0, e, HSMCA_EPERM,
                 "state %s: origin %s is not this log's %s", v->o->state, v->state.origin,
                 v->origin);
    HSMCA_ENSURE(v->state.size <= v->r->size, e, HSMCA_EPERM,
                 "state %s: the auditor saw size %llu, the latest checkpoint is %llu (the log "
                 "was shortened or rolled back)",
                 v->o->state, (unsigned long long)v->state.size, (unsigned long long)v->r->size);
    v->have_state = 1;
    v->r->state_size = v->state.size;
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code save_state(vrun *v, hsmca_err *e)
{
    audit_checkpoint c;
    memset(&c, 0, sizeof(c));
    snprintf(c.origin, sizeof(c.origin), "%s", v->origin);
    c.size = v->r->size;
    c.root = v->r->root;
    char *body;
    size_t len;
    HSMCA_GUARD(audit_checkpoint_body(&c, &body, &len, e));
    hsmca_code rc = util_write_file_atomic(v->o->state, body, len, 0644, e);
    free(body);
    return rc;
}

/* ---- the whole ------------------------------------------------------------------------- */

/* A live directory: checkpoint was replaced after checkpoints/ was listed, by a larger
 * one that the publisher wrote to checkpoints/<its size> first (the same bytes). What was
 * listed is what this run verified; a smaller or unmatched checkpoint is still refused. */
static int grew_since(const vrun *v, const char *path, uint64_t max)
{
    audit_checkpoint now;
    hsmca_err ignored;
    char what[40], cpath[4096];
    if (audit_checkpoint_load(path, "checkpoint", v->o->vkey, &now, &ignored) != HSMCA_OK ||
        now.size <= max)
        return 0;
    snprintf(what, sizeof(what), "checkpoints/%llu", (unsigned long long)now.size);
    snprintf(cpath, sizeof(cpath), "%s/%s", v->o->dir, what);
    char *a = NULL, *b = NULL;
    size_t alen, blen;
    int same = util_read_file(path, AUDIT_NOTE_MAX, &a, &alen, &ignored) == HSMCA_OK &&
               util_read_file(cpath, AUDIT_NOTE_MAX, &b, &blen, &ignored) == HSMCA_OK &&
               alen == blen && memcmp(a, b, alen) == 0;
    free(a);
    free(b);
    return same;
}

/* DIR/checkpoint and the largest of checkpoints/: the same bytes, verified. */
static HSMCA_MUSTCHECK hsmca_code latest(vrun *v, hsmca_err *e)
{
    char path[4096], cpath[4096];
    snprintf(path, sizeof(path), "%s/checkpoint", v->o->dir);
    struct stat st;
    if (v->nsizes == 0) {
        HSMCA_ENSURE(stat(path, &st) != 0, e, HSMCA_EPERM,
                     "checkpoint: exists, but checkpoints/ holds none");
        return HSMCA_OK;
    }
    uint64_t max = v->sizes[v->nsizes - 1];
    char what[40];
    snprintf(what, sizeof(what), "checkpoints/%llu", (unsigned long long)max);
    snprintf(cpath, sizeof(cpath), "%s/%s", v->o->dir, what);
    HSMCA_ENSURE(stat(path, &st) == 0, e, HSMCA_EPERM, "checkpoint: missing (%s is the latest)",
                 what);
    audit_checkpoint c;
    HSMCA_GUARD(audit_checkpoint_load(cpath, what, v->o->vkey, &c, e));
    HSMCA_ENSURE(c.size == max, e, HSMCA_EPERM,
                 "%s: holds the checkpoint of size %llu (swapped or renamed)", what,
                 (unsigned long long)c.size);
    char *a = NULL, *b = NULL;
    size_t alen, blen;
    hsmca_err re;
    hsmca_code rc = util_read_file(path, AUDIT_NOTE_MAX, &a, &alen, &re);
    if (rc == HSMCA_OK)
        rc = util_read_file(cpath, AUDIT_NOTE_MAX, &b, &blen, &re);
    int same = rc == HSMCA_OK && alen == blen && memcmp(a, b, alen) == 0;
    free(a);
    free(b);
    HSMCA_ENSURE(rc == HSMCA_OK, e, HSMCA_EPERM, "checkpoint: %s", re.msg);
    HSMCA_ENSURE(same || grew_since(v, path, max), e, HSMCA_EPERM,
                 "checkpoint: is not the same bytes as %s, the largest", what);
    v->r->size = c.size;
    v->r->root = c.root;
    snprintf(v->origin, sizeof(v->origin), "%s", c.origin);
    return HSMCA_OK;
}

hsmca_code audit_verify(const audit_verify_opts *o, audit_verify_report *r, hsmca_err *e)
{
    memset(r, 0, sizeof(*r));
    vrun v;
    memset(&v, 0, sizeof(v));
    v.o = o;
    v.r = r;
    if (o->vkey)
        snprintf(v.origin, sizeof(v.origin), "%s", o->vkey->name);
    audit_tree_init(&v.tree);
    HSMCA_GUARD(list_checkpoints(o->dir, &v.sizes, &v.nsizes, e));
    hsmca_code rc = latest(&v, e);
    if (rc == HSMCA_OK && o->state)
        rc = load_state(&v, e);
    if (rc == HSMCA_OK)
        rc = vt_new(o->dir, r->size, &v.tiles, e);
    if (rc == HSMCA_OK)
        rc = audit_replay_new(&v.replay, e);
    if (rc == HSMCA_OK)
        rc = replay(&v, e);
    uint64_t bseq;
    const char *broken = rc == HSMCA_OK ? audit_replay_ca_broken(v.replay, &bseq) : NULL;
    if (broken) /* every other check ran to the end: only the CA profile's rules stopped */
        rc = hsmca_fail(e, HSMCA_EPERM,
                        "a CA-profile rule is broken at log seq %llu: %s. The rest verified: "
                        "framing, checkpoints, tiles and the workload entries' rules to the "
                        "end; the intermediate and CRL entries after seq %llu were not "
                        "checked. The signer serves workloads with its CA profile closed "
                        "(docs/OPERATIONS.md, \"A broken CA-profile rule\")",
                        (unsigned long long)bseq, broken, (unsigned long long)bseq);
    if (rc == HSMCA_OK) {
        snprintf(r->origin, sizeof(r->origin), "%s", v.origin);
        r->open_intents = audit_replay_open_count(v.replay);
        r->first_open = audit_replay_open_first(v.replay);
    }
    /* The state remembers what was verified: without a key, no signature was. */
    if (rc == HSMCA_OK && o->state && o->vkey && v.nsizes > 0)
        rc = save_state(&v, e);
    vt_free(v.tiles);
    audit_replay_free(v.replay);
    free(v.sizes);
    return rc;
}

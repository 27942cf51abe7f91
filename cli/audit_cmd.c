/* audit_cmd.c - `hsmca audit verify|prove|consistency|vkey` (audit_cmd.h); `show` is in
 * audit_show.c. Every command reads files only: an auditor runs them on a copy. */
#include "audit_cmd.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "audit_verify.h"
#include "util.h"

const char *audit_cmd_path(char *out, size_t cap, const char *dir, const char *rel)
{
    int n = snprintf(out, cap, "%s/%s", dir, rel);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "hsmca audit: %s: path too long\n", dir);
        exit(2);
    }
    return out;
}

static void usage(FILE *f)
{
    fputs("usage: hsmca audit COMMAND [flags]   (hsmca audit COMMAND --help for its flags)\n"
          "\n"
          "Checks the signing log a CA keeps in its audit directory (audit.dir: log, vkey,\n"
          "checkpoint, checkpoints/, tile/), offline: no token or server needed.\n"
          "\n"
          "Commands:\n"
          "  verify DIR [--vkey K] [--state F]   replay and check everything; one-line summary\n"
          "  prove --cert CERT.pem DIR           inclusion proof of a certificate's result entry\n"
          "  consistency OLD NEW [--dir DIR]     consistency proof between two checkpoints\n"
          "  show DIR [filters] [--json]         the entries as a table (or JSON lines)\n"
          "  vkey DIR                            print the log's verifier key\n"
          "\n"
          "Exit status: 0 verified, 1 does not verify (the message names the entry,\n"
          "checkpoint or tile that broke and why), 2 bad usage.\n",
          f);
}

static int is_help(const char *a)
{
    return !strcmp(a, "--help") || !strcmp(a, "-h");
}

static char *b64(const audit_hash *h)
{
    char *s = util_b64_encode(h->b, AUDIT_HASH_LEN);
    if (!s) {
        fputs("hsmca audit: out of memory\n", stderr);
        exit(1);
    }
    return s;
}

/* The verifier key: --vkey K, else DIR/vkey. */
static int load_vkey(const char *cmd, const char *arg, const char *dir, audit_vkey *k)
{
    char path[4096];
    if (!arg) {
        audit_cmd_path(path, sizeof(path), dir, "vkey");
        arg = path;
    }
    hsmca_err e;
    if (audit_vkey_load(arg, k, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca audit %s: vkey: %s\n", cmd, e.msg);
        return 0;
    }
    return 1;
}

/* ---- verify ------------------------------------------------------------------------------ */

static int verify_main(int argc, char **argv)
{
    const char *dir = NULL, *vkey = NULL, *state = NULL;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            puts("usage: hsmca audit verify DIR [--vkey K] [--state F]\n"
                 "\n"
                 "Replays the signing log in DIR and checks: every line ends in a newline and\n"
                 "is at most 64 KiB; every entry is canonical JSON; seq is the line index;\n"
                 "every issue-result names an earlier issue-intent without a result (its seq\n"
                 "and request_id), none is left open at a later start, and no serial is in\n"
                 "two intents of one CA key while valid; every checkpoint in DIR/checkpoints/ is\n"
                 "signed by the key, has the key's name as origin, the size its file name\n"
                 "says, and the root of the log's first SIZE entries (so they all are one\n"
                 "tree that only grows); DIR/checkpoint is the largest of them; the tiles\n"
                 "and entry bundles of the latest checkpoint hold what the log holds.\n"
                 "\n"
                 "  --vkey K   the verifier key: a file, or the vkey string itself\n"
                 "             (default DIR/vkey; pass the one you got from the CA's\n"
                 "             operator out of band, or DIR could sign itself)\n"
                 "  --state F  the auditor's memory: F holds the origin, size and root of the\n"
                 "             checkpoint the last run verified (a checkpoint body); the log\n"
                 "             must still have that root at that size (not forked, rewritten\n"
                 "             or rolled back). F is created when missing and replaced\n"
                 "             atomically by the latest checkpoint after a run that verifies.\n"
                 "\n"
                 "Prints one line: 'OK: E entries (C certificates, X failed, D denies),\n"
                 "K checkpoints, latest size N root R' ('latest none' without a checkpoint;\n"
                 "warnings on stderr for that and for intents\n"
                 "still without a result at the end), exit 0; or 'FAILED: why' naming the\n"
                 "first entry (log seq S (byte B)), checkpoint or tile that breaks, exit 1.");
            return 0;
        }
        if (!strcmp(argv[i], "--vkey") && i + 1 < argc)
            vkey = argv[++i];
        else if (!strcmp(argv[i], "--state") && i + 1 < argc)
            state = argv[++i];
        else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else {
            fprintf(stderr, "hsmca audit verify: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!dir) {
        fputs("hsmca audit verify: DIR is required\n", stderr);
        return 2;
    }
    audit_vkey k;
    if (!load_vkey("verify", vkey, dir, &k))
        return 1;
    audit_verify_opts o = {dir, &k, state};
    audit_verify_report r;
    hsmca_err e;
    if (audit_verify(&o, &r, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca audit verify: FAILED: %s\n", e.msg);
        return 1;
    }
    char *root = b64(&r.root), st[80] = "";
    if (state && r.checkpoints == 0)
        snprintf(st, sizeof(st), ", state unchanged (no checkpoint)");
    else if (state && r.state_new)
        snprintf(st, sizeof(st), ", state created");
    else if (state)
        snprintf(st, sizeof(st), ", state advanced from size %llu",
                 (unsigned long long)r.state_size);
    char latest[120] = "latest none";
    if (r.checkpoints)
        snprintf(latest, sizeof(latest), "latest size %llu root %s", (unsigned long long)r.size,
                 root);
    printf("OK: %llu entries (%llu certificates, %llu failed, %llu denies), %llu checkpoints, "
           "%s%s\n",
           (unsigned long long)r.entries, (unsigned long long)r.certificates,
           (unsigned long long)r.failed, (unsigned long long)r.denies,
           (unsigned long long)r.checkpoints, latest, st);
    free(root);
    if (r.open_intents)
        fprintf(stderr,
                "hsmca audit verify: warning: %llu intent(s) without a result yet (first at seq "
                "%llu): in flight, or the signer has not restarted since it stopped\n",
                (unsigned long long)r.open_intents, (unsigned long long)r.first_open);
    if (r.checkpoints == 0)
        fputs("hsmca audit verify: warning: no checkpoint: nothing in the log is signed\n", stderr);
    return 0;
}

/* ---- prove ------------------------------------------------------------------------------- */

/* SHA-256 of the certificate's DER (PEM, or DER as is) as lowercase hex into hex. */
static int cert_hash(const char *path, char hex[65])
{
    char *buf;
    size_t len;
    hsmca_err e;
    if (util_read_file(path, 1u << 20, &buf, &len, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca audit prove: %s\n", e.msg);
        return 0;
    }
    BIO *bio = BIO_new_mem_buf(buf, (int)len);
    X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    const unsigned char *p = (const unsigned char *)buf;
    if (!x)
        x = d2i_X509(NULL, &p, (long)len);
    BIO_free(bio);
    free(buf);
    unsigned char *der = NULL, md[32];
    int n = x ? i2d_X509(x, &der) : -1;
    X509_free(x);
    if (n <= 0) {
        fprintf(stderr, "hsmca audit prove: %s: not a certificate (PEM or DER)\n", path);
        return 0;
    }
    int ok = EVP_Digest(der, (size_t)n, md, NULL, EVP_sha256(), NULL) == 1;
    OPENSSL_free(der);
    if (ok)
        util_hex(md, 32, hex);
    return ok;
}

typedef struct {
    uint64_t seq, intent_seq;
    char *line; /* the result's line (malloc'd) */
    size_t len;
    int found;
} found_result;

int audit_cmd_each_entry(const char *dir, const char *cmd, audit_cmd_entry_fn fn, void *ctx)
{
    char path[4096];
    audit_cmd_path(path, sizeof(path), dir, "log");
    audit_lines *lr;
    hsmca_err e;
    if (audit_lines_open(path, &lr, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca audit %s: %s\n", cmd, e.msg);
        return 0;
    }
    static audit_entry_buf buf;
    int ok = 1;
    for (uint64_t seq = 0;; seq++) {
        const char *line;
        size_t len;
        uint64_t off;
        int eof;
        audit_entry ent;
        if (audit_lines_next(lr, &line, &len, &off, &eof, &e) != HSMCA_OK) {
            fprintf(stderr, "hsmca audit %s: %s\n", cmd, e.msg);
            ok = 0;
            break;
        }
        if (eof)
            break;
        if (audit_entry_parse(line, len, &ent, &buf, &e) != HSMCA_OK) {
            fprintf(stderr, "hsmca audit %s: log seq %llu (byte %llu): %s\n", cmd,
                    (unsigned long long)seq, (unsigned long long)off, e.msg);
            ok = 0;
            break;
        }
        int go = fn(ctx, seq, &ent, line, len);
        if (go <= 0) {
            ok = go == 0;
            break;
        }
    }
    audit_lines_close(lr);
    return ok;
}

/* What scan_log looks for: the issue-result with cert_sha256 hex (hex set), or the line
 * at seq want (hex NULL), copied into fr. */
typedef struct {
    const char *hex;
    uint64_t want;
    found_result *fr;
} scan_ctx;

static char *copy_line(const char *line, size_t len)
{
    char *p = malloc(len ? len : 1);
    if (p)
        memcpy(p, line, len);
    return p;
}

static int scan_entry(void *ctx, uint64_t seq, const audit_entry *ent, const char *line, size_t len)
{
    scan_ctx *sc = ctx;
    found_result *fr = sc->fr;
    if (sc->hex ? ent->kind != AUDIT_ISSUE_RESULT || strcmp(ent->cert_sha256, sc->hex)
                : seq != sc->want)
        return 1;
    fr->seq = seq;
    fr->intent_seq = ent->intent_seq;
    fr->line = copy_line(line, len);
    fr->len = len;
    fr->found = fr->line != NULL;
    return 0;
}

/* Finds the issue-result with cert_sha256 hex in DIR/log (hex set), or the line at seq
 * want (hex NULL), into *fr (fr->line malloc'd). 0 when the log could not be read. */
static int scan_log(const char *dir, const char *hex, uint64_t want, found_result *fr)
{
    scan_ctx sc = {hex, want, fr};
    return audit_cmd_each_entry(dir, "prove", scan_entry, &sc);
}

/* Proves line (entry seq) in the tree of c from the tiles of dir; prints it when print. */
static int prove_entry(const char *dir, const audit_checkpoint *c, uint64_t seq, const char *line,
                       size_t len, int print)
{
    audit_hash leaf, proof[AUDIT_PROOF_MAX];
    size_t n;
    hsmca_err e;
    audit_tile_reader *t = malloc(sizeof(*t));
    if (!t)
        return 0;
    audit_tile_reader_init(t, dir, c->size);
    hsmca_code rc = audit_hash_leaf((const uint8_t *)line, len, &leaf, &e);
    if (rc == HSMCA_OK)
        rc = audit_prove_inclusion(seq, c->size, audit_tile_reader_source, t, proof, &n, &e);
    free(t);
    if (rc == HSMCA_OK)
        rc = audit_verify_inclusion(seq, c->size, &leaf, proof, n, &c->root, &e);
    if (rc != HSMCA_OK) {
        fprintf(stderr, "hsmca audit prove: FAILED: the inclusion of seq %llu: %s\n",
                (unsigned long long)seq, e.msg);
        return 0;
    }
    if (!print)
        return 1;
    char *s = b64(&leaf);
    printf("leaf_index: %llu\nleaf_hash: %s\nproof: %zu hashes\n", (unsigned long long)seq, s, n);
    free(s);
    for (size_t i = 0; i < n; i++) {
        s = b64(&proof[i]);
        printf("  %s\n", s);
        free(s);
    }
    return 1;
}

static int prove_main(int argc, char **argv)
{
    const char *dir = NULL, *cert = NULL, *vkey = NULL;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            puts("usage: hsmca audit prove --cert CERT.pem DIR [--vkey K]\n"
                 "\n"
                 "Finds the issue-result entry whose cert_sha256 is the SHA-256 of the\n"
                 "certificate's DER (PEM or DER file) and its issue-intent, and prints an\n"
                 "RFC 9162 inclusion proof of the result entry in the tree of the latest\n"
                 "checkpoint (DIR/checkpoint, verified with --vkey K or DIR/vkey), built from\n"
                 "the tiles in DIR and checked before it is printed:\n"
                 "\n"
                 "  cert_sha256: HEX\n"
                 "  intent: seq S serial HEX requester ID\n"
                 "  origin: ORIGIN\n"
                 "  tree_size: N\n"
                 "  root: BASE64\n"
                 "  leaf_index: SEQ\n"
                 "  leaf_hash: BASE64        (SHA-256(0x00 || the entry's line))\n"
                 "  proof: K hashes\n"
                 "    BASE64                 (one per line, from the leaf's sibling up)\n"
                 "  verified: ...\n"
                 "\n"
                 "Exit 1 when the certificate is not in the log, not yet covered by the\n"
                 "latest checkpoint, or a proof does not verify.");
            return 0;
        }
        if (!strcmp(argv[i], "--cert") && i + 1 < argc)
            cert = argv[++i];
        else if (!strcmp(argv[i], "--vkey") && i + 1 < argc)
            vkey = argv[++i];
        else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else {
            fprintf(stderr, "hsmca audit prove: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!dir || !cert) {
        fputs("hsmca audit prove: --cert CERT.pem and DIR are required\n", stderr);
        return 2;
    }
    audit_vkey k;
    char hex[65], path[4096];
    if (!load_vkey("prove", vkey, dir, &k) || !cert_hash(cert, hex))
        return 1;
    audit_checkpoint c;
    hsmca_err e;
    audit_cmd_path(path, sizeof(path), dir, "checkpoint");
    if (audit_checkpoint_load(path, "checkpoint", &k, &c, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca audit prove: FAILED: %s\n", e.msg);
        return 1;
    }
    found_result fr = {0}, in = {0};
    if (!scan_log(dir, hex, 0, &fr))
        return 1;
    if (!fr.found) {
        fprintf(stderr, "hsmca audit prove: no issue-result with cert_sha256 %s in %s/log\n", hex,
                dir);
        return 1;
    }
    int rc = 1;
    if (fr.seq >= c.size) {
        fprintf(stderr,
                "hsmca audit prove: the result is seq %llu, the latest checkpoint covers only "
                "%llu entries: try again after the next checkpoint\n",
                (unsigned long long)fr.seq, (unsigned long long)c.size);
        goto out;
    }
    if (!scan_log(dir, NULL, fr.intent_seq, &in) || !in.found) {
        fprintf(stderr, "hsmca audit prove: intent seq %llu not found\n",
                (unsigned long long)fr.intent_seq);
        goto out;
    }
    static audit_entry_buf ib;
    audit_entry ient;
    if (audit_entry_parse(in.line, in.len, &ient, &ib, &e) != HSMCA_OK ||
        ient.kind != AUDIT_ISSUE_INTENT) {
        fprintf(stderr, "hsmca audit prove: FAILED: seq %llu is not the result's issue-intent\n",
                (unsigned long long)fr.intent_seq);
        goto out;
    }
    char req[512], *root = b64(&c.root);
    printf("cert_sha256: %s\nintent: seq %llu serial %s requester %s\norigin: %s\n"
           "tree_size: %llu\nroot: %s\n",
           hex, (unsigned long long)fr.intent_seq, ient.serial,
           util_printable(ient.requester.p ? ient.requester.p : "", ient.requester.len, req,
                          sizeof(req)),
           c.origin, (unsigned long long)c.size, root);
    free(root);
    /* the intent is proven too (not printed): a result without its intent proves little */
    if (prove_entry(dir, &c, fr.seq, fr.line, fr.len, 1) &&
        prove_entry(dir, &c, fr.intent_seq, in.line, in.len, 0)) {
        printf("verified: entries %llu (issue-result) and %llu (issue-intent) are in the tree "
               "of the checkpoint of size %llu\n",
               (unsigned long long)fr.seq, (unsigned long long)fr.intent_seq,
               (unsigned long long)c.size);
        rc = 0;
    }
out:
    free(fr.line);
    free(in.line);
    return rc;
}

/* ---- consistency ------------------------------------------------------------------------- */

/* The audit directory of a checkpoint file: its directory, or that one's parent when it
 * is checkpoints/. Into out. */
static void dir_of(const char *file, char *out, size_t cap)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s", file) >= (int)sizeof(tmp))
        tmp[0] = '\0';
    char *d = dirname(tmp);
    size_t n = strlen(d);
    if (!strcmp(d, "checkpoints") || (n >= 12 && !strcmp(d + n - 12, "/checkpoints"))) {
        audit_cmd_path(out, cap, d, "..");
        return;
    }
    audit_cmd_path(out, cap, d, ".");
}

static int consistency_main(int argc, char **argv)
{
    const char *files[2] = {NULL, NULL}, *dir = NULL, *vkey = NULL;
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            puts("usage: hsmca audit consistency OLD NEW [--dir DIR] [--vkey K]\n"
                 "\n"
                 "Verifies the two checkpoint notes OLD and NEW (files) with the verifier\n"
                 "key (--vkey K: a file or the vkey string; default DIR/vkey), builds the\n"
                 "RFC 9162 consistency proof that the tree of OLD is a prefix of the tree of\n"
                 "NEW from the tiles in DIR (default: NEW's directory, or its parent when NEW\n"
                 "is in checkpoints/), checks it and prints:\n"
                 "\n"
                 "  old: ORIGIN size N1 root BASE64\n"
                 "  new: ORIGIN size N2 root BASE64\n"
                 "  proof: K hashes\n"
                 "    BASE64\n"
                 "  verified: ...\n"
                 "\n"
                 "Exit 1 when a note does not verify or the trees are not consistent (a\n"
                 "fork, or OLD is larger than NEW).");
            return 0;
        }
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--vkey") && i + 1 < argc)
            vkey = argv[++i];
        else if (argv[i][0] != '-' && nf < 2)
            files[nf++] = argv[i];
        else {
            fprintf(stderr, "hsmca audit consistency: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (nf != 2) {
        fputs("hsmca audit consistency: OLD and NEW are required\n", stderr);
        return 2;
    }
    char dbuf[4096];
    if (!dir) {
        dir_of(files[1], dbuf, sizeof(dbuf));
        dir = dbuf;
    }
    audit_vkey k;
    if (!load_vkey("consistency", vkey, dir, &k))
        return 1;
    audit_checkpoint c[2];
    hsmca_err e;
    for (int i = 0; i < 2; i++)
        if (audit_checkpoint_load(files[i], files[i], &k, &c[i], &e) != HSMCA_OK) {
            fprintf(stderr, "hsmca audit consistency: FAILED: %s\n", e.msg);
            return 1;
        }
    if (c[0].size > c[1].size) {
        fprintf(stderr, "hsmca audit consistency: FAILED: OLD has size %llu, NEW only %llu\n",
                (unsigned long long)c[0].size, (unsigned long long)c[1].size);
        return 1;
    }
    audit_hash proof[AUDIT_PROOF_MAX];
    size_t n = 0;
    audit_tile_reader *t = malloc(sizeof(*t));
    if (!t)
        return 1;
    audit_tile_reader_init(t, dir, c[1].size);
    hsmca_code rc =
        audit_prove_consistency(c[0].size, c[1].size, audit_tile_reader_source, t, proof, &n, &e);
    free(t);
    if (rc != HSMCA_OK) {
        fprintf(stderr, "hsmca audit consistency: cannot build the proof from %s: %s\n", dir,
                e.msg);
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        char *root = b64(&c[i].root);
        printf("%s: %s size %llu root %s\n", i ? "new" : "old", c[i].origin,
               (unsigned long long)c[i].size, root);
        free(root);
    }
    printf("proof: %zu hashes\n", n);
    for (size_t i = 0; i < n; i++) {
        char *s = b64(&proof[i]);
        printf("  %s\n", s);
        free(s);
    }
    if (audit_verify_consistency(c[0].size, c[1].size, &c[0].root, &c[1].root, proof, n, &e) !=
        HSMCA_OK) {
        fprintf(stderr, "hsmca audit consistency: FAILED: %s (the logs forked)\n", e.msg);
        return 1;
    }
    printf("verified: the tree of size %llu is a prefix of the tree of size %llu\n",
           (unsigned long long)c[0].size, (unsigned long long)c[1].size);
    return 0;
}

/* ---- vkey -------------------------------------------------------------------------------- */

static int vkey_main(int argc, char **argv)
{
    if (argc != 2 || is_help(argv[1])) {
        puts("usage: hsmca audit vkey DIR\n"
             "\n"
             "Prints the verifier key of the log's audit key (C2SP vkey form\n"
             "name+keyid+base64, the name being the checkpoints' origin) from DIR/vkey,\n"
             "which the signer writes from the key in the token. Hand it to auditors and\n"
             "witnesses out of band: `verify --vkey` then trusts it, not the directory.");
        return argc == 2 ? 0 : 2;
    }
    char path[4096];
    audit_cmd_path(path, sizeof(path), argv[1], "vkey");
    audit_vkey k;
    hsmca_err e;
    char *s;
    if (audit_vkey_load(path, &k, &e) != HSMCA_OK || audit_vkey_format(&k, &s, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca audit vkey: %s: %s\n", path, e.msg);
        return 1;
    }
    puts(s);
    free(s);
    return 0;
}

int audit_main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "verify"))
        return verify_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "prove"))
        return prove_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "consistency"))
        return consistency_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "show"))
        return audit_show_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "vkey"))
        return vkey_main(argc - 1, argv + 1);
    if (is_help(cmd) || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "hsmca audit: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}

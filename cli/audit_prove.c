/* audit_prove.c - `hsmca audit prove` (audit_prove.h): the inclusion proof of a
 * certificate's issue-result entry, and of its issue-intent, in the tree of the latest
 * checkpoint, built from the tiles and checked before it is printed. */
#include "audit_prove.h"
#include "audit_cmd_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "audit_verify.h"
#include "cli_opts.h"
#include "util.h"

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
    char *s = audit_cmd_b64(&leaf);
    printf("leaf_index: %llu\nleaf_hash: %s\nproof: %zu hashes\n", (unsigned long long)seq, s, n);
    free(s);
    audit_cmd_print_hashes(proof, n);
    return 1;
}

static const char prove_help[] =
    "usage: hsmca audit prove --cert CERT.pem DIR [--vkey K]\n"
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
    "latest checkpoint, or a proof does not verify.";

static const struct option prove_flags[] = {{"cert", required_argument, 0, 'c'},
                                            {"vkey", required_argument, 0, 'k'},
                                            {"help", no_argument, 0, 'h'},
                                            {0, 0, 0, 0}};

/* The issue-result of the certificate whose hash is hex (fr) and its issue-intent (in,
 * parsed into *ient) from DIR/log; the result must be in the tree of c. fr->line and
 * in->line are malloc'd (the caller frees them, found or not); ient's strings live
 * until the next call. 0 when one is missing or the result is beyond c: said. */
static int find_issue(const char *dir, const char *hex, const audit_checkpoint *c, found_result *fr,
                      found_result *in, audit_entry *ient)
{
    if (!scan_log(dir, hex, 0, fr))
        return 0;
    if (!fr->found) {
        fprintf(stderr, "hsmca audit prove: no issue-result with cert_sha256 %s in %s/log\n", hex,
                dir);
        return 0;
    }
    if (fr->seq >= c->size) {
        fprintf(stderr,
                "hsmca audit prove: the result is seq %llu, the latest checkpoint covers only "
                "%llu entries: try again after the next checkpoint\n",
                (unsigned long long)fr->seq, (unsigned long long)c->size);
        return 0;
    }
    if (!scan_log(dir, NULL, fr->intent_seq, in) || !in->found) {
        fprintf(stderr, "hsmca audit prove: intent seq %llu not found\n",
                (unsigned long long)fr->intent_seq);
        return 0;
    }
    static audit_entry_buf ib;
    hsmca_err e;
    if (audit_entry_parse(in->line, in->len, ient, &ib, &e) != HSMCA_OK ||
        ient->kind != AUDIT_ISSUE_INTENT) {
        fprintf(stderr, "hsmca audit prove: FAILED: seq %llu is not the result's issue-intent\n",
                (unsigned long long)fr->intent_seq);
        return 0;
    }
    return 1;
}

/* Prints the certificate's issue and the checkpoint, then proves the result (printed)
 * and its intent (not printed: a result without its intent proves little) in the tree
 * of c. 1 when both proofs verify. */
static int prove_issue(const char *dir, const char *hex, const audit_checkpoint *c,
                       const found_result *fr, const found_result *in, const audit_entry *ient)
{
    char req[512], *root = audit_cmd_b64(&c->root);
    printf("cert_sha256: %s\nintent: seq %llu serial %s requester %s\norigin: %s\n"
           "tree_size: %llu\nroot: %s\n",
           hex, (unsigned long long)fr->intent_seq, ient->serial,
           util_printable(ient->requester.p ? ient->requester.p : "", ient->requester.len, req,
                          sizeof(req)),
           c->origin, (unsigned long long)c->size, root);
    free(root);
    if (!prove_entry(dir, c, fr->seq, fr->line, fr->len, 1) ||
        !prove_entry(dir, c, fr->intent_seq, in->line, in->len, 0))
        return 0;
    printf("verified: entries %llu (issue-result) and %llu (issue-intent) are in the tree "
           "of the checkpoint of size %llu\n",
           (unsigned long long)fr->seq, (unsigned long long)fr->intent_seq,
           (unsigned long long)c->size);
    return 1;
}

int audit_prove_main(int argc, char **argv)
{
    const char *dir = NULL, *cert = NULL, *vkey = NULL;
    cli_opts o;
    cli_opts_init(&o, "hsmca audit prove", prove_flags, &dir, 1);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(prove_help); return 0;
        case 'c': cert = optarg; break;
        case 'k': vkey = optarg; break;
        default: return 2;
        }
    }
    if (!dir || !cert) {
        fputs("hsmca audit prove: --cert CERT.pem and DIR are required\n", stderr);
        return 2;
    }
    audit_vkey k;
    char hex[65], path[4096];
    if (!audit_cmd_load_vkey("prove", vkey, dir, &k) || !cert_hash(cert, hex))
        return 1;
    audit_checkpoint c;
    hsmca_err e;
    audit_cmd_path(path, sizeof(path), dir, "checkpoint");
    if (audit_checkpoint_load(path, "checkpoint", &k, &c, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca audit prove: FAILED: %s\n", e.msg);
        return 1;
    }
    found_result fr = {0}, in = {0};
    audit_entry ient;
    int ok =
        find_issue(dir, hex, &c, &fr, &in, &ient) && prove_issue(dir, hex, &c, &fr, &in, &ient);
    free(fr.line);
    free(in.line);
    return ok ? 0 : 1;
}

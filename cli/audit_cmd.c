/* audit_cmd.c - `hsmca audit verify|consistency|vkey` (audit_cmd.h) and the dispatch to
 * `prove` (audit_prove.c) and `show` (audit_show.c); what they share is in
 * audit_cmd_util.c. Every command reads files only: an auditor runs them on a copy. */
#include "audit_cmd.h"
#include "audit_cmd_multi.h"
#include "audit_cmd_util.h"
#include "audit_prove.h"
#include "audit_show.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_verify.h"
#include "cli_opts.h"
#include "cli_table.h"
#include "util.h"

static int is_help(const char *a)
{
    return !strcmp(a, "--help") || !strcmp(a, "-h");
}

/* ---- verify ------------------------------------------------------------------------------ */

static const char verify_help[] =
    "usage: hsmca audit verify DIR [--vkey K] [--require-vkey] [--state F]\n"
    "       hsmca audit verify DIR1 DIR2 ... [--vkey K1 --vkey K2 ...] [--require-vkey]\n"
    "\n"
    "Several DIRs (the logs of replicas of one CA, docs/HA.md): each is verified\n"
    "as below, with its --vkey (one per DIR, in order) or its DIR/vkey, then\n"
    "together: their origins differ, and no serial of one CA key is in the\n"
    "issue-intents of two of them (the message names the serial and both logs).\n"
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
    "  --vkey K        the verifier key: a file, or the vkey string itself\n"
    "                  (default DIR/vkey; pass the one you got from the CA's\n"
    "                  operator out of band, or DIR could sign itself)\n"
    "  --require-vkey  exit 1 when there is no verifier key (no --vkey and no\n"
    "                  DIR/vkey) instead of checking all but the signatures\n"
    "  --state F       the auditor's memory: F holds the origin, size and root of\n"
    "                  the checkpoint the last run verified (a checkpoint body); the\n"
    "                  log must still have that root at that size (not forked,\n"
    "                  rewritten or rolled back). F is created when missing and\n"
    "                  replaced atomically by the latest checkpoint after a run that\n"
    "                  verifies with a key (without one, F is checked, not changed).\n"
    "\n"
    "Prints one line: 'OK: E entries (C certificates, X failed, D denies),\n"
    "K checkpoints, latest size N root R' ('latest none' without a checkpoint;\n"
    "warnings on stderr for that and for intents\n"
    "still without a result at the end), exit 0; or 'FAILED: why' naming the\n"
    "first entry (log seq S (byte B)), checkpoint or tile that breaks, exit 1.\n"
    "\n"
    "Without a verifier key every check above is made but the checkpoints'\n"
    "signatures (and their origin must be the latest checkpoint's, not the key's\n"
    "name): the OK line is followed by the line\n"
    "'checkpoint signatures: NOT checked (no vkey: give --vkey FILE)', stderr\n"
    "warns, and the exit status is still 0. That proves the directory is one\n"
    "consistent, append-only log, not that the CA's audit key signed it: anyone\n"
    "who can write DIR can rewrite it whole. An auditor gives --vkey and\n"
    "--require-vkey, so that a missing key is a failure (exit 1).";

static const struct option verify_flags[] = {{"vkey", required_argument, 0, 'k'},
                                             {"require-vkey", no_argument, 0, 'r'},
                                             {"state", required_argument, 0, 's'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};

/* The summary line of a log that verified, and the warnings (state: --state, or NULL;
 * signed: a verifier key checked the checkpoints' signatures). */
static void print_verified(const audit_verify_report *r, const char *state, int with_key)
{
    char *root = audit_cmd_b64(&r->root), st[80] = "";
    if (state && !with_key)
        snprintf(st, sizeof(st), r->state_new ? ", state not created (no signature checked)"
                                              : ", state checked, not advanced (no signature "
                                                "checked)");
    else if (state && r->checkpoints == 0)
        snprintf(st, sizeof(st), ", state unchanged (no checkpoint)");
    else if (state && r->state_new)
        snprintf(st, sizeof(st), ", state created");
    else if (state)
        snprintf(st, sizeof(st), ", state advanced from size %llu",
                 (unsigned long long)r->state_size);
    char latest[120] = "latest none";
    if (r->checkpoints)
        snprintf(latest, sizeof(latest), "latest size %llu root %s", (unsigned long long)r->size,
                 root);
    printf("OK: %llu entries (%llu certificates, %llu failed, %llu denies), %llu checkpoints, "
           "%s%s\n",
           (unsigned long long)r->entries, (unsigned long long)r->certificates,
           (unsigned long long)r->failed, (unsigned long long)r->denies,
           (unsigned long long)r->checkpoints, latest, st);
    free(root);
    if (r->open_intents)
        fprintf(stderr,
                "hsmca audit verify: warning: %llu intent(s) without a result yet (first at seq "
                "%llu): in flight, or the signer has not restarted since it stopped\n",
                (unsigned long long)r->open_intents, (unsigned long long)r->first_open);
    if (r->checkpoints == 0)
        fputs("hsmca audit verify: warning: no checkpoint: nothing in the log is signed\n", stderr);
    if (!with_key) {
        puts("checkpoint signatures: NOT checked (no vkey: give --vkey FILE)");
        fputs("hsmca audit verify: warning: no verifier key (no --vkey, no DIR/vkey): the log "
              "is consistent, but nothing shows the CA's audit key signed it\n",
              stderr);
    }
}

/* One directory (vkey: --vkey or NULL; m: several logs together, or NULL): 0 verified,
 * 1 not. */
static int verify_one(const char *dir, const char *vkey, const char *state, int require,
                      audit_multi *m)
{
    audit_vkey k;
    int have = audit_cmd_find_vkey("verify", vkey, dir, &k);
    if (have < 0)
        return 1;
    if (!have && require) {
        fprintf(stderr,
                "hsmca audit verify: FAILED: no verifier key: %s/vkey does not exist and no "
                "--vkey was given (--require-vkey)\n",
                dir);
        return 1;
    }
    audit_verify_opts vo = {dir, have ? &k : NULL, state, m ? audit_multi_entry : NULL, m};
    audit_verify_report r;
    hsmca_err e;
    if (m)
        audit_multi_begin(m, dir);
    /* The origin first when the key names it: two copies of one log are said so. */
    if ((m && have && audit_multi_origin(m, k.name, &e) != HSMCA_OK) ||
        audit_verify(&vo, &r, &e) != HSMCA_OK ||
        (m && !have && audit_multi_origin(m, r.origin, &e) != HSMCA_OK)) {
        fprintf(stderr, "hsmca audit verify: FAILED: %s%s%s\n", m ? dir : "", m ? ": " : "",
                e.msg);
        return 1;
    }
    if (m)
        printf("%s (origin %s): ", dir, r.origin[0] ? r.origin : "none");
    print_verified(&r, state, have);
    return 0;
}

static int verify_main(int argc, char **argv)
{
    const char *dirs[AUDIT_MULTI_MAX] = {0}, *vkeys[AUDIT_MULTI_MAX] = {0}, *state = NULL;
    int require = 0, nv = 0;
    cli_opts o;
    cli_opts_init(&o, "hsmca audit verify", verify_flags, dirs, AUDIT_MULTI_MAX);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(verify_help); return 0;
        case 'k':
            if (nv < AUDIT_MULTI_MAX)
                vkeys[nv++] = optarg;
            break;
        case 'r': require = 1; break;
        case 's': state = optarg; break;
        default: return 2;
        }
    }
    int n = o.n_operands;
    const char *bad = n == 0                         ? "DIR is required"
                      : nv > 1 && nv != n            ? "give one --vkey per DIR, in their order"
                      : state && n > 1               ? "--state takes one DIR"
                                                     : NULL;
    if (bad) {
        fprintf(stderr, "hsmca audit verify: %s\n", bad);
        return 2;
    }
    if (n == 1)
        return verify_one(dirs[0], vkeys[0], state, require, NULL);
    audit_multi *m = audit_multi_new();
    int rc = m ? 0 : 1;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = verify_one(dirs[i], vkeys[i], NULL, require, m);
    if (rc == 0)
        printf("OK: %d logs together: origins distinct, %llu serials, none in two logs\n", n,
               audit_multi_serials(m));
    audit_multi_free(m);
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

static const char consistency_help[] =
    "usage: hsmca audit consistency OLD NEW [--dir DIR] [--vkey K]\n"
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
    "fork, or OLD is larger than NEW).";

static const struct option consistency_flags[] = {{"dir", required_argument, 0, 'd'},
                                                  {"vkey", required_argument, 0, 'k'},
                                                  {"help", no_argument, 0, 'h'},
                                                  {0, 0, 0, 0}};

/* The checkpoints OLD and NEW (files), verified with k, into c; OLD must not be the
 * larger. 0 when they are not: said. */
static int load_pair(const char *const files[2], const audit_vkey *k, audit_checkpoint c[2])
{
    hsmca_err e;
    for (int i = 0; i < 2; i++)
        if (audit_checkpoint_load(files[i], files[i], k, &c[i], &e) != HSMCA_OK) {
            fprintf(stderr, "hsmca audit consistency: FAILED: %s\n", e.msg);
            return 0;
        }
    if (c[0].size > c[1].size) {
        fprintf(stderr, "hsmca audit consistency: FAILED: OLD has size %llu, NEW only %llu\n",
                (unsigned long long)c[0].size, (unsigned long long)c[1].size);
        return 0;
    }
    return 1;
}

/* Builds the consistency proof of c[0] in c[1] from the tiles of dir, prints both
 * checkpoints and the proof, then checks it. 1 when it verifies. */
static int prove_consistency(const char *dir, const audit_checkpoint c[2])
{
    audit_hash proof[AUDIT_PROOF_MAX];
    size_t n = 0;
    hsmca_err e;
    audit_tile_reader *t = malloc(sizeof(*t));
    if (!t)
        return 0;
    audit_tile_reader_init(t, dir, c[1].size);
    hsmca_code rc =
        audit_prove_consistency(c[0].size, c[1].size, audit_tile_reader_source, t, proof, &n, &e);
    free(t);
    if (rc != HSMCA_OK) {
        fprintf(stderr, "hsmca audit consistency: cannot build the proof from %s: %s\n", dir,
                e.msg);
        return 0;
    }
    for (int i = 0; i < 2; i++) {
        char *root = audit_cmd_b64(&c[i].root);
        printf("%s: %s size %llu root %s\n", i ? "new" : "old", c[i].origin,
               (unsigned long long)c[i].size, root);
        free(root);
    }
    printf("proof: %zu hashes\n", n);
    audit_cmd_print_hashes(proof, n);
    if (audit_verify_consistency(c[0].size, c[1].size, &c[0].root, &c[1].root, proof, n, &e) !=
        HSMCA_OK) {
        fprintf(stderr, "hsmca audit consistency: FAILED: %s (the logs forked)\n", e.msg);
        return 0;
    }
    printf("verified: the tree of size %llu is a prefix of the tree of size %llu\n",
           (unsigned long long)c[0].size, (unsigned long long)c[1].size);
    return 1;
}

static int consistency_main(int argc, char **argv)
{
    const char *files[2] = {NULL, NULL}, *dir = NULL, *vkey = NULL;
    cli_opts o;
    cli_opts_init(&o, "hsmca audit consistency", consistency_flags, files, 2);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(consistency_help); return 0;
        case 'd': dir = optarg; break;
        case 'k': vkey = optarg; break;
        default: return 2;
        }
    }
    if (o.n_operands != 2) {
        fputs("hsmca audit consistency: OLD and NEW are required\n", stderr);
        return 2;
    }
    char dbuf[4096];
    if (!dir) {
        dir_of(files[1], dbuf, sizeof(dbuf));
        dir = dbuf;
    }
    audit_vkey k;
    audit_checkpoint c[2];
    if (!audit_cmd_load_vkey("consistency", vkey, dir, &k) || !load_pair(files, &k, c))
        return 1;
    return prove_consistency(dir, c) ? 0 : 1;
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

/* ---- dispatch --------------------------------------------------------------------------- */

static const cli_cmd commands[] = {
    {"verify", verify_main, "DIR [--vkey K] [--state F]",
     "replay and check everything; one-line summary"},
    {"verify", verify_main, "DIR1 DIR2 ... [--require-vkey]",
     "several replicas' logs: each, then serials\n"
     "(no vkey: all but the signatures, said)"},
    {"prove", audit_prove_main, "--cert CERT.pem DIR",
     "inclusion proof of a certificate's result entry"},
    {"consistency", consistency_main, "OLD NEW [--dir DIR]",
     "consistency proof between two checkpoints"},
    {"show", audit_show_main, "DIR [filters] [--json]", "the entries as a table (or JSON lines)"},
    {"vkey", vkey_main, "DIR", "print the log's verifier key"},
    {NULL, NULL, NULL, NULL}};

static void usage(FILE *f)
{
    fputs("usage: hsmca audit COMMAND [flags]   (hsmca audit COMMAND --help for its flags)\n"
          "\n"
          "Checks the signing log a CA keeps in its audit directory (audit.dir: log, vkey,\n"
          "checkpoint, checkpoints/, tile/), offline: no token or server needed.\n"
          "\n"
          "Commands:\n",
          f);
    cli_cmd_print(f, commands, 36);
    fputs("\n"
          "Exit status: 0 verified (verify without a vkey: all but the signatures), 1 does\n"
          "not verify (the message names the entry, checkpoint or tile that broke and\n"
          "why), 2 bad usage.\n",
          f);
}

int audit_main(int argc, char **argv)
{
    return cli_dispatch("hsmca audit", commands, usage, argc, argv);
}

/* fuzz_replay.c - libFuzzer target for the signing log's replay (audit/audit_replay.h)
 * with its intermediate (audit/audit_ica.h) and revocation (audit/audit_crl.h) rules, over
 * sequences of entries, the way the signer's start and `hsmca audit verify` run it: each
 * line parsed (audit_entry_parse), its seq the next one (the log reader's own check), fed
 * to audit_replay_entry; the first refusal ends the log.
 *
 * The input is a program: each step's first byte picks an entry kind (or a clock step,
 * or a raw line: a 2-byte length and that many bytes of the input, parsed as a log line),
 * the next bytes its fields, from a small vocabulary so that deep states are reached:
 * five users, two clusters, three real CSRs with their keys, the three intermediate
 * certificates (signed by fuzz_ca's CA) for those keys, renewal proofs signed by each
 * key, ids of the requests and intents made so far. A generated entry is encoded with
 * audit_entry_encode and parsed back, so the replay sees what a log would hold.
 *
 * Checked, besides ASan, UBSan and LeakSanitizer:
 * - every state the replay reaches: an issued request was signed after its intent, with
 *   its approvals (or an auto-approval of an issued intermediate of its cluster, signed
 *   before it) and no denial; approvers are distinct users, none its requester; a
 *   revocation, once in, stays; cRLNumber only grows;
 * - what the signer checks before it writes a step agrees with what the replay then
 *   accepts: audit_ica_may_approve, audit_ica_may_deny and audit_ica_may_auto at the
 *   entry's time, against the replay's refusal of that entry;
 * - a refusal is EPERM (or ENOMEM) and names the log seq;
 * - the replay's tables, taken at the end, are those a second audit_ica and audit_crl
 *   built from the same accepted entries. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "audit_crl.h"
#include "audit_entry.h"
#include "audit_ica.h"
#include "audit_replay.h"
#include "fuzz_ca.h"
#include "fuzz_common.h"
#include "util.h"

#define NKEYS 3
#define NCLUSTERS 2
#define MAX_STEPS 200
#define MAX_IDS 64

static const char *const users[] = {"alice", "bob", "carol", "dave", "root"};
static const char *const clusters[NCLUSTERS] = {"west", "east"};
static const char *const reasons[] = {"keyCompromise", "superseded", "cessationOfOperation",
                                      "unspecified", "certificateHold"};
static const char *const wl_serials[] = {"0102030405060708", "7f00aa55", "01"};
static const char *const spkis[] = {
    "1111111111111111111111111111111111111111111111111111111111111111",
    "2222222222222222222222222222222222222222222222222222222222222222"};

/* The material of key i: its CSR and its intermediate certificate. */
static struct {
    char csr_b64[2048], key_sha256[65], cert_b64[2048], cert_sha256[65], serial[41];
    /* proof[c][j]: this key's renewal proof for CSR j of cluster c (base64) */
    char proof[NCLUSTERS][NKEYS][AUDIT_RENEW_PROOF_MAX + 1];
} mat[NKEYS];

static void b64_of(const uint8_t *der, size_t n, char *out, size_t outsz)
{
    if ((n + 2) / 3 * 4 + 1 > outsz)
        abort();
    EVP_EncodeBlock((unsigned char *)out, der, (int)n);
}

static void sha256_hex(const uint8_t *p, size_t n, char out[65])
{
    uint8_t md[32];
    SHA256(p, n, md);
    util_hex(md, 32, out);
}

static void make_proof(EVP_PKEY *k, int c, const uint8_t *csr, size_t csr_len, char *out)
{
    size_t mn = 0, sn = 0;
    uint8_t *msg = audit_ica_renewal_message(clusters[c], csr, csr_len, &mn), sig[256];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    sn = sizeof(sig);
    if (!msg || !ctx || EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k) != 1 ||
        EVP_DigestSign(ctx, sig, &sn, msg, mn) != 1)
        abort();
    b64_of(sig, sn, out, AUDIT_RENEW_PROOF_MAX + 1);
    EVP_MD_CTX_free(ctx);
    free(msg);
}

/* Key i's CSR and certificate into mat[i]; its DER CSR into csr_der[i]. */
static void make_key(int i, X509 *ca, EVP_PKEY *ca_key, EVP_PKEY **k, uint8_t **csr_der,
                     int *csr_len)
{
    uint8_t *spki = NULL, *der = NULL;
    int dn = 0, sn;
    snprintf(mat[i].serial, sizeof(mat[i].serial), "5e7a11%02x0000c0ffee", 0x10 + i);
    if (!fuzz_ca_intermediate(ca, ca_key, i, mat[i].serial, FUZZ_NOW, FUZZ_NOW + 30 * 86400, k,
                              csr_der, csr_len, &der, &dn) ||
        (sn = i2d_PUBKEY(*k, &spki)) <= 0)
        abort();
    sha256_hex(spki, (size_t)sn, mat[i].key_sha256);
    b64_of(*csr_der, (size_t)*csr_len, mat[i].csr_b64, sizeof(mat[i].csr_b64));
    b64_of(der, (size_t)dn, mat[i].cert_b64, sizeof(mat[i].cert_b64));
    sha256_hex(der, (size_t)dn, mat[i].cert_sha256);
    OPENSSL_free(spki);
    OPENSSL_free(der);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    EVP_PKEY *ca_key = NULL, *keys[NKEYS];
    X509 *ca = fuzz_ca_new(&ca_key);
    uint8_t *csr[NKEYS] = {NULL};
    int csr_len[NKEYS];
    if (!ca)
        abort();
    for (int i = 0; i < NKEYS; i++)
        make_key(i, ca, ca_key, &keys[i], &csr[i], &csr_len[i]);
    for (int i = 0; i < NKEYS; i++)
        for (int c = 0; c < NCLUSTERS; c++)
            for (int j = 0; j < NKEYS; j++)
                make_proof(keys[i], c, csr[j], (size_t)csr_len[j], mat[i].proof[c][j]);
    for (int i = 0; i < NKEYS; i++) {
        EVP_PKEY_free(keys[i]);
        OPENSSL_free(csr[i]);
    }
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    return 0;
}

/* ---- the run ---- */

typedef struct {
    const uint8_t *p;
    size_t n;
    audit_replay *replay;
    audit_ica *ica; /* the second tables: the accepted entries only */
    audit_crl *crl;
    uint64_t next; /* the next entry's seq (a log's first is 0) */
    int64_t clock;
    uint64_t ids[MAX_IDS];     /* requests made: their ids */
    int id_key[MAX_IDS];       /* their CSR's key */
    int id_cluster[MAX_IDS];   /* their cluster */
    size_t n_ids;
    uint64_t intents[MAX_IDS]; /* issue-intents made: their seqs */
    uint64_t intent_req[MAX_IDS];
    char serials[MAX_IDS][AUDIT_SERIAL_HEX_MAX + 1];
    size_t n_intents;
    uint64_t last_crl;
    size_t last_revs;
} run;

static unsigned byte(run *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

/* An id the log knows most of the time, else any. */
static uint64_t pick_id(run *r, int *slot)
{
    unsigned b = byte(r);
    *slot = -1;
    if (!r->n_ids || b == 0xff)
        return b ? b : 1;
    *slot = (int)(r->n_ids - 1 - b % r->n_ids); /* the newest first */
    return r->ids[*slot];
}

static int key_of_id(run *r, int slot, unsigned b)
{
    return slot >= 0 && b % 4 ? r->id_key[slot] : (int)(b % NKEYS);
}

static void fill(run *r, audit_entry *ent, audit_kind k)
{
    unsigned b, c;
    int slot, slot2;
    memset(ent, 0, sizeof(*ent));
    ent->kind = k;
    ent->seq = r->next;
    ent->time = r->clock;
    const char *user = users[byte(r) % 5];
    ent->requester = (audit_str){user, strlen(user), 0};
    switch (k) {
    case AUDIT_ICA_REQUEST:
        b = byte(r), c = byte(r);
        memcpy(ent->key_sha256, mat[b % NKEYS].key_sha256, 65);
        ent->csr = (audit_str){mat[b % NKEYS].csr_b64, strlen(mat[b % NKEYS].csr_b64), 0};
        snprintf(ent->cluster, sizeof(ent->cluster), "%s", clusters[c % NCLUSTERS]);
        ent->required = 1 + (b >> 4) % 3;
        ent->expires = r->clock + (int64_t)(c >> 4) * 600;
        ent->ttl_s = (c >> 2) & 1 ? 86400 : 0;
        break;
    case AUDIT_ICA_APPROVE:
    case AUDIT_ICA_FETCH: ent->request_id = pick_id(r, &slot); break;
    case AUDIT_ICA_DENY:
        ent->request_id = pick_id(r, &slot);
        ent->reason = (audit_str){"not this one", 12, 0};
        break;
    case AUDIT_ISSUE_INTENT:
        ent->request_id = pick_id(r, &slot);
        b = byte(r);
        snprintf(ent->profile, sizeof(ent->profile), "%s", b & 1 ? AUDIT_ICA_PROFILE : "workload");
        if (b & 1) /* one serial per key and request: a renewal is a new certificate */
            snprintf(ent->serial, sizeof(ent->serial), "5e7a11%02x%02x00c0ffee",
                     0x10 + key_of_id(r, slot, b >> 1), slot < 0 ? 0xff : slot);
        else
            snprintf(ent->serial, sizeof(ent->serial), "%s", wl_serials[(b >> 1) % 3]);
        memset(ent->tbs_sha256, 'a', 64);
        ent->not_before = r->clock;
        ent->not_after = r->clock + 1 + (int64_t)(b >> 4) * 3600;
        break;
    case AUDIT_ISSUE_RESULT:
        b = byte(r);
        if (r->n_intents && b != 0xff) {
            size_t i = r->n_intents - 1 - b % r->n_intents;
            ent->intent_seq = r->intents[i];
            ent->request_id = r->intent_req[i];
        } else {
            ent->intent_seq = b;
        }
        if (b & 0x40)
            snprintf(ent->code, sizeof(ent->code), "UNKNOWN");
        else
            memset(ent->cert_sha256, 'c', 64);
        break;
    case AUDIT_ICA_CERT:
        ent->request_id = pick_id(r, &slot);
        b = byte(r);
        ent->cert = (audit_str){mat[key_of_id(r, slot, b)].cert_b64,
                                strlen(mat[key_of_id(r, slot, b)].cert_b64), 0};
        memcpy(ent->cert_sha256, mat[key_of_id(r, slot, b)].cert_sha256, 65);
        if (b == 0x80)
            ent->cert_sha256[0] = ent->cert_sha256[0] == '0' ? '1' : '0';
        break;
    case AUDIT_ICA_AUTO_APPROVE:
        ent->request_id = pick_id(r, &slot);
        ent->renews = pick_id(r, &slot2);
        b = byte(r);
        if (b & 1) { /* a proof by key b>>1 over the renewal's CSR and cluster */
            int j = slot >= 0 ? r->id_key[slot] : 0, cl = slot >= 0 ? r->id_cluster[slot] : 0;
            const char *pr = mat[(b >> 1) % NKEYS].proof[cl][j];
            ent->proof = (audit_str){pr, b & 2 ? strlen(pr) : 4, 0};
        }
        break;
    case AUDIT_REVOKE:
        b = byte(r);
        if (b & 1 && r->n_intents) /* an intent's serial, the newest first */
            snprintf(ent->serial, sizeof(ent->serial), "%s",
                     r->serials[r->n_intents - 1 - (b >> 1) % r->n_intents]);
        else
            snprintf(ent->serial, sizeof(ent->serial), "%s", wl_serials[(b >> 1) % 3]);
        snprintf(ent->profile, sizeof(ent->profile), "%s",
                 b & 0x10 ? "unknown" : b & 1 ? AUDIT_ICA_PROFILE : "workload");
        ent->reason = (audit_str){reasons[(b >> 5) % 5], strlen(reasons[(b >> 5) % 5]), 0};
        break;
    case AUDIT_CRL:
        b = byte(r);
        ent->crl_number = r->last_crl + (b & 0x80 ? 0 : 1 + b % 3);
        ent->crl_number = ent->crl_number ? ent->crl_number : 1;
        ent->count = audit_crl_count(r->crl) + (b & 0x40 ? 1 : 0);
        memset(ent->crl_sha256, 'd', 64);
        ent->not_before = r->clock;
        ent->not_after = r->clock + (b & 0x20 ? 0 : 86400);
        break;
    case AUDIT_KEY:
        b = byte(r);
        memcpy(ent->ca_spki_sha256, spkis[b % 2], 65);
        memset(ent->ca_cert_sha256, 'e', 64);
        snprintf(ent->ca_key_alg, sizeof(ent->ca_key_alg), "ecdsa-sha256");
        snprintf(ent->ca_key_type, sizeof(ent->ca_key_type), "ec-p256");
        break;
    case AUDIT_CONFIG:
        memset(ent->config_sha256, 'f', 64);
        memset(ent->policy_sha256, 'f', 64);
        break;
    default: break;
    }
}

/* The state invariants (see the top of the file), on the second tables. */
static void check_state(run *r)
{
    for (size_t i = 0; i < audit_ica_count(r->ica); i++) {
        const audit_ica_req *q = audit_ica_at(r->ica, i);
        if (q->n_approvers > AUDIT_ICA_APPROVERS_MAX)
            abort();
        for (unsigned a = 0; a < q->n_approvers; a++) {
            if (q->approver_uids[a] >= 0 && q->requester_uid >= 0
                    ? q->approver_uids[a] == q->requester_uid
                    : !strcmp(q->approvers[a], q->requester))
                abort(); /* a requester's approval never counts */
            for (unsigned b = 0; b < a; b++)
                if (q->approver_uids[a] >= 0 && q->approver_uids[b] >= 0
                        ? q->approver_uids[a] == q->approver_uids[b]
                        : !strcmp(q->approvers[a], q->approvers[b]))
                    abort(); /* nor one user twice (by uid where both have one) */
        }
        int approved = q->n_approvers >= q->required || q->auto_renews;
        if ((q->intent_seq || q->cert_b64) && !approved)
            abort(); /* no CA signature without its approvals */
        if (q->cert_b64 && (q->denied || !q->intent_seq))
            abort(); /* nor for a denied request, nor without its intent */
        if (q->auto_renews) {
            const audit_ica_req *p = audit_ica_find(r->ica, q->auto_renews);
            if (!p || p->id >= q->id || !p->cert_b64 || strcmp(p->cluster, q->cluster))
                abort(); /* a renewal renews an issued intermediate of its cluster */
        }
    }
    if (audit_crl_last_number(r->crl) < r->last_crl || audit_crl_count(r->crl) < r->last_revs)
        abort(); /* cRLNumber only grows; a revocation is never undone */
    r->last_crl = audit_crl_last_number(r->crl);
    r->last_revs = audit_crl_count(r->crl);
}

/* What the signer's own check before it writes (audit_crl_check, audit_ica_check) says
 * of ent, for the kinds whose rules are all CA-profile rules (-1: another kind). */
static int signer_says(run *r, const audit_entry *ent)
{
    hsmca_err e;
    switch (ent->kind) {
    case AUDIT_ICA_APPROVE:
    case AUDIT_ICA_DENY:
    case AUDIT_ICA_AUTO_APPROVE:
    case AUDIT_REVOKE:
    case AUDIT_CRL:
        return audit_crl_check(r->crl, ent, &e) == HSMCA_OK &&
               audit_ica_check(r->ica, ent, &e) == HSMCA_OK;
    default: return -1;
    }
}

/* One line of the log: 1 accepted, 0 not an entry (skipped), -1 refused (the end). */
static int feed(run *r, const char *line, size_t len)
{
    static audit_entry_buf buf;
    audit_entry ent;
    hsmca_err e;
    if (audit_entry_parse(line, len, &ent, &buf, &e) != HSMCA_OK)
        return 0;
    ent.seq = r->next; /* the log reader refuses any other */
    int says = signer_says(r, &ent);
    hsmca_err_clear(&e);
    hsmca_code rc = audit_replay_entry(r->replay, &ent, 0, &e);
    uint64_t broken_seq;
    int broken = rc == HSMCA_OK && audit_replay_ca_broken(r->replay, &broken_seq);
    if (says >= 0 && says != (rc == HSMCA_OK && !broken))
        abort(); /* the signer's check and the replay disagree about this step */
    if (broken) {
        if (says == 1)
            abort(); /* a step the signer would write breaks a CA-profile rule */
        return -1; /* the CA profile closes here: the log goes on for workloads only */
    }
    if (rc != HSMCA_OK) {
        if ((rc != HSMCA_EPERM && rc != HSMCA_ENOMEM) || strncmp(e.msg, "log seq ", 8) != 0)
            abort();
        return -1;
    }
    hsmca_err e2;
    if (audit_crl_apply(r->crl, &ent, 0, &e2) != HSMCA_OK ||
        audit_ica_apply(r->ica, &ent, 0, &e2) != HSMCA_OK)
        abort(); /* the same rules on the same entries */
    r->next++;
    if (ent.time > r->clock)
        r->clock = ent.time;
    if (ent.kind == AUDIT_ICA_REQUEST && r->n_ids < MAX_IDS) {
        const char *k = ent.key_sha256;
        r->id_key[r->n_ids] = !strcmp(k, mat[1].key_sha256) ? 1
                               : !strcmp(k, mat[2].key_sha256) ? 2
                                                                : 0;
        r->id_cluster[r->n_ids] = !strcmp(ent.cluster, clusters[1]);
        r->ids[r->n_ids++] = ent.seq;
    }
    if (ent.kind == AUDIT_ISSUE_INTENT && r->n_intents < MAX_IDS) {
        r->intent_req[r->n_intents] = ent.request_id;
        snprintf(r->serials[r->n_intents], sizeof(r->serials[0]), "%s", ent.serial);
        r->intents[r->n_intents++] = ent.seq;
    }
    check_state(r);
    return 1;
}

static const audit_kind ops[16] = {
    AUDIT_ICA_REQUEST,  AUDIT_ICA_REQUEST, AUDIT_ICA_APPROVE, AUDIT_ICA_APPROVE,
    AUDIT_ICA_DENY,     AUDIT_ISSUE_INTENT, AUDIT_ISSUE_RESULT, AUDIT_ICA_CERT,
    AUDIT_ICA_FETCH,    AUDIT_ICA_AUTO_APPROVE, AUDIT_REVOKE, AUDIT_CRL,
    AUDIT_KEY,          AUDIT_START,       0 /* a clock step */, 0 /* a raw line */};

/* One step of the program: -1 when the log ended. */
static int step(run *r)
{
    static char line[AUDIT_LINE_MAX];
    unsigned op = byte(r) % 16;
    if (op == 14) { /* forward by up to ~10 days, or back an hour */
        unsigned b = byte(r);
        r->clock += b == 0xff ? -3600 : (int64_t)b * b * 15;
        return 0;
    }
    if (op == 15) {
        size_t n = byte(r) << 8;
        n |= byte(r);
        n = n < r->n ? n : r->n;
        memcpy(line, r->p, n);
        r->p += n, r->n -= n;
        return feed(r, line, n) < 0 ? -1 : 0;
    }
    audit_entry ent;
    audit_kind k = ops[op];
    if (k == AUDIT_START && byte(r) & 1)
        k = byte(r) & 1 ? AUDIT_STOP : AUDIT_CONFIG;
    fill(r, &ent, k);
    size_t len;
    hsmca_err e;
    if (audit_entry_encode(&ent, line, &len, &e) != HSMCA_OK)
        return 0; /* not a line a signer could write */
    return feed(r, line, len - 1) < 0 ? -1 : 0;
}

static void check_taken(run *r)
{
    audit_ica *ica = audit_replay_take_ica(r->replay);
    audit_crl *crl = audit_replay_take_crl(r->replay);
    if (audit_ica_count(ica) != audit_ica_count(r->ica) ||
        audit_crl_count(crl) != audit_crl_count(r->crl) ||
        audit_crl_last_number(crl) != audit_crl_last_number(r->crl))
        abort();
    for (size_t i = 0; i < audit_ica_count(ica); i++) {
        const audit_ica_req *a = audit_ica_at(ica, i), *b = audit_ica_at(r->ica, i);
        if (a->id != b->id || a->n_approvers != b->n_approvers || a->denied != b->denied ||
            !a->cert_b64 != !b->cert_b64 || a->revoked != b->revoked ||
            a->auto_renews != b->auto_renews || a->intent_seq != b->intent_seq)
            abort();
    }
    for (size_t i = 0; i < audit_crl_count(crl); i++)
        if (!audit_crl_revoked(r->crl, audit_crl_at(crl, i)->serial))
            abort();
    audit_ica_free(ica);
    audit_crl_free(crl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run *r = calloc(1, sizeof(*r));
    hsmca_err e;
    if (!r || audit_replay_new(&r->replay, &e) != HSMCA_OK || audit_ica_new(&r->ica, &e) != HSMCA_OK ||
        audit_crl_new(&r->crl, &e) != HSMCA_OK)
        abort();
    r->p = data, r->n = size, r->clock = FUZZ_NOW;
    for (int i = 0; i < MAX_STEPS && r->n; i++)
        if (step(r) < 0)
            break;
    check_taken(r);
    audit_replay_free(r->replay);
    audit_ica_free(r->ica);
    audit_crl_free(r->crl);
    free(r);
    return 0;
}

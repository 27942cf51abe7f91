/* fuzz_admin.c - libFuzzer target for the signer's admin socket (signer/signer_admin.h):
 * the JSON requests any admin.group member may send, through the real socket code and
 * its allow-table of ops (ica-request, -list, -show, -approve, -deny, -fetch,
 * ca-revoke, crl-get, and any op added to the table), each op's request fields parsed
 * and checked, its steps written to a real signing log.
 *
 * An input is up to FUZZ_MAX_REQUESTS request packets separated by NUL bytes, each sent
 * on a connection of its own, in order. The signer's state is made afresh for each
 * input: an empty log in a private directory (in /dev/shm when it can be), then, by the
 * signer's own signer_ica_log, a start entry and three requests (ids 1, 7, 9) for
 * fuzz_ca's fixed istiod keys 0, 1, 2: 1 issued (cluster west, approved by bob and carol,
 * its certificate signed by fuzz_ca's CA with serial FUZZ_ICA_SERIAL), 7 (east) with one
 * approval, 9 (west) with none; a request with key 0's CSR for west renews 1. The CA
 * signing thread is absent (s->casign NULL): an op that would sign (an approval that
 * completes a request, a fetch of an approved one, a renewal, a revocation's CRL) stops
 * at signer_casign_ready, before its intent is written, as it does while the CA key's
 * token is away; nothing the token would answer is faked. `status`, which reads only
 * the token's state, is left out (there is no token). approval.auto_renew is on and
 * crl.path is set, so those paths run up to the CA signature.
 *
 * The input goes over the admin socket (signer_admin_open on a socket in the private
 * directory, the caller this process) and the signer's main-loop calls serve it
 * (signer_admin_pollfds, poll, signer_admin_serve). Checked:
 * - one reply per request packet, right away (no reply can wait for a CA signature here), at
 *   most ADMIN_MAX_MSG bytes, a JSON object with "ok"; a refusal has a non-empty "error";
 * - the log the signer wrote replays (audit_replay, as the next start and `hsmca audit
 *   verify` run it): a step the signer wrote that its own rules refuse would stop every
 *   later start. */
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/sha.h>

#include "audit_crl.h"
#include "audit_ica.h"
#include "audit_log.h"
#include "audit_replay.h"
#include "certasm.h"
#include "fuzz_ca.h"
#include "log.h"
#include "signer_admin.h"
#include "signer_caops.h"
#include "signer_ctx.h"
#include "signer_ica_sign.h"
#include "util.h"

#define FUZZ_ICA_SERIAL "5e7a1110c0ffee01"
#define FUZZ_MAX_REQUESTS 4

static signer_ctx S;
static signer_caops *CA; /* S.ca: what the CA-profile ops see */
static signer_admin *adm;
static char dir[64], logdir[96];
static struct {
    char csr_b64[2048], key_sha256[65];
} keys[3];
static char cert_b64[2048], cert_sha256[65];

static void b64_sha(const uint8_t *der, int n, char *b64, size_t b64sz, char *sha)
{
    uint8_t md[32];
    if ((size_t)(n + 2) / 3 * 4 + 1 > b64sz)
        abort();
    EVP_EncodeBlock((unsigned char *)b64, der, n);
    SHA256(der, (size_t)n, md);
    util_hex(md, 32, sha);
}

/* CSRs of fuzz_ca's three istiod keys, and key 0's certificate, valid for 30 days from
 * now. */
static void make_material(X509 *ca, EVP_PKEY *ca_key)
{
    int64_t now = (int64_t)time(NULL);
    for (int i = 0; i < 3; i++) {
        EVP_PKEY *k;
        uint8_t *csr, *cert, *spki = NULL;
        int csr_len, cert_len, sn;
        char ignored[65];
        if (!fuzz_ca_intermediate(ca, ca_key, i, FUZZ_ICA_SERIAL, now - 60, now + 30 * 86400,
                                  &k, &csr, &csr_len, &cert, &cert_len) ||
            (sn = i2d_PUBKEY(k, &spki)) <= 0)
            abort();
        b64_sha(csr, csr_len, keys[i].csr_b64, sizeof(keys[i].csr_b64), ignored);
        uint8_t md[32];
        SHA256(spki, (size_t)sn, md);
        util_hex(md, 32, keys[i].key_sha256);
        if (i == 0)
            b64_sha(cert, cert_len, cert_b64, sizeof(cert_b64), cert_sha256);
        OPENSSL_free(spki);
        OPENSSL_free(csr);
        OPENSSL_free(cert);
        EVP_PKEY_free(k);
    }
}

static char *pem_of(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *s = b && PEM_write_bio_X509(b, x) ? certasm_bio_string(b) : NULL;
    BIO_free(b);
    return s;
}

static void rm_dir(const char *d);

static void cleanup(void)
{
    char p[128];
    signer_admin_close(adm);
    snprintf(p, sizeof(p), "%s/ca.crl", dir);
    unlink(S.cfg.admin_socket);
    unlink(p);
    rm_dir(logdir);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    log_set_level(LOG_LVL_ERROR);
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof(dir), "%s/fuzz_admin.XXXXXX", tmp);
    if (!mkdtemp(dir))
        abort();
    atexit(cleanup);
    snprintf(logdir, sizeof(logdir), "%s/audit", dir);
    EVP_PKEY *ca_key = NULL;
    config_defaults(&S.cfg);
    snprintf(S.cfg.trust_domain, sizeof(S.cfg.trust_domain), "cluster.local");
    snprintf(S.cfg.admin_socket, sizeof(S.cfg.admin_socket), "%s/admin.sock", dir);
    snprintf(S.cfg.crl_path, sizeof(S.cfg.crl_path), "%s/ca.crl", dir);
    snprintf(S.cfg.ica_subject_prefix, sizeof(S.cfg.ica_subject_prefix), "O=hsmca fuzz");
    S.cfg.approval_required = 2;
    S.cfg.approval_auto_renew = 1;
    S.ca_cert = fuzz_ca_new(&ca_key);
    S.alg = S.ca_cert ? sigalg_for_key(ca_key) : NULL;
    CA = signer_caops_new();
    if (!CA)
        abort();
    S.ca = CA; /* lent as signer_start lends them */
    CA->cfg = &S.cfg;
    CA->ca_cert = S.ca_cert;
    CA->alg = S.alg;
    CA->policy = &S.policy;
    CA->stats = &S.stats;
    CA->ica_ca_pem = S.ca_cert ? pem_of(S.ca_cert) : NULL;
    CA->ica_roots_pem = CA->ica_ca_pem ? strdup(CA->ica_ca_pem) : NULL;
    if (!S.alg || !CA->ica_roots_pem)
        abort();
    make_material(S.ca_cert, ca_key);
    EVP_PKEY_free(ca_key);
    signer_sandbox sb;
    memset(&sb, 0, sizeof(sb));
    hsmca_err e;
    if (signer_admin_open(&S.cfg, &sb, &adm, &e) != HSMCA_OK || !adm)
        abort();
    return 0;
}

static void rm_dir(const char *d)
{
    DIR *dp = opendir(d);
    struct dirent *de;
    char p[256];
    while (dp && (de = readdir(dp)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            snprintf(p, sizeof(p), "%s/%s", d, de->d_name);
            unlink(p);
        }
    if (dp)
        closedir(dp);
    rmdir(d);
}

/* One step written by the signer's own writer; the state must take it. */
static void put(audit_entry *ent)
{
    hsmca_err e;
    if (signer_ica_log(CA, ent, &e) != HSMCA_OK)
        abort();
}

static void request(const char *user, const char *cluster, int key)
{
    audit_entry ent = {.kind = AUDIT_ICA_REQUEST, .required = 2};
    ent.requester = (audit_str){user, strlen(user), 0};
    snprintf(ent.cluster, sizeof(ent.cluster), "%s", cluster);
    ent.csr = (audit_str){keys[key].csr_b64, strlen(keys[key].csr_b64), 0};
    memcpy(ent.key_sha256, keys[key].key_sha256, 65);
    ent.expires = (int64_t)time(NULL) + 3600;
    put(&ent);
}

static void approve(uint64_t id, const char *user)
{
    audit_entry ent = {.kind = AUDIT_ICA_APPROVE, .request_id = id};
    ent.requester = (audit_str){user, strlen(user), 0};
    put(&ent);
}

/* The state described at the top of the file. */
static void fresh_state(void)
{
    hsmca_err e;
    rm_dir(logdir);
    if (audit_log_open(logdir, (uid_t)-1, (gid_t)-1, NULL, NULL, &S.audit, NULL, &e) != HSMCA_OK ||
        audit_ica_new(&CA->ica, &e) != HSMCA_OK || audit_crl_new(&CA->crl, &e) != HSMCA_OK ||
        !(S.serials = serial_set_new()))
        abort();
    CA->audit = S.audit;
    CA->serials = S.serials;
    audit_entry start = {.kind = AUDIT_START};
    uint64_t seq;
    if (audit_log_append(S.audit, &start, &seq, &e) != HSMCA_OK)
        abort();
    request("alice", "west", 0); /* 1 */
    approve(1, "bob");
    approve(1, "carol");
    int64_t now = (int64_t)time(NULL);
    audit_entry in = {.kind = AUDIT_ISSUE_INTENT, .request_id = 1, .not_before = now - 60,
                      .not_after = now + 30 * 86400};
    in.requester = (audit_str){"carol", 5, 0};
    snprintf(in.profile, sizeof(in.profile), AUDIT_ICA_PROFILE);
    snprintf(in.serial, sizeof(in.serial), FUZZ_ICA_SERIAL);
    memset(in.tbs_sha256, 'a', 64);
    put(&in); /* 4 */
    audit_entry res = {.kind = AUDIT_ISSUE_RESULT, .request_id = 1, .intent_seq = 4};
    memcpy(res.cert_sha256, cert_sha256, 65);
    put(&res);
    audit_entry cert = {.kind = AUDIT_ICA_CERT, .request_id = 1};
    cert.cert = (audit_str){cert_b64, strlen(cert_b64), 0};
    memcpy(cert.cert_sha256, cert_sha256, 65);
    put(&cert);
    request("bob", "east", 1); /* 7 */
    approve(7, "alice");
    request("dave", "west", 2); /* 9 */
}

static hsmca_code replay_one(void *ctx, const audit_entry *ent, uint64_t off, hsmca_err *e)
{
    return audit_replay_entry(ctx, ent, off, e);
}

/* The log the signer wrote, replayed as the next start would. */
static void check_log_replays(void)
{
    audit_replay *r;
    audit_log *l;
    hsmca_err e;
    if (audit_replay_new(&r, &e) != HSMCA_OK)
        abort();
    if (audit_log_open(logdir, (uid_t)-1, (gid_t)-1, replay_one, r, &l, NULL, &e) != HSMCA_OK) {
        fprintf(stderr, "fuzz_admin: the signer wrote a log it cannot replay: %s\n", e.msg);
        abort();
    }
    audit_log_close(l);
    audit_replay_free(r);
}

static void drop_state(void)
{
    audit_log_close(S.audit);
    audit_ica_free(CA->ica);
    audit_crl_free(CA->crl);
    serial_set_free(S.serials);
    S.audit = NULL, CA->ica = NULL, CA->crl = NULL, S.serials = NULL;
    CA->audit = NULL, CA->serials = NULL;
}

/* One round of the signer's main loop for the admin socket. */
static void serve(void)
{
    struct pollfd p[SIGNER_ADMIN_POLLFDS];
    int n = signer_admin_pollfds(adm, p);
    if (poll(p, (nfds_t)n, 1000) < 0)
        abort();
    signer_admin_serve(adm, &S, p, n);
}

static void check_reply(const char *buf, ssize_t n)
{
    json_error_t je;
    json_t *r = n > 0 && n <= ADMIN_MAX_MSG ? json_loadb(buf, (size_t)n, 0, &je) : NULL;
    json_t *ok = json_object_get(r, "ok");
    const char *err = json_string_value(json_object_get(r, "error"));
    if (!json_is_object(r) || !json_is_boolean(ok) || (json_is_false(ok) && (!err || !err[0])))
        abort(); /* every request gets an answer; a refusal says why */
    json_decref(r);
}

/* One request over a connection of its own, as `hsmca` sends it; its reply checked. */
static void one_request(const uint8_t *data, size_t size)
{
    if (size == 0)
        return; /* an empty packet is a hang-up */
    json_t *j = json_loadb((const char *)data, size, 0, NULL);
    const char *op = json_string_value(json_object_get(j, "op"));
    int skip = op && strcmp(op, "status") == 0;
    json_decref(j);
    if (skip)
        return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", S.cfg.admin_socket);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        abort();
    serve(); /* accepted */
    if (send(fd, data, size, MSG_NOSIGNAL) != (ssize_t)size)
        abort();
    serve(); /* read, run, answered */
    static char buf[ADMIN_MAX_MSG + 2];
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    check_reply(buf, n);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > ADMIN_MAX_MSG)
        return 0; /* a longer packet cannot be sent */
    fresh_state();
    size_t start = 0;
    int sent = 0;
    for (size_t i = 0; i <= size && sent < FUZZ_MAX_REQUESTS; i++)
        if (i == size || data[i] == 0) {
            one_request(data + start, i - start);
            start = i + 1;
            sent++;
        }
    drop_state();
    check_log_replays();
    return 0;
}

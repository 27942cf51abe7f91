/* hostile_frontend.c - a compromised front end against a real signer process.
 *
 * DESIGN.md §2 and §4: the signer must not be a signing oracle. This program
 * plays both the supervisor (it fork+execs `hsmca signer` on a fresh dev CA,
 * holds its control channel and hands it new connections) and a front end that
 * an attacker controls: it builds its own TBS certificates with OpenSSL, each
 * breaking exactly one rule, and breaks the IPC protocol in the ways a
 * compromised peer could. After every refusal and every dropped connection the
 * same signer process must still sign a fresh valid request; at the end its log
 * must not contain the token PIN.
 *
 * A second group starts its own signer on its own dev CA with a small token
 * bucket (invariant 7) and floods it the way a compromised front end would. */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certasm.h"
#include "config.h"
#include "fe_tbs.h"
#include "hsmca_err.h"
#include "ipc_frame.h"
#include "signer.h"
#include "signer.pb-c.h"
#include "signer_tbs.h"
#include "testutil.h"
#include "util.h"

#define HF_SPIFFE_ID "spiffe://cluster.local/ns/default/sa/sleep"
#define HF_READY_MS 30000 /* first reply: SoftHSM login and start-up checks */
#define HF_REPLY_MS 10000 /* any later reply */
#define HF_DROP_MS 5000   /* EOF and the 'K' byte after a protocol violation */
#define HF_EXIT_MS 10000  /* signer exit after its control channel closes */
#define HF_MAX_LOG (4 << 20)
#define HF_FLOOD_MS 30000 /* every reply to the flood of the rate group */

/* The supervisor's view of the one signer process all tests talk to. */
static struct {
    char *dir;
    char conf[1024];
    char log[1024];
    X509 *ca;  /* DIR/root-cert.pem */
    pid_t pid; /* 0 once reaped */
    int ipc;   /* our end of the current front end connection */
    int ctl;   /* our end of the signer's control channel */
    uint64_t next_id;
} hf = {.pid = 0, .ipc = -1, .ctl = -1, .next_id = 1};

/* ---- files and the signer's log ---------------------------------------------------- */

/* Whole file as a NUL-terminated string (malloc'd), NULL when unreadable. */
static char *read_text(const char *path, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(cap + 1);
    size_t n = buf ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* The end of the signer's log, so a failure shows what the signer said. */
static void dump_log_tail(void)
{
    char *text = read_text(hf.log, HF_MAX_LOG);
    if (!text)
        return;
    size_t n = strlen(text);
    const char *from = n > 3000 ? text + n - 3000 : text;
    fprintf(stderr, "---- signer log (%s), last %zu bytes ----\n%s\n---- end ----\n", hf.log,
            strlen(from), from);
    free(text);
}

static int signer_alive(void)
{
    if (hf.pid <= 0)
        return 0;
    int st;
    pid_t r = waitpid(hf.pid, &st, WNOHANG);
    if (r == 0)
        return 1;
    if (r == hf.pid) {
        fprintf(stderr, "signer exited: %s %d\n", WIFSIGNALED(st) ? "signal" : "status",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        hf.pid = 0;
    }
    return 0;
}

/* ---- TBS certificates, built the way a front end would, with one knob per rule ---- */

typedef enum {
    EXTRA_NONE,
    EXTRA_PRIVATE_OID,      /* 1.3.6.1.4.1.55555.1.1, not critical */
    EXTRA_NAME_CONSTRAINTS, /* a leaf that would constrain names: never ours to add */
} extra_ext;

typedef struct {
    int ca_true;           /* basicConstraints CA:TRUE instead of CA:FALSE */
    const char *issuer_cn; /* non-NULL: issuer CN=this instead of the CA subject */
    long not_after;        /* notAfter = now + this (0: 3600) */
    const char *uri;       /* NULL: HF_SPIFFE_ID; "" for no URI SAN */
    const char *dns;       /* non-NULL: a DNS SAN next to the URI */
    extra_ext extra;       /* an extension outside the allowlist */
    EVP_PKEY *key;         /* NULL: a fresh EC P-256 key */
    int sig_nid;           /* 0: ecdsa-with-SHA256 (the CA's) */
    int ku_cert_sign;      /* keyUsage also asserts keyCertSign */
} tbs_spec;

static void add_ext_i2d(X509 *x, int nid, void *value, int crit)
{
    assert_non_null(value);
    assert_int_equal(X509_add1_ext_i2d(x, nid, value, crit, X509V3_ADD_DEFAULT), 1);
}

static void add_ext_raw(X509 *x, ASN1_OBJECT *obj, int crit, const uint8_t *der, int len)
{
    ASN1_OCTET_STRING *os = ASN1_OCTET_STRING_new();
    assert_non_null(os);
    assert_int_equal(ASN1_OCTET_STRING_set(os, der, len), 1);
    X509_EXTENSION *ext = X509_EXTENSION_create_by_OBJ(NULL, obj, crit, os);
    assert_non_null(ext);
    assert_int_equal(X509_add_ext(x, ext, -1), 1);
    X509_EXTENSION_free(ext);
    ASN1_OCTET_STRING_free(os);
}

static void set_serial(X509 *x)
{
    uint8_t b[16];
    assert_int_equal(RAND_bytes(b, sizeof(b)), 1);
    b[0] = (uint8_t)((b[0] & 0x7f) | 0x01); /* positive, exactly 16 content octets */
    ASN1_INTEGER *sn = X509_get_serialNumber(x);
    assert_int_equal(ASN1_STRING_set(sn, b, sizeof(b)), 1);
}

static void set_names_and_time(X509 *x, const tbs_spec *s)
{
    assert_int_equal(X509_set_version(x, X509_VERSION_3), 1);
    set_serial(x);
    if (s->issuer_cn) {
        X509_NAME *n = X509_NAME_new();
        assert_non_null(n);
        assert_int_equal(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                                                    (const unsigned char *)s->issuer_cn, -1, -1, 0),
                         1);
        assert_int_equal(X509_set_issuer_name(x, n), 1);
        X509_NAME_free(n);
    } else {
        assert_int_equal(X509_set_issuer_name(x, X509_get_subject_name(hf.ca)), 1);
    }
    /* The subject stays X509_new's empty name. */
    time_t now = time(NULL);
    assert_non_null(ASN1_TIME_set(X509_getm_notBefore(x), now - 120));
    assert_non_null(
        ASN1_TIME_set(X509_getm_notAfter(x), now + (s->not_after ? s->not_after : 3600)));
}

static void add_constraint_exts(X509 *x, const tbs_spec *s)
{
    BASIC_CONSTRAINTS *bc = BASIC_CONSTRAINTS_new();
    assert_non_null(bc);
    bc->ca = s->ca_true ? 0xff : 0;
    add_ext_i2d(x, NID_basic_constraints, bc, 1);
    BASIC_CONSTRAINTS_free(bc);

    ASN1_BIT_STRING *ku = ASN1_BIT_STRING_new();
    assert_non_null(ku);
    assert_int_equal(ASN1_BIT_STRING_set_bit(ku, 0, 1), 1); /* digitalSignature */
    assert_int_equal(ASN1_BIT_STRING_set_bit(ku, 2, 1), 1); /* keyEncipherment */
    if (s->ku_cert_sign)
        assert_int_equal(ASN1_BIT_STRING_set_bit(ku, 5, 1), 1);
    add_ext_i2d(x, NID_key_usage, ku, 1);
    ASN1_BIT_STRING_free(ku);

    EXTENDED_KEY_USAGE *eku = sk_ASN1_OBJECT_new_null();
    assert_non_null(eku);
    assert_true(sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_server_auth)) > 0);
    assert_true(sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_client_auth)) > 0);
    add_ext_i2d(x, NID_ext_key_usage, eku, 0);
    sk_ASN1_OBJECT_free(eku); /* static table objects */
}

static void add_key_id_exts(X509 *x)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    assert_int_equal(X509_pubkey_digest(x, EVP_sha1(), md, &mdlen), 1);
    ASN1_OCTET_STRING *ski = ASN1_OCTET_STRING_new();
    assert_non_null(ski);
    assert_int_equal(ASN1_OCTET_STRING_set(ski, md, (int)mdlen), 1);
    add_ext_i2d(x, NID_subject_key_identifier, ski, 0);
    ASN1_OCTET_STRING_free(ski);

    const ASN1_OCTET_STRING *ca_ski = X509_get0_subject_key_id(hf.ca);
    assert_non_null(ca_ski);
    AUTHORITY_KEYID *aki = AUTHORITY_KEYID_new();
    assert_non_null(aki);
    aki->keyid = ASN1_OCTET_STRING_dup(ca_ski);
    assert_non_null(aki->keyid);
    add_ext_i2d(x, NID_authority_key_identifier, aki, 0);
    AUTHORITY_KEYID_free(aki);
}

static void push_ia5_name(GENERAL_NAMES *gens, int type, const char *text)
{
    GENERAL_NAME *g = GENERAL_NAME_new();
    ASN1_IA5STRING *v = ASN1_IA5STRING_new();
    assert_non_null(g);
    assert_non_null(v);
    assert_int_equal(ASN1_STRING_set(v, text, -1), 1);
    GENERAL_NAME_set0_value(g, type, v);
    assert_true(sk_GENERAL_NAME_push(gens, g) > 0);
}

static void add_san_and_extra(X509 *x, const tbs_spec *s)
{
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    assert_non_null(gens);
    if (!s->uri || *s->uri)
        push_ia5_name(gens, GEN_URI, s->uri ? s->uri : HF_SPIFFE_ID);
    if (s->dns)
        push_ia5_name(gens, GEN_DNS, s->dns);
    add_ext_i2d(x, NID_subject_alt_name, gens, 1);
    GENERAL_NAMES_free(gens);

    if (s->extra == EXTRA_PRIVATE_OID) {
        static const uint8_t null_der[] = {0x05, 0x00};
        ASN1_OBJECT *o = OBJ_txt2obj("1.3.6.1.4.1.55555.1.1", 1);
        assert_non_null(o);
        add_ext_raw(x, o, 0, null_der, sizeof(null_der));
        ASN1_OBJECT_free(o);
    } else if (s->extra == EXTRA_NAME_CONSTRAINTS) {
        /* NameConstraints { permittedSubtrees [0] { { dNSName "evil" } } }, critical
         * as RFC 5280 wants: well formed, so only the allowlist can refuse it. */
        static const uint8_t nc_der[] = {0x30, 0x0a, 0xa0, 0x08, 0x30, 0x06,
                                         0x82, 0x04, 'e',  'v',  'i',  'l'};
        add_ext_raw(x, OBJ_nid2obj(NID_name_constraints), 1, nc_der, sizeof(nc_der));
    }
}

/* A DER TBSCertificate per spec (OPENSSL_malloc'd). */
static uint8_t *build_tbs(const tbs_spec *s, size_t *len)
{
    EVP_PKEY *key = s->key ? s->key : EVP_EC_gen("P-256");
    assert_non_null(key);
    X509 *x = X509_new();
    assert_non_null(x);
    set_names_and_time(x, s);
    assert_int_equal(X509_set_pubkey(x, key), 1);
    add_constraint_exts(x, s);
    add_key_id_exts(x);
    add_san_and_extra(x, s);
    uint8_t *der = NULL;
    hsmca_err e;
    hsmca_code rc =
        certasm_tbs_der(x, s->sig_nid ? s->sig_nid : NID_ecdsa_with_SHA256, &der, len, &e);
    if (rc != HSMCA_OK)
        fail_msg("certasm_tbs_der: %s", e.msg);
    X509_free(x);
    if (!s->key)
        EVP_PKEY_free(key);
    return der;
}

static uint8_t *valid_tbs(size_t *len)
{
    tbs_spec s = {0};
    return build_tbs(&s, len);
}

/* ---- the IPC, as the front end speaks it ---------------------------------------- */

static uint64_t send_request(int fd, uint32_t profile, const uint8_t *tbs, size_t len)
{
    Hsmca__Ipc__SignRequest req = HSMCA__IPC__SIGN_REQUEST__INIT;
    uint8_t csr_sha[32];
    SHA256(tbs, len, csr_sha); /* stands in for the CSR digest: only logged */
    req.profile = profile;
    req.tbs.data = (uint8_t *)tbs;
    req.tbs.len = len;
    req.requester = (char *)HF_SPIFFE_ID;
    req.csr_sha256.data = csr_sha;
    req.csr_sha256.len = sizeof(csr_sha);
    size_t n = hsmca__ipc__sign_request__get_packed_size(&req);
    assert_true(n <= IPC_MAX_PAYLOAD);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    hsmca__ipc__sign_request__pack(&req, buf);
    uint64_t id = hf.next_id++;
    hsmca_err e;
    hsmca_code rc = ipc_send(fd, IPC_SIGN_REQ, id, buf, n, &e);
    free(buf);
    if (rc != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    return id;
}

/* Waits for the next reply, whatever its id (timeout_ms); fails the test on a hang,
 * EOF, a dead signer or a wrong type. what names the wait in failure messages. */
static Hsmca__Ipc__SignReply *recv_reply(int fd, int timeout_ms, uint64_t *rid, const char *what)
{
    static uint8_t buf[IPC_MAX_FRAME];
    for (int waited = 0;; waited += 100) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, 100);
        if (r > 0)
            break;
        if (r < 0 && errno != EINTR)
            fail_msg("poll: %s", strerror(errno));
        if (!signer_alive()) {
            dump_log_tail();
            fail_msg("the signer died while %s was pending", what);
        }
        if (waited >= timeout_ms) {
            dump_log_tail();
            fail_msg("no reply to %s within %d ms", what, timeout_ms);
        }
    }
    ipc_msg m;
    hsmca_err e;
    if (ipc_recv(fd, buf, &m, &e) != HSMCA_OK) {
        dump_log_tail();
        fail_msg("ipc_recv (%s): %s%s", what, e.msg,
                 m.eof ? " (the signer closed the connection)" : "");
    }
    *rid = m.id;
    assert_int_equal(m.type, IPC_SIGN_REPLY);
    Hsmca__Ipc__SignReply *rep = hsmca__ipc__sign_reply__unpack(NULL, m.len, m.payload);
    assert_non_null(rep);
    return rep;
}

/* Waits for the reply to id (timeout_ms); as recv_reply, and a reply to another
 * request fails the test too. */
static Hsmca__Ipc__SignReply *await_reply(int fd, uint64_t id, int timeout_ms)
{
    char what[64];
    snprintf(what, sizeof(what), "request %llu", (unsigned long long)id);
    uint64_t rid = 0;
    Hsmca__Ipc__SignReply *rep = recv_reply(fd, timeout_ms, &rid, what);
    assert_int_equal(rid, id);
    return rep;
}

static Hsmca__Ipc__SignReply *sign(uint32_t profile, const uint8_t *tbs, size_t len)
{
    uint64_t id = send_request(hf.ipc, profile, tbs, len);
    return await_reply(hf.ipc, id, HF_REPLY_MS);
}

/* The TBSCertificate inside a DER certificate: the first element of the outer
 * SEQUENCE, taken byte for byte (no re-encoding). */
static void cert_tbs_span(const uint8_t *der, size_t len, const uint8_t **tbs, size_t *tbs_len)
{
    const unsigned char *p = der;
    long l;
    int tag, cls;
    int r = ASN1_get_object(&p, &l, &tag, &cls, (long)len);
    assert_false(r & 0x80);
    assert_int_equal(tag, V_ASN1_SEQUENCE);
    const unsigned char *start = p;
    r = ASN1_get_object(&p, &l, &tag, &cls, (long)(len - (size_t)(p - der)));
    assert_false(r & 0x80);
    assert_int_equal(tag, V_ASN1_SEQUENCE);
    *tbs = start;
    *tbs_len = (size_t)(p - start) + (size_t)l;
    assert_true(*tbs + *tbs_len <= der + len);
}

/* An OK reply whose certificate verifies under the root and carries exactly the
 * TBS we sent: the signer added nothing and changed nothing. */
static void assert_signed(const Hsmca__Ipc__SignReply *rep, const uint8_t *tbs, size_t len)
{
    if (rep->code != HSMCA_OK)
        fail_msg("valid TBS refused: code %u, reason \"%s\"", rep->code, rep->reason);
    assert_true(rep->certificate.len > 0);
    const unsigned char *p = rep->certificate.data;
    X509 *x = d2i_X509(NULL, &p, (long)rep->certificate.len);
    assert_non_null(x);
    assert_ptr_equal(p, rep->certificate.data + rep->certificate.len);
    assert_int_equal(X509_verify(x, X509_get0_pubkey(hf.ca)), 1);
    assert_int_equal(X509_check_issued(hf.ca, x), X509_V_OK);
    assert_int_equal(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
    const uint8_t *got;
    size_t got_len;
    cert_tbs_span(rep->certificate.data, rep->certificate.len, &got, &got_len);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, tbs, len);
    X509_free(x);
}

/* The signer still does its job: a fresh valid TBS is signed on the current connection. */
static void assert_signs_fresh(void)
{
    size_t len;
    uint8_t *tbs = valid_tbs(&len);
    Hsmca__Ipc__SignReply *rep = sign(TBS_PROFILE_WORKLOAD, tbs, len);
    assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
}

/* Sends tbs; the signer must refuse it with code and a reason that names the
 * rule (rule, e.g. "invariant 3") and the check (detail), sign nothing, and
 * then still sign a fresh valid TBS. */
static void assert_refused(uint32_t profile, const uint8_t *tbs, size_t len, hsmca_code code,
                           const char *rule, const char *detail)
{
    Hsmca__Ipc__SignReply *rep = sign(profile, tbs, len);
    fprintf(stderr, "  refused: code %u (%s), reason \"%s\"\n", rep->code,
            hsmca_code_name((hsmca_code)rep->code), rep->reason);
    if (rep->code == HSMCA_OK)
        fail_msg("signed a TBS that should be refused by \"%s: %s\"", rule, detail);
    assert_int_equal(rep->code, code);
    assert_non_null(rep->reason);
    if (!strstr(rep->reason, rule) || !strstr(rep->reason, detail))
        fail_msg("reason \"%s\" does not name \"%s\" and \"%s\"", rep->reason, rule, detail);
    assert_int_equal(rep->certificate.len, 0);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    assert_signs_fresh();
}

static void refuse_spec(const tbs_spec *s, hsmca_code code, const char *rule, const char *detail)
{
    size_t len;
    uint8_t *tbs = build_tbs(s, &len);
    assert_refused(TBS_PROFILE_WORKLOAD, tbs, len, code, rule, detail);
    OPENSSL_free(tbs);
}

/* ---- protocol violations: the supervisor's side ---------------------------------- */

static int wait_readable(int fd, int timeout_ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    int r;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    return r > 0;
}

/* After a violation: the signer ends the connection (we read EOF), asks the
 * supervisor for a new front end ('K' on ctl), stays alive, and signs again on
 * the connection the supervisor hands it. */
/* Reads the old connection to its end. Replies may still come for requests
 * [lo, hi) sent before the violation; anything else before EOF is an error. */
static void drain_to_eof(uint64_t lo, uint64_t hi)
{
    static uint8_t buf[IPC_MAX_FRAME];
    for (;;) {
        if (!wait_readable(hf.ipc, HF_DROP_MS)) {
            dump_log_tail();
            fail_msg("the signer did not end the connection within %d ms", HF_DROP_MS);
        }
        ipc_msg m;
        hsmca_err e;
        if (ipc_recv(hf.ipc, buf, &m, &e) != HSMCA_OK) {
            if (m.eof)
                return;
            fail_msg("expected EOF on the front end connection: %s", e.msg);
        }
        if (m.type != IPC_SIGN_REPLY || m.id < lo || m.id >= hi)
            fail_msg("expected EOF on the front end connection, got type %u id %llu", m.type,
                     (unsigned long long)m.id);
    }
}

static void assert_dropped_then_reconnect_after(uint64_t lo, uint64_t hi)
{
    drain_to_eof(lo, hi);
    /* The restart request is checked after the reconnection, so that a missing
     * one fails this test only and leaves the signer connected for the next. */
    char k = 0;
    int got_k = wait_readable(hf.ctl, HF_DROP_MS) && read(hf.ctl, &k, 1) == 1;
    if (!signer_alive()) {
        dump_log_tail();
        fail_msg("the signer died on a protocol violation");
    }

    /* What the supervisor does once the new front end is up. */
    int pair[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
    hsmca_err e;
    if (ipc_send_fd(hf.ctl, pair[1], &e) != HSMCA_OK)
        fail_msg("ipc_send_fd: %s", e.msg);
    close(pair[1]);
    close(hf.ipc);
    hf.ipc = pair[0];
    assert_signs_fresh();

    if (!got_k) {
        dump_log_tail();
        fail_msg("no restart request on the control channel within %d ms", HF_DROP_MS);
    }
    assert_int_equal(k, CTL_RESTART_PEER);
}

static void assert_dropped_then_reconnect(void)
{
    assert_dropped_then_reconnect_after(0, 0);
}

/* One raw packet of n bytes on the front end connection. */
static void send_raw(const uint8_t *p, size_t n)
{
    ssize_t w = send(hf.ipc, p, n, MSG_NOSIGNAL);
    if (w < 0 || (size_t)w != n)
        fail_msg("send of %zu raw bytes: %zd (%s)", n, w, strerror(errno));
}

/* ---- group setup: dev CA, socketpairs, the signer process ------------------------ */

static X509 *load_cert(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    return x;
}

/* fork + exec `hsmca signer` with ipc_child on fd 3, ctl_child on fd 4 and
 * stdout/stderr into the log, as cli/supervisor.c does. */
static pid_t spawn_signer(int ipc_child, int ctl_child)
{
    int logfd = open(hf.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0)
        return -1;
    const char *bin = tu_hsmca_bin();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan signer if this test dies */
        /* LeakSanitizer needs ptrace and a non-thread clone, which the signer's
         * seccomp filter refuses (as the front end's does): no leak check in it.
         * (This program has no threads: setenv after fork is safe.) */
        const char *asan = getenv("ASAN_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof(opts), "%s:detect_leaks=0", asan ? asan : "");
        setenv("ASAN_OPTIONS", opts, 1);
        /* Lift every source above 4 first, so no dup2 clobbers another source. */
        int a = fcntl(ipc_child, F_DUPFD_CLOEXEC, 10), b = fcntl(ctl_child, F_DUPFD_CLOEXEC, 10),
            l = fcntl(logfd, F_DUPFD_CLOEXEC, 10);
        if (a < 0 || b < 0 || l < 0 || dup2(a, 3) != 3 || dup2(b, 4) != 4 || dup2(l, 1) != 1 ||
            dup2(l, 2) != 2)
            _exit(127);
        execl(bin, bin, "signer", "--config", hf.conf, "--ipc-fd", "3", "--ctl-fd", "4",
              (char *)NULL);
        _exit(127);
    }
    close(logfd);
    return pid;
}

/* Makes a dev CA in a new directory named after prefix, lets prepare (when not
 * NULL) change it, and starts a signer on it with fresh socketpairs. 0 on success. */
static int start_signer(const char *prefix, int (*prepare)(void))
{
    hf.dir = tu_mkdtemp(prefix);
    if (tu_dev_init(hf.dir, "ec-p256") != 0)
        return -1;
    snprintf(hf.conf, sizeof(hf.conf), "%s/hsmca.yaml", hf.dir);
    snprintf(hf.log, sizeof(hf.log), "%s/signer.log", hf.dir);
    char path[1100];
    snprintf(path, sizeof(path), "%s/root-cert.pem", hf.dir);
    if (!(hf.ca = load_cert(path))) {
        fprintf(stderr, "cannot load %s\n", path);
        return -1;
    }
    if (prepare && prepare() != 0)
        return -1;
    int ipc[2], ctl[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ipc) != 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0)
        return -1;
    hf.pid = spawn_signer(ipc[1], ctl[1]);
    close(ipc[1]);
    close(ctl[1]);
    hf.ipc = ipc[0];
    hf.ctl = ctl[0];
    if (hf.pid <= 0) {
        fprintf(stderr, "cannot start the signer\n");
        return -1;
    }
    fprintf(stderr, "signer pid %d, dir %s\n", (int)hf.pid, hf.dir);
    return 0;
}

static int group_setup(void **state)
{
    return start_signer("hostile", NULL);
}

/* Also leaves hf idle, so that the next group can start its own signer. */
static int group_teardown(void **state)
{
    if (hf.pid > 0) { /* a test failed before the orderly stop */
        kill(hf.pid, SIGKILL);
        waitpid(hf.pid, NULL, 0);
        hf.pid = 0;
    }
    if (hf.ipc >= 0)
        close(hf.ipc);
    if (hf.ctl >= 0)
        close(hf.ctl);
    hf.ipc = hf.ctl = -1;
    X509_free(hf.ca);
    hf.ca = NULL;
    free(hf.dir);
    hf.dir = NULL;
    return 0;
}

/* Closes the control channel like a supervisor that went away: the signer must
 * stop cleanly within HF_EXIT_MS. */
static void stop_signer(void)
{
    assert_true(signer_alive());
    close(hf.ctl);
    hf.ctl = -1;
    int st = 0, waited = 0;
    pid_t r;
    while ((r = waitpid(hf.pid, &st, WNOHANG)) == 0 && waited < HF_EXIT_MS) {
        usleep(50 * 1000);
        waited += 50;
    }
    if (r != hf.pid) {
        dump_log_tail();
        fail_msg("the signer did not exit within %d ms of its control channel closing", HF_EXIT_MS);
    }
    hf.pid = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        dump_log_tail();
        fail_msg("the signer did not exit cleanly (status 0x%x)", st);
    }
}

/* The signer's whole log (malloc'd), checked to be free of the PIN. */
static char *read_log_without_pin(void)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/pin", hf.dir);
    char *pin = read_text(path, 256);
    assert_non_null(pin);
    pin[strcspn(pin, "\r\n")] = '\0';
    assert_true(strlen(pin) >= 8);
    char *log = read_text(hf.log, HF_MAX_LOG);
    assert_non_null(log);
    if (strstr(log, pin))
        fail_msg("the signer logged the PIN (%s)", hf.log);
    OPENSSL_cleanse(pin, strlen(pin));
    free(pin);
    return log;
}

/* ---- the tests ------------------------------------------------------------------- */

/* The first request also waits for the signer to finish starting: the packet
 * waits in the socket until the signer reads it. */
static void test_ready_and_signs_valid(void **state)
{
    size_t len;
    uint8_t *tbs = valid_tbs(&len);
    uint64_t id = send_request(hf.ipc, TBS_PROFILE_WORKLOAD, tbs, len);
    Hsmca__Ipc__SignReply *rep = await_reply(hf.ipc, id, HF_READY_MS);
    assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
}

/* What the real front end builds is signed too. */
static void test_signs_fe_tbs_build(void **state)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    assert_non_null(key);
    fe_tbs_params p = {.ca_cert = hf.ca,
                       .sig_nid = NID_ecdsa_with_SHA256,
                       .subject_key = key,
                       .uri_san = HF_SPIFFE_ID,
                       .now = time(NULL),
                       .ttl = 3600};
    uint8_t *tbs = NULL;
    size_t len = 0;
    hsmca_err e;
    if (fe_tbs_build(&p, &tbs, &len, &e) != HSMCA_OK)
        fail_msg("fe_tbs_build: %s", e.msg);
    Hsmca__Ipc__SignReply *rep = sign(TBS_PROFILE_WORKLOAD, tbs, len);
    assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    EVP_PKEY_free(key);
}

static void test_refuses_ca_true(void **state)
{
    tbs_spec s = {.ca_true = 1};
    refuse_spec(&s, HSMCA_EPERM, "invariant 3", "basicConstraints must be CA:FALSE");
}

static void test_refuses_wrong_issuer(void **state)
{
    tbs_spec s = {.issuer_cn = "hsmca dev root CA evil"};
    refuse_spec(&s, HSMCA_EPERM, "invariant 1", "issuer must equal the CA subject");
}

static void test_refuses_ttl_beyond_max(void **state)
{
    tbs_spec s = {.not_after = 25 * 3600};
    refuse_spec(&s, HSMCA_EPERM, "invariant 2", "exceeds the profile max TTL");
}

static void test_refuses_foreign_trust_domain(void **state)
{
    tbs_spec s = {.uri = "spiffe://evil.example/ns/default/sa/sleep"};
    refuse_spec(&s, HSMCA_EPERM, "invariant 4", "trust domain is not a configured one");
}

static void test_refuses_private_extension(void **state)
{
    tbs_spec s = {.extra = EXTRA_PRIVATE_OID};
    refuse_spec(&s, HSMCA_EPERM, "invariant 3",
                "extension 1.3.6.1.4.1.55555.1.1 not in the allowlist");
}

static void test_refuses_name_constraints(void **state)
{
    tbs_spec s = {.extra = EXTRA_NAME_CONSTRAINTS};
    refuse_spec(&s, HSMCA_EPERM, "invariant 3", "extension 2.5.29.30 not in the allowlist");
}

static void test_refuses_repeated_serial(void **state)
{
    size_t len;
    uint8_t *tbs = valid_tbs(&len);
    Hsmca__Ipc__SignReply *rep = sign(TBS_PROFILE_WORKLOAD, tbs, len);
    assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    assert_refused(TBS_PROFILE_WORKLOAD, tbs, len, HSMCA_EPERM, "invariant 6",
                   "serial issued before");
    OPENSSL_free(tbs);
}

/* The version field [0] { INTEGER 2 } = a0 03 02 01 02 right after the outer
 * header 30 82 hh ll; its length re-encoded in long form (81 03), and the outer
 * length grown by one to match. Everything else is untouched. */
static void test_refuses_long_form_length(void **state)
{
    size_t len;
    uint8_t *tbs = valid_tbs(&len);
    static const uint8_t version[] = {0xa0, 0x03, 0x02, 0x01, 0x02};
    assert_true(len > 9 && len < 0xffff);
    assert_int_equal(tbs[0], 0x30);
    assert_int_equal(tbs[1], 0x82);
    assert_memory_equal(tbs + 4, version, sizeof(version));
    uint8_t *bad = malloc(len + 1);
    assert_non_null(bad);
    size_t inner = ((size_t)tbs[2] << 8 | tbs[3]) + 1;
    bad[0] = 0x30;
    bad[1] = 0x82;
    bad[2] = (uint8_t)(inner >> 8);
    bad[3] = (uint8_t)inner;
    bad[4] = 0xa0;
    bad[5] = 0x81;
    memcpy(bad + 6, tbs + 5, len - 5);
    assert_refused(TBS_PROFILE_WORKLOAD, bad, len + 1, HSMCA_EINVAL, "invariant 1",
                   "version: not DER");
    free(bad);
    OPENSSL_free(tbs);
}

/* basicConstraints' critical flag as BOOLEAN 0x01 instead of DER's 0xFF. */
static void test_refuses_ber_boolean(void **state)
{
    size_t len;
    uint8_t *tbs = valid_tbs(&len);
    static const uint8_t bc_crit[] = {0x06, 0x03, 0x55, 0x1d, 0x13, 0x01, 0x01, 0xff};
    uint8_t *at = memmem(tbs, len, bc_crit, sizeof(bc_crit));
    assert_non_null(at);
    at[sizeof(bc_crit) - 1] = 0x01;
    assert_refused(TBS_PROFILE_WORKLOAD, tbs, len, HSMCA_EINVAL, "invariant 3",
                   "extension critical: not DER");
    OPENSSL_free(tbs);
}

static void test_refuses_trailing_bytes(void **state)
{
    size_t len;
    uint8_t *tbs = valid_tbs(&len);
    uint8_t *bad = malloc(len + 2);
    assert_non_null(bad);
    memcpy(bad, tbs, len);
    bad[len] = 0x05; /* a well-formed NULL after the TBS */
    bad[len + 1] = 0x00;
    assert_refused(TBS_PROFILE_WORKLOAD, bad, len + 2, HSMCA_EINVAL, "invariant 0",
                   "TBSCertificate: not DER");
    free(bad);
    OPENSSL_free(tbs);
}

static void test_refuses_dns_san_in_workload(void **state)
{
    tbs_spec s = {.dns = "sleep.default.svc.cluster.local"};
    refuse_spec(&s, HSMCA_EPERM, "invariant 4", "DNS SAN not granted to workload identities");
}

/* CA:FALSE but keyCertSign: a leaf that could still sign certificates for
 * relying parties that do not check basicConstraints. */
static void test_refuses_key_cert_sign(void **state)
{
    tbs_spec s = {.ku_cert_sign = 1};
    refuse_spec(&s, HSMCA_EPERM, "invariant 3", "keyUsage allows only");
}

/* The front end picks the profile, so the serving profile must not be a way
 * around the workload rules: it takes only the names it is configured for.
 * First the positive case, so that the refusal below is for the name alone. */
static void test_serving_profile_signs_localhost(void **state)
{
    tbs_spec s = {.uri = "", .dns = "localhost"};
    size_t len;
    uint8_t *tbs = build_tbs(&s, &len);
    Hsmca__Ipc__SignReply *rep = sign(TBS_PROFILE_SERVING, tbs, len);
    assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
}

static void test_refuses_serving_foreign_dns(void **state)
{
    tbs_spec s = {.uri = "", .dns = "accounts.google.com"};
    size_t len;
    uint8_t *tbs = build_tbs(&s, &len);
    assert_refused(TBS_PROFILE_SERVING, tbs, len, HSMCA_EPERM, "invariant 4",
                   "DNS SAN not in the serving list");
    OPENSSL_free(tbs);
}

static void test_refuses_rsa_1024(void **state)
{
    tbs_spec s = {.key = EVP_RSA_gen(1024)};
    assert_non_null(s.key);
    refuse_spec(&s, HSMCA_EPERM, "invariant 5", "RSA key of 1024 bits");
    EVP_PKEY_free(s.key);
}

static void test_refuses_wrong_sig_alg(void **state)
{
    tbs_spec s = {.sig_nid = NID_sha256WithRSAEncryption};
    refuse_spec(&s, HSMCA_EPERM, "invariant 1", "signature algorithm must equal the CA key's");
}

static void test_refuses_unknown_profile(void **state)
{
    size_t len;
    uint8_t *tbs = valid_tbs(&len); /* a valid workload TBS under a profile that does not exist */
    assert_refused(99, tbs, len, HSMCA_EPERM, "unknown profile", "99");
    OPENSSL_free(tbs);
}

static void test_violation_truncated_frame(void **state)
{
    static const uint8_t five[5] = {IPC_SIGN_REQ, 0, 0, 0, 0};
    send_raw(five, sizeof(five));
    assert_dropped_then_reconnect();
}

static void test_violation_unknown_type(void **state)
{
    /* A valid header and a valid SignRequest: only the type is wrong. */
    size_t len;
    uint8_t *tbs = valid_tbs(&len);
    Hsmca__Ipc__SignRequest req = HSMCA__IPC__SIGN_REQUEST__INIT;
    req.profile = TBS_PROFILE_WORKLOAD;
    req.tbs.data = tbs;
    req.tbs.len = len;
    uint8_t buf[TBS_MAX_LEN + 64];
    size_t n = hsmca__ipc__sign_request__get_packed_size(&req);
    assert_true(n <= sizeof(buf));
    hsmca__ipc__sign_request__pack(&req, buf);
    hsmca_err e;
    if (ipc_send(hf.ipc, 77, hf.next_id++, buf, n, &e) != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    OPENSSL_free(tbs);
    assert_dropped_then_reconnect();
}

static void test_violation_undecodable_payload(void **state)
{
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    hsmca_err e;
    if (ipc_send(hf.ipc, IPC_SIGN_REQ, hf.next_id++, junk, sizeof(junk), &e) != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    assert_dropped_then_reconnect();
}

static void test_violation_oversized_frame(void **state)
{
    enum { BIG = 70000 };
    uint8_t *big = malloc(BIG);
    assert_non_null(big);
    memset(big, 0x41, BIG);
    big[0] = IPC_SIGN_REQ; /* a plausible header: only the size is wrong */
    memset(big + 1, 0, 8);
    big[8] = 1;
    send_raw(big, BIG);
    free(big);
    assert_dropped_then_reconnect();
}

/* Requests in flight when the front end breaks the protocol: their replies may
 * reach the old connection or be dropped, but never the new one (the next
 * reply there must carry the id of the next request). */
static void test_violation_with_requests_in_flight(void **state)
{
    enum { N = 16 };
    uint64_t lo = hf.next_id;
    for (int i = 0; i < N; i++) {
        size_t len;
        uint8_t *tbs = valid_tbs(&len);
        send_request(hf.ipc, TBS_PROFILE_WORKLOAD, tbs, len);
        OPENSSL_free(tbs);
    }
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    hsmca_err e;
    if (ipc_send(hf.ipc, IPC_SIGN_REQ, hf.next_id++, junk, sizeof(junk), &e) != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    assert_dropped_then_reconnect_after(lo, lo + N);
}

/* A packet of zero bytes is shorter than the header like any truncated frame
 * (DESIGN.md §4: malformed, so the connection ends and the front end is
 * restarted). On SEQPACKET it reads as a 0-byte recvmsg, which must not be
 * taken for an orderly close: the front end is still there and, left without a
 * connection and without a restart, would answer UNAVAILABLE forever. */
static void test_violation_empty_packet(void **state)
{
    send_raw((const uint8_t *)"", 0);
    assert_dropped_then_reconnect();
}

/* Close the control channel like a supervisor that went away: the signer stops
 * cleanly. Then its whole log must be free of the PIN. */
static void test_stop_and_no_pin_in_log(void **state)
{
    stop_signer();
    char *log = read_log_without_pin();
    /* The log is the real one: it saw the start and the violations above. */
    assert_non_null(strstr(log, "signer ready"));
    assert_non_null(strstr(log, "protocol violation"));
    free(log);
}

/* ---- invariant 7: the rate group, with its own signer and its own dev CA ---------- */

#define HR_RATE 5   /* issuance.rate_per_second of the rate group's signer */
#define HR_BURST 10 /* issuance.rate_burst */
#define HR_FLOOD 60 /* requests a compromised front end puts in flight at once */

/* What the flood leaves for the tests after it. */
static struct {
    uint8_t *refused_tbs; /* a valid TBS refused for rate (malloc'd), NULL if none */
    size_t refused_len;
} hr;

static int line_has_key(const char *line, size_t n, const char *key)
{
    size_t k = strlen(key);
    return n > k + 2 && !memcmp(line, "  ", 2) && !memcmp(line + 2, key, k) && line[2 + k] == ':';
}

/* in with issuance.rate_per_second and rate_burst set to ours and every other line
 * kept as it was; rate lines it already had are dropped, so no key repeats (the
 * config parser refuses duplicates). Returns a malloc'd buffer of *out_len bytes. */
static char *rate_yaml(const char *in, size_t len, size_t *out_len)
{
    size_t cap = len + 256, o = 0;
    char *out = malloc(cap);
    int in_issuance = 0, inserted = 0;
    for (const char *line = in; out && line < in + len;) {
        const char *nl = memchr(line, '\n', (size_t)(in + len - line));
        size_t n = nl ? (size_t)(nl - line) : (size_t)(in + len - line);
        int top = n > 0 && line[0] != ' ' && line[0] != '#';
        if (top)
            in_issuance = n == strlen("issuance:") && !memcmp(line, "issuance:", n);
        if (!(in_issuance && !top &&
              (line_has_key(line, n, "rate_per_second") || line_has_key(line, n, "rate_burst")))) {
            memcpy(out + o, line, n);
            o += n;
            out[o++] = '\n';
        }
        if (top && in_issuance) {
            o += (size_t)snprintf(out + o, cap - o, "  rate_per_second: %d\n  rate_burst: %d\n",
                                  HR_RATE, HR_BURST);
            inserted = 1;
        }
        line += n + 1;
    }
    if (out && !inserted)
        o += (size_t)snprintf(out + o, cap - o,
                              "issuance:\n  rate_per_second: %d\n  rate_burst: %d\n", HR_RATE,
                              HR_BURST);
    *out_len = o;
    return out;
}

/* Rewrites DIR/hsmca.yaml before the signer starts, then checks with the real
 * parser that the rate fields, and only they, changed. */
static int rate_prepare(void)
{
    hsmca_config *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    char *in = NULL, *out = NULL;
    size_t len = 0, out_len = 0;
    hsmca_err e;
    hsmca_err_clear(&e);
    int rc = -1;
    if (!before || !after || util_read_file(hf.conf, 1 << 20, &in, &len, &e) != HSMCA_OK ||
        config_load(hf.conf, before, &e) != HSMCA_OK || !(out = rate_yaml(in, len, &out_len)) ||
        util_write_file_atomic(hf.conf, out, out_len, 0644, &e) != HSMCA_OK ||
        config_load(hf.conf, after, &e) != HSMCA_OK || config_validate(after, &e) != HSMCA_OK) {
        fprintf(stderr, "rewriting %s: %s\n", hf.conf, e.msg[0] ? e.msg : "out of memory");
        goto done;
    }
    if (after->rate_per_second != HR_RATE || after->rate_burst != HR_BURST ||
        before->rate_per_second == HR_RATE) {
        fprintf(stderr, "%s: rate %u/s burst %u after the rewrite (before: %u/s)\n", hf.conf,
                after->rate_per_second, after->rate_burst, before->rate_per_second);
        goto done;
    }
    /* Both structs come from config_defaults' memset and the same parser, so
     * everything but the two fields must be byte for byte the same. */
    after->rate_per_second = before->rate_per_second;
    after->rate_burst = before->rate_burst;
    if (memcmp(before, after, sizeof(*before)) != 0) {
        fprintf(stderr, "%s: the rewrite changed more than issuance.rate_*\n", hf.conf);
        goto done;
    }
    fprintf(stderr, "%s: issuance.rate_per_second %d, rate_burst %d\n", hf.conf, HR_RATE, HR_BURST);
    rc = 0;
done:
    free(before);
    free(after);
    free(in);
    free(out);
    return rc;
}

static int rate_group_setup(void **state)
{
    group_teardown(state); /* whatever the first group left if its setup failed */
    return start_signer("hostile-rate", rate_prepare);
}

static int rate_group_teardown(void **state)
{
    free(hr.refused_tbs);
    hr.refused_tbs = NULL;
    return group_teardown(state);
}

/* The refusal of invariant 7, with the limits this group configured: proof that
 * the signer took them from the rewritten hsmca.yaml. */
static void assert_rate_refusal(const Hsmca__Ipc__SignReply *rep)
{
    char limits[64];
    snprintf(limits, sizeof(limits), "(%d/s, burst %d)", HR_RATE, HR_BURST);
    assert_int_equal(rep->code, HSMCA_ERATE);
    assert_non_null(rep->reason);
    if (!strstr(rep->reason, "invariant 7: signing rate limit") || !strstr(rep->reason, limits))
        fail_msg("rate refusal \"%s\" does not name \"invariant 7: signing rate limit\" %s",
                 rep->reason, limits);
    assert_int_equal(rep->certificate.len, 0);
}

/* Waits for start-up with one signature (a token), then long enough for the
 * bucket to be full again, so the flood meets exactly HR_BURST tokens. */
static void test_rate_ready(void **state)
{
    size_t len;
    uint8_t *tbs = valid_tbs(&len);
    uint64_t id = send_request(hf.ipc, TBS_PROFILE_WORKLOAD, tbs, len);
    Hsmca__Ipc__SignReply *rep = await_reply(hf.ipc, id, HF_READY_MS);
    assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    usleep(1000 * 1000); /* one token back takes 1/HR_RATE s */
}

/* A compromised front end puts HR_FLOOD valid, distinct requests in flight at
 * once. The bucket holds HR_BURST and refills HR_RATE per second, so at most
 * HR_BURST + HR_RATE * elapsed (rounded up, +1 for timing slack) may be signed;
 * every other reply must be the rate refusal; every signature must verify. The
 * full burst must be served: all of it is there when the flood starts. */
static void test_rate_flood_capped(void **state)
{
    uint8_t *tbs[HR_FLOOD];
    size_t len[HR_FLOOD];
    int seen[HR_FLOOD] = {0};
    for (int i = 0; i < HR_FLOOD; i++)
        tbs[i] = valid_tbs(&len[i]); /* built first, so the sends go back to back */

    double t0 = util_mono_now();
    uint64_t first = hf.next_id;
    for (int i = 0; i < HR_FLOOD; i++)
        assert_int_equal(send_request(hf.ipc, TBS_PROFILE_WORKLOAD, tbs[i], len[i]),
                         first + (uint64_t)i);

    int n_signed = 0, n_refused = 0;
    for (int got = 0; got < HR_FLOOD; got++) {
        int left_ms = HF_FLOOD_MS - (int)((util_mono_now() - t0) * 1000.0);
        if (left_ms <= 0)
            fail_msg("only %d of %d replies to the flood within %d ms", got, HR_FLOOD, HF_FLOOD_MS);
        uint64_t rid = 0;
        Hsmca__Ipc__SignReply *rep = recv_reply(hf.ipc, left_ms, &rid, "the flood");
        if (rid < first || rid >= first + HR_FLOOD || seen[rid - first])
            fail_msg("reply id %llu: not one of the flood's, or a second reply",
                     (unsigned long long)rid);
        size_t i = (size_t)(rid - first);
        seen[i] = 1;
        if (rep->code == HSMCA_OK) {
            assert_signed(rep, tbs[i], len[i]);
            n_signed++;
        } else {
            assert_rate_refusal(rep);
            n_refused++;
            if (!hr.refused_tbs) { /* kept for test_rate_refusal_keeps_serial */
                hr.refused_tbs = malloc(len[i]);
                assert_non_null(hr.refused_tbs);
                memcpy(hr.refused_tbs, tbs[i], len[i]);
                hr.refused_len = len[i];
            }
        }
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    }
    double elapsed = util_mono_now() - t0;
    double refill = elapsed * HR_RATE;
    int max_signed = HR_BURST + (int)refill + ((double)(int)refill < refill) + 1;
    fprintf(stderr,
            "  flood of %d in %.3f s: %d signed (at most %d allowed), %d refused for rate\n",
            HR_FLOOD, elapsed, n_signed, max_signed, n_refused);
    for (int i = 0; i < HR_FLOOD; i++)
        OPENSSL_free(tbs[i]);
    if (n_signed > max_signed)
        fail_msg("%d of %d signed in %.3f s: the bucket (%d/s, burst %d) allows at most %d",
                 n_signed, HR_FLOOD, elapsed, HR_RATE, HR_BURST, max_signed);
    if (n_signed < HR_BURST)
        fail_msg("only %d signed: a full bucket must serve its burst of %d", n_signed, HR_BURST);
    assert_int_equal(n_signed + n_refused, HR_FLOOD);
    assert_true(signer_alive());
}

/* The bucket refills: ~1.2 s after the flood (6 tokens at 5/s) a valid request
 * is signed again by the same process. */
static void test_rate_refills(void **state)
{
    assert_true(signer_alive());
    usleep(1200 * 1000);
    assert_true(signer_alive());
    assert_signs_fresh();
    assert_true(signer_alive());
}

/* A refusal for rate must not burn the serial: sign_one takes a token before it
 * records the serial, so the very TBS refused in the flood is signed now. Sent
 * once more it is refused for its serial, so the signature above was not for
 * want of a serial check. (4 tokens here and in test_rate_refills: the bucket
 * holds at least 6.) */
static void test_rate_refusal_keeps_serial(void **state)
{
    if (!hr.refused_tbs)
        fail_msg("the flood left no TBS refused for rate");
    Hsmca__Ipc__SignReply *rep = sign(TBS_PROFILE_WORKLOAD, hr.refused_tbs, hr.refused_len);
    if (rep->code == HSMCA_EPERM && strstr(rep->reason, "invariant 6"))
        fail_msg("the serial of a TBS refused for rate was burned: \"%s\"", rep->reason);
    assert_signed(rep, hr.refused_tbs, hr.refused_len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    assert_refused(TBS_PROFILE_WORKLOAD, hr.refused_tbs, hr.refused_len, HSMCA_EPERM,
                   "invariant 6", "serial issued before");
    assert_true(signer_alive());
}

/* The rate group's signer stops cleanly too; its log names the rate refusals and
 * not the PIN. */
static void test_rate_stop(void **state)
{
    stop_signer();
    char *log = read_log_without_pin();
    assert_non_null(strstr(log, "signer ready"));
    assert_non_null(strstr(log, "invariant 7: signing rate limit"));
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_and_signs_valid),
        cmocka_unit_test(test_signs_fe_tbs_build),
        cmocka_unit_test(test_refuses_ca_true),
        cmocka_unit_test(test_refuses_wrong_issuer),
        cmocka_unit_test(test_refuses_ttl_beyond_max),
        cmocka_unit_test(test_refuses_foreign_trust_domain),
        cmocka_unit_test(test_refuses_private_extension),
        cmocka_unit_test(test_refuses_name_constraints),
        cmocka_unit_test(test_refuses_repeated_serial),
        cmocka_unit_test(test_refuses_long_form_length),
        cmocka_unit_test(test_refuses_ber_boolean),
        cmocka_unit_test(test_refuses_trailing_bytes),
        cmocka_unit_test(test_refuses_dns_san_in_workload),
        cmocka_unit_test(test_refuses_key_cert_sign),
        cmocka_unit_test(test_serving_profile_signs_localhost),
        cmocka_unit_test(test_refuses_serving_foreign_dns),
        cmocka_unit_test(test_refuses_rsa_1024),
        cmocka_unit_test(test_refuses_wrong_sig_alg),
        cmocka_unit_test(test_refuses_unknown_profile),
        cmocka_unit_test(test_violation_truncated_frame),
        cmocka_unit_test(test_violation_unknown_type),
        cmocka_unit_test(test_violation_undecodable_payload),
        cmocka_unit_test(test_violation_oversized_frame),
        cmocka_unit_test(test_violation_with_requests_in_flight),
        cmocka_unit_test(test_violation_empty_packet),
        cmocka_unit_test(test_stop_and_no_pin_in_log),
    };
    const struct CMUnitTest rate_tests[] = {
        cmocka_unit_test(test_rate_ready),
        cmocka_unit_test(test_rate_flood_capped),
        cmocka_unit_test(test_rate_refills),
        cmocka_unit_test(test_rate_refusal_keeps_serial),
        cmocka_unit_test(test_rate_stop),
    };
    int failed = cmocka_run_group_tests_name("signer invariants 1-6 and the IPC", tests,
                                             group_setup, group_teardown);
    failed += cmocka_run_group_tests_name("signer invariant 7: rate", rate_tests,
                                          rate_group_setup, rate_group_teardown);
    return failed;
}

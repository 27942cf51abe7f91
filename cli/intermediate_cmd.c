/* intermediate_cmd.c - see intermediate_cmd.h. The signer decides; this only asks and
 * prints (and fetch writes the cacerts directory). */
#include "intermediate_cmd.h"
#include "admin_cmd.h"
#include "ica_crl.h"
#include "ica_renew.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin_contract.h"
#include "cli_opts.h"
#include "config.h"
#include "util.h"

static void print_synopsis(FILE *f);

static void usage(FILE *f)
{
    print_synopsis(f);
    fputs("  (--socket PATH instead of --config F: the signer's admin.socket)\n"
          "\n"
          "An intermediate CA for istiod, signed by the CA key in the token once\n"
          "approval.required users of admin.group (not the requester; each uid once)\n"
          "have approved it, within approval.pending_ttl (a raised approval.required\n"
          "reaches waiting requests; a lowered one never weakens them). A user may have\n"
          "approval.max_pending_per_user requests waiting. request prints the request's id\n"
          "and the SHA-256 of the CSR's public key: compare it with istiod's key out of\n"
          "band before you approve. show prints exactly what would be signed: the signer\n"
          "takes only the public key from the CSR; subject (intermediate.subject_prefix\n"
          "and the cluster), CA:TRUE pathlen 0, key usage, name constraints (the trust\n"
          "domain's SPIFFE URIs; DNS: intermediate.istiod_names and dns_suffixes; IP:\n"
          "intermediate.ip_ranges, else none; e-mail: email_domains, else none) and validity\n"
          "(intermediate.max_ttl, never past the CA's) are its own. deny is final; it is\n"
          "refused while the request's signature is in flight (revoke the certificate).\n"
          "fetch writes DIR/ca-cert.pem, cert-chain.pem and root-cert.pem (no key: it\n"
          "stays with istiod) and prints the kubectl command for the cacerts secret; and\n"
          "ca-crl.pem: the CA's current CRL (from the signer) and, with\n"
          "--intermediate-crl, the intermediate's own, each verified against its issuer\n"
          "(no CRL available: no ca-crl.pem). crl makes that own CRL, empty, signed by\n"
          "the intermediate's key file where istiod's key lives (Istio ignores the CA's\n"
          "CRL without it); it refuses a key that is not the certificate's and a\n"
          "certificate that is not a CA with cRLSign.\n"
          "With approval.auto_renew: true, a request that renews the cluster's current\n"
          "intermediate (the newest issued; not expired, not revoked) is approved and\n"
          "signed at once when it proves possession of that intermediate's key: after the\n"
          "signer wrote the request, --renew-with-key (the key file: the CSR's own key\n"
          "for a renewal with the same key; for a new key, the current intermediate's\n"
          "key, with --renew-with-cert its certificate) signs the log's origin, the\n"
          "request's id, the cluster and the CSR, and the signer checks that signature\n"
          "(a CSR copied from the log proves nothing). A revoked intermediate's key renews\n"
          "nothing, as the old or the new key; revoking a cluster's current intermediate\n"
          "stops its auto-renewal until a request is issued with its approvals. Anything\n"
          "else waits for approvals.\n"
          "Every step is an entry in the audit log, with the user who took it.\n",
          f);
}

typedef struct {
    const char *config, *sock, *csr, *cluster, *ttl, *reason, *out, *cert, *key, *ica_crl;
    const char *renew_cert, *renew_key;
    int json;
} ica_args;

static json_t *call(const ica_args *a, const char *cmd, json_t *req)
{
    json_t *reply = NULL;
    hsmca_err e;
    hsmca_code rc = req ? admin_call(a->config, a->sock, req, &reply, &e)
                        : hsmca_fail(&e, HSMCA_ENOMEM, "out of memory");
    json_decref(req);
    if (rc != HSMCA_OK)
        fprintf(stderr, "hsmca intermediate %s: %s\n", cmd, e.msg);
    return reply;
}

static int print_json(json_t *r)
{
    json_dumpf(r, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
    fputc('\n', stdout);
    json_decref(r);
    return 0;
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static long long num(json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

static int print_request(json_t *r)
{
    if (num(r, "renews"))
        printf("request %lld: auto-approved as the renewal of %lld (approval.auto_renew); %s\n",
               num(r, "id"), num(r, "renews"), str(r, "state"));
    else
        printf("request %lld: pending, %lld approvals needed (not the requester's)\n",
               num(r, "id"), num(r, "required"));
    printf("public key SHA-256: %s\n", str(r, "key_sha256"));
    if (!num(r, "renews"))
        printf("(compare it with istiod's key before you approve)\n");
    if (str(r, "auto_renew")[0])
        printf("not auto-approved: %s\n", str(r, "auto_renew"));
    if (str(r, "sign_error")[0])
        printf("not signed yet (fetch tries again): %s\n", str(r, "sign_error"));
    json_decref(r);
    return 0;
}

/* A renewal's second step: the proof by k for the request of reply r (its id, the log's
 * origin and cluster), sent as ica-renew-proof. The reply to print: the proof's, or r with
 * "auto_renew" saying why it was not auto-approved. */
static json_t *send_proof(const ica_args *a, EVP_PKEY *k, const char *pem, json_t *r)
{
    char *proof = NULL;
    json_t *reply = NULL;
    hsmca_err e;
    long long id = num(r, "id");
    hsmca_code rc = ica_renew_proof(k, pem, str(r, "origin"), (uint64_t)id, str(r, "cluster"),
                                    &proof, &e);
    json_t *q = rc == HSMCA_OK ? json_pack("{s:s, s:I, s:s}", "op", "ica-renew-proof", "id",
                                           (json_int_t)id, "proof", proof)
                               : NULL;
    free(proof);
    if (rc == HSMCA_OK)
        rc = q ? admin_call(a->config, a->sock, q, &reply, &e)
               : hsmca_fail(&e, HSMCA_ENOMEM, "out of memory");
    json_decref(q);
    if (rc == HSMCA_OK) {
        json_decref(r);
        return reply;
    }
    json_object_set_new(r, "auto_renew", json_string(e.msg));
    return r;
}

static int cmd_request(const ica_args *a, long long id)
{
    (void)id;
    char *pem = NULL;
    size_t len;
    hsmca_err e;
    uint32_t ttl = 0;
    if (!a->csr || !a->cluster) {
        fputs("hsmca intermediate request: --csr FILE and --cluster NAME are required\n", stderr);
        return 2;
    }
    if (a->renew_cert && !a->renew_key) {
        fputs("hsmca intermediate request: --renew-with-cert needs --renew-with-key\n", stderr);
        return 2;
    }
    if (a->ttl && config_parse_u32(a->ttl, strlen(a->ttl), 1, &ttl) != 0) {
        fprintf(stderr, "hsmca intermediate request: --ttl '%s': a duration (90d, 8760h)\n",
                a->ttl);
        return 2;
    }
    if (util_read_file(a->csr, ADMIN_MAX_CSR, &pem, &len, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca intermediate request: %s\n", e.msg);
        return 2;
    }
    /* The key is checked before anything is asked: a request is on the record for good. */
    EVP_PKEY *k = a->renew_key ? ica_renew_key(pem, a->renew_cert, a->renew_key, &e) : NULL;
    if (a->renew_key && !k) {
        fprintf(stderr, "hsmca intermediate request: %s\n", e.msg);
        free(pem);
        return 2;
    }
    json_t *r = call(a, "request",
                     json_pack("{s:s, s:s, s:s, s:I}", "op", "ica-request", "csr", pem, "cluster",
                               a->cluster, "ttl_s", (json_int_t)ttl));
    if (r && k)
        r = send_proof(a, k, pem, r);
    EVP_PKEY_free(k);
    free(pem);
    if (!r)
        return 1;
    if (a->json)
        return print_json(r);
    return print_request(r);
}

static int cmd_list(const ica_args *a, long long id)
{
    (void)id;
    json_t *r = call(a, "list", json_pack("{s:s}", "op", "ica-list"));
    if (!r)
        return 1;
    if (a->json)
        return print_json(r);
    json_t *reqs = json_object_get(r, "requests"), *it;
    size_t i;
    printf("%-6s %-9s %-20s %-16s %-9s %s\n", "ID", "STATE", "CLUSTER", "REQUESTER", "APPROVALS",
           "KEY SHA-256");
    json_array_foreach(reqs, i, it)
    {
        printf("%-6lld %-9s %-20s %-16s %zu/%-7lld %s\n", num(it, "id"), str(it, "state"),
               str(it, "cluster"), str(it, "requester"),
               json_array_size(json_object_get(it, "approvers")), num(it, "required"),
               str(it, "key_sha256"));
    }
    if ((long long)json_array_size(reqs) < num(r, "total"))
        printf("(the newest %zu of %lld requests)\n", json_array_size(reqs), num(r, "total"));
    json_decref(r);
    return 0;
}

static json_t *id_req(const char *op, long long id)
{
    return json_pack("{s:s, s:I}", "op", op, "id", (json_int_t)id);
}

static int cmd_show(const ica_args *a, long long id)
{
    json_t *r = call(a, "show", id_req("ica-show", id));
    if (!r)
        return 1;
    if (a->json)
        return print_json(r);
    json_t *q = json_object_get(r, "request"), *p = json_object_get(r, "profile");
    printf("request %lld: %s, cluster %s, asked by %s, %zu of %lld approvals\n", num(q, "id"),
           str(q, "state"), str(q, "cluster"), str(q, "requester"),
           json_array_size(json_object_get(q, "approvers")), num(q, "required"));
    printf("would be signed as:\n  subject            %s\n  public key         %s, SHA-256 %s\n"
           "  basicConstraints   %s\n  keyUsage           %s\n  nameConstraints    %s\n"
           "    permitted        %s\n    excluded         %s\n"
           "  validity           %lld s (not before %lld, not after %lld)\n"
           "  from the CSR       %s\n",
           str(p, "subject"), str(p, "key"), str(p, "key_sha256"), str(p, "basic_constraints"),
           str(p, "key_usage"), str(p, "name_constraints"), str(p, "permitted"),
           str(p, "excluded"), num(p, "ttl_s"), num(p, "not_before"), num(p, "not_after"),
           str(p, "from_csr"));
    json_decref(r);
    return 0;
}

static int cmd_approve(const ica_args *a, long long id)
{
    json_t *r = call(a, "approve", id_req("ica-approve", id));
    if (!r)
        return 1;
    if (a->json)
        return print_json(r);
    printf("request %lld: %lld of %lld approvals; %s\n", id, num(r, "approvals"),
           num(r, "required"), str(r, "state"));
    if (str(r, "sign_error")[0])
        printf("not signed yet (fetch tries again): %s\n", str(r, "sign_error"));
    json_decref(r);
    return 0;
}

static int cmd_deny(const ica_args *a, long long id)
{
    if (!a->reason) {
        fputs("hsmca intermediate deny: --reason TEXT is required\n", stderr);
        return 2;
    }
    json_t *r = call(a, "deny",
                     json_pack("{s:s, s:I, s:s}", "op", "ica-deny", "id", (json_int_t)id,
                               "reason", a->reason));
    if (!r)
        return 1;
    printf("request %lld: denied\n", id);
    json_decref(r);
    return 0;
}

static int write_one(const char *dir, const char *name, const char *text)
{
    char path[4096];
    hsmca_err e;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (util_write_out(path, text, strlen(text), 0644, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca intermediate fetch: %s\n", e.msg);
        return 0;
    }
    return 1;
}

/* --out DIR: made now, or an existing directory (not a link) of this user that no one
 * else may write, so no file in it can be swapped for a link under us. */
static int out_dir(const char *dir)
{
    static const char cmd[] = "hsmca intermediate fetch";
    if (mkdir(dir, 0755) == 0)
        return 1;
    struct stat st;
    if (errno != EEXIST || lstat(dir, &st) != 0) {
        fprintf(stderr, "%s: --out %s: %s\n", cmd, dir, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)) {
        fprintf(stderr,
                "%s: --out %s: refusing %s: name a directory of your own that no one else "
                "may write (or a new one)\n",
                cmd, dir,
                S_ISLNK(st.st_mode)      ? "a symbolic link"
                : !S_ISDIR(st.st_mode)   ? "what is not a directory"
                : st.st_uid != geteuid() ? "a directory of another user"
                                         : "a directory others may write");
        return 0;
    }
    return 1;
}

static int cmd_fetch(const ica_args *a, long long id)
{
    if (!a->out) {
        fputs("hsmca intermediate fetch: --out DIR is required\n", stderr);
        return 2;
    }
    json_t *r = call(a, "fetch", id_req("ica-fetch", id));
    if (!r)
        return 1;
    int ok = out_dir(a->out) && write_one(a->out, "ca-cert.pem", str(r, "ca_cert")) &&
             write_one(a->out, "cert-chain.pem", str(r, "cert_chain")) &&
             write_one(a->out, "root-cert.pem", str(r, "root_cert"));
    if (ok)
        printf("wrote %s/ca-cert.pem, cert-chain.pem, root-cert.pem (cluster %s)\n"
               "add istiod's key as ca-key.pem (it never left istiod's side), then:\n"
               "  kubectl create secret generic cacerts -n istio-system \\\n"
               "    --from-file=%s/ca-cert.pem --from-file=ca-key.pem \\\n"
               "    --from-file=%s/root-cert.pem --from-file=%s/cert-chain.pem\n"
               "    (and --from-file=%s/ca-crl.pem when it is written below)\n",
               a->out, str(r, "cluster"), a->out, a->out, a->out, a->out);
    if (ok)
        ok = ica_crl_fetch(a->config, a->sock, r, a->ica_crl, a->out) == 0;
    json_decref(r);
    return ok ? 0 : 1;
}

static int cmd_crl(const ica_args *a, long long id)
{
    (void)id;
    return ica_crl_make(a->cert, a->key, a->out);
}

/* The subcommands: the dispatch and the usage's synopsis both read these rows. A row
 * with_id takes a request id operand; one without takes no operand. */
static const struct {
    const char *name;
    int with_id;
    int (*run)(const ica_args *a, long long id);
    const char *args;
} subcommands[] = {
    {"request", 0, cmd_request,
     "--config F --csr FILE --cluster NAME [--ttl D]\n"
     "                [--renew-with-key ca-key.pem [--renew-with-cert ca-cert.pem]]"},
    {"list", 0, cmd_list, "--config F [--json]"},
    {"show", 1, cmd_show, "ID --config F [--json]"},
    {"approve", 1, cmd_approve, "ID --config F"},
    {"deny", 1, cmd_deny, "ID --config F --reason TEXT"},
    {"fetch", 1, cmd_fetch, "ID --config F --out DIR [--intermediate-crl F]"},
    {"crl", 0, cmd_crl, "--cert ca-cert.pem --key ca-key.pem --out F"},
};

static void print_synopsis(FILE *f)
{
    for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
        fprintf(f, "%s hsmca intermediate %s %s\n", i ? "      " : "usage:", subcommands[i].name,
                subcommands[i].args);
}

/* The request id operand: a decimal number. */
static int parse_id(const char *s, long long *id)
{
    char *end;
    errno = 0;
    *id = s ? strtoll(s, &end, 10) : -1;
    return s && *s && !*end && errno == 0 && *id >= 0;
}

int intermediate_main(int argc, char **argv)
{
    static const struct option flags[] = {
        {"config", required_argument, 0, 'c'}, {"socket", required_argument, 0, 's'},
        {"csr", required_argument, 0, 'r'},    {"cluster", required_argument, 0, 'k'},
        {"ttl", required_argument, 0, 't'},    {"reason", required_argument, 0, 'w'},
        {"out", required_argument, 0, 'o'},    {"json", no_argument, 0, 'j'},
        {"cert", required_argument, 0, 'C'},   {"key", required_argument, 0, 'K'},
        {"intermediate-crl", required_argument, 0, 'I'},
        {"renew-with-cert", required_argument, 0, 'R'},
        {"renew-with-key", required_argument, 0, 'S'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    const char *operands[2] = {NULL, NULL};
    ica_args a = {0};
    cli_opts o;
    int c;
    cli_opts_init(&o, "hsmca intermediate", flags, operands, 2);
    while ((c = cli_opts_next(&o, argc, argv)) != -1) {
        switch (c) {
        case 'c': a.config = optarg; break;
        case 's': a.sock = optarg; break;
        case 'r': a.csr = optarg; break;
        case 'k': a.cluster = optarg; break;
        case 't': a.ttl = optarg; break;
        case 'w': a.reason = optarg; break;
        case 'o': a.out = optarg; break;
        case 'j': a.json = 1; break;
        case 'C': a.cert = optarg; break;
        case 'K': a.key = optarg; break;
        case 'I': a.ica_crl = optarg; break;
        case 'R': a.renew_cert = optarg; break;
        case 'S': a.renew_key = optarg; break;
        case 'h': usage(stdout); return 0;
        default: return 2;
        }
    }
    const char *sub = operands[0] ? operands[0] : "";
    long long id = -1;
    for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++) {
        if (strcmp(sub, subcommands[i].name) != 0)
            continue;
        if (subcommands[i].with_id ? parse_id(operands[1], &id) : !operands[1])
            return subcommands[i].run(&a, id);
        break;
    }
    usage(stderr);
    return 2;
}

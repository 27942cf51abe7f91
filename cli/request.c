/* request.c - see request.h. Also the quickest check that a CA answers. */
#include "request.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "ca.pb-c.h"
#include "certasm.h"
#include "grpc_unary.h"
#include "util.h"

#define METHOD "/istio.v1.auth.IstioCertificateService/CreateCertificate"

typedef struct {
    const char *addr, *root, *token, *id, *key_type, *out, *renew;
    long ttl;
} req_opts;

static void usage(FILE *f)
{
    fputs("usage: hsmca request --root FILE (--token JWT | --renew PREFIX) --id SPIFFE-ID\n"
          "                     [--addr HOST:PORT] [--key ec-p256|rsa-2048] [--ttl SECONDS]\n"
          "                     [--out PREFIX]\n"
          "\n"
          "Requests a workload certificate the way istio-agent does: generates a key and\n"
          "a CSR whose only SAN is SPIFFE-ID, calls CreateCertificate over TLS (trusting\n"
          "the roots in FILE) with `authorization: Bearer JWT`, and prints the returned\n"
          "chain (leaf first); on stderr, the leaf's serial in hex (as the signing log,\n"
          "the signer's log lines and `hsmca ca revoke SERIAL` spell it) and its expiry.\n"
          "Exits non-zero with the server's status and message on a refusal.\n"
          "\n"
          "  --renew PREFIX    no token: present PREFIX-chain.pem and PREFIX-key.pem (what\n"
          "                    --out wrote) as the TLS client certificate, as istio-agent\n"
          "                    renews; the new certificate is for the same identity\n"
          "  --addr HOST:PORT  the CA (default localhost:15012)\n"
          "  --key TYPE        key to generate (default ec-p256)\n"
          "  --ttl SECONDS     requested validity (default: the CA's default)\n"
          "  --out PREFIX      also write PREFIX-key.pem (0600) and PREFIX-chain.pem\n",
          f);
}

/* A CSR for key with one URI SAN, as PEM (caller frees). */
static char *make_csr(EVP_PKEY *key, const char *id)
{
    X509_REQ *req = X509_REQ_new();
    STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    GENERAL_NAME *uri = GENERAL_NAME_new();
    ASN1_IA5STRING *s = ASN1_IA5STRING_new();
    char *pem = NULL;
    if (!req || !exts || !gens || !uri || !s || !ASN1_STRING_set(s, id, (int)strlen(id)))
        goto out;
    GENERAL_NAME_set0_value(uri, GEN_URI, s);
    s = NULL;
    sk_GENERAL_NAME_push(gens, uri);
    uri = NULL;
    X509_EXTENSION *ext = X509V3_EXT_i2d(NID_subject_alt_name, 0, gens);
    if (!ext || !sk_X509_EXTENSION_push(exts, ext)) {
        X509_EXTENSION_free(ext);
        goto out;
    }
    if (!X509_REQ_set_pubkey(req, key) || !X509_REQ_add_extensions(req, exts) ||
        !X509_REQ_sign(req, key, EVP_sha256()))
        goto out;
    BIO *b = BIO_new(BIO_s_mem());
    if (b && PEM_write_bio_X509_REQ(b, req))
        pem = certasm_bio_string(b);
    BIO_free(b);
out:
    ASN1_IA5STRING_free(s);
    GENERAL_NAME_free(uri);
    GENERAL_NAMES_free(gens);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    X509_REQ_free(req);
    return pem;
}

static int write_outputs(const char *prefix, EVP_PKEY *key, const char *chain)
{
    char path[4096];
    hsmca_err e;
    char *key_pem = certasm_key_pem(key);
    if (!key_pem) {
        fputs("hsmca request: cannot encode the key\n", stderr);
        return 1;
    }
    snprintf(path, sizeof(path), "%s-key.pem", prefix);
    hsmca_code rc = util_write_out(path, key_pem, strlen(key_pem), 0600, &e);
    OPENSSL_cleanse(key_pem, strlen(key_pem));
    free(key_pem);
    if (rc == HSMCA_OK) {
        snprintf(path, sizeof(path), "%s-chain.pem", prefix);
        rc = util_write_out(path, chain, strlen(chain), 0644, &e);
    }
    if (rc != HSMCA_OK) {
        fprintf(stderr, "hsmca request: %s\n", e.msg);
        return 1;
    }
    return 0;
}

/* Prints the chain; returns its concatenation (caller frees) for --out. */
/* The serial as the signing log, its log lines and `ca revoke` spell it: lowercase hex
 * of the DER INTEGER's content octets (a leading 00 kept when the top bit is set). */
static void serial_hex(const X509 *leaf, char *out, size_t cap)
{
    const ASN1_INTEGER *sn = X509_get0_serialNumber(leaf);
    const unsigned char *p = ASN1_STRING_get0_data(sn);
    int n = ASN1_STRING_length(sn);
    size_t pad = n > 0 && (p[0] & 0x80) ? 1 : 0;
    if (n <= 0 || (pad + (size_t)n) * 2 + 1 > cap) {
        snprintf(out, cap, "?");
        return;
    }
    snprintf(out, cap, "%s", pad ? "00" : "");
    util_hex(p, (size_t)n, out + 2 * pad);
}

static char *print_chain(const grpc_slice *resp)
{
    Istio__V1__Auth__IstioCertificateResponse *r = istio__v1__auth__istio_certificate_response__unpack(
        NULL, GRPC_SLICE_LENGTH(*resp), GRPC_SLICE_START_PTR(*resp));
    if (!r || r->n_cert_chain == 0) {
        fputs("hsmca request: the response holds no certificate chain\n", stderr);
        if (r)
            istio__v1__auth__istio_certificate_response__free_unpacked(r, NULL);
        return NULL;
    }
    size_t total = 1;
    for (size_t i = 0; i < r->n_cert_chain; i++)
        total += strlen(r->cert_chain[i]);
    char *all = calloc(1, total);
    for (size_t i = 0; all && i < r->n_cert_chain; i++) {
        fputs(r->cert_chain[i], stdout);
        strcat(all, r->cert_chain[i]);
    }
    BIO *b = BIO_new_mem_buf(r->cert_chain[0], -1);
    X509 *leaf = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    if (leaf) {
        char serial[2 * 21 + 1];
        serial_hex(leaf, serial, sizeof(serial));
        BIO *err = BIO_new_fp(stderr, BIO_NOCLOSE);
        BIO_printf(err, "issued: serial %s, %zu certificates in the chain, valid until ", serial,
                   r->n_cert_chain);
        ASN1_TIME_print(err, X509_get0_notAfter(leaf));
        BIO_printf(err, "\n");
        BIO_free(err);
    }
    X509_free(leaf);
    BIO_free(b);
    istio__v1__auth__istio_certificate_response__free_unpacked(r, NULL);
    return all;
}

/* PREFIX-key.pem and PREFIX-chain.pem, as --out wrote them, into pair (caller
 * wipes the key and frees both). */
static int read_renewal(const char *prefix, grpc_ssl_pem_key_cert_pair *pair)
{
    char path[4096];
    char *key = NULL, *chain = NULL;
    hsmca_err e;
    snprintf(path, sizeof(path), "%s-key.pem", prefix);
    hsmca_code rc = util_read_file(path, 1 << 16, &key, NULL, &e);
    snprintf(path, sizeof(path), "%s-chain.pem", prefix);
    if (rc == HSMCA_OK)
        rc = util_read_file(path, 1 << 20, &chain, NULL, &e);
    pair->private_key = key;
    pair->cert_chain = chain;
    if (rc != HSMCA_OK) {
        fprintf(stderr, "hsmca request: --renew: %s\n", e.msg);
        return 1;
    }
    return 0;
}

static int parse_opts(int argc, char **argv, req_opts *o)
{
    static const struct option opts[] = {
        {"addr", required_argument, 0, 'a'},  {"root", required_argument, 0, 'r'},
        {"token", required_argument, 0, 't'}, {"id", required_argument, 0, 'i'},
        {"key", required_argument, 0, 'k'},   {"ttl", required_argument, 0, 'l'},
        {"out", required_argument, 0, 'o'},   {"renew", required_argument, 0, 'n'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    *o = (req_opts){"localhost:15012", NULL, NULL, NULL, "ec-p256", NULL, NULL, 0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "a:r:t:i:k:l:o:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'a': o->addr = optarg; break;
        case 'r': o->root = optarg; break;
        case 't': o->token = optarg; break;
        case 'i': o->id = optarg; break;
        case 'k': o->key_type = optarg; break;
        case 'l': o->ttl = strtol(optarg, NULL, 10); break;
        case 'o': o->out = optarg; break;
        case 'n': o->renew = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!o->root || !o->token == !o->renew || !o->id || (o->token && strlen(o->token) > 8000) ||
        o->ttl < 0 || (strcmp(o->key_type, "ec-p256") && strcmp(o->key_type, "rsa-2048"))) {
        fputs("hsmca request: --root, --id and one of --token and --renew are required; --key "
              "is ec-p256 or rsa-2048\n",
              stderr);
        return 2;
    }
    return -1;
}

int request_main(int argc, char **argv)
{
    req_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char *root = NULL;
    hsmca_err e;
    if (util_read_file(o.root, 1 << 20, &root, NULL, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca request: %s\n", e.msg);
        return 1;
    }
    EVP_PKEY *key = strcmp(o.key_type, "rsa-2048") ? EVP_EC_gen("P-256") : EVP_RSA_gen(2048);
    char *csr = key ? make_csr(key, o.id) : NULL;
    if (!csr) {
        fputs("hsmca request: cannot make the key and CSR\n", stderr);
        EVP_PKEY_free(key);
        free(root);
        return 1;
    }
    Istio__V1__Auth__IstioCertificateRequest req = ISTIO__V1__AUTH__ISTIO_CERTIFICATE_REQUEST__INIT;
    req.csr.data = (uint8_t *)csr;
    req.csr.len = strlen(csr);
    req.validity_duration = o.ttl;
    size_t len = istio__v1__auth__istio_certificate_request__get_packed_size(&req);
    uint8_t *body = malloc(len ? len : 1);
    istio__v1__auth__istio_certificate_request__pack(&req, body);

    grpc_init();
    grpc_slice resp;
    grpc_ssl_pem_key_cert_pair pair = {NULL, NULL};
    rc = o.renew ? read_renewal(o.renew, &pair) : 0;
    if (rc == 0)
        rc = grpc_unary_call(&(grpc_unary){"hsmca request", o.addr, root, o.renew ? &pair : NULL,
                                           o.token, METHOD, 20},
                             body, len, &resp);
    if (rc == 0) {
        char *chain = print_chain(&resp);
        rc = !chain || (o.out && write_outputs(o.out, key, chain) != 0);
        free(chain);
        grpc_slice_unref(resp);
    }
    grpc_shutdown();
    if (pair.private_key)
        OPENSSL_cleanse((char *)pair.private_key, strlen(pair.private_key));
    free((char *)pair.private_key);
    free((char *)pair.cert_chain);
    free(body);
    free(csr);
    free(root);
    EVP_PKEY_free(key);
    return rc;
}

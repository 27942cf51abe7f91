/* dev.c - `hsmca dev`: a development CA on a SoftHSM token, in one command. */
#include "dev.h"
#include "key_kinds.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_table.h"
#include "dev_ca.h"
#include "dev_jwt.h"
#include "dev_signer.h"
#include "log.h"
#include "serve.h"

#define DEV_DEFAULT_DIR "hsmca-dev"
#define DEV_DEFAULT_LISTEN "127.0.0.1:15012"
#define DEV_DEFAULT_METRICS "127.0.0.1:15014"

static int dev_init(int argc, char **argv);
static int dev_token(int argc, char **argv);

/* The subcommands: without one, `hsmca dev` runs the dev CA. */
static const cli_cmd subcommands[] = {
    {"init", dev_init, NULL, "create (or check) DIR and exit without serving"},
    {"token", dev_token, NULL,
     "print a JWT for service account SA in namespace NS that the dev\n"
     "server accepts (audience A, default istio-ca; TTL default 3600)"},
    {NULL, NULL, NULL, NULL}};

static void usage(FILE *f)
{
    fputs("usage: hsmca dev [--dir DIR] [--listen ADDR] [--metrics ADDR] [--ca-key TYPE]\n"
          "                 [--audit-key ed25519|ec-p256|ec-p384]\n"
          "       hsmca dev init [--dir DIR] [--ca-key TYPE]\n"
          "                 [--audit-key ed25519|ec-p256|ec-p384]\n"
          "       hsmca dev token [--dir DIR] --ns NS --sa SA [--aud A] [--ttl SECONDS]\n"
          "\n"
          "Runs a development CA: on first start it creates, under DIR (default\n"
          "./" DEV_DEFAULT_DIR "), a SoftHSM2 token with its own DIR/softhsm2.conf and a\n"
          "random PIN in DIR/pin (mode 0600), generates the CA key and the audit key\n"
          "inside the token (sensitive, never extractable), a self-signed\n"
          "root DIR/root-cert.pem, a dev JWT issuer (public keys in DIR/dev-jwks.json)\n"
          "and DIR/hsmca.yaml; later starts reuse all of it (and add the audit key to a\n"
          "DIR made before it existed). Then it serves Istio's CreateCertificate over TLS\n"
          "on ADDR (default " DEV_DEFAULT_LISTEN ") until interrupted.\n"
          "\n"
          "Run as root, the signer switches to the system user " DEV_SIGNER_USER " once the\n"
          "token is open; hsmca dev creates that user (useradd --system) if it is\n"
          "missing and gives it DIR/tokens. The PIN files stay root's.\n"
          "\n"
          "It serves /metrics, /healthz and /readyz over HTTP on the --metrics ADDR\n"
          "(default " DEV_DEFAULT_METRICS "; \"\" for none).\n"
          "\n",
          f);
    cli_cmd_print(f, subcommands, 8);
    fputs("\n"
          "Flags:\n"
          "  --dir DIR        state directory (created 0700)\n"
          "  --listen ADDR    host:port to serve on\n"
          "  --metrics ADDR   host:port of the metrics and health listener\n"
          "  --ca-key TYPE    CA key type on first start: ec-p256 (default), ec-p384,\n"
          "                   rsa-2048, rsa-3072 or rsa-4096\n"
          "  --audit-key TYPE audit key type on first start: ed25519 (default), ec-p256\n"
          "                   or ec-p384\n"
          "                   (ECDSA checkpoints, for tokens without EdDSA); without\n"
          "                   it a later start keeps the audit key DIR holds\n"
          "  --help           this text\n",
          f);
}

/* --ca-key / --audit-key: the type named by arg, among those the flag takes. */
static int parse_key(int flag, const char *arg, p11_key_type *ca, p11_key_type *audit)
{
    const key_kind *k = key_kind_find(arg);
    int audit_flag = flag == 'a';
    if (!k || !(audit_flag ? k->audit : k->ca)) {
        fprintf(stderr, "hsmca dev: --%s must be %s\n", audit_flag ? "audit-key" : "ca-key",
                key_kind_names(audit_flag));
        return -1;
    }
    *(audit_flag ? audit : ca) = k->type;
    return 0;
}

/* DIR made absolute (created first), so that paths written into configs hold. */
static int absolute_dir(const char *dir, char *out)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "hsmca dev: mkdir %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (!realpath(dir, out)) {
        fprintf(stderr, "hsmca dev: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int dev_token(int argc, char **argv)
{
    static const struct option opts[] = {
        {"dir", required_argument, 0, 'd'}, {"ns", required_argument, 0, 'n'},
        {"sa", required_argument, 0, 's'},  {"aud", required_argument, 0, 'a'},
        {"ttl", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *dir = DEV_DEFAULT_DIR, *ns = NULL, *sa = NULL, *aud = "istio-ca";
    long ttl = 3600;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:n:s:a:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'n': ns = optarg; break;
        case 's': sa = optarg; break;
        case 'a': aud = optarg; break;
        case 't': ttl = strtol(optarg, NULL, 10); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!ns || !sa || ttl <= 0 || ttl > 7 * 24 * 3600) {
        fputs("hsmca dev token: --ns and --sa are required; --ttl must be 1..604800\n", stderr);
        return 2;
    }
    hsmca_err e;
    char *jwt = dev_jwt_mint(dir, DEV_JWT_ISSUER, aud, ns, sa, (uint32_t)ttl, &e);
    if (!jwt) {
        fprintf(stderr, "hsmca dev token: %s\n", e.msg);
        return 1;
    }
    printf("%s\n", jwt);
    free(jwt);
    return 0;
}

/* Who the signer runs as, in the banner's words. */
static const char *signer_user_note(int created)
{
    if (geteuid() != 0)
        return "not switched: not started as root";
    return created ? DEV_SIGNER_USER " (system user created now with useradd --system)"
                   : DEV_SIGNER_USER;
}

static void print_banner(const char *dir, const char *listen, const char *metrics, int created)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    const char *port = strrchr(listen, ':');
    port = port ? port + 1 : "15012";
    printf("hsmca dev CA\n"
           "  serving     Istio CreateCertificate over TLS on %s\n"
           "  metrics     %s%s%s\n"
           "  root CA     %s/root-cert.pem\n"
           "  token PIN   %s/pin   (SoftHSM2 config: %s/softhsm2.conf)\n"
           "  JWT issuer  %s/dev-jwks.json\n"
           "  signer user %s\n"
           "  inspect     SOFTHSM2_CONF=%s/softhsm2.conf pkcs11-tool --module %s -O\n"
           "\n"
           "Request a certificate from another terminal:\n"
           "  TOKEN=$(%s dev token --dir %s --ns default --sa sleep)\n"
           "  %s request --addr localhost:%s --root %s/root-cert.pem \\\n"
           "      --token \"$TOKEN\" --id spiffe://cluster.local/ns/default/sa/sleep\n"
           "\n",
           listen, metrics[0] ? "http://" : "off (--metrics \"\")", metrics,
           metrics[0] ? "/metrics, /healthz, /readyz" : "", dir, dir, dir, dir,
           signer_user_note(created), dir, DEV_SOFTHSM_MODULE, exe,
           dir, exe, port, dir);
    fflush(stdout);
}

/* Makes (or checks) the dev CA's directory; then, unless INIT_ONLY, serves it. */
static int dev_run(int argc, char **argv, int init_only)
{
    static const struct option opts[] = {{"dir", required_argument, 0, 'd'},
                                         {"listen", required_argument, 0, 'l'},
                                         {"metrics", required_argument, 0, 'm'},
                                         {"ca-key", required_argument, 0, 'k'},
                                         {"audit-key", required_argument, 0, 'a'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *dir = DEV_DEFAULT_DIR, *listen = DEV_DEFAULT_LISTEN,
               *metrics = DEV_DEFAULT_METRICS;
    p11_key_type type = P11_KEY_EC_P256, audit_type = P11_KEY_UNSET;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:l:m:k:a:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'l': listen = optarg; break;
        case 'm': metrics = optarg; break;
        case 'k':
        case 'a':
            if (parse_key(c, optarg, &type, &audit_type) != 0)
                return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hsmca dev: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    char abs[PATH_MAX];
    if (absolute_dir(dir, abs) != 0)
        return 1;
    hsmca_err e;
    int created = 0;
    if (dev_signer_user_ensure(&created, &e) != HSMCA_OK ||
        dev_ca_init(abs, type, audit_type, listen, metrics, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca dev: %s\n", e.msg);
        return 1;
    }
    if (init_only) {
        printf("dev CA ready in %s (config %s/hsmca.yaml); signer user: %s\n", abs, abs,
               signer_user_note(created));
        return 0;
    }
    print_banner(abs, listen, metrics, created);
    char config[PATH_MAX + 16];
    snprintf(config, sizeof(config), "%s/hsmca.yaml", abs);
    log_init("supervisor");
    return serve_exec(config);
}

static int dev_init(int argc, char **argv)
{
    return dev_run(argc, argv, 1);
}

int dev_main(int argc, char **argv)
{
    log_init("cli");
    const cli_cmd *sub = argc > 1 ? cli_cmd_find(subcommands, argv[1]) : NULL;
    return sub ? sub->run(argc - 1, argv + 1) : dev_run(argc, argv, 0);
}

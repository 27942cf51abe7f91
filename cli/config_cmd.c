/* config_cmd.c - see config_cmd.h. The config is read by the processes' own functions
 * (config_load, config_validate); the files it names by the loaders serve's processes
 * use (config_files.c). Nothing here loads the PKCS#11 module, reads a PIN or opens a
 * socket: the check runs where serve may not yet, as any user. */
#include "config_cmd.h"
#include "config_check.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_table.h"
#include "log.h"
#include "util.h"

#define CC_MAX_FILE (1024 * 1024) /* config_load's cap */

static void usage(FILE *f)
{
    fputs("usage: hsmca config check FILE\n"
          "       hsmca config check --config FILE\n"
          "\n"
          "Checks the configuration serve would run with, without the token, the PIN or a\n"
          "port: the YAML and its rules (the parser serve runs: unknown keys, types,\n"
          "ranges), then every file and name it reads at start: ca.cert (a CA\n"
          "certificate, not expired), ca.chain and ca.root_bundle (linking ca.cert to a\n"
          "root), pkcs11.module and the PIN files (present; the module is not loaded),\n"
          "issuance.policy_file, auth.jwt.jwks_file, the clusters' files and kubeconfigs,\n"
          "audit.dir, signer.user, frontend.user, signer.groups, server.listen.\n"
          "\n"
          "Prints one line per problem, FILE:LINE: KEY: what, then 'config check: OK'\n"
          "(exit 0; warnings do not fail) or 'config check: N problems' (exit 1).\n",
          f);
}

/* config_load's message, "FILE:LINE: what", with the key written on LINE after it. */
static void report_parse(cc_report *r, const char *msg)
{
    size_t fl = strlen(r->file);
    r->problems++;
    if (strncmp(msg, r->file, fl) != 0 || msg[fl] != ':') {
        printf("%s: %s\n", r->file, msg);
        return;
    }
    char *end;
    long line = strtol(msg + fl + 1, &end, 10);
    const char *key = end > msg + fl + 1 && !strncmp(end, ": ", 2) && line > 0 && line < 1000000
                          ? config_lines_at(r->lines, (int)line)
                          : NULL;
    if (key)
        printf("%.*s: %s: %s\n", (int)(end - msg), msg, key, end + 2);
    else
        printf("%s\n", msg);
}

/* config_validate's message ("config: server.listen '...' must be ..."): at the line of
 * the first written key it names. */
static void report_rule(cc_report *r, const char *msg)
{
    if (!strncmp(msg, "config: ", 8))
        msg += 8;
    int line = 0;
    r->problems++;
    if (config_lines_named(r->lines, msg, &line))
        printf("%s:%d: %s\n", r->file, line, msg);
    else
        printf("%s: %s\n", r->file, msg);
}

static int verdict(const cc_report *r)
{
    if (!r->problems) {
        printf("config check: OK%s\n", r->warnings ? " (with warnings)" : "");
        return 0;
    }
    printf("config check: %d problem%s\n", r->problems, r->problems == 1 ? "" : "s");
    return 1;
}

static int check(const char *path)
{
    static config_lines lines; /* ~50 KiB: off the stack */
    static hsmca_config cfg;
    cc_report r = {path, &lines, 0, 0};
    char *buf = NULL;
    size_t len = 0;
    hsmca_err e;
    lines.n = 0;
    if (util_read_file(path, CC_MAX_FILE, &buf, &len, &e) == HSMCA_OK) {
        config_lines_build(buf, len, &lines);
        free(buf);
    }
    /* Stops at the first mistake in the YAML: the rest cannot be read with certainty. */
    if (config_load(path, &cfg, &e) != HSMCA_OK) {
        report_parse(&r, e.msg);
        return verdict(&r);
    }
    if (config_validate(&cfg, &e) != HSMCA_OK)
        report_rule(&r, e.msg);
    cc_check_ca(&cfg, &r);
    cc_check_rotation(&cfg, &r);
    cc_check_pkcs11(&cfg, &r);
    cc_check_auth(&cfg, &r);
    cc_check_system(&cfg, &r);
    return verdict(&r);
}

int config_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    if (argc < 2 || strcmp(argv[1], "check") != 0) {
        if (argc >= 2 && cli_is_help(argv[1])) {
            usage(stdout);
            return 0;
        }
        usage(stderr);
        return 2;
    }
    /* getopt over "check ARGS...": av[0] is "check". */
    int ac = argc - 1;
    char **av = argv + 1;
    const char *config = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(ac, av, ":c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "hsmca config check: unexpected argument '%s'\n", av[optind - 1]);
            return 2;
        }
    }
    if (optind < ac && !config)
        config = av[optind++];
    if (optind < ac) {
        fprintf(stderr, "hsmca config check: unexpected argument '%s'\n", av[optind]);
        return 2;
    }
    if (!config) {
        fputs("hsmca config check: FILE is required\n", stderr);
        usage(stderr);
        return 2;
    }
    log_init("cli");
    return check(config);
}

/* token_check.c - `hsmca token`: its dispatch, and `check` (token_check.h).
 *
 * check runs the real signer program in its check mode (`hsmca-signer --check`,
 * signer/signer_check.h), so the token is opened by the same code, user, sandbox and
 * environment as under serve; this process loads no module for it. keygen is a ceremony
 * step run in this process (ca/token_cmd.c). */
#include "token_check.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ca.h"
#include "cli_opts.h"
#include "cli_table.h"
#include "config.h"
#include "log.h"
#include "sup_env.h"
#include "sup_exec.h"

static int token_check(int argc, char **argv);

static const cli_cmd token_commands[] = {
    {"check", token_check, NULL, "open the token as `serve` would and say whether it would start"},
    {"keygen", token_keygen, NULL,
     "make the CA key or the audit key in the token (sensitive, never\n"
     "extractable, sign only)"},
    {NULL, NULL, NULL, NULL}};

static void usage(FILE *f)
{
    fputs("usage: hsmca token COMMAND --config FILE [flags]   (hsmca token COMMAND --help)\n"
          "\n"
          "The PKCS#11 token a config names (pkcs11.module, pkcs11.ca_key,\n"
          "pkcs11.audit_key, pkcs11.pin_file):\n"
          "\n",
          f);
    cli_cmd_print(f, token_commands, 9);
    fputs("\n"
          "Run check first on a new HSM, and after keygen.\n",
          f);
}

static const char check_help[] =
    "usage: hsmca token check --config FILE\n"
    "\n"
    "Runs the signer program (hsmca-signer, found as serve finds it) in its check\n"
    "mode: as serve's signer it reads the PIN file once, loads the module, then lists\n"
    "the module's slots and tokens and, for pkcs11.ca_key and pkcs11.audit_key, the\n"
    "key's type and curve or size, CKA_SENSITIVE, CKA_EXTRACTABLE, CKA_SIGN,\n"
    "CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE, CKA_DECRYPT, CKA_UNWRAP,\n"
    "CKA_DERIVE and whether the public half is there; opens both keys as serve\n"
    "does, checks ca.cert against the CA key, switches to signer.user (as root),\n"
    "enters the signer's sandbox and signs and verifies once with each key inside it.\n"
    "\n"
    "One line per check on stdout: 'ok', 'WARN' (serve accepts it, but should not\n"
    "be asked to), 'FAIL' (serve would not start) or 'info', then the config key or\n"
    "token attribute it is about. Last a verdict: 'verdict: serve would start', or\n"
    "'verdict: serve would not start' and the list of what to fix.\n"
    "\n"
    "Reads the token and ca.cert only: writes nothing, takes no lock on audit.dir\n"
    "(it may run beside serve). A PIN the token refuses is not tried again.\n"
    "\n"
    "Exit status: 0 serve would start, 1 it would not, 78 the config does not load.";

/* ---- check ----------------------------------------------------------------------------- */

/* Runs `SIGNER --check --config CONFIG` with envp and waits for it; its report goes
 * straight to our stdout. Returns its exit status (1 when it died of a signal). */
static int run_check_child(const char *signer, const char *config, char *const envp[])
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "hsmca token check: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        char *argv[] = {(char *)signer, "--check", "--config", (char *)config, NULL};
        execve(signer, argv, envp);
        fprintf(stderr, "hsmca token check: exec %s: %s\n", signer, strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "hsmca token check: waitpid: %s\n", strerror(errno));
            return 1;
        }
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    fprintf(stderr, "hsmca token check: %s died of signal %d\n", signer, WTERMSIG(status));
    return 1;
}

/* The check child gets the environment serve gives the signer (sup_env.h): the module
 * must see the same variables. A config that does not load leaves the config's part
 * out; the child then reports why it does not load. */
static int check_with_signer_env(const char *signer, const char *config)
{
    hsmca_config *cfg = calloc(1, sizeof(*cfg));
    sup_env env = {0};
    hsmca_err e;
    if (!cfg) {
        fputs("hsmca token check: out of memory\n", stderr);
        return 1;
    }
    if (config_load(config, cfg, &e) != HSMCA_OK)
        memset(cfg, 0, sizeof(*cfg));
    int code = 1;
    if (sup_env_build(cfg, SUP_ENV_SIGNER, &env, &e) != HSMCA_OK)
        fprintf(stderr, "hsmca token check: %s\n", e.msg);
    else
        code = run_check_child(signer, config, env.envp);
    sup_env_free(&env);
    free(cfg);
    return code;
}

static const struct option config_flags[] = {
    {"config", required_argument, 0, 'c'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

static int token_check(int argc, char **argv)
{
    const char *config = NULL;
    cli_opts o;
    cli_opts_init(&o, "hsmca token check", config_flags, NULL, 0);
    for (int c; (c = cli_opts_next(&o, argc, argv)) != -1;) {
        switch (c) {
        case 'h': puts(check_help); return 0;
        case 'c': config = optarg; break;
        default: return 2;
        }
    }
    if (!config) {
        fputs("hsmca token check: --config FILE is required\n", stderr);
        return 2;
    }
    char self[PATH_MAX], signer[PATH_MAX], config_abs[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "hsmca token check: cannot find our own executable: %s\n", strerror(errno));
        return EXIT_CONFIG;
    }
    self[n] = '\0';
    hsmca_err e;
    if (sup_exec_find(self, "signer", signer, sizeof(signer), &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca token check: %s\n", e.msg);
        return EXIT_CONFIG;
    }
    if (!realpath(config, config_abs)) {
        fprintf(stderr, "hsmca token check: config %s: %s\n", config, strerror(errno));
        return EXIT_CONFIG;
    }
    return check_with_signer_env(signer, config_abs);
}

int token_main(int argc, char **argv)
{
    return cli_dispatch("hsmca token", token_commands, usage, argc, argv);
}

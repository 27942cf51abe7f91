/* hostile_reload.c - SIGHUP's reload as the signer takes it (signer/signer_policy.h), on
 * the SAN policy file group's signer, after hostile_policy.c's cases: we push a new
 * policy file as the supervisor does (CTL_POLICY with a sealed memfd) and read the
 * signer's answer on the control channel. The new file's rules apply at once; for its
 * grace the replaced file's grants are still honoured (a front end may have checked a
 * request under them just before its own switch), and what neither grants is refused
 * naming the new file's rule. A file that does not parse is answered CTL_RELOAD_FAILED,
 * logged with its line, and the policy in force stays. */
#include "hostile.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc_frame.h"

#define TD "spiffe://cluster.local"

/* hostile_policy.c's file with sleep.default's name replaced by another. */
static const char RELOADED[] = "trust_domain_aliases: [old.example]\n"
                               "denied_namespaces: [kube-system]\n"
                               "namespace_max_ttl:\n"
                               "  payments: 1h\n"
                               "dns_names:\n"
                               "  sleep.default: [sleep2.example.com]\n"
                               "  productpage.bookinfo: [productpage.example.com]\n"
                               "service_dns: true\n"
                               "key_types:\n"
                               "  rsa_bits: [3072]\n"
                               "  ec_curves: [P-256]\n";
/* Line 2 holds the mistake. */
static const char BROKEN[] = "dns_names: {sleep.default: [sleep3.example.com]}\n"
                             "no_such_rule: true\n";

/* Pushes text as the supervisor does; the signer's answer byte. */
static char push_policy(const char *text)
{
    int fd = memfd_create("hf-policy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    assert_int_equal(
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL), 0);
    hsmca_err e;
    if (ipc_send_ctl_fd(hf.ctl, CTL_POLICY, fd, &e) != HSMCA_OK)
        fail_msg("ipc_send_ctl_fd: %s", e.msg);
    close(fd);
    assert_true(hf_wait_readable(hf.ctl, 10000));
    char b = 0;
    assert_int_equal(read(hf.ctl, &b, 1), 1);
    return b;
}

static void signs(const char *dns)
{
    tbs_spec s = {.dns = dns};
    size_t len;
    uint8_t *tbs = hf_build_tbs(&s, &len);
    Hsmca__Ipc__SignReply *rep = hf_sign(PROFILE_WORKLOAD, tbs, len);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
}

static void test_reload_applies_with_grace(void **state)
{
    (void)state;
    assert_int_equal(push_policy(RELOADED), CTL_POLICY);
    signs("sleep2.example.com"); /* the new grant */
    signs("sleep.example.com");  /* the replaced file's, within its grace */
    char *log = hf_read_text(hf.log, 64 << 20);
    assert_non_null(log);
    assert_non_null(strstr(log, "accepted under the replaced policy file (reload grace)"));
    free(log);
    signs("web.default.svc");    /* a rule both keep */
    tbs_spec s = {.dns = "evil.example.com"};
    hf_refuse_spec(&s, HSMCA_EPERM,
                   "invariant 4: policy rule dns_names: DNS SAN 'evil.example.com' is not "
                   "granted to sleep.default");
    tbs_spec denied = {.uri = TD "/ns/kube-system/sa/default"};
    hf_refuse_spec(&denied, HSMCA_EPERM, "invariant 4: policy rule denied_namespaces");
}

static void test_reload_refuses_a_broken_file(void **state)
{
    (void)state;
    assert_int_equal(push_policy(BROKEN), CTL_RELOAD_FAILED);
    signs("sleep2.example.com"); /* the policy in force stays */
    tbs_spec s = {.dns = "sleep3.example.com"};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 4: policy rule dns_names");
    char *log = hf_read_text(hf.log, 64 << 20);
    assert_non_null(log);
    const char *at =
        strstr(log, "reload: policy file not taken, keeping the one in force\",\"reason\":\"");
    assert_non_null(at);
    const char *eol = strchr(at, '\n');
    assert_non_null(eol);
    fprintf(stderr, "  %.*s\n", (int)(eol - at > 300 ? 300 : eol - at), at);
    const char *needle = "policy.yaml:2:"; /* the file named with the line at fault */
    assert_non_null(memmem(at, (size_t)(eol - at), needle, strlen(needle)));
    free(log);
}

const struct CMUnitTest hf_reload_tests[] = {
    cmocka_unit_test(test_reload_applies_with_grace),
    cmocka_unit_test(test_reload_refuses_a_broken_file),
};
const size_t hf_n_reload_tests = sizeof(hf_reload_tests) / sizeof(hf_reload_tests[0]);

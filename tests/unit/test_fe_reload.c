/* test_fe_reload.c - the front end's side of SIGHUP's reload (frontend/fe_reload.h): a
 * policy file pushed as the supervisor does is put in force; one that does not parse
 * leaves the policy in force and the "last reload failed" state names the file's line;
 * the supervisor's word that a reload failed sets the state too; a later good reload
 * clears it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "fe_app.h"
#include "fe_reload.h"
#include "ipc_frame.h"
#include "policy_live.h"

static int memfd_of(const char *text)
{
    int fd = memfd_create("test-reload", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    return fd;
}

static void push(fe_app *app, char type, const char *text)
{
    int fd = memfd_of(text);
    fe_reload_on_ctl(app, type, fd);
    close(fd);
}

static const char *alias_in_force(fe_app *app, char *buf, size_t cap)
{
    policy_version *v = policy_live_acquire(app->policies);
    const policy_set *p = policy_version_set(v);
    snprintf(buf, cap, "%s", p && policy_set_n_aliases(p) ? policy_set_alias(p, 0) : "");
    policy_live_release(v);
    return buf;
}

static void test_reload_states(void **state)
{
    (void)state;
    static hsmca_config cfg;
    snprintf(cfg.policy_file, sizeof(cfg.policy_file), "/etc/hsmca/policy.yaml");
    fe_app app;
    memset(&app, 0, sizeof(app));
    app.cfg = &cfg;
    app.policies = policy_live_new(NULL);
    assert_non_null(app.policies);
    char why[FE_RELOAD_WHY_MAX], alias[64];
    assert_int_equal(fe_reload_failed(why, sizeof(why)), 0);
    assert_string_equal(why, "");

    push(&app, CTL_POLICY, "trust_domain_aliases: [a.example]\n");
    assert_int_equal(fe_reload_failed(why, sizeof(why)), 0);
    assert_string_equal(alias_in_force(&app, alias, sizeof(alias)), "a.example");

    push(&app, CTL_POLICY, "trust_domain_aliases: [b.example]\nno_such_rule: 1\n");
    assert_int_equal(fe_reload_failed(why, sizeof(why)), 1);
    assert_non_null(strstr(why, "last reload failed: /etc/hsmca/policy.yaml:2:"));
    assert_string_equal(alias_in_force(&app, alias, sizeof(alias)), "a.example");

    push(&app, CTL_POLICY, "trust_domain_aliases: [c.example]\n");
    assert_int_equal(fe_reload_failed(why, sizeof(why)), 0);
    assert_string_equal(alias_in_force(&app, alias, sizeof(alias)), "c.example");

    /* The supervisor's or the signer's refusal, as the supervisor words it; a control
     * character in it does not reach a probe's body. */
    push(&app, CTL_RELOAD_FAILED, "x.yaml:7: unknown key 'k'\nmore");
    assert_int_equal(fe_reload_failed(why, sizeof(why)), 1);
    assert_string_equal(why, "last reload failed: x.yaml:7: unknown key 'k' more");
    assert_string_equal(alias_in_force(&app, alias, sizeof(alias)), "c.example");
    char small[24];
    assert_int_equal(fe_reload_failed(small, sizeof(small)), 1); /* cut to fit */
    assert_int_equal(strlen(small), sizeof(small) - 1);
    policy_live_free(app.policies);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reload_states),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

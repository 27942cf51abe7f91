/* test_fe_grpcrt.c - gRPC core's runtime settings (frontend/fe_grpcrt.c): on an
 * abseil that exports SetMutexDeadlockDetectionMode (Debian 12's, built without
 * NDEBUG) the deadlock detection is turned off and says so; gRPC core then starts,
 * serves a completion queue and stops as before. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after the headers it needs */

#include <dlfcn.h>

#include <grpc/grpc.h>
#include <grpc/support/time.h>

#include "fe_grpcrt.h"

/* The abseil this binary runs with: does it export the setter (either mangling)? */
static int absl_has_setter(void)
{
    return dlsym(RTLD_DEFAULT,
                 "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE") ||
           dlsym(RTLD_DEFAULT, "_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE");
}

static void test_applied_when_abseil_has_it(void **state)
{
    (void)state;
    /* libgrpc is linked: its abseil is loaded */
    assert_non_null(dlsym(RTLD_DEFAULT, "grpc_init"));
    assert_int_equal(fe_grpcrt_init(), absl_has_setter());
    assert_int_equal(fe_grpcrt_init(), absl_has_setter()); /* idempotent */
}

static void test_grpc_runs_after(void **state)
{
    (void)state;
    fe_grpcrt_init();
    grpc_init();
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server *srv = grpc_server_create(NULL, NULL);
    grpc_server_register_completion_queue(srv, cq, NULL);
    grpc_server_start(srv);
    grpc_server_shutdown_and_notify(srv, cq, (void *)1);
    grpc_event ev = grpc_completion_queue_next(
        cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_seconds(5, GPR_TIMESPAN)),
        NULL);
    assert_int_equal(ev.type, GRPC_OP_COMPLETE);
    assert_ptr_equal(ev.tag, (void *)1);
    grpc_server_destroy(srv);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    grpc_shutdown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_applied_when_abseil_has_it),
        cmocka_unit_test(test_grpc_runs_after),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

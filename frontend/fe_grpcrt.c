/* fe_grpcrt.c - see fe_grpcrt.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fe_grpcrt.h"

#include <dlfcn.h>
#include <stddef.h>

/* absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle) as C++ mangles it, in
 * Debian's inline namespace and in a build without one. The enum is passed as an int;
 * kIgnore is 0 (absl/synchronization/mutex.h). */
static const char *const SET_MODE[] = {
    "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
    "_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE",
};
#define ABSL_ON_DEADLOCK_CYCLE_IGNORE 0

int fe_grpcrt_init(void)
{
    for (size_t i = 0; i < sizeof(SET_MODE) / sizeof(SET_MODE[0]); i++) {
        void (*set_mode)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, SET_MODE[i]);
        if (set_mode) {
            set_mode(ABSL_ON_DEADLOCK_CYCLE_IGNORE);
            return 1;
        }
    }
    return 0;
}

/* log.h - JSON-lines logging to stderr with a stable set of keys:
 * {"ts":"...","lvl":"info","proc":"signer","msg":"..."} */
#ifndef HSMCA_LOG_H
#define HSMCA_LOG_H

#include <stdnoreturn.h>

/* Names this process in every line ("supervisor", "signer", "frontend", "cli"). */
void log_init(const char *proc);

/* Lines below this level are dropped: 0 debug, 1 info, 2 warn, 3 error.
 * HSMCA_LOG_LEVEL=debug|info|warn|error in the environment sets it at log_init. */
void log_set_level(int level);

void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Logs at error level and exits(1): the supervisor restarts the process. */
noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Exit status of a child that cannot start for a reason a restart will not cure
 * (bad config, wrong PIN, unsafe key): the supervisor stops instead of retrying,
 * which also keeps it from locking an HSM's PIN with repeated failed logins. */
#define EXIT_CONFIG 78

/* Logs at error level and exits(EXIT_CONFIG). */
noreturn void fatal_config(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

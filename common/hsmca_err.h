/* hsmca_err.h - the one error type that crosses every module boundary.
 *
 * Out of memory, in every process (front end, signer, supervisor, CLI):
 *   - An allocation for one request (its job, its buffers, its reply, a log entry for it)
 *     that fails fails that request: the function returns HSMCA_ENOMEM naming what it
 *     could not allocate, the request is answered with that error (the signer replies, the
 *     front end answers the call), and the process goes on. Nothing on a request's path
 *     calls fatal() or abort() for memory.
 *   - An allocation at start-up (the config, tables sized once, threads, the first serving
 *     certificate), or one without which the process can serve nothing more (its signer
 *     connection, the front end's slot for the next gRPC call), or one that would lose what
 *     a guarantee rests on (the audit log's unwritten lines: never sign past them) is
 *     fatal(): the process logs it and exits, and the supervisor restarts it whole.
 * Every result that reports an allocation is checked; fatal() is never used to skip the
 * error path of a request. */
#ifndef HSMCA_ERR_H
#define HSMCA_ERR_H

#include <stddef.h>

/* Codes map one-to-one onto what a caller of CreateCertificate sees. */
typedef enum {
    HSMCA_OK = 0,
    HSMCA_EINVAL,   /* malformed input               -> INVALID_ARGUMENT  */
    HSMCA_EAUTH,    /* no or bad credentials         -> UNAUTHENTICATED   */
    HSMCA_EPERM,    /* a policy or profile refused   -> PERMISSION_DENIED */
    HSMCA_EUNAVAIL, /* signer or token not reachable -> UNAVAILABLE       */
    HSMCA_ERATE,    /* rate limit                    -> RESOURCE_EXHAUSTED */
    HSMCA_ENOMEM,   /* allocation failed             -> INTERNAL          */
    HSMCA_EIO,      /* file or socket error          -> INTERNAL          */
    HSMCA_EINTERNAL, /* a bug or a library failure   -> INTERNAL          */
    HSMCA_ENOTFOUND, /* a named object does not exist -> NOT_FOUND        */
} hsmca_code;

#define HSMCA_CODE_MAX HSMCA_ENOTFOUND

/* A refusal: the code and a message that names the check that failed.
 * The message never contains a secret (PIN, token, key material). */
typedef struct {
    hsmca_code code;
    char msg[256];
} hsmca_err;

/* On every function that returns an hsmca_code: a caller that drops the result
 * does not compile (-Werror), so a check cannot be skipped by accident. */
#define HSMCA_MUSTCHECK __attribute__((warn_unused_result))

/* The error path in one line (s2n's RESULT_GUARD / RESULT_ENSURE): return the
 * failure of x from the enclosing function, or fail with code and a message
 * naming the rule unless cond holds. */
#define HSMCA_GUARD(x)                                                                             \
    do {                                                                                           \
        hsmca_code hsmca_guard_rc_ = (x);                                                          \
        if (hsmca_guard_rc_ != HSMCA_OK)                                                           \
            return hsmca_guard_rc_;                                                                \
    } while (0)
#define HSMCA_ENSURE(cond, e, code, ...)                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return hsmca_fail((e), (code), __VA_ARGS__);                                           \
    } while (0)

/* Sets *e (when e is not NULL) and returns code; printf-style message. */
hsmca_code hsmca_fail(hsmca_err *e, hsmca_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Resets *e to HSMCA_OK with an empty message. */
void hsmca_err_clear(hsmca_err *e);

/* A short stable name for the code ("INVALID_ARGUMENT", ...). */
const char *hsmca_code_name(hsmca_code code);

#endif

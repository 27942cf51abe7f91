/* hsmca_err.c - see hsmca_err.h. */
#include "hsmca_err.h"

#include <stdarg.h>
#include <stdio.h>

hsmca_code hsmca_fail(hsmca_err *e, hsmca_code code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

void hsmca_err_clear(hsmca_err *e)
{
    if (e) {
        e->code = HSMCA_OK;
        e->msg[0] = '\0';
    }
}

const char *hsmca_code_name(hsmca_code code)
{
    switch (code) {
    case HSMCA_OK: return "OK";
    case HSMCA_EINVAL: return "INVALID_ARGUMENT";
    case HSMCA_EAUTH: return "UNAUTHENTICATED";
    case HSMCA_EPERM: return "PERMISSION_DENIED";
    case HSMCA_EUNAVAIL: return "UNAVAILABLE";
    case HSMCA_ERATE: return "RESOURCE_EXHAUSTED";
    case HSMCA_ENOMEM: return "OUT_OF_MEMORY";
    case HSMCA_EIO: return "IO_ERROR";
    case HSMCA_EINTERNAL: return "INTERNAL";
    case HSMCA_ENOTFOUND: return "NOT_FOUND";
    }
    return "UNKNOWN";
}

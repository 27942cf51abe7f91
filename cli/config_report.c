/* config_report.c - the lines of `hsmca config check` (config_check.h): each problem or
 * warning at the line of the key it is about, when the file writes that key. */
#include "config_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vline(cc_report *r, const char *key, const char *tag, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static void vline(cc_report *r, const char *key, const char *tag, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    int line = key ? config_lines_find(r->lines, key) : 0;
    if (line > 0)
        printf("%s:%d: ", r->file, line);
    else
        printf("%s: ", r->file);
    /* A message that starts with its key (the sandbox's lookups) is not given it twice. */
    size_t kl = key ? strlen(key) : 0;
    if (key && !(!strncmp(msg, key, kl) && (msg[kl] == ' ' || msg[kl] == ':')))
        printf("%s: ", key);
    printf("%s%s\n", tag, msg);
}

void cc_problem(cc_report *r, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(r, key, "", fmt, ap);
    va_end(ap);
    r->problems++;
}

void cc_warn(cc_report *r, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(r, key, "warning: ", fmt, ap);
    va_end(ap);
    r->warnings++;
}

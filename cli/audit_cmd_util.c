/* audit_cmd_util.c - see audit_cmd_util.h. */
#include "audit_cmd_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "util.h"

const char *audit_cmd_path(char *out, size_t cap, const char *dir, const char *rel)
{
    int n = snprintf(out, cap, "%s/%s", dir, rel);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "hsmca audit: %s: path too long\n", dir);
        exit(2);
    }
    return out;
}

char *audit_cmd_b64(const audit_hash *h)
{
    char *s = util_b64_encode(h->b, AUDIT_HASH_LEN);
    if (!s) {
        fputs("hsmca audit: out of memory\n", stderr);
        exit(1);
    }
    return s;
}

void audit_cmd_print_hashes(const audit_hash *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *s = audit_cmd_b64(&h[i]);
        printf("  %s\n", s);
        free(s);
    }
}

int audit_cmd_load_vkey(const char *cmd, const char *arg, const char *dir, audit_vkey *k)
{
    char path[4096];
    if (!arg) {
        audit_cmd_path(path, sizeof(path), dir, "vkey");
        arg = path;
    }
    hsmca_err e;
    if (audit_vkey_load(arg, k, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca audit %s: vkey: %s\n", cmd, e.msg);
        return 0;
    }
    return 1;
}

int audit_cmd_find_vkey(const char *cmd, const char *arg, const char *dir, audit_vkey *k)
{
    char path[4096];
    struct stat st;
    if (!arg && stat(audit_cmd_path(path, sizeof(path), dir, "vkey"), &st) != 0 &&
        errno == ENOENT)
        return 0;
    return audit_cmd_load_vkey(cmd, arg, dir, k) ? 1 : -1;
}

int audit_cmd_each_entry(const char *dir, const char *cmd, audit_cmd_entry_fn fn, void *ctx)
{
    char path[4096];
    audit_cmd_path(path, sizeof(path), dir, "log");
    audit_lines *lr;
    hsmca_err e;
    if (audit_lines_open(path, &lr, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca audit %s: %s\n", cmd, e.msg);
        return 0;
    }
    static audit_entry_buf buf;
    int ok = 1;
    for (uint64_t seq = 0;; seq++) {
        const char *line;
        size_t len;
        uint64_t off;
        int eof;
        audit_entry ent;
        if (audit_lines_next(lr, &line, &len, &off, &eof, &e) != HSMCA_OK) {
            fprintf(stderr, "hsmca audit %s: %s\n", cmd, e.msg);
            ok = 0;
            break;
        }
        if (eof)
            break;
        if (audit_entry_parse(line, len, &ent, &buf, &e) != HSMCA_OK) {
            fprintf(stderr, "hsmca audit %s: log seq %llu (byte %llu): %s\n", cmd,
                    (unsigned long long)seq, (unsigned long long)off, e.msg);
            ok = 0;
            break;
        }
        int go = fn(ctx, seq, &ent, line, len);
        if (go <= 0) {
            ok = go == 0;
            break;
        }
    }
    audit_lines_close(lr);
    return ok;
}

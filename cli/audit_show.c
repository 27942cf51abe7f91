/* audit_show.c - `hsmca audit show` (audit_show.h): the log's entries as a table an
 * auditor reads, or as the JSON lines themselves, filtered by identity, serial, namespace,
 * kind and a time window. A result row carries its intent's serial and identity, so
 * "which workloads got certificates between T1 and T2" is one filter. Every string from
 * the log is printed through util_printable: the requester and reasons are the front
 * end's words and must not drive the auditor's terminal. */
#include "audit_show.h"
#include "audit_cmd_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit_verify.h"
#include "cli_opts.h"
#include "util.h"

typedef struct {
    const char *identity, *ns, *kind;
    char serial[AUDIT_SERIAL_HEX_MAX + 1];
    int64_t since, until;
    int json;
} show_opts;

/* What a result row borrows from its intent. */
typedef struct {
    uint64_t seq;
    char serial[AUDIT_SERIAL_HEX_MAX + 1];
    char identity[256], requester[256];
} show_intent;

typedef struct {
    show_intent *v;
    size_t n, cap;
} show_intents;

/* "2026-11-24T04:00:00Z", "...+01:00", "2026-11-24" or unix seconds into *out. */
static int parse_time(const char *s, int64_t *out)
{
    char *end;
    if (*s >= '0' && *s <= '9' && !strchr(s, '-')) {
        long long v = strtoll(s, &end, 10);
        if (*end)
            return 0;
        *out = v;
        return 1;
    }
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    int n = 0;
    if (sscanf(s, "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &n) != 3)
        return 0;
    const char *p = s + n;
    int off = 0;
    if (*p == 'T' || *p == 't' || *p == ' ') {
        int m = 0;
        if (sscanf(p + 1, "%2d:%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &m) != 3)
            return 0;
        p += 1 + m;
        if (*p == '.')
            for (p++; *p >= '0' && *p <= '9'; p++)
                ;
        int hh, mm;
        if (*p == 'Z' || *p == 'z')
            p++;
        else if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d", &hh, &mm) == 2) {
            off = (*p == '+' ? 1 : -1) * (hh * 3600 + mm * 60);
            p += 6;
        } else
            return 0;
    }
    if (*p)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *out = (int64_t)timegm(&tm) - off;
    return 1;
}

/* The first uri: SAN of an intent ("uri:spiffe://...,dns:..."), or "". */
static void first_uri(const audit_str *sans, char *out, size_t cap)
{
    out[0] = '\0';
    const char *p = sans->p;
    size_t len = sans->len;
    for (size_t i = 0; p && i + 4 <= len; i++) {
        if ((i == 0 || p[i - 1] == ',') && !memcmp(p + i, "uri:", 4)) {
            size_t j = i + 4;
            while (j < len && p[j] != ',')
                j++;
            util_printable(p + i + 4, j - i - 4, out, cap);
            return;
        }
    }
}

static int ns_match(const char *id, const char *ns)
{
    char want[300];
    snprintf(want, sizeof(want), "/ns/%s/", ns);
    return strstr(id, want) != NULL;
}

static int keep(const show_opts *o, const audit_entry *ent, const char *kind, const char *serial,
                const char *identity, const char *requester)
{
    if (ent->time < o->since || ent->time > o->until)
        return 0;
    if (o->kind && strcmp(o->kind, kind ? kind : ""))
        return 0;
    if (o->serial[0] && strcmp(o->serial, serial))
        return 0;
    if (o->identity && strcmp(o->identity, identity) && strcmp(o->identity, requester))
        return 0;
    if (o->ns && !ns_match(identity, o->ns) && !ns_match(requester, o->ns))
        return 0;
    return 1;
}

/* The RESULT column. */
static void result_text(const audit_entry *ent, char *out, size_t cap)
{
    char a[160], b[160];
    const audit_str *why = ent->error.len ? &ent->error : &ent->reason;
    util_printable(why->p ? why->p : "", why->len, b, sizeof(b));
    if (ent->kind == AUDIT_ISSUE_INTENT)
        snprintf(out, cap, "profile %s", ent->profile);
    else if (ent->kind == AUDIT_ISSUE_RESULT && ent->cert_sha256[0])
        snprintf(out, cap, "issued cert_sha256 %.16s...", ent->cert_sha256);
    else if (ent->kind == AUDIT_REVOKE)
        snprintf(out, cap, "%s, %s", b, ent->profile);
    else if (ent->kind == AUDIT_BAN)
        snprintf(out, cap, ent->expires ? "%s, by %s, until %lld" : "%s, by %s, until lifted",
                 b, ent->profile, (long long)ent->expires);
    else if (ent->kind == AUDIT_BAN_LIFT)
        snprintf(out, cap, "lifted, by %s", ent->profile);
    else if (ent->kind == AUDIT_CRL)
        snprintf(out, cap, "crl_number %llu, %llu revoked, next update %lld",
                 (unsigned long long)ent->crl_number, (unsigned long long)ent->count,
                 (long long)ent->not_after);
    else if (ent->kind == AUDIT_CA_KEY)
        snprintf(out, cap, "%s key_sha256 %.16s...%s%.16s%s", ent->step, ent->ca_spki_sha256,
                 ent->ca_cert_sha256[0] ? " cert_sha256 " : "", ent->ca_cert_sha256,
                 ent->ca_cert_sha256[0] ? "..." : "");
    else if (ent->code[0])
        snprintf(out, cap, "%s %s", util_printable(ent->code, strlen(ent->code), a, sizeof(a)), b);
    else
        snprintf(out, cap, "%s", b);
}

static show_intent *find_intent(show_intents *s, uint64_t seq)
{
    for (size_t i = s->n; i-- > 0;)
        if (s->v[i].seq == seq)
            return &s->v[i];
    return NULL;
}

static void drop_intent(show_intents *s, show_intent *it)
{
    *it = s->v[--s->n];
}

static int row(const show_opts *o, show_intents *open, const audit_entry *ent, const char *line,
               size_t len)
{
    const char *kind = audit_kind_name(ent->kind);
    char identity[256] = "", requester[256] = "", serial[AUDIT_SERIAL_HEX_MAX + 1] = "";
    util_printable(ent->requester.p ? ent->requester.p : "", ent->requester.len, requester,
                   sizeof(requester));
    if (ent->kind == AUDIT_ISSUE_INTENT) {
        first_uri(&ent->sans, identity, sizeof(identity));
        snprintf(serial, sizeof(serial), "%s", ent->serial);
        if (open->n == open->cap) {
            size_t cap = open->cap ? 2 * open->cap : 64;
            show_intent *v = realloc(open->v, cap * sizeof(*v));
            if (!v)
                return 0;
            open->v = v;
            open->cap = cap;
        }
        show_intent *it = &open->v[open->n++];
        it->seq = ent->seq;
        memcpy(it->serial, serial, sizeof(serial));
        memcpy(it->identity, identity, sizeof(identity));
        memcpy(it->requester, requester, sizeof(requester));
    } else if (ent->kind == AUDIT_ISSUE_RESULT) {
        show_intent *it = find_intent(open, ent->intent_seq);
        if (it) {
            memcpy(serial, it->serial, sizeof(serial));
            memcpy(identity, it->identity, sizeof(identity));
            memcpy(requester, it->requester, sizeof(requester));
            drop_intent(open, it);
        }
    } else if (ent->kind == AUDIT_REVOKE) {
        snprintf(serial, sizeof(serial), "%s", ent->serial);
        memcpy(identity, requester, sizeof(identity));
    } else if (ent->kind == AUDIT_BAN || ent->kind == AUDIT_BAN_LIFT) {
        util_printable(ent->identity.p, ent->identity.len, identity, sizeof(identity));
    } else if (ent->requester.len) {
        /* a deny names no certificate: the requester is the identity it asked as */
        memcpy(identity, requester, sizeof(identity));
    }
    if (!keep(o, ent, kind, serial, identity, requester))
        return 1;
    if (o->json) {
        fwrite(line, 1, len, stdout);
        putchar('\n');
        return 1;
    }
    char when[32] = "?", result[400];
    time_t t = (time_t)ent->time;
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    result_text(ent, result, sizeof(result));
    printf("%-20s  %8llu  %-13s  %-32s  %-44s  %-44s  %s\n", when, (unsigned long long)ent->seq,
           kind ? kind : "?", serial[0] ? serial : "-", identity[0] ? identity : "-",
           requester[0] ? requester : "-", result);
    return 1;
}

static int show_usage(FILE *f, int rc)
{
    fputs("usage: hsmca audit show DIR [--identity SPIFFE-ID] [--serial HEX] [--namespace NS]\n"
          "                          [--since T] [--until T] [--kind KIND] [--json]\n"
          "\n"
          "Prints the entries of DIR/log as a table: TIME (UTC), SEQ, KIND, SERIAL, IDENTITY\n"
          "(the certificate's first URI SAN; a deny's requester), REQUESTER (who asked, as\n"
          "the front end authenticated it), RESULT. An issue-result row shows its intent's\n"
          "serial and identity. With --json, the matching log lines themselves (canonical\n"
          "JSON, one per line). It parses every line strictly but checks no signature:\n"
          "run `hsmca audit verify` for that.\n"
          "\n"
          "  --identity ID   rows whose identity or requester is ID\n"
          "  --serial HEX    rows of the certificate with that serial (hex, any case, ':' ok)\n"
          "  --namespace NS  rows whose identity or requester is in .../ns/NS/...\n"
          "  --since T       rows at or after T; --until T: at or before T. T is RFC 3339\n"
          "                  (2026-11-24T04:00:00Z, +01:00 offsets, or a date) or unix seconds\n"
          "  --kind KIND     issue-intent, issue-result, deny, start, stop, recovery,\n"
          "                  ca-key (key generation, import, rotation), revoke,\n"
          "                  revoke-identity, revoke-identity-lift, ...\n"
          "\n"
          "Which workloads got certificates between T1 and T2:\n"
          "  hsmca audit show DIR --kind issue-result --since T1 --until T2\n",
          f);
    return rc;
}

typedef struct {
    const show_opts *o;
    show_intents open;
} show_walk;

static int show_entry(void *ctx, uint64_t seq, const audit_entry *ent, const char *line, size_t len)
{
    (void)seq;
    show_walk *w = ctx;
    if (row(w->o, &w->open, ent, line, len))
        return 1;
    fputs("hsmca audit show: out of memory\n", stderr);
    return -1;
}

static const struct option show_flags[] = {{"identity", required_argument, 0, 'i'},
                                           {"serial", required_argument, 0, 's'},
                                           {"namespace", required_argument, 0, 'n'},
                                           {"since", required_argument, 0, 'S'},
                                           {"until", required_argument, 0, 'U'},
                                           {"kind", required_argument, 0, 'k'},
                                           {"json", no_argument, 0, 'j'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};

/* --serial's value into o->serial: hex digits in any case, ':' skipped. 0 when it is
 * not a serial in hex: said. */
static int parse_serial(const char *arg, show_opts *o)
{
    size_t n = 0;
    for (const char *p = arg; *p; p++) {
        char c = *p >= 'A' && *p <= 'F' ? (char)(*p - 'A' + 'a') : *p;
        if (c == ':')
            continue;
        if (n == AUDIT_SERIAL_HEX_MAX || !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            fprintf(stderr, "hsmca audit show: --serial: not a serial in hex\n");
            return 0;
        }
        o->serial[n++] = c;
    }
    o->serial[n] = '\0';
    return 1;
}

/* The flags and DIR into *o and *dir. -1 to go on, else the exit code. */
static int parse_show(int argc, char **argv, show_opts *o, const char **dir)
{
    cli_opts co;
    cli_opts_init(&co, "hsmca audit show", show_flags, dir, 1);
    for (int c; (c = cli_opts_next(&co, argc, argv)) != -1;) {
        switch (c) {
        case 'h': return show_usage(stdout, 0);
        case 'j': o->json = 1; break;
        case 'i': o->identity = optarg; break;
        case 'n': o->ns = optarg; break;
        case 'k': o->kind = optarg; break;
        case 's':
            if (!parse_serial(optarg, o))
                return 2;
            break;
        case 'S':
        case 'U':
            if (!parse_time(optarg, c == 'S' ? &o->since : &o->until)) {
                fprintf(stderr, "hsmca audit show: %s: '%s' is not RFC 3339 or unix seconds\n",
                        c == 'S' ? "--since" : "--until", optarg);
                return 2;
            }
            break;
        default: return show_usage(stderr, 2);
        }
    }
    if (!*dir) {
        fputs("hsmca audit show: DIR is required\n", stderr);
        return 2;
    }
    return -1;
}

int audit_show_main(int argc, char **argv)
{
    show_opts o = {.since = INT64_MIN, .until = INT64_MAX};
    const char *dir = NULL;
    int rc = parse_show(argc, argv, &o, &dir);
    if (rc >= 0)
        return rc;
    if (!o.json)
        printf("%-20s  %8s  %-13s  %-32s  %-44s  %-44s  %s\n", "TIME (UTC)", "SEQ", "KIND",
               "SERIAL", "IDENTITY", "REQUESTER", "RESULT");
    show_walk w = {&o, {0}};
    int ok = audit_cmd_each_entry(dir, "show", show_entry, &w);
    free(w.open.v);
    fflush(stdout);
    return ok ? 0 : 1;
}

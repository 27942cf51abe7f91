/* hostile_spiffe.c - invariant 4: the SANs. An X509-SVID holds exactly one URI
 * SAN, a SPIFFE ID by the grammar of policy/policy_spiffe.c in the configured
 * trust domain, and nothing else; the serving profile holds only the names the
 * config gives the front end. Each refusal must name the rule, and a byte
 * outside the grammar only in hex. */
#include "hostile.h"

#include <stdio.h>
#include <string.h>

#include "signer_tbs.h"

#define TD "spiffe://cluster.local"
#define SP "invariant 4: SPIFFE ID: "
#define NOT_OURS SP "trust domain is not a configured one"

/* A case of the workload (W) or serving (S) profile: name, code, the reason's
 * prefix (NULL when signed), then the tbs_spec knobs. */
/* clang-format off */
#define W(nm, c, pre, ...) {.name = (nm), .code = (c), .prefix = (pre), .spec = {__VA_ARGS__}}
#define S(nm, c, pre, ...) \
    {.name = (nm), .profile = PROFILE_SERVING, .code = (c), .prefix = (pre), .spec = {__VA_ARGS__}}
static const hf_case san_cases[] = {
    W("no subjectAltName", HSMCA_EPERM, "invariant 4: subjectAltName missing",
      .san_mode = EXT_OMIT),
    W("subjectAltName not critical", HSMCA_EPERM, "invariant 4: subjectAltName must be critical",
      .san_mode = EXT_FLIP_CRITICAL),
    W("subjectAltName extension twice", HSMCA_EPERM,
      "invariant 3: duplicate extension subjectAltName",
      .san_twice = 1),
    W("subjectAltName empty", HSMCA_EINVAL, "invariant 4: subjectAltName empty", .uri = ""),
    W("two URI SANs", HSMCA_EPERM, "invariant 4: an X509-SVID has exactly one URI SAN",
      .uri2 = TD "/ns/kube-system/sa/admin"),
    W("the same URI SAN twice", HSMCA_EPERM, "invariant 4: an X509-SVID has exactly one URI SAN",
      .uri2 = HF_SPIFFE_ID),
    W("URI + DNS SAN", HSMCA_EPERM, "invariant 4: DNS SAN not granted to workload identities",
      .dns = "sleep.default.svc.cluster.local"),
    W("DNS SAN alone", HSMCA_EPERM, "invariant 4: DNS SAN not granted to workload identities",
      .uri = "", .dns = "sleep.default.svc"),
    W("URI + IPv4 SAN", HSMCA_EPERM, "invariant 4: IP SAN not granted to workload identities",
      .ip = "127.0.0.1"),
    W("URI + IPv6 SAN", HSMCA_EPERM, "invariant 4: IP SAN not granted to workload identities",
      .ip = "::1"),
    W("URI + email SAN", HSMCA_EPERM, "invariant 4: SAN type [1] not allowed",
      .email = "sleep@cluster.local"),
    W("URI + directoryName SAN", HSMCA_EPERM, "invariant 4: SAN type [4] not allowed",
      .dir_name = 1),
    W("URI + otherName SAN (UPN)", HSMCA_EPERM, "invariant 4: SAN type [0] not allowed",
      .other_name = 1),
    {.name = "empty URI", .spec = {.uri_empty = 1}, .code = HSMCA_EPERM, .prefix = SP "empty",
     .absent = "forbidden"},
    W("scheme SPIFFE://", HSMCA_EPERM, SP "scheme must be spiffe:// (lowercase)",
      .uri = "SPIFFE://cluster.local/ns/default/sa/sleep"),
    W("scheme https://", HSMCA_EPERM, SP "scheme must be spiffe:// (lowercase)",
      .uri = "https://cluster.local/ns/default/sa/sleep"),
    W("scheme spiffe:/", HSMCA_EPERM, SP "scheme must be spiffe:// (lowercase)",
      .uri = "spiffe:/cluster.local/ns/default/sa/sleep"),
    W("no path", HSMCA_EPERM, SP "no path (a workload ID needs one)", .uri = TD),
    W("path /", HSMCA_EPERM, SP "path segment 1 is empty", .uri = TD "/"),
    W("trailing slash", HSMCA_EPERM, SP "path segment 5 is empty", .uri = HF_SPIFFE_ID "/"),
    W("empty segment", HSMCA_EPERM, SP "path segment 2 is empty", .uri = TD "/ns//sa/sleep"),
    W("segment .", HSMCA_EPERM, SP "path segment 2 is '.'", .uri = TD "/ns/./sa/sleep"),
    W("segment ..", HSMCA_EPERM, SP "path segment 4 is '..'",
      .uri = TD "/ns/default/sa/../../kube-system/sa/admin"),
    W("last segment ..", HSMCA_EPERM, SP "path segment 4 is '..'", .uri = TD "/ns/default/sa/.."),
    W("segment a..b", HSMCA_OK, NULL, .uri = TD "/ns/default/sa/a..b"),
    W("segment ...", HSMCA_OK, NULL, .uri = TD "/ns/default/sa/..."),
    W("uppercase path", HSMCA_OK, NULL, .uri = TD "/ns/Default/sa/Sleep"),
    W("uppercase trust domain", HSMCA_EPERM, SP "trust domain must be lowercase",
      .uri = "spiffe://Cluster.local/ns/default/sa/sleep"),
    W("port", HSMCA_EPERM, SP "port (':') not allowed",
      .uri = "spiffe://cluster.local:443/ns/default/sa/sleep"),
    W("userinfo", HSMCA_EPERM, SP "userinfo ('@') not allowed",
      .uri = "spiffe://admin@cluster.local/ns/default/sa/sleep"),
    W("query", HSMCA_EPERM, SP "query or fragment not allowed", .uri = HF_SPIFFE_ID "?x=1"),
    W("fragment", HSMCA_EPERM, SP "query or fragment not allowed", .uri = HF_SPIFFE_ID "#x"),
    W("query in the trust domain", HSMCA_EPERM, SP "query or fragment not allowed",
      .uri = "spiffe://cluster.local?/ns/default/sa/sleep"),
    W("percent-encoded path", HSMCA_EPERM, SP "percent-encoding not allowed",
      .uri = TD "/ns/default/sa/%2e%2e"),
    W("percent-encoded trust domain", HSMCA_EPERM, SP "percent-encoding not allowed",
      .uri = "spiffe://clu%73ter.local/ns/default/sa/sleep"),
    W("empty trust domain", HSMCA_EPERM, SP "empty trust domain",
      .uri = "spiffe:///ns/default/sa/sleep"),
    W("trust domain byte ','", HSMCA_EPERM,
      SP "trust domain byte 0x2c at offset 16 is not [a-z0-9._-]",
      .uri = "spiffe://cluster,local/ns/default/sa/sleep"),
    W("foreign trust domain", HSMCA_EPERM, NOT_OURS,
      .uri = "spiffe://evil.example/ns/default/sa/sleep"),
    W("trust domain + suffix", HSMCA_EPERM, NOT_OURS,
      .uri = "spiffe://cluster.local.evil.example/ns/default/sa/sleep"),
    W("prefix + trust domain", HSMCA_EPERM, NOT_OURS,
      .uri = "spiffe://evilcluster.local/ns/default/sa/sleep"),
    W("trust domain with a trailing dot", HSMCA_EPERM, NOT_OURS,
      .uri = "spiffe://cluster.local./ns/default/sa/sleep"),
    W("trust domain cut short", HSMCA_EPERM, NOT_OURS,
      .uri = "spiffe://cluster.loca/ns/default/sa/sleep"),
    W("NUL inside", HSMCA_EPERM, SP "contains a NUL byte",
      .uri = HF_SPIFFE_ID "\0.evil", .uri_len = sizeof(HF_SPIFFE_ID "\0.evil") - 1),
    /* The serving profile: the front end's own TLS names, nothing else. */
    S("serving: localhost and 127.0.0.1", HSMCA_OK, NULL,
      .uri = "", .dns = "localhost", .ip = "127.0.0.1"),
    S("serving: a DNS name not configured", HSMCA_EPERM,
      "invariant 4: DNS SAN not in the serving list",
      .uri = "", .dns = "accounts.google.com"),
    S("serving: an IP not configured", HSMCA_EPERM, "invariant 4: IP SAN not in the serving list",
      .uri = "", .dns = "localhost", .ip = "10.0.0.1"),
    S("serving: a SPIFFE ID (profile confusion)", HSMCA_EPERM,
      "invariant 4: URI SAN not allowed in the serving profile",
      .dns = "localhost"),
    S("serving: keyCertSign", HSMCA_EPERM,
      "invariant 3: keyUsage allows only digitalSignature, keyEncipherment",
      .uri = "", .dns = "localhost", .ku = KU_SET | KU_DS | KU_CERT_SIGN),
    S("serving: CA:TRUE", HSMCA_EPERM, "invariant 3: basicConstraints must be CA:FALSE",
      .uri = "", .dns = "localhost", .bc = BC_CA_TRUE),
};
/* clang-format on */

/* Bytes a URI path may hold but a SPIFFE path may not: each must be refused
 * with its hex value and offset, never the byte itself. */
static const char path_bytes[] = ",=@:*;<\"'~+[] \\!$&()>^`{|}\x7f\x80\xff";
#define N_PATH_BYTES (sizeof(path_bytes) - 1)

/* The long ones: at the length bound and one past it, and a trust domain one
 * past its own bound. */
enum { N_LONG = 3 };

static struct {
    hf_case c;
    char name[48], uri[2100], want[128];
} generated[N_PATH_BYTES + N_LONG];

static void make_path_byte_case(size_t i)
{
    unsigned char b = (unsigned char)path_bytes[i];
    static const char head[] = HF_SPIFFE_ID;
    size_t at = sizeof(head) - 1 - 3; /* spiffe://cluster.local/ns/default/sa/sl<b>eep */
    if (b >= 0x21 && b < 0x7f)
        snprintf(generated[i].name, sizeof(generated[i].name), "path byte '%c'", b);
    else
        snprintf(generated[i].name, sizeof(generated[i].name), "path byte 0x%02x", b);
    snprintf(generated[i].uri, sizeof(generated[i].uri), "%.*s%c%s", (int)at, head, b, head + at);
    snprintf(generated[i].want, sizeof(generated[i].want),
             SP "path byte 0x%02x at offset %zu is not [A-Za-z0-9._-]", b, at);
    generated[i].c = (hf_case){.name = generated[i].name,
                               .spec = {.uri = generated[i].uri},
                               .code = HSMCA_EPERM,
                               .prefix = generated[i].want};
}

static void make_long_case(size_t i, const char *name, size_t total, int long_td)
{
    char *u = generated[i].uri;
    snprintf(generated[i].name, sizeof(generated[i].name), "%s", name);
    if (long_td) { /* spiffe:// + 256 x 'a' + /ns */
        memset(u, 0, sizeof(generated[i].uri));
        memcpy(u, "spiffe://", 9);
        memset(u + 9, 'a', 256);
        memcpy(u + 9 + 256, "/ns", 3);
        snprintf(generated[i].want, sizeof(generated[i].want),
                 SP "trust domain of 256 bytes (at most 255)");
    } else { /* the usual ID, its last segment grown to total bytes */
        size_t head = strlen(HF_SPIFFE_ID);
        memcpy(u, HF_SPIFFE_ID, head);
        memset(u + head, 'x', total - head);
        u[total] = '\0';
        snprintf(generated[i].want, sizeof(generated[i].want), SP "%zu bytes (at most 2048)",
                 total);
    }
    generated[i].c = (hf_case){.name = generated[i].name,
                               .spec = {.uri = u},
                               .code = total > 2048 || long_td ? HSMCA_EPERM : HSMCA_OK,
                               .prefix = generated[i].want};
}

const struct CMUnitTest *hf_spiffe_tests(size_t *n)
{
    static struct CMUnitTest all[sizeof(san_cases) / sizeof(san_cases[0]) + N_PATH_BYTES + N_LONG];
    size_t k = 0;
    for (size_t i = 0; i < sizeof(san_cases) / sizeof(san_cases[0]); i++)
        all[k++] = hf_case_unit_test(&san_cases[i]);
    for (size_t i = 0; i < N_PATH_BYTES; i++) {
        make_path_byte_case(i);
        all[k++] = hf_case_unit_test(&generated[i].c);
    }
    make_long_case(N_PATH_BYTES, "SPIFFE ID of 2048 bytes", 2048, 0);
    make_long_case(N_PATH_BYTES + 1, "SPIFFE ID of 2049 bytes", 2049, 0);
    make_long_case(N_PATH_BYTES + 2, "trust domain of 256 bytes", 0, 1);
    for (size_t i = N_PATH_BYTES; i < N_PATH_BYTES + N_LONG; i++)
        all[k++] = hf_case_unit_test(&generated[i].c);
    *n = k;
    return all;
}

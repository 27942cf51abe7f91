/* config_check.h - what the parts of `hsmca config check` share: the report, one line
 * per problem or warning, each "FILE:LINE: KEY: what" (no LINE when the file does not
 * write the key: its default is in force). */
#ifndef HSMCA_CONFIG_CHECK_H
#define HSMCA_CONFIG_CHECK_H

#include "config.h"
#include "config_lines.h"

typedef struct {
    const char *file; /* the config's path as given: the start of every line */
    const config_lines *lines;
    int problems, warnings;
} cc_report;

/* A problem (serve would refuse it) or a warning (it would start) about key. */
void cc_problem(cc_report *r, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void cc_warn(cc_report *r, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The checks of the files and names serve reads at start (config_files.c): ca.*,
 * pkcs11.*, the policy file, the issuer keys, kubeconfigs, audit.dir, users and groups,
 * the listen address. Each failure is reported; none stops the others. */
void cc_check_ca(const hsmca_config *c, cc_report *r);
void cc_check_pkcs11(const hsmca_config *c, cc_report *r);
void cc_check_auth(const hsmca_config *c, cc_report *r);
void cc_check_system(const hsmca_config *c, cc_report *r);
/* The rotation's keys (config_rot.c): ca.next_*, ca.previous_*. */
void cc_check_rotation(const hsmca_config *c, cc_report *r);

#endif

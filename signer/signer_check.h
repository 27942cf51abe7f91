/* signer_check.h - `hsmca-signer --check --config FILE`, what `hsmca token check` runs:
 * the signer's own start-up path without serving (docs/ARCHITECTURE.md §3.4). */
#ifndef HSMCA_SIGNER_CHECK_H
#define HSMCA_SIGNER_CHECK_H

/* Reads the config and the PIN, loads the module, lists its slots and tokens, reports
 * each configured key's attributes (p11_key_inspect), opens the CA key and the audit key
 * as serve does, checks ca.cert against the CA key, then switches user and enters the
 * signer's sandbox and signs and verifies once with each key inside it. One line per
 * check on stdout ("ok", "FAIL", "WARN", "info", then the config key or attribute to
 * fix), then a verdict: "verdict: serve would start" (exit 0) or "verdict: serve would
 * not start" and the list of what stops it (exit 1); EXIT_CONFIG when the config does
 * not load or signer.user is unusable, as serve. The PIN is tried once: after a refusal
 * nothing logs in again. Nothing is written to the token or to audit.dir. */
int signer_check_main(int argc, char **argv);

#endif

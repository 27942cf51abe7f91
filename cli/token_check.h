/* token_check.h - `hsmca token check` (what `serve` would find in the token, found by
 * the signer program itself) and the dispatch of `hsmca token`, whose `keygen` (the CA
 * key or the audit key made in the token with hsmca's template: a ceremony step) is
 * ca/'s (ca.h: token_keygen). */
#ifndef HSMCA_TOKEN_CHECK_H
#define HSMCA_TOKEN_CHECK_H

/* argv[0] is "token". Exit status: 0 done (check: serve would start), 1 not (check:
 * what stops serve is listed; keygen: the token refused), 2 bad usage, 78 (EXIT_CONFIG)
 * a config that does not load or lacks what the command needs. */
int token_main(int argc, char **argv);

#endif

/* keyfetch.h - the key fetcher child (hsmca-keyfetch): fetches each issuer's discovery
 * document and JWKS over HTTPS, checks them (supervisor/sup_keys.h: sup_oidc, sup_http,
 * tok_jwks_parse), and hands each accepted JWKS to the supervisor over its control
 * channel (CTL_KEYS_CLUSTER(idx), a sealed memfd), which pushes it to the signer and the
 * front end as it pushes a JWKS file's. It runs as frontend.user with no_new_privs (not
 * chrooted: it reads auth.jwt.ca_bundle and fetch_token_file at every fetch, and loads
 * libcurl), holds no secret of the CA's and has no IPC channel to the other children.
 * CTL_KEYS_REFRESH from the supervisor (a child saw an unknown kid, or SIGHUP) fetches
 * again, as soon as auth.jwt.min_refresh allows. */
#ifndef HSMCA_KEYFETCH_H
#define HSMCA_KEYFETCH_H

/* The program: `hsmca-keyfetch --config FILE --ctl-fd N`. Returns its exit status: 0 when
 * the supervisor goes (its channel closes), 2 for a bad command line, EXIT_CONFIG for a
 * config, user or fetcher setup that no restart cures. */
int keyfetch_main(int argc, char **argv);

#endif

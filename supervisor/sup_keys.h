/* sup_keys.h - the holders of the JWT issuer's keys, the supervisor's and the key
 * fetcher's (docs/ARCHITECTURE.md §3.2 "Identity binding": the front end and the signer
 * hold the keys but never fetch them).
 *
 * Source, from the config: auth.jwt.jwks_file, read by the supervisor and re-read when
 * it changes (its device, inode, size or mtime, looked at every SUP_KEYS_FILE_POLL_S);
 * or, with auth.jwt.discovery, in the key fetcher child (keyfetch/), the issuer's
 * OpenID discovery document and its jwks_uri over HTTPS, every auth.jwt.refresh, and
 * sooner when a child asks (at most once per auth.jwt.min_refresh); the supervisor then
 * holds what the fetcher sends (sup_keys_relay). A document is accepted only when
 * tok_jwks_parse accepts it; a failed fetch or a bad document keeps the last good
 * keys (and is logged). Work happens on a thread of its own, so a slow issuer
 * never delays the supervisor's restarts. */
#ifndef HSMCA_SUP_KEYS_H
#define HSMCA_SUP_KEYS_H

#include "config.h"
#include "hsmca_err.h"
#include <stdint.h>

#define SUP_KEYS_FILE_POLL_S 2

typedef struct sup_keys sup_keys;

#define SUP_KEYS_SRC_MAX 2048 /* where a fetched JWKS came from, for messages */

/* Fetches cfg's issuer's JWKS into a new *doc of *len bytes (caller frees), not yet
 * checked, and names where it came from in src; *cancel becoming non-zero aborts. The
 * key fetcher's (keyfetch/kf_fetch.c): the supervisor has none. */
typedef hsmca_code (*sup_keys_fetch_fn)(const hsmca_config *cfg, const volatile int *cancel,
                                        char **doc, size_t *len, char *src, size_t srcsz,
                                        hsmca_err *e);

/* Starts the fetcher for cfg (which must outlive it). A JWKS file is loaded here,
 * before returning, and a missing or bad one is an error (a config error: the
 * caller stops). With discovery the first fetch happens on the thread, with fetch (an
 * error when it is NULL). Without "jwt" in auth.chain nothing is fetched: generation
 * stays 0. For start-up only: a thread that cannot start is fatal (thread_start.h). */
sup_keys *sup_keys_start(const hsmca_config *cfg, sup_keys_fetch_fn fetch, hsmca_err *e);

/* Whether cluster idx's keys (0 local, i + 1 auth.clusters[i]) come from its issuer by
 * discovery: then the key fetcher child (keyfetch/) fetches and parses them, and the
 * supervisor only relays them (sup_keys_relay). */
int sup_keys_from_issuer(const hsmca_config *cfg, int idx);

/* A holder of documents the key fetcher child sends: no thread; nothing read, fetched
 * or parsed here (sup_keys_offer_fd sets the document). NULL with e on ENOMEM. */
sup_keys *sup_keys_relay(hsmca_err *e);

/* The key fetcher's document, in fd: a sealed memfd (the seals that keep its size and
 * bytes fixed) of 1..TOK_JWKS_MAX_LEN bytes, copied, not parsed (the children that use
 * the keys parse them); the same bytes again are no news. HSMCA_EINVAL naming the check
 * for any other fd. The caller keeps fd. For a relay holder. */
HSMCA_MUSTCHECK hsmca_code sup_keys_offer_fd(sup_keys *k, int fd, hsmca_err *e);

/* Increases with every newly accepted document (0: none yet). Thread-safe. */
uint64_t sup_keys_generation(sup_keys *k);

/* Sends the accepted document to a child over its control channel ctl: a sealed
 * memfd after the type byte CTL_KEYS (common/ipc_frame.h). *sent is the generation
 * pushed (0 and nothing sent when there is none yet). */
HSMCA_MUSTCHECK hsmca_code sup_keys_push(sup_keys *k, int ctl, uint64_t *sent, hsmca_err *e);

/* The same with another type byte: CTL_KEYS_CLUSTER(idx) for the fetcher of remote
 * cluster idx (multicluster: one fetcher per cluster, each started with
 * config_cluster_view, since two clusters may share an issuer URL but not its keys). */
HSMCA_MUSTCHECK hsmca_code sup_keys_push_type(sup_keys *k, int ctl, char type, uint64_t *sent,
                                              hsmca_err *e);

/* A child saw a kid it does not know (CTL_KEYS_REFRESH): fetch again, as soon as
 * min_refresh allows. */
void sup_keys_refresh(sup_keys *k);

/* A memfd named name holding doc[0..len), sealed so that the receiver reads exactly what
 * we accepted; -1 with errno on failure. */
int sup_sealed_memfd(const char *name, const char *doc, size_t len);

/* Stops the thread and frees everything. */
void sup_keys_stop(sup_keys *k);

#endif

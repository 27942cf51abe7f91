/* fuzz_common.h - constants shared by the fuzz targets and their seed corpus.
 *
 * The seeds under corpus/ were made for exactly these values (a JWT's iat/exp,
 * a TBS's validity and issuer): change them and regenerate the seeds. */
#ifndef HSMCA_FUZZ_COMMON_H
#define HSMCA_FUZZ_COMMON_H

/* "Now" for every target that checks time: 2023-11-14T22:13:20Z. */
#define FUZZ_NOW ((int64_t)1700000000)

#define FUZZ_JWT_ISS "https://issuer.fuzz.example"
#define FUZZ_JWT_AUD "istio-ca"

#define FUZZ_TRUST_DOMAIN "cluster.local"

/* The audit key of fuzz_note (an Ed25519 seed) and its name: the signed notes in
 * corpus/note/ are signed by it. */
#define FUZZ_AUDIT_SEED "fuzz_note: audit key seed, 32 B"
#define FUZZ_AUDIT_ORIGIN "hsmca.fuzz/audit-log"

#endif

/* profile.h - the certificate profiles: the contract between the front end,
 * which builds TBS certificates, and the signer, which checks every one of them
 * (docs/ARCHITECTURE.md §3.1, §4). Both sides include this file, so they cannot disagree on
 * a profile number or a bound. */
#ifndef HSMCA_PROFILE_H
#define HSMCA_PROFILE_H

/* SignRequest.profile (proto/signer.proto). */
typedef enum {
    PROFILE_WORKLOAD = 1, /* X509-SVID workload leaf: one SPIFFE ID URI SAN */
    PROFILE_SERVING = 2,  /* the front end's own TLS cert: DNS/IP SANs from the config */
} profile_id;

/* notBefore is backdated this much for clock skew between CA and peers. */
#define PROFILE_BACKDATE_S 120
/* The signer accepts notBefore in [now - PAST, now + FUTURE]. */
#define PROFILE_NOT_BEFORE_PAST_S 300
#define PROFILE_NOT_BEFORE_FUTURE_S 60
/* The backdate is inside the TTL (notAfter - notBefore <= max TTL), so a short
 * TTL would give a certificate that is expired or nearly so when issued. */
#define PROFILE_MIN_TTL_S 600
/* An istiod intermediate's notBefore is backdated this much (inside its TTL), so an
 * istiod whose clock lags ours accepts it when it is fetched. */
#define PROFILE_ICA_BACKDATE_S 300

/* Serial numbers: positive, 8..20 octets (RFC 5280 4.1.2.2); the front end
 * draws 128 random bits. */
#define PROFILE_SERIAL_MIN 8
#define PROFILE_SERIAL_MAX 20

/* Subject RSA keys: modulus bits, and an odd public exponent in [min, max] (what Go's
 * crypto/x509 and BoringSSL accept). The front end refuses what the signer would, so
 * an honest request never reaches the signer's refusal (a deny entry there means a
 * front end that misbehaves). */
#define PROFILE_RSA_BITS_MIN 2048
#define PROFILE_RSA_BITS_MAX 8192
#define PROFILE_RSA_E_MIN 65537u
#define PROFILE_RSA_E_MAX 2147483647u /* 2^31 - 1 */

/* Largest TBS the signer reads, and most SANs a serving certificate holds. */
#define PROFILE_TBS_MAX 16384
#define PROFILE_MAX_NAMES 32

/* SignRequest string fields, checked before unpacking. */
#define PROFILE_REQUESTER_MAX 2048 /* a SPIFFE ID is at most 2048 bytes */

#endif

/* sigalg.h - the CA signature algorithms, in one table: how each is encoded in a
 * certificate, which digest it signs and which PKCS#11 mechanism makes it. The
 * front end (inner algorithm of the TBS), the signer (the check of it, the
 * digest, the verify before release, the outer algorithm) and the PKCS#11 layer
 * all read this table, so a key type maps to one algorithm everywhere. */
#ifndef HSMCA_SIGALG_H
#define HSMCA_SIGALG_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>

/* PKCS#11 mechanisms, by value (common/ does not include the PKCS#11 headers;
 * pkcs11/ checks these against its own at compile time). */
#define SIGALG_CKM_RSA_PKCS 0x00000001UL
#define SIGALG_CKM_ECDSA 0x00001041UL

typedef struct {
    const char *name;             /* "ecdsa-with-SHA256" */
    int nid;                      /* NID_ecdsa_with_SHA256 */
    int key_type;                 /* EVP_PKEY_EC or EVP_PKEY_RSA */
    int curve_nid;                /* EC: the CA key's curve; RSA: NID_undef */
    const uint8_t *alg_der;       /* the AlgorithmIdentifier, exact DER */
    size_t alg_der_len;
    const char *digest;           /* OpenSSL digest name, "SHA256" */
    size_t digest_len;            /* 32 or 48 */
    const uint8_t *digest_info;   /* RSA: DigestInfo prefix the token signs; ECDSA: NULL */
    size_t digest_info_len;
    unsigned long mechanism;      /* SIGALG_CKM_* */
} sigalg;

/* The algorithm a CA key signs with (EC P-256: ECDSA-SHA256, EC P-384:
 * ECDSA-SHA384, RSA: SHA256-RSA PKCS#1 v1.5), or NULL for any other key. */
const sigalg *sigalg_for_key(const EVP_PKEY *key);

/* A key's type as the signing log names it: "ec-prime256v1", "rsa-2048", "ed25519"
 * ("type-N" for any other). */
void sigalg_key_type(const EVP_PKEY *k, char *out, size_t cap);

/* The table row of an algorithm NID, or NULL when we do not sign with it. */
const sigalg *sigalg_by_nid(int nid);

/* The digest of data[0..len) with alg's digest into out (alg->digest_len
 * bytes). Returns 1 on success. The EVP_MD is fetched once per process. */
int sigalg_digest(const sigalg *alg, const uint8_t *data, size_t len, uint8_t *out);

/* 1 when sig is alg's signature by pub over digest (alg->digest_len bytes). */
int sigalg_verify_digest(const sigalg *alg, EVP_PKEY *pub, const uint8_t *digest,
                         const uint8_t *sig, size_t sig_len);

#endif

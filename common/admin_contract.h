/* admin_contract.h - the admin socket's protocol, one definition for the signer
 * (signer/signer_admin.c) and its client (cli/admin_cmd.c).
 *
 * A unix SOCK_SEQPACKET socket (admin.socket): one packet is one message, a JSON object of
 * at most ADMIN_MAX_MSG bytes. The client sends one request {"op": NAME, ...} and reads
 * one reply, {"ok": true, ...} or {"ok": false, "error": TEXT}; then the signer closes the
 * connection. Ops: status, ica-request (csr: PEM, cluster, ttl_s), ica-renew-proof (id,
 * proof: base64, audit/audit_ica_renew.h), ica-list, ica-show
 * (id), ica-approve (id), ica-deny (id, reason), ica-fetch (id), ca-revoke (serial: lowercase
 * hex, reason: an RFC 5280 name, force_unknown: bool), ca-revoke-identity (identity: a SPIFFE
 * ID, or namespace: one of issuance.trust_domain; reason; until: unix seconds, 0 or absent:
 * until lifted; or lift: true), crl-get (the CA's current CRL). */
#ifndef HSMCA_ADMIN_CONTRACT_H
#define HSMCA_ADMIN_CONTRACT_H

#define ADMIN_MAX_MSG 65536   /* bytes of one request or reply */
#define ADMIN_MAX_CONNS 8     /* connections the signer holds at once; more wait in the backlog */
#define ADMIN_TIMEOUT_S 10    /* a connection that sends no request by then is closed */
#define ADMIN_MAX_CSR 16384   /* bytes of a CSR's PEM */
#define ADMIN_MAX_REASON 1024 /* bytes of a denial's reason */

#endif

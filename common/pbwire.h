/* pbwire.h - the protobuf wire format's base-128 varint, read one way by every process
 * that walks protobuf bytes before protobuf-c sees them: the signer's wire check of the
 * IPC (signer/signer_request.c) and the front end's walk of an Istio request's metadata
 * Struct (frontend/fe_pbcheck.c).
 *
 * Strict: a varint must be in its shortest form. protobuf-c 1.4.1 accepts some longer
 * spellings (a length prefix padded with 0x80 bytes, up to 5 of them), so a check that
 * admitted every spelling could disagree with the parser after it about where a field
 * ends; refusing them leaves one spelling per value. No valid client is refused: every
 * encoder Istio's clients use (Go protobuf in istio-agent, prost in ztunnel, gRPC's C++
 * and protobuf-c itself in the front end) sizes a message before writing it and writes
 * each varint in its shortest form, negative int32 values included (ten bytes, which is
 * their shortest form). */
#ifndef HSMCA_PBWIRE_H
#define HSMCA_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

/* Wire types (protobuf encoding guide). */
enum { PBWIRE_VARINT = 0, PBWIRE_I64 = 1, PBWIRE_LEN = 2, PBWIRE_I32 = 5 };

/* Reads the varint at p[*off..end) into *v and moves *off past it. 1 on success; 0 when
 * it runs past end, is longer than its shortest form (a last byte of 0 after the first),
 * or exceeds 2^64 - 1 (*off and *v are then unspecified). */
int pbwire_varint(const uint8_t *p, size_t end, size_t *off, uint64_t *v);

#endif

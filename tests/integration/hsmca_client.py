#!/usr/bin/python3
"""A small Istio CA client: CSR in, certificate chain out, over gRPC + TLS.

Used by the integration tests and by hand (see `hsmca dev`'s banner):
  /usr/bin/python3 hsmca_client.py --addr localhost:15012 --root DIR/root-cert.pem \
      --token "$TOKEN" --id spiffe://cluster.local/ns/default/sa/sleep
and, to renew with the certificate it printed (saved with its key) and no token:
  /usr/bin/python3 hsmca_client.py --root DIR/root-cert.pem --cert cert.pem \
      --cert-key key.pem --id spiffe://cluster.local/ns/default/sa/sleep

It speaks the wire format of istio.v1.auth.IstioCertificateService directly
(the request is three fields), so tests can also send malformed requests.
Needs Debian's python3-grpcio and python3-cryptography (/usr/bin/python3).
"""
import argparse
import sys

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

METHOD = "/istio.v1.auth.IstioCertificateService/CreateCertificate"


def _varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_request(csr_pem, validity=0, metadata=None):
    """IstioCertificateRequest: csr = 1 (string), validity_duration = 3, metadata = 4."""
    body = b"\x0a" + _varint(len(csr_pem)) + csr_pem
    if validity:
        body += b"\x18" + _varint(validity)
    if metadata is not None:
        body += b"\x22" + _varint(len(metadata)) + metadata
    return body


def decode_response(data):
    """IstioCertificateResponse: repeated string cert_chain = 1."""
    chain, i = [], 0
    while i < len(data):
        tag = data[i]
        i += 1
        if tag != 0x0A:
            raise ValueError("unexpected field tag %d" % tag)
        n, shift = 0, 0
        while True:
            b = data[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        chain.append(data[i:i + n].decode())
        i += n
    return chain


def make_key(kind="ec-p256"):
    if kind == "rsa-2048":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if kind == "rsa-1024":
        return rsa.generate_private_key(public_exponent=65537, key_size=1024)
    return ec.generate_private_key(ec.SECP256R1())


def make_csr(key, uris=(), dns=(), org=None):
    sans = [x509.UniformResourceIdentifier(u) for u in uris] + [x509.DNSName(d) for d in dns]
    b = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def key_pem(key):
    """The private key as unencrypted PKCS#8 PEM (bytes), for a TLS client certificate."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class Client:
    def __init__(self, addr, root_pem, cert_pem=None, key_pem=None):
        """cert_pem and key_pem (bytes): a client certificate (chain) and its key to
        present in the TLS handshake, as istio-agent does when it renews."""
        creds = grpc.ssl_channel_credentials(root_certificates=root_pem, private_key=key_pem,
                                             certificate_chain=cert_pem)
        self.channel = grpc.secure_channel(
            addr, creds, options=[("grpc.ssl_target_name_override", "localhost"),
                                  ("grpc.max_send_message_length", 1 << 22)])
        self.call = self.channel.unary_unary(METHOD)  # raw bytes in and out

    def create_raw(self, body, token=None, timeout=20):
        md = [("authorization", "Bearer " + token)] if token is not None else []
        return decode_response(self.call(body, metadata=md, timeout=timeout))

    def create(self, csr_pem, token, validity=0, timeout=20):
        return self.create_raw(encode_request(csr_pem, validity), token, timeout)

    def close(self):
        self.channel.close()


def main():
    ap = argparse.ArgumentParser(description="Request a workload certificate from hsmca.")
    ap.add_argument("--addr", default="localhost:15012")
    ap.add_argument("--root", required=True, help="root CA bundle (PEM) to trust")
    ap.add_argument("--token", help="bearer JWT (hsmca dev token)")
    ap.add_argument("--cert", help="client certificate chain (PEM) to renew with, no token")
    ap.add_argument("--cert-key", help="the client certificate's private key (PEM)")
    ap.add_argument("--id", required=True, help="SPIFFE ID to put in the CSR")
    ap.add_argument("--key", default="ec-p256", choices=["ec-p256", "rsa-2048"])
    ap.add_argument("--ttl", type=int, default=0, help="requested validity, seconds")
    a = ap.parse_args()
    if not a.token and not (a.cert and a.cert_key):
        ap.error("give --token, or --cert and --cert-key")
    with open(a.root, "rb") as f:
        root = f.read()
    cert = key = None
    if a.cert:
        with open(a.cert, "rb") as f:
            cert = f.read()
        with open(a.cert_key, "rb") as f:
            key = f.read()
    c = Client(a.addr, root, cert, key)
    try:
        chain = c.create(make_csr(make_key(a.key), uris=[a.id]), a.token, a.ttl)
    except grpc.RpcError as e:
        print("error: %s: %s" % (e.code().name, e.details()), file=sys.stderr)
        return 1
    sys.stdout.write("".join(chain))
    leaf = x509.load_pem_x509_certificate(chain[0].encode())
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    print("issued: serial %x, %s, valid until %s" % (
        leaf.serial_number, ", ".join(u for u in san.get_values_for_type(
            x509.UniformResourceIdentifier)), leaf.not_valid_after), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

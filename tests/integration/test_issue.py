#!/usr/bin/python3
"""End to end: a real `hsmca dev` (SoftHSM token, signer, sandboxed front end) and a
real gRPC client over TLS. Every refusal gets its status and names the failed check,
and the server keeps issuing after each one. Runs for an EC P-256 and an RSA-2048 CA."""
import base64
import datetime
import json
import os
import signal
import ssl
import subprocess
import tempfile
import time
import unittest

import grpc
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

import hsmca_client as hc
from hsmca_harness import BIN, DevServer

SLEEP_ID = "spiffe://cluster.local/ns/default/sa/sleep"
DEV_ISSUER = "https://hsmca.dev.local"


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class IssueTests:
    CA_KEY = None
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = DevServer(cls.CA_KEY, name="issue-" + cls.CA_KEY)
        cls.server.wait_ready()
        with open(os.path.join(cls.server.dir, "dev-jwt-key.pem"), "rb") as f:
            cls.jwt_key = serialization.load_pem_private_key(f.read(), None)
        with open(os.path.join(cls.server.dir, "dev-jwks.json")) as f:
            cls.kid = json.load(f)["keys"][0]["kid"]

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    # --- helpers -------------------------------------------------------------
    def claims(self, **over):
        now = int(time.time())
        c = {"iss": DEV_ISSUER, "aud": ["istio-ca"], "iat": now, "nbf": now, "exp": now + 600,
             "sub": "system:serviceaccount:default:sleep",
             "kubernetes.io": {"namespace": "default", "serviceaccount": {"name": "sleep"}}}
        c.update(over)
        return c

    def signed(self, claims):
        return jwt.encode(claims, self.jwt_key, algorithm="ES256", headers={"kid": self.kid})

    def csr(self, key="ec-p256", uri=SLEEP_ID):
        return hc.make_csr(hc.make_key(key), uris=[uri])

    def refused(self, code, fragment, body=None, token="valid"):
        if token == "valid":
            token = self.server.token()
        with self.assertRaises(grpc.RpcError) as cm:
            self.server.client.create_raw(body if body is not None else hc.encode_request(self.csr()),
                                          token)
        err = cm.exception
        self.assertEqual(err.code(), code, err.details())
        self.assertIn(fragment, err.details())
        # The server keeps serving after every refusal.
        self.assertEqual(len(self.server.issue()), 2)
        return err.details()

    def check_leaf(self, chain, ttl):
        self.assertEqual(len(chain), 2)
        for pem in chain:
            self.assertTrue(pem.endswith("\n"))
        self.assertEqual(chain[1].encode(), self.server.root if self.server.root.endswith(b"\n")
                         else self.server.root + b"\n")
        leaf = x509.load_pem_x509_certificate(chain[0].encode())
        self.assertEqual(len(leaf.subject), 0)
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        self.assertTrue(san.critical)
        self.assertEqual(san.value.get_values_for_type(x509.UniformResourceIdentifier), [SLEEP_ID])
        bc = leaf.extensions.get_extension_for_class(x509.BasicConstraints)
        self.assertTrue(bc.critical)
        self.assertFalse(bc.value.ca)
        ku = leaf.extensions.get_extension_for_class(x509.KeyUsage).value
        # One usage per key type (RFC 8813 3): keyEncipherment on RSA keys only.
        rsa_key = isinstance(leaf.public_key(), rsa.RSAPublicKey)
        self.assertTrue(ku.digital_signature)
        self.assertEqual(ku.key_encipherment, rsa_key)
        self.assertFalse(ku.key_cert_sign)
        eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        self.assertEqual(set(eku), {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH})
        root = x509.load_pem_x509_certificate(self.server.root)
        aki = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
        ski = root.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        self.assertEqual(aki.key_identifier, ski.digest)
        self.assertGreaterEqual(leaf.serial_number.bit_length(), 64)
        self.assertLessEqual(leaf.serial_number.bit_length(), 128)
        now = datetime.datetime.utcnow()
        nb, na = leaf.not_valid_before, leaf.not_valid_after
        self.assertLess(abs((now - nb).total_seconds() - 120), 30)
        self.assertEqual((na - nb).total_seconds(), ttl)  # the 2 min backdate is part of it
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "leaf.pem"), "w").write(chain[0])
            r = subprocess.run(["openssl", "verify", "-CAfile",
                                os.path.join(self.server.dir, "root-cert.pem"),
                                os.path.join(d, "leaf.pem")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    # --- issuance ------------------------------------------------------------
    def test_ec_p256_csr(self):
        self.check_leaf(self.server.client.create(self.csr("ec-p256"), self.server.token()), 86400)

    def test_rsa_2048_csr(self):
        self.check_leaf(self.server.client.create(self.csr("rsa-2048"), self.server.token()), 86400)

    def test_requested_ttl(self):
        self.check_leaf(self.server.client.create(self.csr(), self.server.token(), 3600), 3600)

    # --- refusals ------------------------------------------------------------
    def test_ttl_over_max(self):
        self.refused(grpc.StatusCode.PERMISSION_DENIED, "TTL",
                     hc.encode_request(self.csr(), validity=2 * 86400))

    def test_ttl_below_min(self):
        self.refused(grpc.StatusCode.PERMISSION_DENIED, "below the minimum",
                     hc.encode_request(self.csr(), validity=60))

    def test_wrong_service_account(self):
        self.refused(grpc.StatusCode.PERMISSION_DENIED, "SAN policy",
                     hc.encode_request(self.csr(uri="spiffe://cluster.local/ns/default/sa/admin")))

    def test_dns_san_refused(self):
        csr = hc.make_csr(hc.make_key(), uris=[SLEEP_ID], dns=["evil.example.com"])
        self.refused(grpc.StatusCode.PERMISSION_DENIED, "SAN policy", hc.encode_request(csr))

    def test_missing_token(self):
        self.refused(grpc.StatusCode.UNAUTHENTICATED, "authorization", token=None)

    def test_expired_token(self):
        t = self.signed(self.claims(exp=int(time.time()) - 3600, iat=int(time.time()) - 7200,
                                    nbf=int(time.time()) - 7200))
        self.refused(grpc.StatusCode.UNAUTHENTICATED, "expired", token=t)

    def test_wrong_audience(self):
        self.refused(grpc.StatusCode.UNAUTHENTICATED, "aud",
                     token=self.server.token(aud="someone-else"))

    def test_wrong_issuer(self):
        self.refused(grpc.StatusCode.UNAUTHENTICATED, "iss",
                     token=self.signed(self.claims(iss="https://evil.example")))

    def test_alg_none(self):
        h = b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode())
        p = b64url(json.dumps(self.claims()).encode())
        self.refused(grpc.StatusCode.UNAUTHENTICATED, "alg", token=h + "." + p + ".")

    def test_hs256(self):
        with open(os.path.join(self.server.dir, "dev-jwks.json"), "rb") as f:
            secret = f.read()
        h = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": self.kid}).encode())
        p = b64url(json.dumps(self.claims()).encode())
        import hmac, hashlib
        sig = b64url(hmac.new(secret, (h + "." + p).encode(), hashlib.sha256).digest())
        self.refused(grpc.StatusCode.UNAUTHENTICATED, "alg", token=h + "." + p + "." + sig)

    def test_tampered_token(self):
        t = self.server.token()
        h, p, s = t.split(".")
        forged = b64url(json.dumps(self.claims(sub="system:serviceaccount:kube-system:admin",
                                               **{"kubernetes.io": {"namespace": "kube-system",
                                                   "serviceaccount": {"name": "admin"}}})).encode())
        self.refused(grpc.StatusCode.UNAUTHENTICATED, "signature", token=h + "." + forged + "." + s)

    def test_garbage_csr(self):
        self.refused(grpc.StatusCode.INVALID_ARGUMENT, "CSR",
                     hc.encode_request(b"-----BEGIN CERTIFICATE REQUEST-----\nnot base64\n"
                                       b"-----END CERTIFICATE REQUEST-----\n"))

    def test_broken_csr_signature(self):
        key = hc.make_key()
        csr = x509.load_pem_x509_csr(hc.make_csr(key, uris=[SLEEP_ID]))
        der = bytearray(csr.public_bytes(serialization.Encoding.DER))
        der[-5] ^= 0x01  # inside the signature BIT STRING
        pem = (b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(bytes(der)) +
               b"-----END CERTIFICATE REQUEST-----\n")
        self.refused(grpc.StatusCode.INVALID_ARGUMENT, "signature", hc.encode_request(pem))

    def test_oversized_request(self):
        self.refused(grpc.StatusCode.INVALID_ARGUMENT, "exceeds",
                     hc.encode_request(b"A" * 100000))

    def test_far_oversized_request(self):
        # Past twice the cap gRPC itself refuses the message before we see it.
        self.refused(grpc.StatusCode.RESOURCE_EXHAUSTED, "",
                     hc.encode_request(b"A" * 2000000))

    def test_deep_metadata(self):
        # google.protobuf.Struct nested 100 deep: {"a": {"a": {...}}}
        inner = b""
        for _ in range(100):
            value = b"\x2a" + hc._varint(len(inner)) + inner          # Value.struct_value = 5
            entry = b"\x0a\x01a" + b"\x12" + hc._varint(len(value)) + value  # key = 1, value = 2
            inner = b"\x0a" + hc._varint(len(entry)) + entry          # Struct.fields = 1
        self.refused(grpc.StatusCode.INVALID_ARGUMENT, "nesting",
                     hc.encode_request(self.csr(), metadata=inner))

    def test_shallow_metadata_accepted(self):
        value = b"\x1a\x02v1"  # Value.string_value = 3
        entry = b"\x0a\x09ClusterID" + b"\x12" + hc._varint(len(value)) + value
        md = b"\x0a" + hc._varint(len(entry)) + entry
        chain = self.server.client.create_raw(hc.encode_request(self.csr(), metadata=md),
                                              self.server.token())
        self.assertEqual(len(chain), 2)

    def test_unknown_method(self):
        call = self.server.client.channel.unary_unary("/istio.v1.auth.IstioCertificateService/Nope")
        with self.assertRaises(grpc.RpcError) as cm:
            call(b"", timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)


class EcCaTests(IssueTests, unittest.TestCase):
    CA_KEY = "ec-p256"


class RsaCaTests(IssueTests, unittest.TestCase):
    CA_KEY = "rsa-2048"


class CaExpiresFirst(unittest.TestCase):
    """A CA certificate that expires before the requested TTL runs out (a root re-made
    with `ca init --ttl 1d` on the same key, issuance.max_ttl and server.serving_cert_ttl
    48h): the workload leaf's notAfter and the front end's serving certificate's are the
    CA certificate's, cut by the front end as istiod does (the signer would refuse more)."""

    @classmethod
    def setUpClass(cls):
        cls.server = DevServer(name="issue-ca-end", server_settings=["serving_cert_ttl: 48h"],
                               edit_config=lambda t: t.replace("  max_ttl: 24h\n",
                                                               "  max_ttl: 48h\n", 1))
        try:
            cls.server.wait_ready()
            cls.server.proc.send_signal(signal.SIGTERM)
            cls.server.proc.wait(15)
            subprocess.run([BIN, "ca", "init", "--config", os.path.join(cls.server.dir, "hsmca.yaml"),
                            "--self-signed", "--ttl", "1d", "--existing-key", "--force",
                            "--subject", "/O=hsmca test/CN=Short-lived Root"],
                           check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            cls.server.restart_supervisor()
            cls.server.client.close()
            cls.server.wait_ready()
        except BaseException:
            cls.server.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_not_after_is_the_cas(self):
        ca = x509.load_pem_x509_certificate(self.server.root)
        self.assertEqual(ca.subject.rfc4514_string(), "CN=Short-lived Root,O=hsmca test")
        chain = self.server.issue(ttl=48 * 3600)
        leaf = x509.load_pem_x509_certificate(chain[0].encode())
        self.assertEqual(leaf.not_valid_after, ca.not_valid_after)
        self.assertLess(leaf.not_valid_before, ca.not_valid_after)
        host, port = self.server.addr.rsplit(":", 1)
        serving = x509.load_pem_x509_certificate(
            ssl.get_server_certificate(("127.0.0.1", int(port))).encode())
        self.assertEqual(serving.issuer, ca.subject)
        self.assertEqual(serving.not_valid_after, ca.not_valid_after)


if __name__ == "__main__":
    unittest.main(verbosity=2)

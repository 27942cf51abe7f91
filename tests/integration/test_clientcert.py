#!/usr/bin/python3
"""Renewal by client certificate (issue 7 item 3, Istio's renewal path): the TLS port
requests but does not require a client certificate; a certificate this CA issued
authenticates a call that has no token, and the new certificate carries exactly the
old identity. A certificate of another CA (even one copying our CA's name and key
identifier), an expired certificate of ours, and a call with neither certificate nor
token are refused with UNAUTHENTICATED and the reason; token callers are unaffected,
also when they present a certificate that would be refused. IntermediateCaTests runs
the production layout (the CA an intermediate under an offline root): renewal with the
presented chain or the leaf alone, and a sibling CA's leaf under the same root refused."""
import datetime
import hashlib
import os
import re
import subprocess
import tempfile
import unittest

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import hsmca_client as hc
from hsmca_harness import BIN, DevServer
from test_audit_log import read_log, wait_log

ID = "spiffe://cluster.local/ns/default/sa/sleep"
SOFTHSM = "/usr/lib/softhsm/libsofthsm2.so"
# AlgorithmIdentifier ecdsa-with-SHA256 (RFC 5758 §3.2: no parameters).
ECDSA_SHA256 = bytes.fromhex("300a06082a8648ce3d040302")


def uris(cert):
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.UniformResourceIdentifier)


def der_len(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def leaf_builder(issuer, subject_key, uri, not_before, not_after, issuer_ski=None, sans=None):
    """A workload leaf as this CA issues them (X509-SVID), with the given window;
    sans replaces the one URI SAN."""
    b = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(issuer)
         .public_key(subject_key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(not_before).not_valid_after(not_after)
         .add_extension(x509.SubjectAlternativeName(
             sans or [x509.UniformResourceIdentifier(uri)]), critical=True)
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False,
                                      False), critical=True)
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                               ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if issuer_ski is not None:
        b = b.add_extension(x509.AuthorityKeyIdentifier(issuer_ski, None, None), critical=False)
    return b


class ClientCertTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer(name="clientcert")
        cls.server.wait_ready()
        cls.root = x509.load_pem_x509_certificate(cls.server.root)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def cert_client(self, chain_pem, key):
        c = hc.Client(self.server.addr, self.server.root, chain_pem, hc.key_pem(key))
        self.addCleanup(c.close)
        return c

    def issue_with_token(self, uri=ID):
        key = hc.make_key()
        chain = self.server.client.create(hc.make_csr(key, uris=[uri]), self.server.token())
        return key, chain

    def assert_refused(self, client, code, reason, uri=ID):
        with self.assertRaises(grpc.RpcError) as cm:
            client.create(hc.make_csr(hc.make_key(), uris=[uri]), None)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        self.assertIn(reason, cm.exception.details())
        return cm.exception.details()

    def ca_key_id(self, pin, env):
        out = subprocess.run(["pkcs11-tool", "--module", SOFTHSM, "--login", "--pin", pin,
                              "--list-objects", "--type", "privkey"], env=env,
                             capture_output=True, text=True, timeout=60).stdout
        for block in re.split(r"\n(?=\S)", out):
            if re.search(r"label:\s+ca-key\n", block):
                return re.search(r"ID:\s+([0-9a-f]+)", block).group(1)
        self.fail("no ca-key in the token:\n" + out)

    def sign_in_token(self, data):
        """ECDSA P-256 over SHA-256(data) with the CA key in the token (DER signature):
        a certificate of ours that the server could not be asked for (expired)."""
        with open(os.path.join(self.server.dir, "pin")) as f:
            pin = f.read().strip()
        env = dict(os.environ, SOFTHSM2_CONF=os.path.join(self.server.dir, "softhsm2.conf"))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "in"), "wb") as f:
                f.write(hashlib.sha256(data).digest())  # SoftHSM has no CKM_ECDSA_SHA256
            # By ID: pkcs11-tool 0.23 selecting by --label signs with the wrong key.
            r = subprocess.run(["pkcs11-tool", "--module", SOFTHSM, "--login", "--pin", pin,
                                "--sign", "--mechanism", "ECDSA", "--id", self.ca_key_id(pin, env),
                                "--signature-format", "openssl", "-i", os.path.join(d, "in"),
                                "-o", os.path.join(d, "sig")], env=env, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, "pkcs11-tool --sign: " + r.stderr)
            with open(os.path.join(d, "sig"), "rb") as f:
                return f.read()

    def ours_with_window(self, key, not_before, not_after, sans=None):
        """A leaf for ID (or sans) signed by our CA key, valid in [not_before, not_after]."""
        ski = self.root.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        throwaway = ec.generate_private_key(ec.SECP256R1())
        tbs = leaf_builder(self.root.subject, key, ID, not_before, not_after,
                           ski.digest, sans).sign(throwaway, hashes.SHA256()).tbs_certificate_bytes
        sig = self.sign_in_token(tbs)
        bits = b"\x03" + der_len(len(sig) + 1) + b"\x00" + sig
        body = tbs + ECDSA_SHA256 + bits
        cert = x509.load_der_x509_certificate(b"\x30" + der_len(len(body)) + body)
        # Really ours: our CA key's signature over the TBS.
        self.root.public_key().verify(cert.signature, cert.tbs_certificate_bytes,
                                      ec.ECDSA(hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM)

    def foreign_ca(self):
        """A CA of our CA's name and key identifier, with another key."""
        key = ec.generate_private_key(ec.SECP256R1())
        ski = self.root.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        now = datetime.datetime.utcnow()
        cert = (x509.CertificateBuilder().subject_name(self.root.subject)
                .issuer_name(self.root.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(ski.value, critical=False)
                .sign(key, hashes.SHA256()))
        return key, cert

    def test_renewal_by_certificate_keeps_exactly_the_identity(self):
        key, chain = self.issue_with_token()
        old = x509.load_pem_x509_certificate(chain[0].encode())
        renewer = self.cert_client("".join(chain[:-1]).encode(), key)
        new_key = hc.make_key()
        got = renewer.create(hc.make_csr(new_key, uris=[ID]), None)  # no token
        new = x509.load_pem_x509_certificate(got[0].encode())
        self.assertEqual(uris(new), uris(old))
        self.assertEqual(uris(new), [ID])
        self.assertNotEqual(new.serial_number, old.serial_number)
        self.assertEqual(new.public_key().public_numbers(), new_key.public_key().public_numbers())
        self.assertEqual(new.issuer, self.root.subject)
        self.assertEqual(got[1:], chain[1:])
        # The renewed certificate renews in turn (a workload's whole life without a token).
        again = self.cert_client(got[0].encode(), new_key).create(
            hc.make_csr(hc.make_key(), uris=[ID]), None)
        self.assertEqual(uris(x509.load_pem_x509_certificate(again[0].encode())), [ID])
        # The signing log names the certificate's identity as the requester.
        serial = "%x" % new.serial_number
        intents = [e for e in read_log(self.server)
                   if e["kind"] == "issue-intent" and e["serial"].lstrip("0") == serial]
        self.assertEqual(len(intents), 1)
        self.assertEqual(intents[0]["requester"], ID)

    def test_renewal_cannot_change_the_identity(self):
        key, chain = self.issue_with_token()
        renewer = self.cert_client(chain[0].encode(), key)
        reason = self.assert_refused(renewer, grpc.StatusCode.PERMISSION_DENIED, "SAN",
                                     uri="spiffe://cluster.local/ns/default/sa/admin")
        self.assertNotIn("client certificate", reason)
        entries = wait_log(self.server, lambda es: any(
            e["kind"] == "frontend-deny" and e["authenticator"] == "client_cert"
            and e["code"] == "PERMISSION_DENIED" for e in es))
        deny = [e for e in entries if e["kind"] == "frontend-deny"
                and e["authenticator"] == "client_cert" and e["code"] == "PERMISSION_DENIED"]
        self.assertTrue(deny, entries[-5:])
        self.assertEqual(deny[-1]["requester"], ID)

    def test_certificate_of_another_ca_is_refused(self):
        ca_key, ca = self.foreign_ca()
        ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        key = hc.make_key()
        now = datetime.datetime.utcnow()
        leaf = leaf_builder(ca.subject, key, ID, now - datetime.timedelta(minutes=5),
                            now + datetime.timedelta(hours=1), ski.digest).sign(
                                ca_key, hashes.SHA256())
        pem = leaf.public_bytes(serialization.Encoding.PEM)
        for chain in (pem, pem + ca.public_bytes(serialization.Encoding.PEM)):
            self.assert_refused(self.cert_client(chain, key), grpc.StatusCode.UNAUTHENTICATED,
                                "client certificate: does not verify to our roots")
        entries = wait_log(self.server, lambda es: any(
            e["kind"] == "frontend-deny" and e["authenticator"] == "client_cert"
            and e["code"] == "UNAUTHENTICATED" for e in es))
        deny = [e for e in entries if e["kind"] == "frontend-deny"
                and e["authenticator"] == "client_cert" and e["code"] == "UNAUTHENTICATED"]
        self.assertTrue(deny, entries[-5:])
        self.assertEqual(deny[-1]["requester"], "")  # nobody was authenticated
        self.assertIn("client certificate", deny[-1]["reason"])

    def test_expired_certificate_of_ours_is_refused(self):
        key = hc.make_key()
        now = datetime.datetime.utcnow()
        expired = self.ours_with_window(key, now - datetime.timedelta(hours=2),
                                        now - datetime.timedelta(hours=1))
        self.assert_refused(self.cert_client(expired, key), grpc.StatusCode.UNAUTHENTICATED,
                            "client certificate: does not verify to our roots at depth 0: "
                            "certificate has expired")
        # The same certificate within its window is accepted: time is what refused it.
        valid = self.ours_with_window(key, now - datetime.timedelta(minutes=5),
                                      now + datetime.timedelta(hours=1))
        got = self.cert_client(valid, key).create(hc.make_csr(hc.make_key(), uris=[ID]), None)
        self.assertEqual(uris(x509.load_pem_x509_certificate(got[0].encode())), [ID])

    def test_certificate_of_ours_without_a_uri_identifies_nobody(self):
        """Like the front end's own serving certificate (DNS and IP SANs only)."""
        key = hc.make_key()
        now = datetime.datetime.utcnow()
        pem = self.ours_with_window(key, now - datetime.timedelta(minutes=5),
                                    now + datetime.timedelta(hours=1),
                                    sans=[x509.DNSName("localhost")])
        self.assert_refused(self.cert_client(pem, key), grpc.StatusCode.UNAUTHENTICATED,
                            "client certificate: 0 URI SANs")

    def test_cli_renews_with_what_it_wrote(self):
        """README's commands: `hsmca request --out P`, then `--renew P --out P` (no token)."""
        prefix = os.path.join(self.server.dir, "workload")
        root = os.path.join(self.server.dir, "root-cert.pem")
        base = [BIN, "request", "--addr", self.server.addr, "--root", root, "--id", ID,
                "--out", prefix]
        subprocess.run(base + ["--token", self.server.token()], check=True, capture_output=True,
                       timeout=60)
        with open(prefix + "-chain.pem", "rb") as f:
            first = x509.load_pem_x509_certificate(f.read())
        r = subprocess.run(base + ["--renew", prefix], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(prefix + "-chain.pem", "rb") as f:
            second = x509.load_pem_x509_certificate(f.read())
        self.assertNotEqual(second.serial_number, first.serial_number)
        self.assertEqual(uris(second), [ID])
        # Another identity with that certificate: the policy refuses, by name.
        other = [a if a != ID else "spiffe://cluster.local/ns/default/sa/admin" for a in base]
        r = subprocess.run(other + ["--renew", prefix], capture_output=True, text=True,
                           timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("PERMISSION_DENIED: SAN policy", r.stderr)

    def test_port_requests_a_client_certificate_naming_our_roots(self):
        """The TLS CertificateRequest names the CAs (Go's TLS client, as in istio-agent,
        sends a certificate only when its chain names one); a client without one still
        completes the handshake."""
        r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % self.server.port,
                            "-alpn", "h2", "-servername", "localhost"], input=b"",
                           capture_output=True, timeout=20)
        out = r.stdout.decode(errors="replace")
        self.assertIn("Acceptable client certificate CA names", out)
        names = out.split("Acceptable client certificate CA names", 1)[1].splitlines()[1]
        cn = self.root.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        self.assertIn("CN = " + cn, names)
        self.assertIn("ALPN protocol: h2", out)  # the handshake completed with no certificate

    def test_no_certificate_and_no_token(self):
        self.assert_refused(self.server.client, grpc.StatusCode.UNAUTHENTICATED,
                            "client_cert: no client certificate; jwt: no 'authorization' metadata")

    def test_token_callers_unaffected(self):
        # No client certificate: the port does not require one.
        self.assertEqual(len(self.server.issue()), 2)
        # A token wins over a certificate that would be refused.
        ca_key, ca = self.foreign_ca()
        key = hc.make_key()
        now = datetime.datetime.utcnow()
        leaf = leaf_builder(ca.subject, key, ID, now - datetime.timedelta(hours=2),
                            now - datetime.timedelta(hours=1)).sign(ca_key, hashes.SHA256())
        c = self.cert_client(leaf.public_bytes(serialization.Encoding.PEM), key)
        got = c.create(hc.make_csr(hc.make_key(), uris=[ID]), self.server.token())
        self.assertEqual(uris(x509.load_pem_x509_certificate(got[0].encode())), [ID])
        # The chain (auth.chain, default [client_cert, jwt]) takes the first success, as
        # Istio does: a good certificate with a bad token renews as the certificate's
        # identity; a bad certificate and a bad token are refused naming both.
        okey, chain = self.issue_with_token()
        got = self.cert_client(chain[0].encode(), okey).create(
            hc.make_csr(hc.make_key(), uris=[ID]), "not-a-token")
        self.assertEqual(uris(x509.load_pem_x509_certificate(got[0].encode())), [ID])
        with self.assertRaises(grpc.RpcError) as cm:
            c.create(hc.make_csr(hc.make_key(), uris=[ID]), "not-a-token")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertIn("client_cert: client certificate", cm.exception.details())
        self.assertIn("; jwt: ", cm.exception.details())


class IntermediateServer(DevServer):
    """The production layout: the token's CA key certified as an intermediate under a
    root made here (whose key the test holds, as an offline root's owner would):
    ca.cert the intermediate, ca.chain the intermediate (sent in every cert_chain),
    ca.root_bundle the new root. Returns also a sibling intermediate under the same
    root (another CA the root signed, an istiod's say) with its key."""

    def __init__(self):
        super().__init__(name="clientcert-int", edit_config=self._edit)

    def _edit(self, text):
        with open(os.path.join(self.dir, "root-cert.pem"), "rb") as f:
            dev = x509.load_pem_x509_certificate(f.read())
        now = datetime.datetime.utcnow()
        self.root_key = ec.generate_private_key(ec.SECP256R1())
        root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "offline test root")])
        root = self._ca(root_name, self.root_key.public_key(), root_name, self.root_key, now)
        inter = self._ca(dev.subject, dev.public_key(), root_name, self.root_key, now,
                         dev.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value)
        self.sibling_key = ec.generate_private_key(ec.SECP256R1())
        self.sibling = self._ca(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "istiod")]),
                                self.sibling_key.public_key(), root_name, self.root_key, now)
        for name, cert in (("int-cert.pem", inter), ("test-root.pem", root)):
            with open(os.path.join(self.dir, name), "wb") as f:
                f.write(cert.public_bytes(serialization.Encoding.PEM))
        return text.replace("  cert: root-cert.pem\n  root_bundle: root-cert.pem\n",
                            "  cert: int-cert.pem\n  root_bundle: test-root.pem\n"
                            "  chain: int-cert.pem\n")

    @staticmethod
    def _ca(subject, public_key, issuer, issuer_key, now, ski=None):
        ski = ski or x509.SubjectKeyIdentifier.from_public_key(public_key)
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                .public_key(public_key).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                             False), critical=True)
                .add_extension(ski, critical=False)
                .sign(issuer_key, hashes.SHA256()))

    def wait_ready(self, timeout=90):
        # The client trusts the new root; the harness reads root-cert.pem.
        os.replace(os.path.join(self.dir, "root-cert.pem"),
                   os.path.join(self.dir, "dev-root-cert.pem"))
        os.symlink("test-root.pem", os.path.join(self.dir, "root-cert.pem"))
        return super().wait_ready(timeout)


class IntermediateCaTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = IntermediateServer()
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def client(self, chain_pem, key):
        c = hc.Client(self.server.addr, self.server.root, chain_pem, hc.key_pem(key))
        self.addCleanup(c.close)
        return c

    def test_renewal_through_an_intermediate(self):
        key = hc.make_key()
        chain = self.server.client.create(hc.make_csr(key, uris=[ID]), self.server.token())
        self.assertEqual(len(chain), 3)  # leaf, our intermediate, the root
        # istio-agent presents what it got; a client may also present the leaf alone.
        for presented in ("".join(chain[:2]), chain[0]):
            got = self.client(presented.encode(), key).create(
                hc.make_csr(hc.make_key(), uris=[ID]), None)
            self.assertEqual(uris(x509.load_pem_x509_certificate(got[0].encode())), [ID])

    def test_leaf_of_a_sibling_ca_under_the_same_root_is_refused(self):
        key = hc.make_key()
        now = datetime.datetime.utcnow()
        ski = self.server.sibling.extensions.get_extension_for_class(
            x509.SubjectKeyIdentifier).value
        leaf = leaf_builder(self.server.sibling.subject, key, ID,
                            now - datetime.timedelta(minutes=5), now + datetime.timedelta(hours=1),
                            ski.digest).sign(self.server.sibling_key, hashes.SHA256())
        pems = [c.public_bytes(serialization.Encoding.PEM) for c in (leaf, self.server.sibling)]
        # Even with the sibling in the presented chain (it verifies to our root): the
        # peer's chain is never used, and the issuer must be our CA.
        with self.assertRaises(grpc.RpcError) as cm:
            self.client(b"".join(pems), key).create(hc.make_csr(hc.make_key(), uris=[ID]), None)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertIn("client certificate: does not verify to our roots", cm.exception.details())


if __name__ == "__main__":
    unittest.main(verbosity=2)

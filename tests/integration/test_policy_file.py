#!/usr/bin/python3
"""The SAN policy file (issuance.policy_file) end to end: a real server whose front end
and signer each load the file. A DNS SAN the policy grants to the caller's identity is
in the certificate; one it does not grant is refused PERMISSION_DENIED with the rule in
the status message; and each other rule refuses what it should and only that."""
import datetime
import os
import subprocess
import tempfile
import unittest

import grpc
from cryptography import x509

import hsmca_client as hc
from hsmca_harness import BIN, DevServer, TMP

POLICY = """\
trust_domain_aliases: [old.example]
denied_namespaces: [kube-system]
namespace_max_ttl:
  payments: 1h
dns_names:
  sleep.default: [sleep.example.com, sleep.internal.example]
service_dns: true
key_types:
  rsa_bits: [3072]
  ec_curves: [P-256]
"""


def with_policy(path):
    def edit(text):
        assert "issuance:\n" in text
        return text.replace("issuance:\n", "issuance:\n  policy_file: %s\n" % path, 1)
    return edit


class PolicyFileTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(TMP, exist_ok=True)
        fd, cls.policy_path = tempfile.mkstemp(prefix="policy.", suffix=".yaml", dir=TMP)
        with os.fdopen(fd, "w") as f:
            f.write(POLICY)
        cls.server = DevServer("ec-p256", name="policy", edit_config=with_policy(cls.policy_path))
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        os.unlink(cls.policy_path)

    def create(self, ns="default", sa="sleep", dns=(), key="ec-p256", ttl=0, uri=None):
        k = hc.make_key(key)
        uri = uri or "spiffe://cluster.local/ns/%s/sa/%s" % (ns, sa)
        csr = hc.make_csr(k, uris=[uri], dns=dns)
        chain = self.server.client.create(csr, self.server.token(ns, sa), ttl)
        return x509.load_pem_x509_certificate(chain[0].encode())

    def refused(self, fragment, **kw):
        with self.assertRaises(grpc.RpcError) as cm:
            self.create(**kw)
        err = cm.exception
        self.assertEqual(err.code(), grpc.StatusCode.PERMISSION_DENIED, err.details())
        self.assertIn(fragment, err.details())
        print("refused: %s" % err.details())
        return err.details()

    @staticmethod
    def sans(leaf):
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return (san.get_values_for_type(x509.UniformResourceIdentifier),
                san.get_values_for_type(x509.DNSName))

    def test_granted_dns_sans_end_to_end(self):
        leaf = self.create(dns=["sleep.example.com", "sleep.internal.example"])
        uris, names = self.sans(leaf)
        self.assertEqual(uris, ["spiffe://cluster.local/ns/default/sa/sleep"])
        self.assertEqual(names, ["sleep.example.com", "sleep.internal.example"])
        leaf = self.create(dns=["web.default.svc", "web.default.svc.cluster.local"])
        self.assertEqual(self.sans(leaf)[1], ["web.default.svc", "web.default.svc.cluster.local"])
        # No DNS SAN asked for: none given.
        self.assertEqual(self.sans(self.create())[1], [])

    def test_dns_san_not_granted_refused_with_the_rule(self):
        self.refused("policy rule dns_names: DNS SAN 'evil.example.com' is not granted to "
                     "sleep.default", dns=["evil.example.com"])
        # A granted name next to one that is not: the whole request is refused.
        self.refused("policy rule dns_names: DNS SAN 'evil.example.com'",
                     dns=["sleep.example.com", "evil.example.com"])
        # Another account of the namespace does not get sleep's names.
        self.refused("policy rule dns_names: DNS SAN 'sleep.example.com' is not granted to "
                     "admin.default", sa="admin", dns=["sleep.example.com"])
        self.refused("policy rule dns_names: DNS SAN 'web.payments.svc'", dns=["web.payments.svc"])
        self.create()

    def test_denied_namespace(self):
        self.refused("policy rule denied_namespaces: namespace 'kube-system' may not receive "
                     "certificates", ns="kube-system", sa="default")
        self.create(ns="kube-public", sa="default")

    def test_namespace_max_ttl(self):
        self.refused("policy rule namespace_max_ttl: requested 7200s exceeds 3600s for "
                     "namespace 'payments'", ns="payments", sa="api", ttl=7200)
        leaf = self.create(ns="payments", sa="api")  # the default TTL, capped
        self.assertEqual(leaf.not_valid_after - leaf.not_valid_before,
                         datetime.timedelta(seconds=3600))
        leaf = self.create(ns="default", sa="api", ttl=7200)  # other namespaces: uncapped
        self.assertEqual(leaf.not_valid_after - leaf.not_valid_before,
                         datetime.timedelta(seconds=7200))

    def test_key_types(self):
        self.refused("policy rule key_types: RSA-2048 keys are not allowed", key="rsa-2048")

    def test_trust_domain_alias(self):
        # A CSR asking for the alias form of the caller's identity matches (Istio's
        # ExpandWithTrustDomains); the certificate carries the caller's identity.
        leaf = self.create(uri="spiffe://old.example/ns/default/sa/sleep")
        self.assertEqual(self.sans(leaf)[0], ["spiffe://cluster.local/ns/default/sa/sleep"])
        self.refused("SAN policy: CSR asks for spiffe://evil.example/ns/default/sa/sleep",
                     uri="spiffe://evil.example/ns/default/sa/sleep")

    def test_both_processes_loaded_the_file(self):
        with open(self.server.log_path, "rb") as f:
            lines = [l for l in f.read().decode(errors="replace").splitlines()
                     if "policy file loaded" in l]
        self.assertTrue(any('"frontend"' in l or "frontend" in l for l in lines), lines)
        self.assertGreaterEqual(len(lines), 2, lines)


class BadPolicyFileTests(unittest.TestCase):
    def test_serve_refuses_a_bad_policy_file_naming_file_line_and_key(self):
        os.makedirs(TMP, exist_ok=True)
        d = tempfile.mkdtemp(prefix="badpolicy.", dir=TMP)
        subprocess.run([BIN, "dev", "init", "--dir", d], check=True, capture_output=True)
        with open(os.path.join(d, "policy.yaml"), "w") as f:
            f.write("dns_names:\n  sleep.default: ['*.example.com']\n")
        config = os.path.join(d, "hsmca.yaml")
        with open(config) as f:
            text = f.read()
        with open(config, "w") as f:
            f.write(with_policy("policy.yaml")(text))
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        r = subprocess.run([BIN, "serve", "--config", config], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL, env=env)
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 78, out)
        self.assertIn("policy.yaml:2: key 'dns_names': '*.example.com' is not a lowercase DNS "
                      "name", out)
        self.assertNotIn('"msg":"child started","role":"signer"', out)


if __name__ == "__main__":
    unittest.main(verbosity=2)

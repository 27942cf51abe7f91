#!/usr/bin/python3
"""What a revocation stops, on a real `hsmca dev` (SoftHSM, its admin socket and CRL):

(a) a workload certificate revoked by serial no longer renews itself: `hsmca request
    --renew` with it is refused with PERMISSION_DENIED naming the revocation, and the
    signer's deny entry records it; a certificate not revoked still renews;
(b) `ca revoke --reason unspecified` lists the serial in the CRL without a reasonCode
    extension (RFC 5280 §5.3.1), keyCompromise with one;
(c) `ca revoke --identity ID` revokes every unexpired certificate of ID in the log (the
    CRL lists them), refuses new certificates for ID by token and by certificate while
    another identity is served; `--lift` ends it; `--until` in the past is refused, in the
    future reported; after a restart of the signer the revocation still holds;
(d) `ca revoke --namespace NS` refuses every identity of NS, not another namespace's;
(e) `hsmca audit verify` passes on the log all this wrote."""
import os
import re
import subprocess
import time
import unittest

import grpc
from cryptography import x509

import hsmca_client as hc
from hsmca_harness import BIN, DevServer
from test_audit_log import read_log, wait_log

ID = "spiffe://cluster.local/ns/default/sa/sleep"


def run(*args, timeout=60):
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=timeout)


class RevokeTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = DevServer(name="revoke")
        cls.srv.wait_ready()
        cls.config = os.path.join(cls.srv.dir, "hsmca.yaml")
        cls.rootf = os.path.join(cls.srv.dir, "root-cert.pem")
        cls.crl = os.path.join(cls.srv.dir, "crl", "ca-crl.pem")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def request(self, prefix, sa="sleep", ns="default", renew=False):
        ident = "spiffe://cluster.local/ns/%s/sa/%s" % (ns, sa)
        args = ["request", "--addr", self.srv.addr, "--root", self.rootf, "--id", ident,
                "--out", prefix]
        args += ["--renew", prefix] if renew else ["--token", self.srv.token(ns, sa)]
        return run(*args)

    def serial_of(self, prefix):
        with open(prefix + "-chain.pem", "rb") as f:
            return "%x" % x509.load_pem_x509_certificate(f.read()).serial_number

    def revoke(self, *args):
        return run("ca", "revoke", "--config", self.config, *args)

    def crl_text(self):
        return subprocess.run(["openssl", "crl", "-in", self.crl, "-noout", "-text"],
                              capture_output=True, text=True, check=True).stdout

    def crl_serials(self):
        return [s.lower() for s in re.findall(r"Serial Number: ([0-9A-F]+)", self.crl_text())]

    def token_refused(self, ns="default", sa="sleep"):
        with self.assertRaises(grpc.RpcError) as cm:
            self.srv.issue(ns=ns, sa=sa)
        return cm.exception

    def test_a_revoked_leaf_does_not_renew(self):
        prefix = os.path.join(self.srv.dir, "leaf-a")
        r = self.request(prefix, sa="renewer")
        self.assertEqual(r.returncode, 0, r.stderr)
        serial = self.serial_of(prefix)
        r = self.request(prefix, sa="renewer", renew=True)  # renews while not revoked
        self.assertEqual(r.returncode, 0, r.stderr)
        renewed = self.serial_of(prefix)
        self.assertNotEqual(renewed, serial)
        r = self.revoke(renewed, "--reason", "keyCompromise")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.request(prefix, sa="renewer", renew=True)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("PERMISSION_DENIED", r.stderr)
        self.assertIn("client certificate serial %s: revoked (keyCompromise)" %
                      renewed.rjust(len(renewed) + len(renewed) % 2, "0"), r.stderr)
        self.assertEqual(self.serial_of(prefix), renewed)  # nothing new was written
        entries = wait_log(self.srv, lambda es: any(
            e["kind"] == "deny" and "revoked (keyCompromise)" in e["reason"] for e in es))
        denies = [e for e in entries if e["kind"] == "deny" and "revoked" in e["reason"]]
        self.assertTrue(denies, "no deny entry")
        self.assertIn(renewed, denies[-1]["reason"])
        # The identity itself is not revoked: a token still gets a certificate.
        self.srv.issue(sa="renewer")

    def test_b_unspecified_reason_writes_no_reason_code(self):
        a, b = (os.path.join(self.srv.dir, n) for n in ("leaf-b1", "leaf-b2"))
        for p in (a, b):
            self.assertEqual(self.request(p, sa="crl-reason").returncode, 0)
        sa, sb = self.serial_of(a), self.serial_of(b)
        self.assertEqual(self.revoke(sa, "--reason", "unspecified").returncode, 0)
        self.assertEqual(self.revoke(sb, "--reason", "superseded").returncode, 0)
        text = self.crl_text()
        blocks = re.split(r"\n\s+Serial Number: ", text)
        by_serial = {blk.split("\n", 1)[0].strip().lower(): blk for blk in blocks[1:]}
        pad = lambda s: s.rjust(len(s) + len(s) % 2, "0")
        self.assertNotIn("CRL Reason Code", by_serial[pad(sa)])
        self.assertIn("Superseded", by_serial[pad(sb)])

    def test_c_identity(self):
        ident = "spiffe://cluster.local/ns/default/sa/victim"
        prefixes = [os.path.join(self.srv.dir, "victim-%d" % i) for i in range(2)]
        for p in prefixes:
            self.assertEqual(self.request(p, sa="victim").returncode, 0)
        serials = [self.serial_of(p) for p in prefixes]
        # --until in the past: refused, nothing written.
        r = self.revoke("--identity", ident, "--reason", "keyCompromise",
                        "--until", "2020-01-01T00:00:00Z")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("until: a time in the future", r.stderr)
        self.srv.issue(sa="victim")
        r = self.revoke("--identity", ident, "--reason", "keyCompromise")
        self.assertEqual(r.returncode, 0, r.stderr)
        # Three: the two above and the one the refused --until left alone.
        self.assertIn("3 unexpired certificate(s) revoked", r.stdout)
        listed = self.crl_serials()
        for s in serials:
            self.assertIn(s.rjust(len(s) + len(s) % 2, "0"), listed)
        e = self.token_refused(sa="victim")
        self.assertEqual(e.code(), grpc.StatusCode.PERMISSION_DENIED, e.details())
        self.assertIn("identity %s: revoked by identity (keyCompromise" % ident, e.details())
        self.assertIn("until lifted", e.details())
        r = self.request(prefixes[0], sa="victim", renew=True)
        self.assertIn("PERMISSION_DENIED", r.stderr)
        self.srv.issue(sa="bystander")  # other identities are served
        # A restart of the signer: the revocation is rebuilt from the log.
        pid = self.srv.children()["signer"]
        os.kill(pid, 9)
        self.srv.wait_children(exclude=(pid,))
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                self.srv.issue(sa="bystander")
                break
            except grpc.RpcError:
                time.sleep(0.3)
        e = self.token_refused(sa="victim")
        self.assertIn("revoked by identity", e.details())
        # Lift: certificates again; a second lift finds nothing to lift.
        r = self.revoke("--lift", "--identity", ident)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.srv.issue(sa="victim")
        r = self.revoke("--lift", "--identity", ident)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no revocation by identity is in force", r.stderr)
        # --until in the future: refused until then.
        r = self.revoke("--identity", ident, "--reason", "superseded", "--until", "2h")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("refused until the time given", r.stdout)
        e = self.token_refused(sa="victim")
        self.assertIn("revoked by identity (superseded", e.details())
        self.assertIn("until 20", e.details())
        self.assertEqual(self.revoke("--lift", "--identity", ident).returncode, 0)
        self.srv.issue(sa="victim")

    def test_d_namespace(self):
        r = self.revoke("--namespace", "quarantine", "--reason", "cessationOfOperation")
        self.assertEqual(r.returncode, 0, r.stderr)
        for sa in ("a", "b"):
            e = self.token_refused(ns="quarantine", sa=sa)
            self.assertEqual(e.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("revoked by namespace", e.details())
        self.srv.issue(ns="quarantine-not", sa="a")
        self.assertEqual(self.revoke("--lift", "--namespace", "quarantine").returncode, 0)
        self.srv.issue(ns="quarantine", sa="a")

    def test_z_audit_verify(self):
        r = run("audit", "verify", os.path.join(self.srv.dir, "audit"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        kinds = [e["kind"] for e in read_log(self.srv)]
        if "revoke-identity" in kinds:
            self.assertIn("revoke-identity-lift", kinds)


if __name__ == "__main__":
    unittest.main(verbosity=2)

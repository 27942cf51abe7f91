#!/usr/bin/python3
"""Revocations and CRLs (`hsmca ca revoke`, crl.path, `hsmca intermediate crl`, fetch's
ca-crl.pem) on a real `hsmca serve` (SoftHSM), as root with test users (test_admin.py's):

(a) the signer signs a CRL in the token at start and writes it to crl.path (its directory
    owned by signer.user); it verifies under the root with `openssl crl -CAfile`;
(b) an intermediate issued under M-of-N approval is revoked by an admin.group user: the
    new CRL lists its serial with the reason, its cRLNumber is greater, and `openssl
    verify -crl_check` refuses the intermediate ("certificate revoked"), and with
    -crl_check_all a workload certificate under it; a user outside admin.group cannot
    revoke; an unknown serial needs --force-unknown; a serial is revoked once;
(c) `hsmca intermediate crl` makes the intermediate's empty CRL from its key file (it
    verifies with `openssl crl -CAfile ca-cert.pem`) and refuses a key that is not the
    certificate's and a certificate that is not a CA; fetch --intermediate-crl writes
    ca-crl.pem with both CRLs, each verifying under its issuer;
(d) after `kill -9` of the signer (its supervisor restarts it) a revocation's CRL has a
    greater cRLNumber than every earlier one (it comes from the log);
(e) `hsmca audit verify` passes and `hsmca audit show` lists the revoke (with the user)
    and crl entries."""
import json
import os
import pwd
import re
import shutil
import signal
import tempfile
import time
import unittest

from hsmca_harness import BIN, TMP, DevServer
from test_admin import (admin_config, hsmca_as, make_users, remove_users, signer_kill9,
                        user)
from test_intermediate import EXTRA, Istiod, sh
from test_intermediate import crl_config as crl_config_into

CRL_DIRS = []


def crl_config(text):
    """crl.path in a directory owned by the config's signer.user, made before the start."""
    return crl_config_into(text, CRL_DIRS)


def crl_numbers(path):
    """The cRLNumber of every CRL in the PEM file, in order."""
    with open(path) as f:
        pems = re.findall(r"-----BEGIN X509 CRL-----.*?-----END X509 CRL-----\n", f.read(), re.S)
    out = []
    for pem in pems:
        p = os.path.join(TMP, "one-crl.pem")
        with open(p, "w") as f:
            f.write(pem)
        text = sh("openssl", "crl", "-in", p, "-noout", "-text")[1]
        out.append(int(re.search(r"X509v3 CRL Number: \n\s+(\S+)", text).group(1), 0))
    return out, pems


class Crl(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        remove_users()
        make_users()
        base = admin_config(required=2, extra=EXTRA)
        srv = DevServer(name="crl", edit_config=lambda t: crl_config(base(t)))
        srv.wait_ready()
        os.chmod(srv.dir, 0o711)
        srv.config = os.path.join(srv.dir, "hsmca.yaml")
        cls.srv = srv
        cls.crl = os.path.join(CRL_DIRS[-1], "ca-crl.pem")
        cls.root = os.path.join(srv.dir, "root-cert.pem")
        cls.work = tempfile.mkdtemp(prefix="crl-work.", dir=TMP)
        os.chmod(cls.work, 0o755)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.srv.stop()
        finally:
            shutil.rmtree(cls.work, ignore_errors=True)
            for d in CRL_DIRS:
                shutil.rmtree(d, ignore_errors=True)
            remove_users()

    def run_as(self, who, *args, check=True):
        return hsmca_as(who, list(args) + ["--config", self.srv.config], check=check)

    def wait_crl(self, above):
        """The CRL at crl.path once its number is above `above`."""
        deadline = time.time() + 60
        while time.time() < deadline:
            if os.path.exists(self.crl):
                nums, _ = crl_numbers(self.crl)
                if nums and nums[0] > above:
                    return nums[0]
            time.sleep(0.2)
        self.fail("no CRL numbered above %d at %s" % (above, self.crl))

    def crl_text(self):
        return sh("openssl", "crl", "-in", self.crl, "-noout", "-text")[1]

    def issue_intermediate(self):
        istiod = Istiod(self.work)
        rc, out, err = self.run_as("alice", "intermediate", "request", "--csr", istiod.csr,
                                   "--cluster", "cluster-crl")
        rid = re.search(r"request (\d+): pending", out).group(1)
        self.run_as("bob", "intermediate", "approve", rid)
        self.run_as("carol", "intermediate", "approve", rid)
        out_dir = os.path.join(self.work, "cacerts")
        # --socket, no config: the CA's CRL comes over the admin socket (crl-get).
        rc, out, err = hsmca_as(None, ["intermediate", "fetch", rid, "--out", out_dir,
                                       "--socket", os.path.join(self.srv.dir, "admin.sock")])
        self.assertIn("wrote %s/ca-crl.pem: the CA's CRL\n" % out_dir, out)
        with open(os.path.join(out_dir, "ca-crl.pem")) as f, open(self.crl) as g:
            self.assertEqual(f.read(), g.read())
        self.assertIn("Istio ignores the CA's CRL unless the intermediate's own", out)
        return rid, istiod, out_dir

    def leaf_under(self, ca, key, name):
        crt = os.path.join(self.work, name + ".pem")
        ext = crt + ".ext"
        with open(ext, "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                    "subjectAltName=critical,URI:spiffe://cluster.local/ns/default/sa/a\n")
        sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
           "-nodes", "-keyout", crt + ".key", "-subj", "/", "-out", crt + ".csr")
        sh("openssl", "x509", "-req", "-in", crt + ".csr", "-CA", ca, "-CAkey", key,
           "-CAcreateserial", "-days", "1", "-extfile", ext, "-out", crt)
        return crt

    def test_config_refused(self):
        with open(self.srv.config) as f:
            text = f.read()
        bad = os.path.join(self.srv.dir, "bad.yaml")
        for edit, why in ((lambda t: t.replace("validity: 2d", "validity: 10m"),
                           "crl.validity must be at least 1h"),
                          (lambda t: re.sub(r"audit:\n  dir: audit\n", "audit:\n  disabled: true\n",
                                            t), "crl.path needs audit.dir")):
            with open(bad, "w") as f:
                f.write(edit(text))
            rc, out, err = hsmca_as(None, ["ca", "show", "--config", bad], check=False)
            self.assertEqual(rc, 78, out + err)
            self.assertIn(why, err)
        os.unlink(bad)

    def test_crl_lifecycle(self):
        # (a) the start's CRL, verified under the root.
        n0 = self.wait_crl(0)
        rc, out = sh("openssl", "crl", "-in", self.crl, "-CAfile", self.root, "-noout")
        self.assertIn("verify OK", out)
        with open(self.srv.config) as f:
            signer = re.search(r"signer:\n  user: (\S+)\n", f.read()).group(1)
        self.assertEqual(pwd.getpwuid(os.stat(self.crl).st_uid).pw_name, signer)
        text = self.crl_text()
        self.assertIn("Version 2", text)
        self.assertIn("X509v3 Authority Key Identifier", text)
        self.assertIn("No Revoked Certificates", text)
        # (b) an intermediate, revoked.
        rid, istiod, out_dir = self.issue_intermediate()
        ca = os.path.join(out_dir, "ca-cert.pem")
        serial = sh("openssl", "x509", "-in", ca, "-noout", "-serial")[1].strip().split("=")[1]
        rc, out, err = self.run_as("eve", "ca", "revoke", serial, "--reason", "keyCompromise",
                                   check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("Permission denied", err)
        rc, out, err = self.run_as("alice", "ca", "revoke", "0badc0de", "--reason",
                                   "superseded", check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("--force-unknown", err)
        rc, out, err = self.run_as("alice", "ca", "revoke", serial, "--reason", "bogus",
                                   check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("reason: one of", err)
        rc, out, err = self.run_as("alice", "ca", "revoke", serial, "--reason", "keyCompromise")
        self.assertIn("(intermediate)", out)
        n1 = self.wait_crl(n0)
        text = self.crl_text()
        self.assertRegex(text, r"Serial Number: %s\n\s+Revocation Date: .*\n\s+CRL entry "
                               r"extensions:\n\s+X509v3 CRL Reason Code:\s*\n\s+Key Compromise"
                         % serial.upper())
        self.assertIn("verify OK", sh("openssl", "crl", "-in", self.crl, "-CAfile", self.root,
                                      "-noout")[1])
        rc, out, err = self.run_as("bob", "ca", "revoke", serial, "--reason", "superseded",
                                   check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("revoked already", err)
        rc, out = sh("openssl", "verify", "-crl_check", "-CAfile", self.root, "-CRLfile",
                     self.crl, ca, check=False)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("certificate revoked", out)
        # (c) the intermediate's own CRL, and fetch's ca-crl.pem with both.
        own = os.path.join(self.work, "intermediate-crl.pem")
        rc, out, err = hsmca_as(None, ["intermediate", "crl", "--cert", ca, "--key", istiod.key,
                                       "--out", own])
        self.assertIn("verify OK", sh("openssl", "crl", "-in", own, "-CAfile", ca, "-noout")[1])
        self.assertIn("No Revoked Certificates", sh("openssl", "crl", "-in", own, "-noout",
                                                    "-text")[1])
        other = Istiod(self.work, "other")
        rc, out, err = hsmca_as(None, ["intermediate", "crl", "--cert", ca, "--key", other.key,
                                       "--out", own + ".x"], check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("the key is not the certificate's", err)
        leaf = self.leaf_under(ca, istiod.key, "leaf")
        rc, out, err = hsmca_as(None, ["intermediate", "crl", "--cert", leaf, "--key",
                                       leaf + ".key", "--out", own + ".y"], check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("not a CA", err)
        self.assertFalse(os.path.exists(own + ".x") or os.path.exists(own + ".y"))
        rc, out, err = self.run_as(None, "intermediate", "fetch", rid, "--out", out_dir,
                                   "--intermediate-crl", own)
        both = os.path.join(out_dir, "ca-crl.pem")
        nums, pems = crl_numbers(both)
        self.assertEqual(len(pems), 2)
        self.assertEqual(nums[0], n1)
        for pem, issuer in zip(pems, (self.root, ca)):
            p = os.path.join(self.work, "part.pem")
            with open(p, "w") as f:
                f.write(pem)
            self.assertIn("verify OK", sh("openssl", "crl", "-in", p, "-CAfile", issuer,
                                          "-noout")[1])
        rc, out = sh("openssl", "verify", "-crl_check_all", "-CAfile", self.root, "-untrusted",
                     ca, "-CRLfile", both, leaf, check=False)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("certificate revoked", out)
        # A CRL that does not verify under its issuer is not written.
        rc, out, err = self.run_as(None, "intermediate", "fetch", rid, "--out",
                                   os.path.join(self.work, "bad"), "--intermediate-crl",
                                   self.crl, check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertFalse(os.path.exists(os.path.join(self.work, "bad", "ca-crl.pem")))
        # (d) cRLNumber across kill -9.
        signer_kill9(self.srv)
        rc, out, err = self.run_as("bob", "ca", "revoke", "0x0b:ad:c0:de", "--reason",
                                   "cessationOfOperation", "--force-unknown")
        self.assertIn("(unknown)", out)
        n2 = self.wait_crl(n1)
        self.assertGreater(n2, n1)
        text = self.crl_text()
        self.assertIn("0BADC0DE", text)
        self.assertIn(serial.upper(), text)
        self.assertIn("Cessation Of Operation", text)
        self.check_audit()

    def check_audit(self):
        audit_dir = os.path.join(self.srv.dir, "audit")
        sh(BIN, "audit", "verify", audit_dir)
        rc, out = sh(BIN, "audit", "show", audit_dir, "--kind", "revoke")
        self.assertIn(user("alice"), out)
        self.assertIn(user("bob"), out)
        rc, out = sh(BIN, "audit", "show", audit_dir, "--kind", "crl", "--json")
        entries = [json.loads(l) for l in out.splitlines() if l.strip()]
        nums = [e["crl_number"] for e in entries]
        self.assertGreaterEqual(len(nums), 3)
        self.assertEqual(nums, sorted(set(nums)))
        rc, out = sh(BIN, "audit", "show", audit_dir, "--kind", "revoke", "--json")
        revs = [json.loads(l) for l in out.splitlines() if l.strip()]
        self.assertEqual([(r["reason"], r["profile"]) for r in revs],
                         [("keyCompromise", "intermediate"), ("cessationOfOperation", "unknown")])
        self.assertEqual(revs[0]["requester"], user("alice"))
        rc, out = sh(BIN, "audit", "show", audit_dir, "--serial", revs[0]["serial"])
        self.assertRegex(out, r"revoke +%s +%s .*keyCompromise, intermediate" %
                         (revs[0]["serial"], user("alice")))
        rc, out = sh(BIN, "audit", "show", audit_dir, "--kind", "crl")
        self.assertRegex(out, r"crl_number %d, 2 revoked" % nums[-1])
        # Tampered copies: a CRL number that does not grow, a serial revoked twice.
        with open(os.path.join(audit_dir, "log")) as f:
            lines = f.read().splitlines(True)
        for kind, edit, why in (("crl", lambda e: e.update(crl_number=1), "cRLNumber only grows"),
                                ("revoke", lambda e: e.update(serial=revs[0]["serial"]),
                                 "is revoked already")):
            bad = tempfile.mkdtemp(prefix="crl-tampered.", dir=TMP)
            out_lines = list(lines)
            last = max(i for i, l in enumerate(lines) if json.loads(l)["kind"] == kind)
            e = json.loads(lines[last])
            edit(e)
            out_lines[last] = json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n"
            with open(os.path.join(bad, "log"), "w") as f:
                f.writelines(out_lines)
            rc, out = sh(BIN, "audit", "verify", bad, check=False)
            shutil.rmtree(bad, ignore_errors=True)
            self.assertNotEqual(rc, 0, out)
            self.assertIn(why, out)


class CrlRsa(unittest.TestCase):
    """An RSA CA key: the CRL's signature algorithm is the CA's (sha256WithRSAEncryption)."""

    def test_rsa_crl(self):
        srv = DevServer(name="crl-rsa", ca_key="rsa-2048", edit_config=crl_config)
        try:
            srv.wait_ready()
            path = os.path.join(CRL_DIRS[-1], "ca-crl.pem")
            deadline = time.time() + 60
            while not os.path.exists(path) and time.time() < deadline:
                time.sleep(0.2)
            root = os.path.join(srv.dir, "root-cert.pem")
            self.assertIn("verify OK", sh("openssl", "crl", "-in", path, "-CAfile", root,
                                          "-noout")[1])
            self.assertIn("Signature Algorithm: sha256WithRSAEncryption",
                          sh("openssl", "crl", "-in", path, "-noout", "-text")[1])
        finally:
            srv.stop()
            shutil.rmtree(CRL_DIRS[-1], ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)

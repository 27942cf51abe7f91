#!/usr/bin/python3
"""Intermediate renewals under approval.auto_renew, the admin socket's refusals on the
record, and the dev CA's CRL, on a real `hsmca serve` (SoftHSM), as root with test users
(test_admin.py's):

(a) with approval.auto_renew: true, a request whose CSR has the key of its cluster's
    issued intermediate is auto-approved and signed at once (an intermediate-auto-approve
    entry, no approver); one with another key waits for approvals unless it carries a proof
    signed by the current intermediate's key (--renew-with-cert/--renew-with-key), which is
    auto-approved; a key that is not the certificate's is refused by the CLI; a revoked
    intermediate's key renews nothing; `hsmca audit
    verify` passes, and fails once an auto-approval's proof is taken out of its entry;
(b) with approval.auto_renew off (the default) the same-key renewal stays pending;
(c) a caller outside admin.group (the socket's mode opened by hand) and a malformed
    request are deny entries naming the unix user, at most 30 a minute however many come;
(d) the dev config's crl.path: the CA's CRL is written under DIR/crl and verifies."""
import json
import os
import re
import shutil
import tempfile
import time
import unittest

from hsmca_harness import BIN, TMP
from test_admin import hsmca_as, make_users, raw, remove_users, start_server, user
from test_intermediate import EXTRA, Istiod, sh


def entries(srv):
    with open(os.path.join(srv.dir, "audit", "log")) as f:
        return [json.loads(l) for l in f]


def new_csr(istiod, name):
    """Another CSR with istiod's key (a renewal keeps its key)."""
    path = os.path.join(istiod.dir, name)
    sh("openssl", "req", "-new", "-key", istiod.key, "-out", path, "-subj", "/CN=renewal")
    os.chmod(path, 0o644)
    return path


AUTO = "  auto_renew: true\n"  # continues admin_config's approval section


class AutoRenew(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        remove_users()
        make_users()
        cls.srv = start_server("renew", required=2, extra=AUTO + EXTRA)
        cls.work = tempfile.mkdtemp(prefix="renew-work.", dir=TMP)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.srv.stop()
        finally:
            shutil.rmtree(cls.work, ignore_errors=True)
            remove_users()

    def ica(self, who, *args, check=True, srv=None):
        return hsmca_as(who, ["intermediate"] + list(args)
                        + ["--config", (srv or self.srv).config], check=check)

    def issued(self, istiod, cluster, srv=None):
        """A request by alice approved by bob and carol; its id and cacerts directory."""
        rc, out, err = self.ica("alice", "request", "--csr", istiod.csr, "--cluster", cluster,
                                srv=srv)
        rid = re.search(r"request (\d+): pending", out).group(1)
        self.ica("bob", "approve", rid, srv=srv)
        self.assertIn("2 of 2 approvals; issued", self.ica("carol", "approve", rid, srv=srv)[1])
        out_dir = os.path.join(self.work, "cacerts-" + rid)
        self.ica(None, "fetch", rid, "--out", out_dir, srv=srv)
        return rid, out_dir

    def test_a_renewals(self):
        first = Istiod(self.work, "istiod-a")
        rid, cacerts = self.issued(first, "cluster-a")
        # Same key: approved without approvers, and signed.
        rc, out, err = self.ica("alice", "request", "--csr", new_csr(first, "same.csr"),
                                "--cluster", "cluster-a")
        m = re.search(r"request (\d+): auto-approved as the renewal of %s \(approval.auto_renew\); "
                      r"issued" % rid, out)
        self.assertTrue(m, out + err)
        same = m.group(1)
        self.ica(None, "fetch", same, "--out", os.path.join(self.work, "same"))
        # Same key, another cluster: not a renewal of anything.
        rc, out, err = self.ica("alice", "request", "--csr", first.csr, "--cluster", "cluster-z")
        self.assertIn("pending, 2 approvals needed", out)
        self.assertIn("not auto-approved: not a renewal", out)
        # Another key without a proof: pending, saying why.
        other = Istiod(self.work, "istiod-a2")
        rc, out, err = self.ica("alice", "request", "--csr", other.csr, "--cluster", "cluster-a")
        self.assertIn("pending, 2 approvals needed", out)
        self.assertIn("has another key than %s and no proof signed by its key" % same, out)
        # Another key with the current intermediate's proof: auto-approved (the requester
        # holds istiod's key, as istiod's operator does).
        os.chmod(first.key, 0o644)
        os.chmod(other.key, 0o644)
        cert = os.path.join(self.work, "same", "ca-cert.pem")
        rc, out, err = self.ica("alice", "request", "--csr", other.csr, "--cluster", "cluster-a",
                                "--renew-with-cert", cert, "--renew-with-key", first.key)
        m = re.search(r"request (\d+): auto-approved as the renewal of %s .*; issued" % same, out)
        self.assertTrue(m, out + err)
        proved = m.group(1)
        # A key that is not the certificate's: the CLI refuses to make the proof.
        rc, out, err = self.ica("alice", "request", "--csr", other.csr, "--cluster", "cluster-a",
                                "--renew-with-cert", cert, "--renew-with-key", other.key,
                                check=False)
        self.assertEqual(rc, 2, out + err)
        self.assertIn("is not the private key of --renew-with-cert", err)
        # The renewed intermediate revoked: its key renews nothing any more (the older one,
        # of another key, is what it is compared with).
        self.ica(None, "fetch", proved, "--out", os.path.join(self.work, "proved"))
        serial = sh("openssl", "x509", "-in", os.path.join(self.work, "proved", "ca-cert.pem"),
                    "-noout", "-serial")[1].strip().split("=")[1]
        hsmca_as("alice", ["ca", "revoke", serial, "--reason", "keyCompromise", "--config",
                           self.srv.config])
        rc, out, err = self.ica("alice", "request", "--csr", new_csr(other, "after.csr"),
                                "--cluster", "cluster-a")
        self.assertIn("pending, 2 approvals needed", out)
        self.assertIn("has another key than %s and no proof" % same, out)
        self.check_log(rid, same, proved)

    def check_log(self, rid, same, proved):
        audit_dir = os.path.join(self.srv.dir, "audit")
        autos = [e for e in entries(self.srv) if e["kind"] == "intermediate-auto-approve"]
        self.assertEqual([(str(e["request_id"]), str(e["renews"]), "proof" in e) for e in autos],
                         [(same, rid, False), (proved, same, True)])
        self.assertEqual({e["requester"] for e in autos}, {user("alice")})
        sh(BIN, "audit", "verify", audit_dir)
        rc, out = sh(BIN, "audit", "show", audit_dir, "--kind", "intermediate-auto-approve")
        self.assertEqual(out.count("intermediate-auto-approve"), 2, out)
        # The proof taken out of its entry: the renewal no longer stands for approvals.
        bad = tempfile.mkdtemp(prefix="renew-tampered.", dir=TMP)
        with open(os.path.join(audit_dir, "log")) as f:
            lines = f.read().splitlines(True)
        for i, line in enumerate(lines):
            e = json.loads(line)
            if e["kind"] == "intermediate-auto-approve" and "proof" in e:
                del e["proof"]
                lines[i] = json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n"
        with open(os.path.join(bad, "log"), "w") as f:
            f.writelines(lines)
        rc, out = sh(BIN, "audit", "verify", bad, check=False)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("intermediate request %s has another key than %s and no proof" %
                      (proved, same), out)

    def test_b_auto_renew_off(self):
        srv = start_server("renew-off", required=2, extra=EXTRA)
        try:
            istiod = Istiod(self.work, "istiod-b")
            self.issued(istiod, "cluster-b", srv=srv)
            rc, out, err = self.ica("alice", "request", "--csr", new_csr(istiod, "b2.csr"),
                                    "--cluster", "cluster-b", srv=srv)
            self.assertIn("pending, 2 approvals needed", out)
            self.assertNotIn("intermediate-auto-approve",
                             [e["kind"] for e in entries(srv)])
        finally:
            srv.stop()

    def test_c_refusals_on_record(self):
        t0 = time.time()
        sock = os.path.join(self.srv.dir, "admin.sock")
        os.chmod(sock, 0o666)  # past the mode: the signer's own check refuses eve
        try:
            rc, out, err = hsmca_as("eve", ["admin", "status", "--config", self.srv.config],
                                    check=False)
            self.assertNotEqual(rc, 0)
            self.assertIn("neither root nor in admin.group", err)
        finally:
            os.chmod(sock, 0o660)
        self.assertFalse(raw(sock, b'{"op":"no-such-op"}')["ok"])
        for _ in range(40):  # a flood: bounded entries
            raw(sock, b"not json")
        # Not waited for by the signer (as a workload deny): on disk once the log syncs.
        deadline = time.time() + 20
        while True:
            refusals = [e for e in entries(self.srv)
                        if e["kind"] == "deny" and e["reason"].startswith("admin socket")]
            roots = [e for e in refusals if e["requester"] == "root"]
            if len(roots) >= 30 or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertIn((user("eve"), "PERMISSION_DENIED"),
                      [(e["requester"], e["code"]) for e in refusals])
        self.assertIn(("root", "admin socket: unknown op"),
                      [(e["requester"], e["reason"]) for e in refusals])
        if time.time() - t0 < 50:  # one window of root's limiter (each user has one)
            self.assertEqual(len(roots), 30, roots)
        sh(BIN, "audit", "verify", os.path.join(self.srv.dir, "audit"))

    def test_d_dev_crl(self):
        crl = os.path.join(self.srv.dir, "crl", "ca-crl.pem")
        deadline = time.time() + 30
        while not os.path.exists(crl) and time.time() < deadline:
            time.sleep(0.2)
        rc, out = sh("openssl", "crl", "-in", crl, "-CAfile",
                     os.path.join(self.srv.dir, "root-cert.pem"), "-noout")
        self.assertIn("verify OK", out)


if __name__ == "__main__":
    unittest.main()

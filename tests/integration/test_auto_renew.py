#!/usr/bin/python3
"""Intermediate renewals under approval.auto_renew, the admin socket's refusals on the
record, and the dev CA's CRL, on a real `hsmca serve` (SoftHSM), as root with test users
(test_admin.py's):

(0) a caller outside admin.group (the socket's mode opened by hand) and a malformed
    request are deny entries naming the unix user, at most 30 a minute however many come;
(a) with approval.auto_renew: true, a renewal proved by the current intermediate's key
    (--renew-with-key; --renew-with-cert for a new key) over the log's origin, the
    request's id, the cluster and the CSR is auto-approved and signed at once (an
    intermediate-auto-approve entry with the proof, no approver); a same-key CSR copied
    from the log, without the key, waits for approvals, and an earlier renewal's proof from
    the log does not move it; a key that is not the certificate's (or the CSR's) is refused
    by the CLI before it asks; `hsmca audit verify` passes, and fails once an
    auto-approval's origin is changed;
(b) with approval.auto_renew off (the default) a proved renewal stays pending;
(d) the dev config's crl.path: the CA's CRL is written under DIR/crl and verifies;
(e) revoking a cluster's current intermediate stops its auto-renewal (same key, new key,
    from the current or an older intermediate; after a signer restart too) until a
    request is issued with its approvals; a revoked key renews nothing, as the renewed key
    or the new one; only the current intermediate renews."""
import base64
import json
import os
import re
import shutil
import tempfile
import time
import unittest

from hsmca_harness import BIN, TMP
from test_admin import (hsmca_as, make_users, raw, remove_users, signer_kill9,
                        start_server, user)
from test_intermediate import EXTRA, Istiod, sh


def entries(srv):
    with open(os.path.join(srv.dir, "audit", "log")) as f:
        return [json.loads(l) for l in f]


def pending_id(out):
    return re.search(r"request (\d+): pending", out).group(1)


def new_csr(istiod, name):
    """Another CSR with istiod's key (a renewal keeps its key)."""
    path = os.path.join(istiod.dir, name)
    sh("openssl", "req", "-new", "-key", istiod.key, "-out", path, "-subj", "/CN=renewal")
    os.chmod(path, 0o644)
    return path


# continues admin_config's approval section; refused renewals stay pending, so alice may
# keep more waiting than the default bound (test_ica_race tests that bound)
AUTO = "  auto_renew: true\n  max_pending_per_user: 32\n"


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

    def request(self, csr, cluster, *flags, srv=None, check=True):
        """`intermediate request` as alice: (rc, out, err)."""
        return self.ica("alice", "request", "--csr", csr, "--cluster", cluster, *flags, srv=srv,
                        check=check)

    def auto(self, out, renews):
        """The id of an auto-approved, issued renewal of request renews, from its output."""
        m = re.search(r"request (\d+): auto-approved as the renewal of %s \(approval.auto_renew\)"
                      r"; issued" % renews, out)
        self.assertTrue(m, out)
        return m.group(1)

    def refused(self, out, why):
        """The id of a request that waits for approvals, not auto-approved for why."""
        self.assertIn("pending, 2 approvals needed", out)
        self.assertIn("not auto-approved: ", out)
        self.assertIn(why, out)
        return pending_id(out)

    def fetched(self, rid):
        """The certificate of request rid (fetched: its cacerts directory's ca-cert.pem)."""
        out_dir = os.path.join(self.work, "cacerts-" + rid)
        self.ica(None, "fetch", rid, "--out", out_dir)
        return os.path.join(out_dir, "ca-cert.pem")

    def csr_from_log(self, rid, name):
        """The CSR of request rid as anyone who reads the log has it (no key)."""
        [e] = [e for e in entries(self.srv) if e["seq"] == int(rid)]
        der = os.path.join(self.work, name + ".der")
        with open(der, "wb") as f:
            f.write(base64.b64decode(e["csr"]))
        pem = os.path.join(self.work, name + ".pem")
        sh("openssl", "req", "-inform", "DER", "-in", der, "-out", pem)
        os.chmod(pem, 0o644)
        return pem

    def istiod(self, name):
        i = Istiod(self.work, name)
        os.chmod(i.key, 0o644)  # alice holds istiod's keys, as istiod's operator does
        return i

    def test_a_renewals(self):
        first, other = self.istiod("istiod-a"), self.istiod("istiod-a2")
        rid, cacerts = self.issued(first, "cluster-a")
        # Same key, proved by the key: approved without approvers, and signed.
        out = self.request(new_csr(first, "same.csr"), "cluster-a", "--renew-with-key",
                           first.key)[1]
        same = self.auto(out, rid)
        cert = self.fetched(same)
        # The same key's CSR copied from the log, by one who does not hold the key: it waits
        # for approvals, and the proof of an earlier renewal in the log does not move it.
        out = self.request(self.csr_from_log(rid, "copied"), "cluster-a")[1]
        self.assertIn("pending, 2 approvals needed", out)
        replay = pending_id(out)
        [old] = [e["proof"] for e in entries(self.srv)
                 if e["kind"] == "intermediate-auto-approve" and str(e["request_id"]) == same]
        reply = raw(self.srv.sock, json.dumps({"op": "ica-renew-proof", "id": int(replay),
                                               "proof": old}).encode())
        self.assertFalse(reply["ok"], reply)
        self.assertIn("its renewal proof does not verify under the key of request %s's "
                      "certificate" % same, reply["error"])
        # Proved, but another cluster: not a renewal of anything.
        out = self.request(first.csr, "cluster-z", "--renew-with-key", first.key)[1]
        self.refused(out, "cluster cluster-z has no issued intermediate to renew")
        # Another key without a proof: pending.
        self.assertIn("pending, 2 approvals needed", self.request(other.csr, "cluster-a")[1])
        # Another key with the current intermediate's proof: auto-approved.
        out = self.request(other.csr, "cluster-a", "--renew-with-cert", cert, "--renew-with-key",
                           first.key)[1]
        proved = self.auto(out, same)
        # A key that is not the certificate's, or (same key) not the CSR's: the CLI refuses
        # before it asks anything.
        asked = lambda: sum(e["kind"] == "intermediate-request" for e in entries(self.srv))
        n = asked()
        for flags, why in ((["--renew-with-cert", cert, "--renew-with-key", other.key],
                            "is not the private key of --renew-with-cert"),
                           (["--renew-with-key", first.key], "is not the key of --csr")):
            rc, out, err = self.request(other.csr, "cluster-a", *flags, check=False)
            self.assertEqual(rc, 2, out + err)
            self.assertIn(why, err)
        self.assertEqual(asked(), n)
        self.check_log(rid, same, proved)

    def check_log(self, rid, same, proved):
        audit_dir = os.path.join(self.srv.dir, "audit")
        autos = [e for e in entries(self.srv) if e["kind"] == "intermediate-auto-approve"
                 and str(e["request_id"]) in (same, proved)]
        self.assertEqual([(str(e["request_id"]), str(e["renews"]), "proof" in e, "origin" in e)
                          for e in autos], [(same, rid, True, True), (proved, same, True, True)])
        self.assertEqual({e["requester"] for e in autos}, {user("alice")})
        sh(BIN, "audit", "verify", audit_dir)
        rc, out = sh(BIN, "audit", "show", audit_dir, "--kind", "intermediate-auto-approve")
        self.assertGreaterEqual(out.count("intermediate-auto-approve"), 2, out)
        # The proof said to be made for another log: the renewal no longer stands for
        # approvals.
        bad = tempfile.mkdtemp(prefix="renew-tampered.", dir=TMP)
        with open(os.path.join(audit_dir, "log")) as f:
            lines = f.read().splitlines(True)
        for i, line in enumerate(lines):
            e = json.loads(line)
            if e["kind"] == "intermediate-auto-approve" and str(e["request_id"]) == proved:
                e["origin"] = "elsewhere/hsmca/cluster.local"
                lines[i] = json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n"
        with open(os.path.join(bad, "log"), "w") as f:
            f.writelines(lines)
        rc, out = sh(BIN, "audit", "verify", bad, check=False)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("intermediate request %s: its renewal proof does not verify under the key "
                      "of request %s's certificate" % (proved, same), out)

    def test_e_revocation_stops_renewal(self):
        k1, k2, k3, k4 = (self.istiod("istiod-r%d" % i) for i in range(1, 5))
        ra = self.issued(k1, "cluster-r")[0]
        rb = self.auto(self.request(new_csr(k1, "r1b.csr"), "cluster-r", "--renew-with-key",
                                    k1.key)[1], ra)
        cert_a, cert_b = self.fetched(ra), self.fetched(rb)
        serial = sh("openssl", "x509", "-in", cert_b, "-noout", "-serial")[1].strip().split("=")[1]
        hsmca_as("alice", ["ca", "revoke", serial, "--reason", "keyCompromise", "--config",
                           self.srv.config])
        stopped = ("auto-renewal of cluster cluster-r stopped when its current intermediate "
                   "(request %s) was revoked" % rb)
        # The revoked key, proved: renews neither itself nor onto a new key, from the current
        # (revoked) intermediate or from the older one of the same key (not revoked itself).
        for csr, flags in ((new_csr(k1, "r1c.csr"), ["--renew-with-key", k1.key]),
                           (k2.csr, ["--renew-with-cert", cert_b, "--renew-with-key", k1.key]),
                           (k2.csr, ["--renew-with-cert", cert_a, "--renew-with-key", k1.key])):
            self.refused(self.request(csr, "cluster-r", *flags)[1], stopped)
        # The same after the signer's restart: the replay rebuilds it from the revoke entry.
        signer_kill9(self.srv)
        self.refused(self.request(new_csr(k1, "r1d.csr"), "cluster-r", "--renew-with-key",
                                  k1.key)[1], stopped)
        # Issued with its approvals (another key): the cluster auto-renews again ...
        rd = self.issued(k2, "cluster-r")[0]
        re2 = self.auto(self.request(new_csr(k2, "r2b.csr"), "cluster-r", "--renew-with-key",
                                     k2.key)[1], rd)
        # ... but never onto the revoked key ...
        cert_e = self.fetched(re2)
        self.refused(self.request(new_csr(k1, "r1e.csr"), "cluster-r", "--renew-with-cert",
                                  cert_e, "--renew-with-key", k2.key)[1],
                     "its key is a revoked intermediate's key: a revoked key renews nothing")
        # ... and only off the current intermediate: once k3's is issued, k2's (older, valid,
        # not revoked) proves nothing.
        rf = self.issued(k3, "cluster-r")[0]
        self.refused(self.request(k4.csr, "cluster-r", "--renew-with-cert", cert_e,
                                  "--renew-with-key", k2.key)[1],
                     "does not verify under the key of request %s's certificate" % rf)
        # The revoked key issued again with approvals: people decided, but it auto-renews
        # nothing.
        rg = self.issued(k1, "cluster-r")[0]
        self.refused(self.request(new_csr(k1, "r1f.csr"), "cluster-r", "--renew-with-key",
                                  k1.key)[1],
                     "the key of cluster cluster-r's current intermediate (request %s) is a "
                     "revoked intermediate's key" % rg)
        sh(BIN, "audit", "verify", os.path.join(self.srv.dir, "audit"))

    def test_b_auto_renew_off(self):
        srv = start_server("renew-off", required=2, extra=EXTRA)
        try:
            istiod = Istiod(self.work, "istiod-b")
            self.issued(istiod, "cluster-b", srv=srv)
            os.chmod(istiod.key, 0o644)
            rc, out, err = self.ica("alice", "request", "--csr", new_csr(istiod, "b2.csr"),
                                    "--cluster", "cluster-b", "--renew-with-key", istiod.key,
                                    srv=srv)
            self.refused(out, "approval.auto_renew is off")
            self.assertNotIn("intermediate-auto-approve",
                             [e["kind"] for e in entries(srv)])
            sh(BIN, "audit", "verify", os.path.join(srv.dir, "audit"))
        finally:
            srv.stop()

    def test_0_refusals_on_record(self):
        # First: the later tests' refused renewals are refusals on the record too, and
        # share the limiter's window.
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

#!/usr/bin/python3
"""The signing log (docs/ARCHITECTURE.md §7, §3.1 invariant 8) on a real `hsmca dev`: every certificate a
client got has a durable issue-intent (its serial and TBS hash), an issue-result (its
hash) and an inclusion proof (`hsmca audit prove`) against a signed checkpoint; a killed signer rebuilds its serial set from the log; a log that cannot be written
stops issuance with UNAVAILABLE and the reason, and issuance resumes when it can."""
import hashlib
import json
import os
import signal
import subprocess
import time
import unittest

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from hsmca_harness import BIN, DevServer, audit_entries


def read_log(server):
    return audit_entries(os.path.join(server.dir, "audit"))


def wait_log(server, done, timeout=5):
    """The log's entries once done(entries) holds (within timeout)."""
    deadline = time.time() + timeout
    while True:
        entries = read_log(server)
        if done(entries) or time.time() > deadline:
            return entries
        time.sleep(0.1)


def replayed_lines(server):
    out = []
    server.log.flush()
    with open(server.log_path, "rb") as f:
        text = f.read()
    for line in text.splitlines():
        try:
            ent = json.loads(line)
        except ValueError:
            continue
        if ent.get("msg") == "audit log replayed":
            out.append(ent)
    return out


class AuditLogTests(unittest.TestCase):
    def setUp(self):
        self.server = DevServer("ec-p256", name="auditlog")
        self.server.wait_ready()

    def tearDown(self):
        self.server.stop()

    def issue_leaves(self, n):
        leaves = []
        for _ in range(n):
            chain = self.server.issue()
            leaves.append(x509.load_pem_x509_certificate(chain[0].encode()))
        return leaves

    def test_every_certificate_has_intent_and_result(self):
        leaves = self.issue_leaves(5)
        # Results are not waited for before the reply (the intent is the record): the
        # signer writes them with the next sync or within its tick.
        hashes = {hashlib.sha256(l.public_bytes(serialization.Encoding.DER)).hexdigest()
                  for l in leaves}
        entries = wait_log(self.server, lambda es: hashes <= {e.get("cert_sha256") for e in es})
        self.assertEqual(entries[0]["kind"], "start")
        intents = {e["seq"]: e for e in entries if e["kind"] == "issue-intent"}
        results = [e for e in entries if e["kind"] == "issue-result"]
        by_hash = {r.get("cert_sha256"): r for r in results}
        for leaf in leaves:
            der = leaf.public_bytes(serialization.Encoding.DER)
            res = by_hash.get(hashlib.sha256(der).hexdigest())
            self.assertIsNotNone(res, "no issue-result for serial %x" % leaf.serial_number)
            intent = intents[res["intent_seq"]]
            self.assertLess(intent["seq"], res["seq"])
            self.assertEqual(int(intent["serial"], 16), leaf.serial_number)
            self.assertEqual(intent["tbs_sha256"],
                             hashlib.sha256(leaf.tbs_certificate_bytes).hexdigest())
            self.assertEqual(intent["request_id"], res["request_id"])
            self.assertEqual(intent["requester"], "spiffe://cluster.local/ns/default/sa/sleep")
            self.assertEqual(intent["profile"], "workload")
            self.assertEqual(len(intent["csr_sha256"]), 64)
        # Each has an inclusion proof against a signed checkpoint, from the published
        # tiles (the checkpoint covering the results follows within about a second).
        audit_dir = os.path.join(self.server.dir, "audit")
        for i, leaf in enumerate(leaves):
            path = os.path.join(self.server.dir, "leaf%d.pem" % i)
            with open(path, "wb") as f:
                f.write(leaf.public_bytes(serialization.Encoding.PEM))
            deadline = time.time() + 10
            while True:
                r = subprocess.run([BIN, "audit", "prove", "--cert", path, audit_dir],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                if r.returncode == 0 or time.time() > deadline:
                    break
                time.sleep(0.2)
            out = r.stdout.decode(errors="replace")
            self.assertEqual(r.returncode, 0, out)
            self.assertIn("verified", out)

    def test_signer_restart_replays_serials(self):
        self.issue_leaves(3)
        n_intents = sum(1 for e in read_log(self.server) if e["kind"] == "issue-intent")
        old = self.server.wait_children()["signer"]
        os.kill(old, signal.SIGKILL)
        self.server.wait_children(exclude=(old,))
        deadline = time.time() + 60
        while True:
            try:
                self.server.issue()
                break
            except grpc.RpcError:
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        lines = replayed_lines(self.server)
        self.assertGreaterEqual(len(lines), 2, self.server.logtext())
        self.assertEqual(int(lines[-1]["serials_restored"]), n_intents)
        self.assertEqual(int(lines[-1]["serials_duplicate"]), 0)
        entries = read_log(self.server)  # still whole and canonical after the kill
        self.assertEqual(sum(1 for e in entries if e["kind"] == "start"), 2)

    def test_repeated_serial_refuses_restart(self):
        # An intent that repeats an earlier intent's serial (the same CA key, the first
        # certificate still valid), appended past the latest checkpoint so that only the
        # replay's rule can refuse it: the restarted signer refuses to start (exit 78) with
        # the message `hsmca audit verify` gives for the same log.
        self.issue_leaves(2)
        wait_log(self.server, lambda es: es[-1]["kind"] == "issue-result")
        time.sleep(1.2)  # the results' flush and a checkpoint
        signer = self.server.wait_children()["signer"]
        os.kill(signer, signal.SIGSTOP)  # writes nothing more, and is not restarted yet
        self.server.verify_log_at_stop = False  # broken on purpose
        audit_dir = os.path.join(self.server.dir, "audit")
        entries = read_log(self.server)
        first = [e for e in entries if e["kind"] == "issue-intent"][0]
        forged = dict(first, seq=len(entries), request_id=first["request_id"] + 1000,
                      time=max(e["time"] for e in entries))
        line = json.dumps(forged, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        with open(os.path.join(audit_dir, "log"), "ab") as f:
            f.write(line.encode() + b"\n")
        want = "log seq %d (byte " % forged["seq"]
        again = "serial %s was already in the intent at seq %d " % (first["serial"], first["seq"])
        os.kill(signer, signal.SIGKILL)
        try:
            self.server.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.fail("the server kept running on the log:\n" + self.server.logtext())
        text = self.server.logtext()
        self.assertIn("refusing to serve: " + want, text)
        self.assertIn(again, text)
        self.assertEqual(self.server.proc.returncode, 78, text)
        r = subprocess.run([BIN, "audit", "verify", audit_dir], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        out = r.stdout.decode(errors="replace")
        self.assertNotEqual(r.returncode, 0, out)
        self.assertIn(want, out)
        self.assertIn(again, out)

    def chattr(self, flag, path):
        return subprocess.run(["chattr", flag, path], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0

    def test_unwritable_log_stops_issuance_then_resumes(self):
        # An immutable file fails every write(2), even on the signer's open descriptor
        # (the directory's owner or mode would not: the file is open already). Root
        # without CAP_SYS_RESOURCE cannot lower another process's RLIMIT_FSIZE, and a
        # small tmpfs needs a mount; the unit test covers EFBIG.
        path = os.path.join(self.server.dir, "audit", "log")
        if not self.chattr("+i", path):
            self.skipTest("chattr +i is not available here (needs CAP_LINUX_IMMUTABLE)")
        signer = self.server.wait_children()["signer"]
        try:
            for _ in range(2):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.server.issue()
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertIn("audit log: write failed: Operation not permitted",
                          self.server.logtext())
        finally:
            self.chattr("-i", path)
        time.sleep(1.2)  # the writer retries at most once a second
        leaf = self.issue_leaves(1)[0]
        entries = wait_log(self.server, lambda es: es[-1]["kind"] == "issue-result")
        self.assertEqual(int(entries[-2]["serial"], 16), leaf.serial_number)
        self.assertEqual(self.server.children()["signer"], signer)  # not restarted


if __name__ == "__main__":
    unittest.main()

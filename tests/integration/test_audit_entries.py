#!/usr/bin/python3
"""The signing log's other entries (issue 6 items 1, 5, 6) on a real server behind the
PKCS#11 shim (tests/p11shim/): config and key entries follow every start and match the
files and keys in use; a refusal the front end makes (a bad token, a policy refusal)
becomes a frontend-deny entry, and a flood of them a bounded number of entries plus
summaries that count the rest; a signer killed between an intent and its result
records, at its next start (just before its start entry), an issue-result with code
UNKNOWN for that intent; and a
file-size limit (RLIMIT_FSIZE, set on the running signer with prlimit) stops issuance
with UNAVAILABLE and the reason, loses nothing, and issuance resumes once it is lifted."""
import hashlib
import os
import re
import signal
import subprocess
import threading
import time
import unittest

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

import hsmca_client as hc
from hsmca_harness import ShimServer
from test_audit_log import read_log, wait_log

SIGN_TIMEOUT = 2
ID = "spiffe://cluster.local/ns/default/sa/sleep"

def sha256(b):
    return hashlib.sha256(b).hexdigest()


class AuditEntries(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ShimServer("entries", sign_timeout=SIGN_TIMEOUT)
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()


    def wait_signer_serving(self, timeout=60):
        deadline = time.time() + timeout
        while True:
            try:
                return self.server.issue()
            except grpc.RpcError:
                if time.time() > deadline:
                    raise
                time.sleep(0.3)

    def restart_signer(self):
        old = self.server.wait_children()["signer"]
        os.kill(old, signal.SIGKILL)
        self.server.wait_children(exclude=(old,))
        self.wait_signer_serving()

    # ---- config and key -----------------------------------------------------------

    def test_config_and_key_follow_every_start(self):
        self.restart_signer()  # a second start, so "every" means something
        entries = wait_log(self.server, lambda es: sum(e["kind"] == "start" for e in es) >= 2)
        with open(os.path.join(self.server.dir, "hsmca.yaml"), "rb") as f:
            config_hash = sha256(f.read())
        with open(os.path.join(self.server.dir, "root-cert.pem"), "rb") as f:
            ca = x509.load_pem_x509_certificate(f.read())
        spki = ca.public_key().public_bytes(serialization.Encoding.DER,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)
        # The signer's policy text (signer/signer_audit.h) for the dev config.
        policy = ("hsmca-signer-policy=1\nca_sig_alg=ecdsa-with-SHA256\n"
                  "workload_max_ttl=86400\nserving_max_ttl=86400\n"
                  "trust_domain=cluster.local\nserving_dns=localhost\nserving_ip=127.0.0.1\n"
                  "rate_per_second=1000\nrate_burst=2000\n").encode()
        with open(self.server.log_path) as f:
            audit_pub = re.findall(r'"msg":"audit key ready".*?"public_key":"([0-9a-f]{64})"',
                                   f.read())
        starts = [i for i, e in enumerate(entries) if e["kind"] == "start"]
        self.assertGreaterEqual(len(starts), 2)
        for i in starts:
            cfg, key = entries[i + 1], entries[i + 2]
            self.assertEqual(cfg["kind"], "config", entries[i:i + 3])
            self.assertEqual(cfg["config_sha256"], config_hash)
            self.assertEqual(cfg["policy_sha256"], sha256(policy))
            self.assertEqual(key["kind"], "key", entries[i:i + 3])
            self.assertEqual(key["ca_spki_sha256"], sha256(spki))
            self.assertEqual(key["ca_cert_sha256"],
                             sha256(ca.public_bytes(serialization.Encoding.DER)))
            self.assertEqual(key["ca_key_alg"], "ecdsa-with-SHA256")
            self.assertEqual(key["ca_key_type"], "ec-prime256v1")
            self.assertEqual(key["ca_key_uri"], "pkcs11:token=hsmca;object=ca-key;type=private")
            self.assertEqual(key["audit_key_uri"],
                             "pkcs11:token=hsmca;object=audit-key;type=private")
            self.assertEqual(key["audit_key_alg"], "ed25519")
            self.assertIn(key["audit_public_key"], audit_pub)
            with open(os.path.join(self.server.dir, "pin")) as f:
                pin = f.read().strip()
            self.assertNotIn(pin, str(cfg) + str(key))

    # ---- frontend-deny --------------------------------------------------------------

    def test_frontend_refusals_are_logged(self):
        key = hc.make_key("ec-p256")
        csr = hc.make_csr(key, uris=[ID])
        with self.assertRaises(grpc.RpcError) as cm:
            self.server.client.create(csr, "not-a-token", 0)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        other = hc.make_csr(key, uris=["spiffe://cluster.local/ns/default/sa/other"])
        with self.assertRaises(grpc.RpcError) as cm:
            self.server.client.create(other, self.server.token(), 0)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        entries = wait_log(self.server, lambda es: sum(
            e["kind"] == "frontend-deny" and e["code"] == "PERMISSION_DENIED" for e in es) >= 1)
        denies = [e for e in entries if e["kind"] == "frontend-deny"]
        auth = [e for e in denies if e["code"] == "UNAUTHENTICATED"]
        perm = [e for e in denies if e["code"] == "PERMISSION_DENIED"]
        self.assertTrue(auth, entries[-5:])
        self.assertTrue(perm, entries[-5:])
        a, p = auth[-1], perm[-1]
        self.assertEqual(a["source"], "frontend")
        self.assertEqual(a["requester"], "")  # nobody was authenticated
        self.assertEqual(a["authenticator"], "jwt")
        self.assertIn("JWT", a["reason"])
        self.assertNotIn("not-a-token", a["reason"])  # the token is never written
        self.assertGreater(a["request_id"], 0)
        self.assertEqual(p["requester"], ID)
        self.assertEqual(p["source"], "frontend")

    def test_frontend_refusal_flood_is_summarized(self):
        key = hc.make_key("ec-p256")
        csr = hc.make_csr(key, uris=[ID])
        before = read_log(self.server)
        log_before = os.path.getsize(self.server.log_path)
        n, lock = 400, threading.Lock()
        left = [n]

        def run():
            while True:
                with lock:
                    if left[0] == 0:
                        return
                    left[0] -= 1
                try:
                    self.server.client.create(csr, "bad", 0)
                except grpc.RpcError:
                    pass

        t0 = time.monotonic()
        ts = [threading.Thread(target=run) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        secs = time.monotonic() - t0

        def counted(es):
            new = es[len(before):]
            lines = sum(e["kind"] == "frontend-deny" for e in new)
            summed = sum(e["count"] for e in new
                         if e["kind"] == "suppressed" and e["of"] == "frontend-deny")
            return lines, summed

        entries = wait_log(self.server, lambda es: sum(counted(es)) >= n, timeout=10)
        lines, summed = counted(entries)
        print("flood: %d refusals in %.1f s -> %d frontend-deny entries, %d counted in "
              "summaries" % (n, secs, lines, summed))
        self.assertEqual(lines + summed, n)
        self.assertLessEqual(lines, 50 * (int(secs) + 2))
        if secs < 4:
            self.assertGreater(summed, 0)
        # The front end's stderr is flood-controlled too: at most 50 refusal lines a
        # second (frontend/fe_server.c FE_REFUSAL_LINES_PER_S), the rest counted.
        with open(self.server.log_path, "rb") as f:
            f.seek(log_before)
            text = f.read().decode(errors="replace")
        fe_lines = sum(1 for ln in text.splitlines()
                       if "refused CreateCertificate" in ln and '"proc":"frontend"' in ln)
        print("front end: %d refusal lines for %d refusals" % (fe_lines, n))
        self.assertLessEqual(fe_lines, 50 * (int(secs) + 2))
        self.server.issue()  # issuance goes on

    # ---- open intents at restart -------------------------------------------------------

    def test_killed_between_intent_and_result_gives_unknown(self):
        self.server.control("hang C_Sign always\n")
        errs = []

        def call():
            try:
                self.server.issue()
            except grpc.RpcError as e:
                errs.append(e.code())

        try:
            before = len(read_log(self.server))
            t = threading.Thread(target=call)
            t.start()
            entries = wait_log(self.server, lambda es: any(
                e["kind"] == "issue-intent" for e in es[before:]), timeout=10)
            intent = [e for e in entries[before:] if e["kind"] == "issue-intent"][-1]
            deadline = time.time() + 10
            # The workload's C_Sign held (the audit key's checkpoint signature, also a
            # C_Sign, may be held beside it: at least one call).
            while True:
                with open(self.server.counts) as f:
                    held = re.search(r"^hanging (\d+)$", f.read(), re.M)
                if held and int(held.group(1)) >= 1:
                    break
                self.assertLess(time.time(), deadline, "C_Sign did not hang")
                time.sleep(0.05)
            signer = self.server.wait_children()["signer"]
            os.kill(signer, signal.SIGKILL)
            self.server.control("")
            t.join(30)
            self.server.wait_children(exclude=(signer,))
            self.wait_signer_serving()
        finally:
            self.server.control("")
        entries = wait_log(self.server, lambda es: any(
            e["kind"] == "issue-result" and e["intent_seq"] == intent["seq"] for e in es))
        results = [e for e in entries if e["kind"] == "issue-result" and
                   e["intent_seq"] == intent["seq"]]
        self.assertEqual(len(results), 1, results)
        r = results[0]
        self.assertEqual(r["code"], "UNKNOWN")
        self.assertIn("outcome unknown", r["error"])
        self.assertEqual(r["request_id"], intent["request_id"])
        # Written by the next start just before its start entry: no intent is open at
        # a start.
        last_start = max(i for i, e in enumerate(entries) if e["kind"] == "start")
        self.assertEqual(r["seq"], last_start - 1)
        # Every intent of the log now has exactly one result (the last ones' are written
        # after their reply, within the signer's tick).
        def results_of(es):
            res = {}
            for e in es:
                if e["kind"] == "issue-result":
                    res[e["intent_seq"]] = res.get(e["intent_seq"], 0) + 1
            return res

        entries = wait_log(self.server, lambda es: all(
            e["seq"] in results_of(es) for e in es if e["kind"] == "issue-intent"))
        res = results_of(entries)
        for e in entries:
            if e["kind"] == "issue-intent":
                self.assertEqual(res.get(e["seq"]), 1, e)

    # ---- a full disk: RLIMIT_FSIZE on the running signer ------------------------------

    def prlimit(self, pid, soft):
        """Sets the signer's soft RLIMIT_FSIZE (keeping the hard one), as its own user:
        without CAP_SYS_RESOURCE only a process of the same uid and gid may."""
        with open("/proc/%d/status" % pid) as f:
            st = f.read()
        uid = int(re.search(r"(?m)^Uid:\s+(\d+)", st).group(1))
        gid = int(re.search(r"(?m)^Gid:\s+(\d+)", st).group(1))
        cmd = ["prlimit", "--pid", str(pid), "--fsize=%s:" % soft]
        if uid != os.getuid():
            cmd = ["setpriv", "--reuid", str(uid), "--regid", str(gid), "--clear-groups"] + cmd
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def test_file_size_limit_stops_issuance_then_resumes(self):
        self.server.issue()
        signer = self.server.wait_children()["signer"]
        entries = wait_log(self.server, lambda es: es[-1]["kind"] == "issue-result")
        path = os.path.join(self.server.dir, "audit", "log")
        size = os.path.getsize(path)
        # A few bytes of room: the next line is cut by the limit (a short write, then
        # EFBIG), which the writer must cut away again.
        r = self.prlimit(signer, size + 10)
        if r.returncode != 0:
            self.skipTest("cannot set the signer's RLIMIT_FSIZE: %s" % r.stdout.decode())
        try:
            for _ in range(2):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.server.issue()
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
                self.assertIn("audit", cm.exception.details())
            self.assertIn("audit log: write failed: File too large", self.server.logtext())
        finally:
            r = self.prlimit(signer, "unlimited")
            self.assertEqual(r.returncode, 0, r.stdout)
        time.sleep(1.2)  # the writer retries at most once a second
        chain = self.server.issue()
        leaf = x509.load_pem_x509_certificate(chain[0].encode())
        after = wait_log(self.server, lambda es: es[-1]["kind"] == "issue-result")
        self.assertEqual(self.server.children()["signer"], signer)  # not restarted
        # Nothing lost: what was there is there, byte for byte in meaning, then the rest.
        self.assertEqual(after[:len(entries)], entries)
        intents = [e for e in after if e["kind"] == "issue-intent"]
        self.assertEqual(int(intents[-1]["serial"], 16), leaf.serial_number)
        self.assertEqual(after[-1]["cert_sha256"],
                         sha256(leaf.public_bytes(serialization.Encoding.DER)))


if __name__ == "__main__":
    unittest.main()

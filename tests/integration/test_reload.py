#!/usr/bin/python3
"""SIGHUP to `hsmca serve` under load (docs/OPERATIONS.md "Reload"): the load generator
and a loop of requests for a DNS SAN both policies grant run while the policy file is
changed and reloaded. The new rule applies (a DNS SAN granted, another removed), no
request of the load or the loop fails, a broken policy file is kept out with a log line
naming its line, and neither child restarts: the signer's and the front end's pids are
the same before and after.

Also the request ids (docs/OPERATIONS.md "Logs"): one request's id is in the front end's
final line and in the signer's line about it; the final line has every key, for a
certificate issued and for a refusal."""
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import grpc

import hsmca_client as hc
from hsmca_harness import DevServer, TMP

LOADGEN = os.environ.get("HSMCA_LOADGEN", "build/tests/loadgen")

POLICY_A = """\
dns_names:
  sleep.default: [keep.example.com, a.example.com]
"""
POLICY_B = """\
dns_names:
  sleep.default: [keep.example.com, b.example.com]
"""
# Line 3 holds the mistake: the error names it.
POLICY_BROKEN = """\
dns_names:
  sleep.default: [keep.example.com, b.example.com]
no_such_rule: true
"""

FINAL_KEYS = ("req", "identity", "authn", "code", "dur_ms")


def with_policy(path):
    def edit(text):
        assert "issuance:\n" in text
        return text.replace("issuance:\n", "issuance:\n  policy_file: %s\n" % path, 1)
    return edit


def json_lines(text):
    out = []
    for ln in text.splitlines():
        try:
            out.append(json.loads(ln))
        except ValueError:
            continue
    return out


class ReloadTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(TMP, exist_ok=True)
        fd, cls.policy_path = tempfile.mkstemp(prefix="policy.", suffix=".yaml", dir=TMP)
        with os.fdopen(fd, "w") as f:
            f.write(POLICY_A)
        cls.server = DevServer("ec-p256", name="reload", edit_config=with_policy(cls.policy_path))
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        os.unlink(cls.policy_path)

    def write_policy(self, text):
        tmp = self.policy_path + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.policy_path)

    def create(self, dns=(), client=None):
        k = hc.make_key("ec-p256")
        csr = hc.make_csr(k, uris=["spiffe://cluster.local/ns/default/sa/sleep"], dns=list(dns))
        return (client or self.server.client).create(csr, self.token, 0, timeout=20)

    def config_entries(self):
        """The signing log's config entries (its whole lines: the load appends meanwhile)."""
        with open(os.path.join(self.server.dir, "audit", "log"), "rb") as f:
            lines = f.read().split(b"\n")[:-1]
        return [a for a in map(json.loads, lines) if a.get("kind") == "config"]

    def log_lines(self):
        return json_lines(self.server.logtext(tail=None))

    def wait_for(self, pred, what, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            found = [o for o in self.log_lines() if pred(o)]
            if found:
                return found
            time.sleep(0.1)
        self.fail("no log line: %s\n%s" % (what, self.server.logtext()))

    def count(self, pred):
        return sum(1 for o in self.log_lines() if pred(o))

    def reload(self, text, done_pred, what):
        """Writes text as the policy file, sends SIGHUP and waits for a new line that
        done_pred matches."""
        before = self.count(done_pred)
        self.write_policy(text)
        self.server.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.count(done_pred) > before:
                return
            time.sleep(0.1)
        self.fail("no log line: %s\n%s" % (what, self.server.logtext()))

    def assert_refused(self, dns):
        with self.assertRaises(grpc.RpcError) as cm:
            self.create(dns=dns)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED,
                         cm.exception.details())
        self.assertIn("dns_names", cm.exception.details())

    def test_reload_under_load(self):
        self.token = self.server.token("default", "sleep")
        self.create(dns=["a.example.com"])
        self.assert_refused(["b.example.com"])
        pids = self.server.wait_children()
        configs = self.config_entries()
        self.assertEqual(len(configs), 1)

        load = subprocess.Popen(
            [LOADGEN, "--dir", self.server.dir, "--addr", self.server.addr, "--connections", "2",
             "--concurrency", "8", "--rate", "60", "--requests", "600", "--pods", "10"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stop = threading.Event()
        loop = {"ok": 0, "failed": []}

        def keep_asking():
            client = hc.Client(self.server.addr, self.server.root)
            try:
                while not stop.is_set():
                    try:
                        self.create(dns=["keep.example.com"], client=client)
                        loop["ok"] += 1
                    except grpc.RpcError as e:
                        loop["failed"].append("%s: %s" % (e.code(), e.details()))
            finally:
                client.close()

        th = threading.Thread(target=keep_asking)
        th.start()
        try:
            time.sleep(1)  # the load is on
            fe_took = lambda o: (o.get("proc") == "frontend" and
                                 o.get("msg") == "policy file reloaded")
            self.reload(POLICY_B, fe_took, "the front end reloaded the policy")
            self.wait_for(lambda o: o.get("proc") == "signer" and
                          o.get("msg") == "policy file reloaded", "the signer reloaded it")
            # The new rule applies: b granted, a removed.
            self.create(dns=["b.example.com"])
            self.assert_refused(["a.example.com"])
            # The signing log names the policy its later entries were checked under.
            after = self.config_entries()
            self.assertEqual(len(after), 2)
            self.assertNotEqual(after[1]["policy_sha256"], configs[0]["policy_sha256"])

            # A broken file is kept out, naming its line; the policy in force stays.
            line_named = re.compile(re.escape(self.policy_path) + r":3\b")
            refused = lambda o: (o.get("proc") == "supervisor" and
                                 "policy file not reloaded" in o.get("msg", "") and
                                 line_named.search(o.get("error", "")) is not None)
            self.reload(POLICY_BROKEN, refused, "the broken file named with its line")
            self.wait_for(lambda o: o.get("proc") == "frontend" and
                          "reload failed" in o.get("msg", "") and
                          line_named.search(o.get("reason", "")) is not None,
                          "the front end knows the reload failed")
            self.create(dns=["b.example.com"])
            self.assert_refused(["a.example.com"])
            self.assertEqual(len(self.config_entries()), 2)
            time.sleep(1)  # more load after the last reload
        finally:
            stop.set()
            th.join(60)
        out, err = load.communicate(timeout=120)
        self.assertEqual(load.returncode, 0, out + err)
        m = re.search(r"^result ok=(\d+) requests=(\d+) .* errors=(\d+)( |$)", out, re.M)
        self.assertIsNotNone(m, out)
        print("load: %s of %s requests ok, %s errors; loop: %d ok, %d failed" %
              (m.group(1), m.group(2), m.group(3), loop["ok"], len(loop["failed"])))
        self.assertGreater(int(m.group(2)), 100, out)
        self.assertEqual(m.group(1), m.group(2), out)
        self.assertEqual(m.group(3), "0", out)
        self.assertGreater(loop["ok"], 10)
        self.assertEqual(loop["failed"], [])
        # No child restarted: SIGHUP reloads, it does not restart the signer.
        self.assertEqual(self.server.children(), pids)

    def test_request_ids_join_the_logs(self):
        self.token = self.server.token("default", "sleep")
        self.create(dns=["keep.example.com"])
        self.assert_refused(["not-granted.example.com"])

        def final(o, code):
            return (o.get("proc") == "frontend" and o.get("code") == code and
                    o.get("msg") in ("CreateCertificate", "refused CreateCertificate"))

        ok = self.wait_for(lambda o: final(o, "OK"), "a final line for a certificate")[-1]
        for key in FINAL_KEYS:
            self.assertIn(key, ok)
        self.assertRegex(ok["req"], r"^[0-9a-f]{16}$")
        self.assertEqual(ok["identity"], "spiffe://cluster.local/ns/default/sa/sleep")
        self.assertEqual(ok["authn"], "jwt")
        self.assertGreaterEqual(float(ok["dur_ms"]), 0)
        signed = self.wait_for(lambda o: o.get("proc") == "signer" and o.get("req") == ok["req"],
                               "the signer's line for request %s" % ok["req"])
        self.assertEqual(signed[0]["msg"], "signed workload certificate")

        refused = self.wait_for(lambda o: final(o, "PERMISSION_DENIED"),
                                "a final line for a refusal")[-1]
        for key in FINAL_KEYS + ("reason",):
            self.assertIn(key, refused)
        self.assertRegex(refused["req"], r"^[0-9a-f]{16}$")
        self.assertNotEqual(refused["req"], ok["req"])
        self.assertIn("dns_names", refused["reason"])

        # Refused before authentication: identity "-", and still every key.
        with self.assertRaises(grpc.RpcError):
            k = hc.make_key("ec-p256")
            csr = hc.make_csr(k, uris=["spiffe://cluster.local/ns/default/sa/sleep"])
            self.server.client.create(csr, "not-a-token", 0, timeout=20)
        unauth = self.wait_for(lambda o: final(o, "UNAUTHENTICATED"),
                               "a final line for an unauthenticated call")[-1]
        for key in FINAL_KEYS:
            self.assertIn(key, unauth)
        self.assertEqual(unauth["identity"], "-")


if __name__ == "__main__":
    unittest.main()

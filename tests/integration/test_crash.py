#!/usr/bin/python3
"""Crashes under load (issue 10 part B): `kill -9` of the signer, the front end and the
supervisor at moments the test does not choose, again and again, with the supervisor
started again as systemd would. Each time the children come back within a bound and no
orphan of a dead supervisor keeps running; clients see only OK or retryable codes; and
afterwards the audit log verifies offline and every certificate any client received has
its issue-intent (serial and TBS hash) and issue-result entries. The second test does the
same with the token failing meanwhile, through the fault-injecting PKCS#11 shim."""
import hashlib
import os
import random
import re
import signal
import subprocess
import threading
import time
import unittest

import grpc
from cryptography import x509

import hsmca_client as hc
from hsmca_harness import BIN, SHIM, DevServer, ShimServer, audit_entries

SLEEP_ID = "spiffe://cluster.local/ns/default/sa/sleep"
# What a client may see while a process is being restarted: all retryable (istio-agent
# retries UNAVAILABLE and RESOURCE_EXHAUSTED; the load can outrun the rate limit, 1000/s,
# once the signer catches up after a restart).
RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.CANCELLED, grpc.StatusCode.RESOURCE_EXHAUSTED}
ROLES = ["signer", "frontend", "supervisor"]
ROUNDS = int(os.environ.get("HSMCA_CRASH_ROUNDS", "4"))  # of each role
BACK_WITHIN_S = 15  # children back (and serving) after a kill; generous for ASan


class RecordingLoad:
    """Client threads issuing certificates until stopped; every certificate received is
    kept, every failure counted by code (with one example message)."""

    def __init__(self, server, threads=4):
        self.server = server
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.certs = []
        self.codes = {}
        self.examples = {}
        self.details = {}  # (code, details) -> count
        self.token = server.token()
        self.csr = hc.make_csr(hc.make_key(), uris=[SLEEP_ID])
        self.threads = [threading.Thread(target=self.run) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def run(self):
        client = hc.Client(self.server.addr, self.server.root)
        while not self.stop.is_set():
            try:
                chain = client.create(self.csr, self.token, timeout=5)
                with self.lock:
                    self.certs.append(x509.load_pem_x509_certificate(chain[0].encode()))
            except grpc.RpcError as e:
                with self.lock:
                    self.codes[e.code()] = self.codes.get(e.code(), 0) + 1
                    self.examples.setdefault(e.code(), e.details())
                    key = (e.code(), e.details())
                    self.details[key] = self.details.get(key, 0) + 1
                # A new channel: the server's recovery is measured, not the client
                # library's reconnect backoff (which grows to many seconds).
                client.close()
                time.sleep(0.05)
                client = hc.Client(self.server.addr, self.server.root)
        client.close()

    def ok(self):
        with self.lock:
            return len(self.certs)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def alive(pid):
    """True while pid runs (a zombie does not count)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def missing_intents(audit_dir, certs):
    """The serials (hex) of the certificates in certs without an issue-intent entry of
    the same serial and TBS hash in audit_dir/log, and the log's entries."""
    entries = audit_entries(audit_dir)
    intents = {int(e["serial"], 16): e for e in entries if e["kind"] == "issue-intent"}
    missing = []
    for leaf in certs:
        intent = intents.get(leaf.serial_number)
        if (not intent or
                intent["tbs_sha256"] != hashlib.sha256(leaf.tbs_certificate_bytes).hexdigest()):
            missing.append("%x" % leaf.serial_number)
    return missing, entries


def audit_verify(audit_dir):
    """(exit code, output) of `hsmca audit verify audit_dir`."""
    out = subprocess.run([BIN, "audit", "verify", audit_dir], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    return out.returncode, out.stdout.decode(errors="replace")


class CrashMixin:
    """What the crash tests share: waiting for certificates after a fault, and the kill
    of one process with its checks (children back, no orphan). Needs self.server."""

    def wait_successes(self, load, n, what):
        start, deadline = load.ok(), time.time() + BACK_WITHIN_S
        while load.ok() < start + n:
            if time.time() > deadline:
                self.fail("no certificates within %d s after %s: %s\n%s" %
                          (BACK_WITHIN_S, what, load.examples, self.server.logtext()))
            time.sleep(0.05)

    def kill(self, role):
        kids = self.server.wait_children()
        if role != "supervisor":
            os.kill(kids[role], signal.SIGKILL)
            self.server.wait_children(timeout=BACK_WITHIN_S, exclude=[kids[role]])
            return
        os.kill(self.server.proc.pid, signal.SIGKILL)
        # No orphan: both children stop on their own (the parent-death signal and
        # the closed control channel), the front end after answering what it holds.
        deadline = time.time() + 10
        while any(alive(p) for p in kids.values()):
            if time.time() > deadline:
                self.fail("orphans of a dead supervisor still run: %s" %
                          [p for p in kids.values() if alive(p)])
            time.sleep(0.05)
        self.server.restart_supervisor()
        self.server.wait_children(timeout=BACK_WITHIN_S + 30, exclude=list(kids.values()))


class CrashTests(CrashMixin, unittest.TestCase):
    def setUp(self):
        self.server = DevServer("ec-p256", name="crash")
        self.server.wait_ready()

    def tearDown(self):
        self.server.stop()

    def test_kill9_under_load_loses_nothing(self):
        rng = random.Random(int(os.environ.get("HSMCA_CRASH_SEED", "1")))
        plan = ROLES * ROUNDS
        rng.shuffle(plan)
        load = RecordingLoad(self.server)
        try:
            self.wait_successes(load, 10, "the start")
            for role in plan:
                # A moment inside the stream of requests, not at a boundary we pick.
                time.sleep(rng.uniform(0.05, 0.6))
                self.kill(role)
                self.wait_successes(load, 10, "killing the " + role)
        finally:
            load.finish()
        self.assertTrue(set(load.codes) <= RETRYABLE,
                        "a valid request got a non-retryable answer: %s %s" %
                        (load.codes, load.examples))
        self.assertGreater(len(load.certs), 10 * (len(plan) + 1))
        self.server.stop()  # the stop entry is written: the log is complete

        audit_dir = os.path.join(self.server.dir, "audit")
        rc, out = audit_verify(audit_dir)
        self.assertEqual(rc, 0, out)

        # The intent is the record: durable before C_Sign. A result may have been lost
        # with a killed signer (it is written after the reply); the next start records
        # the outcome as unknown, and `verify` above checked every intent has a result.
        missing, entries = missing_intents(audit_dir, load.certs)
        self.assertEqual(missing, [], "certificates in clients' hands without their intent")
        starts = sum(1 for e in entries if e["kind"] == "start")
        self.assertGreaterEqual(starts, 1 + plan.count("signer") + plan.count("supervisor"))


# The token's faults, one per kill in turn (tests/p11shim/README.md). Every C_Sign of the
# signer goes through them, the audit key's checkpoints too.
TOKEN_FAULTS = [
    "fail C_Sign CKR_DEVICE_ERROR every 9\n",         # pool rebuilt, UNAVAILABLE meanwhile
    "fail C_Sign CKR_SESSION_HANDLE_INVALID every 4\n",  # one session evicted, retried
    "remove\n",                                        # the token gone for REMOVED_S
    "delay C_Sign 150\n",                              # a slow token
]
REMOVED_S = 0.4
BROKEN_S = 2.5  # every C_Sign failing, at the end: more than a checkpoint interval


def checkpoint_size(audit_dir):
    """The size of audit_dir/checkpoint (its second line), 0 when there is none yet."""
    try:
        with open(os.path.join(audit_dir, "checkpoint")) as f:
            return int(f.read().split("\n")[1])
    except (OSError, IndexError, ValueError):
        return 0


class CrashUnderTokenFaults(CrashMixin, unittest.TestCase):
    """The kills of test_kill9_under_load_loses_nothing with the token failing at the same
    time, through the fault-injecting shim: C_Sign failing every Nth call with a device
    error or a dead session, the token removed for a moment, C_Sign slowed down. The
    audit key is in the same token, so checkpoints fail too and are retried."""

    def setUp(self):
        if not SHIM:
            self.skipTest("P11SHIM (the shim's path) is not set")
        self.server = ShimServer("crashfault", sign_timeout=2)
        self.server.wait_ready()

    def tearDown(self):
        self.server.stop()


    def logcount(self, what):
        self.server.log.flush()
        with open(self.server.log_path, "rb") as f:
            return f.read().count(what)

    def sign_failed(self):
        """C_Sign calls the shim failed in the current signer (the counts are per process)."""
        for _ in range(5):  # rewritten in place: read until two reads agree
            with open(self.server.counts) as f:
                a = f.read()
            with open(self.server.counts) as f:
                b = f.read()
            if a == b:
                break
        m = re.search(r"(?m)^C_Sign (\d+) (\d+)$", a)
        return int(m.group(2)) if m else 0

    def test_kill9_with_token_faults_loses_nothing(self):
        rng = random.Random(int(os.environ.get("HSMCA_CRASH_SEED", "1")))
        plan = ROLES * max(1, ROUNDS // 2)
        rng.shuffle(plan)
        audit_dir = os.path.join(self.server.dir, "audit")
        load = RecordingLoad(self.server)
        injected, t0 = 0, time.monotonic()
        try:
            self.wait_successes(load, 10, "the start")
            for i, role in enumerate(plan):
                fault = TOKEN_FAULTS[i % len(TOKEN_FAULTS)]
                before = self.sign_failed()
                self.server.control(fault + "# round %d\n" % i)  # new bytes: the rules re-arm
                timer = None
                if fault == "remove\n":
                    timer = threading.Timer(REMOVED_S, self.server.control, ["# reinserted %d\n" % i])
                    timer.start()
                time.sleep(rng.uniform(0.05, 0.6))
                after = self.sign_failed()
                injected += after - before if after >= before else after
                self.kill(role)
                before = self.sign_failed()
                if timer:
                    timer.join()
                # Back, with the fault still on (the removal over).
                self.wait_successes(load, 10, "killing the %s (token: %s)" %
                                    (role, fault.strip()))
                after = self.sign_failed()
                injected += after - before if after >= before else after
            # Last, the token refuses every signature for a while, the audit key's too:
            # the checkpoints of these seconds fail (logged) and are retried.
            cp_failed0 = self.logcount(b"audit publish: no checkpoint this round")
            self.server.control("fail C_Sign CKR_DEVICE_ERROR always\n")
            time.sleep(BROKEN_S)
            cp_failed = self.logcount(b"audit publish: no checkpoint this round") - cp_failed0
            self.server.control("# no faults\n")
            # Faults over: a checkpoint covers the log as it is now (the publisher
            # retried what the token refused it).
            self.wait_successes(load, 10, "the faults' end")
            size = len(audit_entries(audit_dir))
            deadline = time.time() + 10
            while checkpoint_size(audit_dir) < size:
                self.assertLess(time.time(), deadline, "no checkpoint after the faults ended:"
                                " %d < %d\n%s" % (checkpoint_size(audit_dir), size,
                                                   self.server.logtext()))
                time.sleep(0.1)
        finally:
            self.server.control("")
            load.finish()
        took = time.monotonic() - t0
        allowed = RETRYABLE | {grpc.StatusCode.RESOURCE_EXHAUSTED}
        print("kills with token faults: %d kills (%s) in %.1f s, %d certificates, failures %s,"
              " C_Sign failures injected >= %d; token broken for %.1f s: checkpoint failures"
              " logged %d" %
              (len(plan), ",".join(plan), took, len(load.certs),
               {c.name: n for c, n in load.codes.items()}, injected, BROKEN_S, cp_failed))
        self.assertTrue(set(load.codes) <= allowed,
                        "a valid request got a non-retryable answer: %s %s" %
                        (load.codes, load.examples))
        self.assertGreater(injected, 0, "the shim failed no C_Sign")
        self.assertGreater(cp_failed, 0, "no checkpoint failed while the token was broken")
        self.server.stop()

        rc, out = audit_verify(audit_dir)
        self.assertEqual(rc, 0, out)
        missing, entries = missing_intents(audit_dir, load.certs)
        print("certificates looked up in the log: %d, missing = %d" %
              (len(load.certs), len(missing)))
        self.assertEqual(missing, [], "certificates in clients' hands without their intent")
        starts = sum(1 for e in entries if e["kind"] == "start")
        self.assertGreaterEqual(starts, 1 + plan.count("signer") + plan.count("supervisor"))


if __name__ == "__main__":
    unittest.main()

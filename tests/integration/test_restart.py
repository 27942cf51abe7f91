#!/usr/bin/python3
"""Killing the front end or the signer while requests run: the supervisor restarts
it, requests fail only with UNAVAILABLE (or a dropped connection) meanwhile, and
succeed again afterwards."""
import os
import signal
import threading
import time
import unittest

import grpc

import hsmca_client as hc
from hsmca_harness import DevServer

SLEEP_ID = "spiffe://cluster.local/ns/default/sa/sleep"


class Load:
    """Background clients issuing certificates until stopped; counts outcomes."""

    def __init__(self, server, threads=4):
        self.server = server
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.codes = {}
        self.token = server.token()
        self.csr = hc.make_csr(hc.make_key(), uris=[SLEEP_ID])
        self.threads = [threading.Thread(target=self.run) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def run(self):
        client = hc.Client(self.server.addr, self.server.root)
        while not self.stop.is_set():
            try:
                client.create(self.csr, self.token, timeout=5)
                with self.lock:
                    self.ok += 1
            except grpc.RpcError as e:
                with self.lock:
                    self.codes[e.code()] = self.codes.get(e.code(), 0) + 1
                time.sleep(0.05)
        client.close()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()


class RestartTests(unittest.TestCase):
    def setUp(self):
        self.server = DevServer("ec-p256", name="restart")
        self.server.wait_ready()

    def tearDown(self):
        self.server.stop()

    def successes_after(self, load, seconds=60):
        start = load.ok
        deadline = time.time() + seconds
        while time.time() < deadline and load.ok < start + 20:
            time.sleep(0.1)
        return load.ok - start

    def kill_during_load(self, role):
        before = self.server.wait_children()
        load = Load(self.server)
        try:
            time.sleep(1)
            self.assertGreater(load.ok, 0, "no successes before the kill")
            os.kill(before[role], signal.SIGKILL)
            after = self.server.wait_children(exclude=[before[role]])
            self.assertNotEqual(after[role], before[role])
            self.assertGreaterEqual(self.successes_after(load), 20,
                                    "requests did not recover: %s\n%s" % (load.codes,
                                                                          self.server.logtext()))
        finally:
            load.finish()
        # Only transient failures: nothing refused as if the request were wrong.
        allowed = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                   grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN}
        self.assertTrue(set(load.codes) <= allowed, load.codes)
        # The other child was not restarted.
        other = "signer" if role == "frontend" else "frontend"
        self.assertEqual(self.server.children()[other], before[other])

    def test_kill_frontend(self):
        self.kill_during_load("frontend")

    def test_kill_signer(self):
        self.kill_during_load("signer")

    def test_signer_down_means_unavailable(self):
        """While no signer runs, the front end answers UNAVAILABLE, then recovers."""
        kids = self.server.wait_children()
        token = self.server.token()
        csr = hc.make_csr(hc.make_key(), uris=[SLEEP_ID])
        # Pause the supervisor so that the signer stays down while we ask.
        os.kill(self.server.proc.pid, signal.SIGSTOP)
        try:
            os.kill(kids["signer"], signal.SIGKILL)
            time.sleep(0.5)
            for _ in range(3):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.server.client.create(csr, token)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE,
                                 cm.exception.details())
                self.assertIn("signer unavailable", cm.exception.details())
        finally:
            os.kill(self.server.proc.pid, signal.SIGCONT)
        self.server.wait_children(exclude=[kids["signer"]])
        deadline = time.time() + 30
        while True:
            try:
                self.assertEqual(len(self.server.client.create(csr, token)), 2)
                break
            except grpc.RpcError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)


if __name__ == "__main__":
    unittest.main(verbosity=2)

#!/usr/bin/python3
"""Killing the front end or the signer while requests run: the supervisor restarts
it, requests fail only with UNAVAILABLE (or a dropped connection) meanwhile, and
succeed again afterwards."""
import ctypes
import os
import signal
import threading
import time
import unittest

import grpc

import hsmca_client as hc
from hsmca_harness import DevServer

SLEEP_ID = "spiffe://cluster.local/ns/default/sa/sleep"
SYS_PIDFD_GETFD = 438  # x86_64
LIBC = ctypes.CDLL(None, use_errno=True)


def child_ctl(pid):
    """A copy of child pid's end of its control channel to the supervisor (its fd 4,
    --ctl-fd 4), taken with pidfd_getfd: what we write there the supervisor reads as
    that child's."""
    pidfd = os.pidfd_open(pid)
    try:
        fd = LIBC.syscall(SYS_PIDFD_GETFD, pidfd, 4, 0)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")
        return fd
    finally:
        os.close(pidfd)


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


class ControlRoutingTests(unittest.TestCase):
    """The supervisor routes a control byte by its sender's row of the children's table
    (supervisor/sup_procs.c): the signer may ask for a new front end (CTL_RESTART_PEER,
    'K'); the same byte from the front end is ignored, it cannot get the signer killed."""

    def setUp(self):
        self.server = DevServer("ec-p256", name="ctlroute")
        self.server.wait_ready()

    def tearDown(self):
        self.server.stop()

    def test_restart_peer_only_from_the_signer(self):
        before = self.server.wait_children()
        fe, sg = child_ctl(before["frontend"]), child_ctl(before["signer"])
        try:
            os.write(fe, b"K")  # first: read no later than the signer's
            os.write(sg, b"K")
        finally:
            os.close(fe)
            os.close(sg)
        after = self.server.wait_children(exclude=[before["frontend"]])
        self.assertEqual(after["signer"], before["signer"], self.server.logtext())
        log = self.server.logtext(None)
        violation = '"msg":"a child reports a protocol violation: restarting its peer","role":"%s"'
        self.assertEqual(log.count(violation % "signer"), 1, log)
        self.assertNotIn(violation % "frontend", log)
        # Requests work again on the new front end, with the same signer.
        deadline = time.time() + 30
        while True:
            client = hc.Client(self.server.addr, self.server.root)
            try:
                self.server.issue(client=client, timeout=5)
                break
            except grpc.RpcError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
            finally:
                client.close()
        self.assertEqual(self.server.children()["signer"], before["signer"])


if __name__ == "__main__":
    unittest.main(verbosity=2)

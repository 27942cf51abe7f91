"""Health and readiness (docs/OPERATIONS.md "Health"), on real processes: /readyz turns
false within seconds when the token is removed (the p11shim) and when the audit directory
stops being writable (checkpoints stop), names the condition, and turns true again when
they return; `hsmca probe --ready` and `hsmca probe --grpc` (the gRPC health check over
TLS, the serving certificate's name checked) exit accordingly; /healthz stays up
meanwhile, and both answer 503 while the front end is gone."""

import os
import re
import select
import signal
import socket
import subprocess
import threading
import time
import unittest

import grpc

from hsmca_harness import BIN, DevServer, ShimServer
from pki_fixture import make_server_pki
from test_metrics import get, wait_for


HEALTH = "/grpc.health.v1.Health/Check"
SERVING, NOT_SERVING = b"\x08\x01", b"\x08\x02"


def grpc_health(srv, body=b""):
    """The HealthCheckResponse bytes of a Health/Check on the gRPC port (no credentials)."""
    return srv.client.channel.unary_unary(HEALTH)(body, timeout=10)


def probe(srv, *flags):
    r = subprocess.run([BIN, "probe", "--url", srv.metrics_url] + list(flags),
                       capture_output=True, timeout=30)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def probe_grpc(*args):
    r = subprocess.run([BIN, "probe", "--grpc"] + list(args), capture_output=True, timeout=30)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def config_of(srv):
    return os.path.join(srv.dir, "hsmca.yaml")


class Forwarder:
    """Accepts TCP connections on host (an ephemeral port) and relays each to target, so
    the CA's port is reached under another address."""

    def __init__(self, host, target):
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(8)
        self.addr = "%s:%d" % (host, self.sock.getsockname()[1])
        self.target = target
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(self.target)
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    @staticmethod
    def pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.sock.close()


class TokenRemoved(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = ShimServer("health", sign_timeout=2)
        cls.srv.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def ready(self):
        return get(self.srv.metrics_url + "/readyz")

    def test_token_removed_and_back(self):
        wait_for(lambda: self.ready()[0] == 200, what="ready at start")
        rc, out, _ = probe(self.srv, "--ready")
        self.assertEqual(rc, 0, out)
        self.assertIn("ok: token logged in", out)
        self.assertEqual(grpc_health(self.srv), SERVING)
        rc, out, err = probe_grpc("--config", config_of(self.srv))
        self.assertEqual((rc, out), (0, "127.0.0.1:%d: SERVING\n" % self.srv.port), err)
        # No request from here on: the signer's token probe finds the removal by itself.
        self.srv.control("remove\n")
        t0 = time.monotonic()
        status, body = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(self.ready()),
                                timeout=10, what="readyz 503 after the token's removal")
        print("token removed: /readyz 503 after %.2f s: %s" % (time.monotonic() - t0,
                                                               body.strip()))
        self.assertIn("not ready: the CA key's token is not logged in", body)
        rc, out, _ = probe(self.srv, "--ready")
        self.assertEqual(rc, 1, out)
        self.assertIn("not logged in", out)
        self.assertEqual(grpc_health(self.srv), NOT_SERVING)
        rc, out, err = probe_grpc("--config", config_of(self.srv))
        self.assertEqual((rc, out), (1, "127.0.0.1:%d: NOT_SERVING\n" % self.srv.port), err)
        self.assertIn("is not ready (hsmca probe --ready names the condition)", err)
        self.assertEqual(get(self.srv.metrics_url + "/healthz")[0], 200, "healthz followed")
        self.srv.control("# reinserted\n")
        t0 = time.monotonic()
        wait_for(lambda: self.ready()[0] == 200, timeout=15, what="ready after reinsertion")
        print("token back: /readyz 200 after %.2f s" % (time.monotonic() - t0))
        self.assertEqual(probe(self.srv, "--ready")[0], 0)
        self.srv.issue()
        self.assertEqual(grpc_health(self.srv), SERVING)
        self.assertEqual(probe_grpc("--config", config_of(self.srv))[0], 0)

    def test_grpc_probe_trusts_the_roots_and_checks_the_name(self):
        wait_for(lambda: self.ready()[0] == 200, what="ready")
        root = os.path.join(self.srv.dir, "root-cert.pem")
        rc, out, err = probe_grpc("--addr", self.srv.addr, "--root", root)
        self.assertEqual((rc, out), (0, "%s: SERVING\n" % self.srv.addr), err)
        # The same port reached as 127.0.0.2, a name the serving certificate does not hold
        # (it holds localhost and 127.0.0.1): refused. Through the same relay as
        # 127.0.0.1, accepted, so the name is what failed.
        fwd = Forwarder("127.0.0.2", ("127.0.0.1", self.srv.port))
        self.addCleanup(fwd.close)
        rc, out, err = probe_grpc("--addr", fwd.addr, "--root", root, "--timeout", "10")
        self.assertEqual((rc, out), (1, ""), err)
        self.assertIn("hsmca probe: UNAVAILABLE: ", err)
        self.assertIn("Peer name 127.0.0.2 is not in peer certificate", err)
        host, port = fwd.addr.split(":")
        fwd2 = Forwarder("127.0.0.1", ("127.0.0.2", int(port)))
        self.addCleanup(fwd2.close)
        rc, out, err = probe_grpc("--addr", fwd2.addr, "--root", root, "--timeout", "10")
        self.assertEqual((rc, out), (0, "%s: SERVING\n" % fwd2.addr), err)
        # Roots that are not the CA's (another CA's certificate): refused.
        other = make_server_pki(self.srv.dir, ["other-ca.pem", "other-srv.pem", "other-key.pem"],
                                "another CA", "localhost")[0]
        rc, out, err = probe_grpc("--addr", self.srv.addr, "--root", other)
        self.assertEqual((rc, out), (1, ""), err)
        self.assertIn("hsmca probe: UNAVAILABLE: ", err)
        self.assertIn("certificate verify failed", err)
        rc, out, err = probe_grpc("--addr", self.srv.addr, "--root",
                                  os.path.join(self.srv.dir, "dev-jwks.json"))
        self.assertEqual(rc, 1, out + err)
        self.assertIn("hsmca probe: the roots to trust hold no PEM certificate", err)
        rc, out, err = probe_grpc("--addr", self.srv.addr, "--root", "/nonexistent.pem")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("the roots to trust (--root)", err)
        # Usage: --grpc takes --config or --addr with --root, and not --url or --ready.
        for args in ((), ("--addr", self.srv.addr), ("--config", config_of(self.srv), "--ready"),
                     ("--url", self.srv.metrics_url)):
            self.assertEqual(probe_grpc(*args)[0], 2, args)

    def test_ready_through_the_first_entries_after_a_quiet_spell(self):
        """After more than five quiet seconds the latest checkpoint is old, and the next
        request's entries wait up to a second for theirs: /readyz stays 200 meanwhile."""
        wait_for(lambda: self.ready()[0] == 200, what="ready at start")
        time.sleep(6)  # the quiet spell itself: longer than a checkpoint's allowed age
        self.srv.issue()
        for _ in range(40):
            status, body = self.ready()
            self.assertEqual(status, 200, body)
            time.sleep(0.05)

    def test_grpc_health_services_and_garbage(self):
        name = b"istio.v1.auth.IstioCertificateService"
        wait_for(lambda: self.ready()[0] == 200, what="ready")
        self.assertEqual(grpc_health(self.srv, b"\x0a" + bytes([len(name)]) + name), SERVING)
        with self.assertRaises(grpc.RpcError) as cm:
            grpc_health(self.srv, b"\x0a\x03foo")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(grpc.RpcError) as cm:
            grpc_health(self.srv, b"\x08\x01")  # field 1 as a varint: not a service name
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)


class AuditDirNotWritable(unittest.TestCase):
    def setUp(self):
        self.srv = DevServer(name="healthaudit")
        self.addCleanup(self.srv.stop)
        self.srv.wait_ready()
        self.audit_dir = os.path.join(self.srv.dir, "audit")
        with open("/proc/%d/status" % self.srv.wait_children()["signer"]) as f:
            uid = int(re.search(r"(?m)^Uid:\s+\d+\s+(\d+)", f.read()).group(1))
        if uid == 0:
            self.skipTest("the signer runs as root here: directory modes do not bind it")

    def test_checkpoints_stop_then_resume(self):
        wait_for(lambda: get(self.srv.metrics_url + "/readyz")[0] == 200, what="ready")
        dirs = [self.audit_dir] + [os.path.join(r, d) for r, ds, _ in os.walk(self.audit_dir)
                                   for d in ds]
        modes = {d: os.stat(d).st_mode & 0o7777 for d in dirs}
        try:
            for d in dirs:
                os.chmod(d, 0o500)
            self.srv.issue()  # an entry no checkpoint can cover now
            t0 = time.monotonic()
            status, body = wait_for(
                lambda: (lambda r: r if r[0] == 503 else None)(
                    get(self.srv.metrics_url + "/readyz")),
                timeout=15, what="readyz 503 with the audit directory read-only")
            print("audit dir read-only: /readyz 503 after %.2f s: %s" %
                  (time.monotonic() - t0, body.strip()))
            self.assertRegex(body, r"not ready: \d+ audit entries not covered by a checkpoint")
            self.assertEqual(probe(self.srv, "--ready")[0], 1)
            self.assertEqual(probe(self.srv)[0], 0, "healthz must not follow readiness")
            self.assertEqual(grpc_health(self.srv), NOT_SERVING)
        finally:
            for d, m in modes.items():
                os.chmod(d, m)
        wait_for(lambda: get(self.srv.metrics_url + "/readyz")[0] == 200, timeout=15,
                 what="ready again once writable")
        self.assertEqual(probe(self.srv, "--ready")[0], 0)
        self.assertEqual(grpc_health(self.srv), SERVING)


class Trickle(unittest.TestCase):
    SOURCES = ["127.0.0.%d" % i for i in range(1, 5)]

    def test_trickling_connections_do_not_hold_healthz(self):
        """64 connections from four addresses, each sending a header line a second, neither
        keep /healthz from answering nor hold their connections past the request deadline
        (docs/OPERATIONS.md "Health": 3 s a request, room always made)."""
        srv = DevServer(name="healthtrickle")
        self.addCleanup(srv.stop)
        srv.wait_ready()
        stop = threading.Event()
        self.addCleanup(stop.set)
        lock = threading.Lock()
        counts = {"open": 0, "cut": 0}

        def trickle(src):
            while not stop.is_set():
                s = socket.socket()
                try:
                    s.bind((src, 0))
                    s.settimeout(5)
                    s.connect(("127.0.0.1", srv.metrics_port))
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                except OSError:
                    s.close()
                    stop.wait(0.2)
                    continue
                with lock:
                    counts["open"] += 1
                while not stop.is_set():
                    try:
                        s.sendall(b"X-Slow: 1\r\n")
                        ready = select.select([s], [], [], 1.0)[0]
                        if ready and not s.recv(4096):
                            raise ConnectionResetError("closed")
                    except OSError:
                        with lock:
                            counts["cut"] += 1
                        break
                s.close()

        threads = [threading.Thread(target=trickle, args=(src,), daemon=True)
                   for src in self.SOURCES for _ in range(16)]
        for t in threads:
            t.start()
        wait_for(lambda: counts["open"] >= 64, what="64 trickling connections")
        stop.wait(1.0)  # the server has accepted them
        try:
            status, body = get(srv.metrics_url + "/healthz", timeout=10)
        except OSError as e:
            status, body = None, repr(e)
        self.assertEqual(status, 200, "/healthz under 64 trickling connections: %s" % body)
        # And a trickle does not keep its connection: each one is cut, well before the
        # trickle would have ended on its own.
        wait_for(lambda: counts["cut"] >= 64, timeout=30,
                 what="every trickling connection cut by the deadline")
        stop.set()
        for t in threads:
            t.join(timeout=10)


def all_threads_stopped(pid):
    states = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            pass  # a thread that has just exited
    return bool(states) and all(st in ("T", "t") for st in states)


class FrontEndGone(unittest.TestCase):
    def test_503_while_the_front_end_is_stopped(self):
        srv = DevServer(name="healthfe")
        self.addCleanup(srv.stop)
        srv.wait_ready()
        fe = srv.wait_children()["frontend"]
        os.kill(fe, signal.SIGSTOP)  # alive, so not restarted, but answering nothing
        # A stop reaches a process's threads one by one (the first to take the signal stops
        # the rest): until every one is stopped, the metrics link's thread may still answer.
        wait_for(lambda: all_threads_stopped(fe), what="every front-end thread stopped")
        try:
            for path in ("/healthz", "/readyz", "/metrics"):
                status, body = get(srv.metrics_url + path)
                self.assertEqual(status, 503, (path, body))
                if path != "/metrics":
                    self.assertIn("the front end does not answer", body)
            self.assertEqual(probe(srv)[0], 1)
        finally:
            os.kill(fe, signal.SIGCONT)
        wait_for(lambda: get(srv.metrics_url + "/healthz")[0] == 200, what="healthy again")


if __name__ == "__main__":
    unittest.main()

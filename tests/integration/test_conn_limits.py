#!/usr/bin/python3
"""Connection and queue limits of the front end (issue 8 item 4): a TCP connection that
never starts its TLS handshake is closed after server.handshake_timeout (it was kept for
over 40 s), one that stops half-way through the handshake too, and a valid client on
another connection is served meanwhile and after; beyond server.max_connections a new
connection is closed at once while the open ones keep getting certificates; beyond
server.max_queued_requests a call is answered RESOURCE_EXHAUSTED at once, and the
server recovers."""
import concurrent.futures
import os
import socket
import ssl
import time
import unittest

import grpc

import hsmca_client as hc
from hsmca_harness import SHIM, DevServer, ShimServer

HANDSHAKE_S = 2


def closed_after(sock, limit):
    """Seconds until the server closes sock (reads EOF or a reset), or None by limit."""
    sock.settimeout(0.2)
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        try:
            if sock.recv(4096) == b"":
                return time.monotonic() - t0
        except socket.timeout:
            continue
        except (ConnectionResetError, ssl.SSLError):
            return time.monotonic() - t0
    return None


class ConnLimitTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer("ec-p256", name="connlimits",
                               server_settings=["handshake_timeout: %ds" % HANDSHAKE_S,
                                                "idle_timeout: 600s"])
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.server.port), timeout=5)

    def test_silent_connection_closed_after_handshake_timeout(self):
        s = self.connect()
        try:
            took = closed_after(s, HANDSHAKE_S + 10)
        finally:
            s.close()
        print("a connection that sends nothing: closed after %s s" %
              ("%.2f" % took if took is not None else "> %d" % (HANDSHAKE_S + 10)))
        self.assertIsNotNone(took, "kept open past handshake_timeout + 10 s")
        self.assertGreaterEqual(took, HANDSHAKE_S - 0.5)
        self.server.issue()  # valid clients are served

    def test_half_handshake_closed_after_handshake_timeout(self):
        """A ClientHello, then silence: the server's reply is read, nothing more sent."""
        raw = self.connect()
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
        try:
            tls.do_handshake()
        except ssl.SSLWantReadError:
            pass
        raw.sendall(outgoing.read())  # the ClientHello; the client never answers
        try:
            took = closed_after(raw, HANDSHAKE_S + 10)
        finally:
            raw.close()
        print("a handshake left half-way: closed after %s s" %
              ("%.2f" % took if took is not None else "> %d" % (HANDSHAKE_S + 10)))
        self.assertIsNotNone(took, "kept open past handshake_timeout + 10 s")
        self.server.issue()


def tls_handshake(port, root_pem, timeout=10):
    """1 when a TLS handshake with the server completes (the socket is then closed),
    0 when the server closes or resets the connection during it."""
    ctx = ssl.create_default_context(cadata=root_pem.decode())
    ctx.check_hostname = False
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        tls = ctx.wrap_socket(raw, server_hostname="localhost")
        tls.close()
        return 1
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError, socket.timeout) as e:
        raw.close()
        if isinstance(e, socket.timeout):
            raise AssertionError("the handshake neither finished nor was refused in %d s" %
                                 timeout)
        return 0


def own_channel(server, n):
    """A client on its own TCP connection (gRPC shares one between identical channels)."""
    creds = grpc.ssl_channel_credentials(root_certificates=server.root)
    ch = grpc.secure_channel(server.addr, creds,
                             options=[("grpc.ssl_target_name_override", "localhost"),
                                      ("grpc.use_local_subchannel_pool", 1),
                                      ("hsmca.test.connection", n)])
    c = hc.Client.__new__(hc.Client)
    c.channel, c.call = ch, ch.unary_unary(hc.METHOD)
    return c


MAX_CONN = 4


class ConnCapTests(unittest.TestCase):
    """server.max_connections: 4 (the harness's own client holds one of them)."""

    @classmethod
    def setUpClass(cls):
        cls.server = DevServer("ec-p256", name="conncap",
                               server_settings=["max_connections: %d" % MAX_CONN])
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_beyond_the_cap_refused_existing_served(self):
        s = self.server
        clients = [s.client]
        try:
            for i in range(MAX_CONN - 1):
                c = own_channel(s, i)
                s.issue(client=c)
                clients.append(c)
            # The cap is reached: a new connection is closed during its handshake ...
            self.assertEqual(tls_handshake(s.port, s.root), 0,
                             "a connection beyond server.max_connections was served")
            extra = own_channel(s, 99)
            with self.assertRaises(grpc.RpcError) as cm:
                s.issue(client=extra, timeout=5)
            extra.close()
            self.assertIn(cm.exception.code(), (grpc.StatusCode.UNAVAILABLE,
                                                grpc.StatusCode.DEADLINE_EXCEEDED))
            # ... while every open connection keeps getting certificates.
            for c in clients:
                self.assertTrue(s.issue(client=c))
            self.assertIn("server.max_connections", s.logtext())
            # A connection that closes frees its place.
            clients.pop().close()
            took = None
            t0 = time.monotonic()
            while time.monotonic() - t0 < 10:
                if tls_handshake(s.port, s.root):
                    took = time.monotonic() - t0
                    break
                time.sleep(0.2)
            self.assertIsNotNone(took, "no room after a connection closed")
            print("a place freed by a closed connection taken after %.2f s" % took)
        finally:
            for c in clients[1:]:
                c.close()


@unittest.skipUnless(SHIM and os.path.exists(SHIM), "needs the p11shim ($P11SHIM)")
class QueueBoundTests(unittest.TestCase):
    """server.max_queued_requests: 4, and a token that takes 1 s per signature: a burst of
    40 calls gets RESOURCE_EXHAUSTED for those beyond the bound before any certificate."""

    @classmethod
    def setUpClass(cls):
        cls.server = ShimServer("queuebound", sign_timeout=30,
                                server_settings=["max_queued_requests: 4"])
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_flood_refused_promptly_then_recovers(self):
        s = self.server
        key = hc.make_key("ec-p256")
        csr = hc.make_csr(key, uris=["spiffe://cluster.local/ns/default/sa/flood"])
        body = hc.encode_request(csr)
        md = [("authorization", "Bearer " + s.token("default", "flood"))]
        s.control("delay C_Sign 1000\n")
        done = {}
        t0 = time.monotonic()

        def stamp(i):
            return lambda f: done.setdefault(i, time.monotonic() - t0)

        futs = []
        for i in range(40):
            f = s.client.call.future(body, metadata=md, timeout=60)
            f.add_done_callback(stamp(i))
            futs.append(f)
        ok, busy, other = [], [], []
        for i, f in enumerate(futs):
            try:
                f.result()
                ok.append(i)
            except grpc.RpcError as e:
                if (e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and
                        "server.max_queued_requests" in e.details()):
                    busy.append(i)
                else:
                    other.append((i, e.code(), e.details()))
        s.control("")
        print("40 calls, bound 4: %d OK, %d RESOURCE_EXHAUSTED (last at %.2f s), first OK "
              "at %.2f s" % (len(ok), len(busy), max(done[i] for i in busy) if busy else -1,
                             min(done[i] for i in ok) if ok else -1))
        self.assertEqual(other, [])
        self.assertGreaterEqual(len(busy), 30)
        self.assertGreaterEqual(len(ok), 1)
        # Promptly: every refusal came before the first certificate, which the token
        # held for a second; the refused calls never waited for the signer.
        self.assertLess(max(done[i] for i in busy), min(done[i] for i in ok))
        self.assertIn("server.max_queued_requests", s.logtext())
        self.assertTrue(s.issue())  # recovered


if __name__ == "__main__":
    unittest.main()

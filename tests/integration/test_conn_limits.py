#!/usr/bin/python3
"""Connection limits of the front end (issue 8 item 4, first part): a TCP connection that
never starts its TLS handshake is closed after server.handshake_timeout (it was kept for
over 40 s), one that stops half-way through the handshake too, and a valid client on
another connection is served meanwhile and after."""
import socket
import ssl
import time
import unittest

from hsmca_harness import DevServer

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


if __name__ == "__main__":
    unittest.main()

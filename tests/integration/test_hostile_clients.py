#!/usr/bin/python3
"""Hostile clients against the real front end (issue 10 item 6): slow and never-finished
TLS handshakes, garbage, HTTP/2 abuse gRPC core lets through (many streams, rapid reset,
huge headers, CONTINUATION floods), oversized, truncated and lying gRPC frames, and
tokens, CSRs, requests and metadata at every size boundary.

While each attack runs, a valid client keeps asking for certificates on its own
connection. After each attack the test checks that the front end and the signer are
the same processes (no restart), that the hostile call got the answer it should where it
gets one, and that the valid client was served (every request OK, at least one). At the
end it prints per attack: attempts, the answer, the valid client's OK count and p99
latency, and the front end's RSS (VmRSS of /proc/<pid>/status).

HSMCA_LONG=1 makes the floods longer (more streams, more bytes); the default run
takes about 25 s.
"""
import base64
import json
import os
import random
import socket
import ssl
import sys
import threading
import time
import unittest

import grpc
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from hyperframe.frame import ContinuationFrame, HeadersFrame

import h2raw
import hsmca_client as hc
from hsmca_harness import DevServer

LONG = os.environ.get("HSMCA_LONG") == "1"
HANDSHAKE_S = 2
JWT_MAX = 8192          # common/ipc_contract.h IPC_TOKEN_MAX
CSR_MAX = 16384         # leafcert/leaf_csr.h LEAF_CSR_MAX_LEN
REQ_MAX = 65536         # server.max_request_bytes (default)
MD_DEPTH = 16           # frontend/fe_app.h FE_METADATA_MAX_DEPTH
WAITING_CAP = 1024      # server.max_queued_requests' default (calls not yet answered)
# Rapid reset (test_rapid_reset): the front end's RSS over its value before the flood,
# at the flood's peak and after it. Measured on 2 shared cores (2026-11-24): peak +40
# to +110 MiB for the default 40,000 streams, once +146 MiB in the whole file's run;
# +110 to +170 MiB for HSMCA_LONG's 400,000; after both, +2 to +7 MiB. One run in ~25
# peaked at ~400 MB before falling back (a flood caught late, not diagnosed): the peak
# bound catches unbounded growth (811 MB before the fix), not that outlier.
RAPID_PEAK_KIB = 512 << 10
RAPID_AFTER_KIB = 32 << 10
SA_ID = "spiffe://cluster.local/ns/default/sa/sleep"
RESULTS = []            # one row per attack, printed at the end


def _sanitized():
    """True for an ASan build: its quarantine and redzones make RSS meaningless and it
    is several times slower, so the memory and capacity bounds are not asserted."""
    try:
        with open(os.environ.get("HSMCA_BIN", "hsmca"), "rb") as f:
            return b"AddressSanitizer" in f.read()
    except OSError:
        return False


SANITIZED = _sanitized()


def fe_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def fe_rss_settled(pid, rss, limit_kib, seconds):
    """The front end's RSS once it is below limit_kib or `seconds` have passed, from
    rss (read just before): what a flood freed goes back to the system at the front
    end's next trim (once a second, fe_server.c: give_back_memory), not at once."""
    deadline = time.monotonic() + seconds
    while rss >= limit_kib and time.monotonic() < deadline:
        time.sleep(0.2)
        rss = fe_rss_kib(pid)
    return rss


def p99(values):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))]


class ValidLoad(threading.Thread):
    """A valid workload asking for certificates back to back on its own channel; it
    records (start, latency, status name) of each request."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.client = hc.Client(server.addr, server.root)
        self.token = server.token(ttl=3600)
        self.csrs = [hc.make_csr(hc.make_key(), uris=[SA_ID]) for _ in range(8)]
        self.done = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self):
        i = 0
        while not self.stopping.is_set():
            t0 = time.monotonic()
            try:
                chain = self.client.create(self.csrs[i % len(self.csrs)], self.token, timeout=15)
                code = "OK" if len(chain) == 2 else "BAD_CHAIN"
            except grpc.RpcError as e:
                code = "%s: %s" % (e.code().name, e.details())
            with self.lock:
                self.done.append((t0, time.monotonic() - t0, code))
            i += 1
            self.stopping.wait(0.02)

    def window(self, t0):
        """(OK count, other answers, latencies) of the requests started since t0."""
        with self.lock:
            rows = [r for r in self.done if r[0] >= t0]
        ok = [r[1] for r in rows if r[2] == "OK"]
        bad = [r[2] for r in rows if r[2] != "OK"]
        return len(ok), bad, [r[1] for r in rows]

    def stop(self):
        self.stopping.set()
        self.join(20)
        self.client.close()


def mint_token(server, size):
    """A valid JWT from the dev issuer of exactly `size` bytes: the dev token's header
    and claims, a "pad" claim, and up to two spaces in the header JSON to reach every
    length (a base64url length is never 1 mod 4)."""
    tok = server.token(ttl=3600)
    h64, c64, _ = tok.split(".")
    dec = lambda s: json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))
    header, claims = dec(h64), dec(c64)
    with open(os.path.join(server.dir, "dev-jwt-key.pem"), "rb") as f:
        key = serialization.load_pem_private_key(f.read(), None)
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")
    for spaces in range(3):
        hj = json.dumps(header, separators=(",", ":")).replace(",", ", ", spaces).encode()
        base = len(b64(hj)) + 1 + 1 + 86  # ES256: 64-byte signature, 86 characters
        claims["pad"] = ""
        bare = len(json.dumps(claims, separators=(",", ":")))
        aim = (size - base) * 3 // 4 - bare
        for pad in range(max(0, aim - 8), aim + 8):
            claims["pad"] = "p" * pad
            cj = json.dumps(claims, separators=(",", ":")).encode()
            if base + len(b64(cj)) == size:
                signing = b64(hj) + b"." + b64(cj)
                r, s = decode_dss_signature(key.sign(signing, ec.ECDSA(hashes.SHA256())))
                sig = b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
                out = (signing + b"." + sig).decode()
                assert len(out) == size, (len(out), size)
                return out
    raise AssertionError("no token of %d bytes" % size)


def padded_csr(size):
    """A valid CSR PEM for SA_ID, followed by newlines up to `size` bytes (whitespace
    around the block is accepted)."""
    pem = hc.make_csr(hc.make_key(), uris=[SA_ID])
    assert len(pem) <= size
    return pem + b"\n" * (size - len(pem))


def struct_padding(n):
    """A google.protobuf.Struct of exactly n bytes: {"p": "ppp..."}."""
    for s in range(max(0, n - 24), n + 1):
        value = b"\x1a" + hc._varint(s) + b"p" * s                    # Value.string_value = 3
        entry = b"\x0a\x01p\x12" + hc._varint(len(value)) + value      # key = 1, value = 2
        out = b"\x0a" + hc._varint(len(entry)) + entry                 # Struct.fields = 1
        if len(out) == n:
            return out
    raise AssertionError("no Struct of %d bytes" % n)


def request_of(size):
    """A valid IstioCertificateRequest of exactly `size` bytes (metadata pads it)."""
    csr = hc.make_csr(hc.make_key(), uris=[SA_ID])
    bare = len(hc.encode_request(csr, metadata=b""))
    for md_len in range(max(0, size - bare - 12), size - bare + 1):
        body = hc.encode_request(csr, metadata=struct_padding(md_len))
        if len(body) == size:
            return body
    raise AssertionError("no request of %d bytes" % size)


def nested_struct(depth):
    """A Struct of exactly `depth` levels counted as frontend/fe_pbcheck.c counts them
    (Struct and Value each a level): Struct > Value > Struct > ... (test_fe_pbcheck.c:
    nested_structs)."""
    cur = b"" if depth % 2 else b"\x08\x00"  # empty Struct, or Value{null_value}
    for lvl in range(depth - 1, 0, -1):
        if lvl % 2:
            entry = b"\x0a\x01k\x12" + hc._varint(len(cur)) + cur
            cur = b"\x0a" + hc._varint(len(entry)) + entry
        else:
            cur = b"\x2a" + hc._varint(len(cur)) + cur  # Value.struct_value = 5
    return cur


def closed_by_server(socks, limit):
    """Waits up to limit seconds; returns (how many of socks the server closed, the
    seconds the last of them took)."""
    t0 = time.monotonic()
    open_ = list(socks)
    last = 0.0
    while open_ and time.monotonic() - t0 < limit:
        still = []
        for s in open_:
            s.settimeout(0)
            try:
                if s.recv(65536) == b"":
                    last = time.monotonic() - t0
                    continue
            except (BlockingIOError, ssl.SSLWantReadError, socket.timeout):
                pass
            except (OSError, ssl.SSLError):
                last = time.monotonic() - t0
                continue
            still.append(s)
        open_ = still
        time.sleep(0.05)
    return len(socks) - len(open_), last


def client_hello():
    """The bytes of a TLS ClientHello for localhost (from a memory BIO)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


class HostileServerCase(unittest.TestCase):
    """One server and one valid load for the whole class; attack() wraps each attack."""
    server_settings = ["handshake_timeout: %ds" % HANDSHAKE_S]
    name = "hostile"

    @classmethod
    def setUpClass(cls):
        cls.server = DevServer("ec-p256", name=cls.name, server_settings=cls.server_settings)
        try:
            cls.server.wait_ready()
            cls.pids = cls.server.wait_children()
            cls.load = ValidLoad(cls.server)
            cls.load.start()
        except BaseException:
            cls.server.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.load.stop()
        cls.server.stop()

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.server.port), timeout=5)

    def h2(self, **kw):
        return h2raw.H2Conn(self.server.port, self.server.root, **kw)

    def check_server(self, name):
        self.assertIsNone(self.server.proc.poll(), "%s: the supervisor exited" % name)
        now = self.server.children()
        self.assertEqual(now, self.pids, "%s: a child was restarted (pids %s, then %s)\n%s" %
                         (name, self.pids, now, self.server.logtext()))
        log = self.server.logtext()
        self.assertNotIn('"msg":"restarting a child","role":"frontend"', log, name)
        self.assertNotIn('"msg":"restarting a child","role":"signer"', log, name)

    def attack(self, name, fn, valid_may_get=(), may_get_at_most=None):
        """Runs fn() (returns (attempts, answer)) while the valid load goes on, then
        waits for a valid request started after the attack began to be answered, checks
        the processes and the valid answers (all OK but for the status names in
        valid_may_get, at most may_get_at_most of those when given), and records the
        row."""
        fe = self.pids["frontend"]
        rss0 = fe_rss_kib(fe)
        t0 = time.monotonic()
        attempts, answer = fn()
        deadline = time.monotonic() + 20
        while self.load.window(t0)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        ok, bad, lat = self.load.window(t0)
        rss1 = fe_rss_kib(fe)
        RESULTS.append((name, attempts, answer, ok, len(bad), p99(lat), rss0, rss1))
        print("%s: %s attempts, %s; valid: %d OK, %d other, p99 %.3f s; FE RSS %d -> %d KiB"
              % (name, attempts, answer, ok, len(bad), p99(lat), rss0, rss1), flush=True)
        self.check_server(name)
        excused = [b for b in bad if b.split(":")[0] in valid_may_get]
        bad = [b for b in bad if b.split(":")[0] not in valid_may_get]
        self.assertEqual(bad, [], "%s: valid requests not served" % name)
        if may_get_at_most is not None:
            self.assertLessEqual(len(excused), may_get_at_most,
                                 "%s: too many valid requests refused: %s" % (name, excused))
        self.assertGreater(ok, 0, "%s: no valid request served within 20 s" % name)
        return rss0, rss1

    def create(self, body, token, timeout=15):
        """(status name, details) of one CreateCertificate on a fresh channel."""
        c = hc.Client(self.server.addr, self.server.root)
        try:
            chain = c.create_raw(body, token, timeout=timeout)
            return ("OK", "") if len(chain) == 2 else ("BAD_CHAIN", "")
        except grpc.RpcError as e:
            return e.code().name, e.details() or ""
        finally:
            c.close()


def print_summary():
    if not RESULTS:
        return
    print("\n%-38s %9s  %-70s %6s %5s %8s %14s" %
          ("attack", "attempts", "answer", "validOK", "other", "p99 s", "FE RSS KiB"))
    for name, att, ans, ok, bad, q, r0, r1 in RESULTS:
        print("%-38s %9s  %-70s %6d %5d %8.3f %6d->%-7d" %
              (name, att, ans[:70], ok, bad, q, r0, r1))
    sys.stdout.flush()


class TlsAndTransportAttacks(HostileServerCase):
    """Below gRPC: TCP, TLS and the HTTP/2 preface."""

    def test_half_open_tcp(self):
        def run():
            socks = [self.connect() for _ in range(100)]
            try:
                closed, took = closed_by_server(socks, HANDSHAKE_S + 8)
            finally:
                for s in socks:
                    s.close()
            self.assertEqual(closed, len(socks), "silent connections kept open")
            return len(socks), "all closed by the server after %.1f s" % took
        self.attack("half-open TCP, no ClientHello", run)

    def test_byte_at_a_time_client_hello(self):
        """A slowloris handshake: progress, one byte every 100 ms, never completes in
        time; the handshake deadline counts from the connection, not from the last
        byte."""
        hello = client_hello()

        def run():
            socks = [self.connect() for _ in range(20)]
            t0 = time.monotonic()
            closed, sent, last = set(), 0, 0.0
            try:
                while len(closed) < len(socks) and time.monotonic() - t0 < HANDSHAKE_S + 8:
                    for i, s in enumerate(socks):
                        if i in closed:
                            continue
                        try:
                            s.settimeout(0)
                            try:
                                if s.recv(4096) == b"":
                                    raise ConnectionResetError
                            except BlockingIOError:
                                pass
                            if sent < len(hello):
                                s.send(hello[sent:sent + 1])
                        except OSError:
                            closed.add(i)
                            last = time.monotonic() - t0
                    sent += 1
                    time.sleep(0.1)
            finally:
                for s in socks:
                    s.close()
            self.assertEqual(len(closed), len(socks), "trickling handshakes kept open")
            self.assertLess(sent, len(hello), "the ClientHello was completed: test too slow")
            return len(socks), "closed after %.1f s, %d of %d ClientHello bytes sent" % (
                last, sent, len(hello))
        self.attack("byte-at-a-time ClientHello", run)

    def test_tls_garbage(self):
        rnd = random.Random(10)

        def run():
            socks, n = [], 0
            for i in range(60):
                s = self.connect()
                if i % 3 == 0:    # random bytes
                    data = bytes(rnd.getrandbits(8) for _ in range(4096))
                elif i % 3 == 1:  # a handshake record header announcing 64 KiB - 1
                    data = b"\x16\x03\x01\xff\xff" + bytes(100)
                else:             # a ClientHello with its body scrambled
                    h = bytearray(client_hello())
                    for j in range(9, len(h), 7):
                        h[j] ^= 0x5A
                    data = bytes(h)
                try:
                    s.sendall(data)
                except OSError:
                    pass
                socks.append(s)
                n += 1
            try:
                closed, took = closed_by_server(socks, HANDSHAKE_S + 8)
            finally:
                for s in socks:
                    s.close()
            self.assertEqual(closed, n, "garbage connections kept open")
            return n, "all closed by the server within %.1f s" % took
        self.attack("TLS garbage", run)

    def test_h2_preface_garbage(self):
        rnd = random.Random(11)

        def run():
            conns = []
            for i in range(30):
                c = self.h2(preface=False)
                if i % 2:
                    c.send(bytes(rnd.getrandbits(8) for _ in range(200)))   # no preface
                else:
                    c.send(h2raw.PREFACE + bytes(rnd.getrandbits(8) for _ in range(200)))
                conns.append(c)
            for c in conns:
                c.wait(lambda: c.closed, 5)
            closed = sum(c.closed for c in conns)
            goaways = sum(c.goaway is not None for c in conns)
            for c in conns:
                c.close()
            self.assertEqual(closed, len(conns), "HTTP/2 garbage connections kept open")
            return len(conns), "all closed (%d with GOAWAY first)" % goaways
        self.attack("HTTP/2 preface garbage", run)


class Http2Attacks(HostileServerCase):
    """HTTP/2 abuse that gRPC core parses: streams, resets, headers."""

    def test_many_streams_per_connection(self):
        token = self.server.token(ttl=3600)

        def run():
            c = self.h2()
            self.assertTrue(c.wait(lambda: c.max_streams is not None, 5), "no SETTINGS")
            limit = c.max_streams
            n = limit + 100
            for i in range(n):
                c.send(c.headers_frame(c.new_stream(), h2raw.request_headers(token),
                                       end_stream=False))
                if i % 200 == 0:
                    c.pump(0)
            c.wait(lambda: c.closed, 5)
            refused = sum(1 for v in c.rst.values() if v == h2raw.REFUSED_STREAM)
            answer = ("connection closed" if c.closed else "connection kept") + \
                     (", GOAWAY code %d" % c.goaway[1] if c.goaway else "") + \
                     (", %d streams refused" % refused if refused else "")
            c.close()
            self.assertTrue(c.closed or refused >= n - limit,
                            "streams beyond SETTINGS_MAX_CONCURRENT_STREAMS %d accepted" % limit)
            return n, "%d over the limit of %d: %s" % (n - limit, limit, answer)
        self.attack("streams beyond MAX_CONCURRENT_STREAMS", run)

    def hold_streams(self, nconn, token):
        """nconn connections, each with streams open up to 10 under its
        MAX_CONCURRENT_STREAMS, headers sent and no message; returns them."""
        conns = []
        for _ in range(nconn):
            c = self.h2()
            c.wait(lambda: c.max_streams is not None, 5)
            for i in range(c.max_streams - 10):
                c.send(c.headers_frame(c.new_stream(), h2raw.request_headers(token),
                                       end_stream=False))
                if i % 200 == 0:
                    c.pump(0)
            conns.append(c)
        return conns

    def test_held_streams(self):
        """Connections each holding streams open at just under the limit, the message
        never sent: the calls wait; memory stays bounded and valid clients are served;
        closing the connections frees them."""
        token = self.server.token(ttl=3600)
        nconn = 8 if LONG else 4

        def run():
            conns = self.hold_streams(nconn, token)
            time.sleep(2)
            for c in conns:
                c.pump(0.1)
            rss = fe_rss_kib(self.pids["frontend"])
            kept = sum(not c.closed for c in conns)
            for c in conns:
                c.close()
            return nconn * (conns[0].max_streams - 10), \
                "held; %d of %d connections kept; FE RSS %d KiB while held" % (kept, nconn, rss)
        rss0, rss1 = self.attack("streams held open without a message", run)
        if not SANITIZED:
            self.assertLess(rss1 - rss0, 256 << 10, "held streams grew the front end > 256 MiB")

    def test_held_streams_beyond_the_cap(self):
        """More streams waiting for their message than the front end keeps
        (server.max_queued_requests, default 1024): the excess is refused
        RESOURCE_EXHAUSTED at once and memory stays bounded (gRPC core also stops
        reading some connections under its memory quota, so not every stream over the
        cap reaches the front end). While the cap is full a
        valid request may get RESOURCE_EXHAUSTED too (retryable); once the streams go,
        valid requests are served again."""
        token = self.server.token(ttl=3600)
        nconn = 32 if LONG else 16  # 16 x 90 streams: 416 beyond the 1024

        def run():
            rss_start = fe_rss_kib(self.pids["frontend"])
            conns = self.hold_streams(nconn, token)
            opened = sum(c.next_id // 2 for c in conns)
            refused = 0
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and refused < opened - WAITING_CAP:
                for c in conns:
                    c.pump(0.05)
                refused = sum(1 for c in conns for sid in c.trailers
                              if c.status(sid) and c.status(sid)[0] == 8)
            rss = fe_rss_kib(self.pids["frontend"])
            msgs = {c.status(sid)[1] for c in conns for sid in c.trailers if c.status(sid)}
            for c in conns:
                c.close()
            if not SANITIZED:
                self.assertGreater(refused, 0, "no stream beyond the cap refused: %s" % msgs)
                self.assertTrue(any("server.max_queued_requests" in m for m in msgs), msgs)
                self.assertLess(rss, rss_start + WAITING_CAP * 16 + (32 << 10),
                                "held streams took more than the cap allows")
            t0 = time.monotonic()
            while time.monotonic() - t0 < 10:
                code, details = self.create(hc.encode_request(
                    hc.make_csr(hc.make_key(), uris=[SA_ID])), self.server.token())
                if code == "OK":
                    break
                time.sleep(0.2)
            self.assertEqual(code, "OK", "not served after the held streams went: %s" % details)
            return opened, ("%d refused RESOURCE_EXHAUSTED at once (cap %d); FE RSS %d KiB "
                            "while held; served %.1f s after they went" %
                            (refused, WAITING_CAP, rss, time.monotonic() - t0))
        rss0, rss1 = self.attack("streams held beyond the waiting cap", run,
                                 valid_may_get=("RESOURCE_EXHAUSTED",))

    def test_rapid_reset(self):
        """CVE-2023-44487: HEADERS then RST_STREAM, in a loop, never more than one
        stream open at a time. The front end closes a connection once more than 100 of
        its calls are cancelled within 10 s (or it holds more than 200 calls); the
        attacker then reconnects and goes on until all its streams are sent. The front
        end's RSS must stay within RAPID_PEAK_KIB of where it was during the flood and
        come back within RAPID_AFTER_KIB of it after (glibc's arenas trimmed)."""
        token = self.server.token(ttl=3600)
        nconn, per = (4, 100000) if LONG else (2, 20000)
        out = []

        def one():
            sent = conns = 0
            goaway = None
            while sent < per:
                c = self.h2()
                conns += 1
                while sent < per and not c.closed:
                    batch = []
                    for _ in range(100):
                        sid = c.new_stream()
                        batch.append(c.headers_frame(sid, h2raw.request_headers(token),
                                                     end_stream=False) + c.rst_frame(sid))
                    if not c.send(b"".join(batch)):
                        break
                    sent += 100
                    c.pump(0)
                c.wait(lambda: c.closed, 1)
                goaway = goaway or c.goaway
                c.close()
            out.append((sent, goaway, conns))

        fe = self.pids["frontend"]
        peak = [fe_rss_kib(fe)]
        sampling = threading.Event()

        def sample():
            while not sampling.is_set():
                peak[0] = max(peak[0], fe_rss_kib(fe))
                time.sleep(0.01)

        def run():
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            ths = [threading.Thread(target=one) for _ in range(nconn)]
            t0 = time.monotonic()
            for t in ths:
                t.start()
            for t in ths:
                t.join(300)
            took = time.monotonic() - t0
            sent = sum(o[0] for o in out)
            conns = sum(o[2] for o in out)
            goaway = [o[1][1] for o in out if o[1]]
            # The trim runs once a second: give it two.
            time.sleep(2.5)
            sampling.set()
            sampler.join(5)
            return sent, "%d streams in %.1f s on %d connections; GOAWAY %s; peak RSS %d KiB" % (
                sent, took, conns, goaway or "none", peak[0])
        rss0, rss1 = self.attack("rapid reset (HEADERS+RST_STREAM)", run,
                                 valid_may_get=("RESOURCE_EXHAUSTED",))
        self.assertEqual(sum(o[0] for o in out), nconn * per, "the flood did not get through")
        if not SANITIZED:
            # The front end sees the cancels in the calls gRPC core hands it, behind those
            # core has queued (1.51 queues every new stream, with no bound). On a loaded
            # machine its view can lag the whole flood: in ~1 run of 15 with four busy
            # loops on the two cores (2026-11-27), each attacker had sent its 20,000
            # streams on one connection and gone before the front end counted its 101st
            # cancel, 2-4 s after the flood began; it then logged "cannot close the
            # connection" (already gone) or closed the one gRPC had not yet ended. The
            # decision is checked either way; a close while the attacker is still
            # sending is reported when it happens.
            self.server.logtext()  # flushes
            with open(self.server.log_path, "rb") as f:
                decided = [l for l in f.read().split(b"\n") if b"CVE-2023-44487" in l]
            self.assertTrue(decided, "the front end never decided to close a rapid-reset "
                                     "connection (no log line)")
            if sum(o[2] for o in out) == nconn:
                print("  no connection closed while the attacker sent; the front end's "
                      "first decision: %s" % decided[0].decode(errors="replace"))
            self.assertLess(peak[0] - rss0, RAPID_PEAK_KIB,
                            "rapid reset: FE RSS peaked at %d KiB from %d" % (peak[0], rss0))
            # A front end that lagged the flood frees its calls as it catches up, and
            # gives the memory back at its next trim (once a second): wait for both
            # (59.9 MiB 2.5 s after the flood, from 23.0, once under four busy loops).
            first = rss1
            rss1 = fe_rss_settled(fe, rss1, rss0 + RAPID_AFTER_KIB, 10)
            self.assertLess(rss1 - rss0, RAPID_AFTER_KIB,
                            "rapid reset: FE RSS %d KiB after (%d at first), %d before"
                            % (rss1, first, rss0))

    def test_huge_header_block(self):
        """One HEADERS block of 1 MiB in 16 KiB CONTINUATION frames, ended properly."""
        token = self.server.token(ttl=3600)

        def run():
            c = self.h2()
            sid = c.new_stream()
            block = c.enc.encode(h2raw.request_headers(token) +
                                 [("x-junk-%d" % i, "v" * 1000) for i in range(1000)])
            first = HeadersFrame(sid)
            first.data = block[:16384]
            c.send(first.serialize())
            for off in range(16384, len(block), 16384):
                f = ContinuationFrame(sid)
                f.data = block[off:off + 16384]
                if off + 16384 >= len(block):
                    f.flags.add("END_HEADERS")
                if not c.send(f.serialize()):
                    break
            c.send(c.data_frame(sid, h2raw.grpc_message(b"")))
            c.wait(lambda: c.closed or sid in c.ended, 5)
            st = c.status(sid)
            answer = "stream %s%s" % (st, ", connection closed" if c.closed else "")
            c.close()
            self.assertTrue(st is not None and st[0] != 0 or c.closed,
                            "a 1 MiB header block was served")
            return 1, "%d bytes of headers: %s" % (len(block), answer)
        self.attack("1 MiB header block", run)

    def test_continuation_flood(self):
        """CONTINUATION frames without END_HEADERS, for ever (the 2024 'CONTINUATION
        flood'): the server must stop reading before memory or CPU run out."""
        token = self.server.token(ttl=3600)
        budget = (512 if LONG else 64) << 20

        def run():
            c = self.h2()
            sid = c.new_stream()
            c.send(c.headers_frame(sid, h2raw.request_headers(token), end_stream=False,
                                   end_headers=False))
            sent, frames = 0, 0
            t0 = time.monotonic()
            while sent < budget and not c.closed and time.monotonic() - t0 < 20:
                f = ContinuationFrame(sid)
                f.data = c.enc.encode([("x-junk-%d" % frames, "v" * 8000)])
                if not c.send(f.serialize()):
                    break
                sent += len(f.data)
                frames += 1
                c.pump(0)
            c.wait(lambda: c.closed, 5)
            answer = "%s after %d KiB; stream %s" % (
                "connection closed" if c.closed else "still open", sent >> 10, c.status(sid))
            closed = c.closed
            c.close()
            self.assertTrue(closed, "the server read %d bytes of CONTINUATION" % sent)
            return frames, answer
        self.attack("CONTINUATION flood", run)

    def test_many_small_headers(self):
        token = self.server.token(ttl=3600)

        def run():
            c = self.h2()
            sid = c.new_stream()
            block = c.enc.encode(h2raw.request_headers(token) +
                                 [("x-%d" % i, "") for i in range(10000)])
            first = HeadersFrame(sid)
            first.data = block[:16384]
            c.send(first.serialize())
            for off in range(16384, len(block), 16384):
                f = ContinuationFrame(sid)
                f.data = block[off:off + 16384]
                if off + 16384 >= len(block):
                    f.flags.add("END_HEADERS")
                c.send(f.serialize())
            c.send(c.data_frame(sid, h2raw.grpc_message(b"")))
            c.wait(lambda: c.closed or sid in c.ended, 5)
            st = c.status(sid)
            c.close()
            self.assertTrue(st is not None and st[0] != 0 or c.closed)
            return 1, "10,000 headers: stream %s%s" % (st, ", closed" if c.closed else "")
        self.attack("10,000 small headers", run)

    def test_large_grpc_metadata(self):
        """Metadata through a real gRPC client: up to the 16 KiB the front end allows,
        then over it."""
        token = self.server.token(ttl=3600)
        body = hc.encode_request(hc.make_csr(hc.make_key(), uris=[SA_ID]))

        def run():
            answers = []
            for size in (4096, 12000, 17000, 1 << 20):
                c = hc.Client(self.server.addr, self.server.root)
                try:
                    c.call(body, metadata=[("authorization", "Bearer " + token),
                                           ("x-pad", "p" * size)], timeout=15)
                    answers.append("%d: OK" % size)
                except grpc.RpcError as e:
                    answers.append("%d: %s" % (size, e.code().name))
                finally:
                    c.close()
            self.assertEqual(answers[:2], ["4096: OK", "12000: OK"])
            self.assertEqual(answers[2:], ["17000: RESOURCE_EXHAUSTED",
                                           "%d: RESOURCE_EXHAUSTED" % (1 << 20)])
            return 4, ", ".join(answers)
        self.attack("large metadata (bytes of x-pad)", run)


class GrpcFrameAttacks(HostileServerCase):
    """Length-prefixed gRPC messages that lie, over the raw HTTP/2 client."""

    def raw_call(self, body, token=None, end_stream=True, extra=(), timeout=5):
        c = self.h2()
        try:
            sid = c.new_stream()
            c.send(c.headers_frame(sid, h2raw.request_headers(token, extra=extra)))
            c.send_body(sid, body, end_stream)
            c.wait(lambda: sid in c.ended or c.closed, timeout)
            return c.status(sid), c.closed
        finally:
            c.close()

    def test_grpc_length_prefix_lies(self):
        token = self.server.token(ttl=3600)
        csr = hc.make_csr(hc.make_key(), uris=[SA_ID])
        import gzip
        bomb = gzip.compress(b"\0" * (64 << 20))

        def run():
            cases = [
                # (what, body, token, extra headers, grpc status, text in the message)
                ("announce 1 MiB, send it", h2raw.grpc_message(b"\0" * (1 << 20)), None, (),
                 8, "larger than max"),
                ("announce 100, send 50", h2raw.grpc_message(b"x" * 50, length=100), token,
                 (), 3, "no message received"),
                ("announce 4 GiB, end the stream", b"\x00\xff\xff\xff\xff", token, (), 3,
                 "no message received"),
                ("prefix cut at 3 bytes", b"\x00\x00\x00", token, (), 3,
                 "no message received"),
                # gRPC core 1.51 reads the flag without an encoding as identity
                ("compressed flag, no grpc-encoding",
                 h2raw.grpc_message(hc.encode_request(csr), compressed=1), token, (), 0, ""),
                ("gzip bomb, 64 MiB of zeros", h2raw.grpc_message(bomb, compressed=1), token,
                 [("grpc-encoding", "gzip")], 8, "larger than max"),
                ("valid, for control", h2raw.grpc_message(hc.encode_request(csr)), token, (),
                 0, ""),
            ]
            answers = []
            for what, body, tok, extra, code, text in cases:
                st, closed = self.raw_call(body, tok, extra=extra)
                answers.append("%s: %s" % (what, st))
                self.assertIsNotNone(st, "%s: no answer" % what)
                if code is not None:
                    self.assertEqual(st[0], code, "%s: %s" % (what, st))
                    self.assertIn(text, st[1], what)
                else:
                    self.assertNotEqual(st[0], 0, "%s: served" % what)
            for a in answers:
                print("  " + a)
            return len(cases), "each refused as expected (see lines above)"
        self.attack("lying gRPC length prefixes", run)

    def test_grpc_prefix_4gib_flood(self):
        """A prefix announcing 4 GiB, then bytes as fast as flow control lets us: gRPC
        core 1.51 buffers a message up to its announced length before it checks the
        size cap (it took 156 MiB in 12 s and grew the front end by as much); the
        front end's memory quota (server.memory_limit_mib) must stop it:
        by a reset, a close, or a window that stays shut."""
        budget = (1024 if LONG else 256) << 20

        def run():
            c = self.h2()
            sid = c.call(h2raw.request_headers(None), b"\x00\xff\xff\xff\xff", end_stream=False)
            sent, peak, how = 0, 0, None
            t0 = time.monotonic()
            while sent < budget and time.monotonic() - t0 < 60:
                if not c.send_flow(sid, b"\0" * 16384, end_stream=False):
                    st = c.status(sid)
                    how = ("closed the connection" if c.closed else
                           "RST_STREAM %d" % st[1] if st and st[0] == "RST" else
                           "answered %s" % (st,) if st else "kept its window shut for 3 s")
                    break
                sent += 16384
                if sent % (4 << 20) == 0:
                    peak = max(peak, fe_rss_kib(self.pids["frontend"]))
            c.close()
            self.assertIsNotNone(how, "the server took %d MiB of a 4 GiB message" % (sent >> 20))
            return sent >> 20, "server %s after %d MiB; FE RSS peak %d KiB" % (
                how, sent >> 20, peak)
        # gRPC core keeps under its quota by reclaiming memory from any connection, not
        # the largest: it resets streams (a valid client's RESOURCE_EXHAUSTED "Received
        # RST_STREAM with error code 11", seen with HSMCA_LONG=1) and sends idle
        # connections a GOAWAY and closes them (a valid request written as its
        # connection closed: UNAVAILABLE "Broken pipe", seen once in CI under ASan).
        # Both are retryable and istio-agent retries them; a few, not a stream of them.
        rss0, rss1 = self.attack("4 GiB prefix, then a byte flood (MiB)", run,
                                 valid_may_get=("RESOURCE_EXHAUSTED", "UNAVAILABLE"),
                                 may_get_at_most=3)
        if not SANITIZED:
            first = rss1
            # Right after the flood the front end is up to ~190 MiB larger (the quota,
            # 160 MiB, covers gRPC's buffers only); within 2 s of the reset it is back
            # to within a few MiB of where it was (2026-11-27: 161.4 MiB, then 24.4
            # from 22.7, flat for 24 s), so what stays is a leak, not the flood's.
            rss1 = fe_rss_settled(self.pids["frontend"], rss1, rss0 + (32 << 10), 5)
            print("  FE RSS %d KiB once the flood's memory could be given back (%d KiB at first)"
                  % (rss1, first))
            self.assertLess(rss1 - rss0, 32 << 10,
                            "the flood left the front end > 32 MiB larger 5 s after")


class SizeBoundaries(HostileServerCase):
    """Tokens, CSRs, requests and metadata at 0, 1, limit-1, limit, limit+1."""

    def check_table(self, name, rows):
        """rows: (label, body, token, expected status name, text in the details)."""
        def run():
            answers = []
            for label, body, token, want, text in rows:
                code, details = self.create(body, token)
                answers.append("%s: %s %s" % (label, code, details[:50]))
                print("  %s %s: %s %s" % (name, label, code, details[:80]), flush=True)
                self.assertEqual(code, want, "%s %s: %s %s" % (name, label, code, details))
                self.assertIn(text, details, "%s %s" % (name, label))
            return len(rows), "; ".join(a.split(":")[0] + "=" + a.split(": ")[1].split()[0]
                                        for a in answers)
        self.attack(name, run)

    def test_token_sizes(self):
        body = hc.encode_request(hc.make_csr(hc.make_key(), uris=[SA_ID]))
        limit_msg = "JWT must be 1-%d bytes" % JWT_MAX
        self.check_table("token size", [
            ("0", body, "", "UNAUTHENTICATED", "not a Bearer token"),
            ("1", body, "x", "UNAUTHENTICATED", "JWT"),
            ("limit-1", body, mint_token(self.server, JWT_MAX - 1), "OK", ""),
            ("limit", body, mint_token(self.server, JWT_MAX), "OK", ""),
            ("limit+1", body, mint_token(self.server, JWT_MAX + 1), "UNAUTHENTICATED",
             limit_msg),
            ("16 KiB", body, "x" * 16384, "RESOURCE_EXHAUSTED", "metadata"),
        ])

    def test_csr_sizes(self):
        token = self.server.token(ttl=3600)
        enc = hc.encode_request
        self.check_table("CSR size", [
            ("0", enc(b""), token, "INVALID_ARGUMENT", "csr is empty"),
            ("1", enc(b"-"), token, "INVALID_ARGUMENT", "CSR"),
            ("limit-1", enc(padded_csr(CSR_MAX - 1)), token, "OK", ""),
            ("limit", enc(padded_csr(CSR_MAX)), token, "OK", ""),
            ("limit+1", enc(padded_csr(CSR_MAX + 1)), token, "INVALID_ARGUMENT",
             "larger than %d" % CSR_MAX),
        ])

    def test_request_sizes(self):
        token = self.server.token(ttl=3600)
        self.check_table("request size", [
            ("0", b"", token, "INVALID_ARGUMENT", "csr is empty"),
            ("1", b"\x0a", token, "INVALID_ARGUMENT", "not a valid IstioCertificateRequest"),
            ("limit-1", request_of(REQ_MAX - 1), token, "OK", ""),
            ("limit", request_of(REQ_MAX), token, "OK", ""),
            ("limit+1", request_of(REQ_MAX + 1), token, "INVALID_ARGUMENT",
             "exceeds the limit of %d" % REQ_MAX),
            ("2*limit", b"\0" * (2 * REQ_MAX), token, "INVALID_ARGUMENT", "exceeds"),
            ("2*limit+1", b"\0" * (2 * REQ_MAX + 1), token, "RESOURCE_EXHAUSTED",
             "larger than max"),
        ])

    def test_metadata_depth(self):
        token = self.server.token(ttl=3600)
        csr = hc.make_csr(hc.make_key(), uris=[SA_ID])
        enc = hc.encode_request
        deeper = "metadata nesting deeper than %d" % MD_DEPTH
        self.check_table("metadata Struct depth", [
            ("1", enc(csr, metadata=nested_struct(1)), token, "OK", ""),
            ("limit-1", enc(csr, metadata=nested_struct(MD_DEPTH - 1)), token, "OK", ""),
            ("limit", enc(csr, metadata=nested_struct(MD_DEPTH)), token, "OK", ""),
            ("limit+1", enc(csr, metadata=nested_struct(MD_DEPTH + 1)), token,
             "INVALID_ARGUMENT", deeper),
            ("5000", enc(csr, metadata=nested_struct(5000)), token, "INVALID_ARGUMENT",
             deeper),
        ])


class IdleConnectionCap(HostileServerCase):
    """Idle TLS + HTTP/2 connections beyond server.max_connections (issue 8's limit):
    those beyond the cap are closed at once; the valid client, connected before, is
    served throughout; once the idle ones go, new clients connect. Skipped, saying so,
    when the binary does not know server.max_connections."""
    CAP = 16
    server_settings = HostileServerCase.server_settings + ["max_connections: %d" % CAP]
    name = "hostilecap"

    @classmethod
    def setUpClass(cls):
        try:
            super().setUpClass()
        except RuntimeError as e:
            if "max_connections" in str(e) and "unknown key" in str(e):
                raise unittest.SkipTest("server.max_connections is unknown to this hsmca "
                                        "(config error): the connection cap is not built")
            raise

    def test_idle_connections_beyond_cap(self):
        extra = self.CAP + 16

        def run():
            conns = []
            for _ in range(extra):
                try:
                    c = self.h2()
                except (OSError, ssl.SSLError):
                    conns.append(None)  # refused at connect or in the handshake
                    continue
                conns.append(c)
            time.sleep(1.0)
            for c in conns:
                if c:
                    c.pump(0.05)
            kept = sum(1 for c in conns if c and not c.closed)
            for c in conns:
                if c:
                    c.close()
            # The valid client's connection counts too.
            self.assertLessEqual(kept, self.CAP, "idle connections beyond the cap kept")
            self.assertGreater(kept, 0, "no idle connection kept at all")
            fresh = self.create(hc.encode_request(hc.make_csr(hc.make_key(), uris=[SA_ID])),
                                self.server.token())
            self.assertEqual(fresh[0], "OK", "a new client after the idle ones left: %s" %
                             (fresh,))
            return extra, "%d kept of %d (cap %d), the rest closed; a new client served" % (
                kept, extra, self.CAP)
        self.attack("idle connections beyond the cap", run)


if __name__ == "__main__":
    try:
        unittest.main()
    finally:
        print_summary()

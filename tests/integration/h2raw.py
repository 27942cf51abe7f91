"""A raw HTTP/2-over-TLS client for hostile tests: it writes whatever frames it is told
to (no flow control, no stream limits, no header size limits: the server must enforce
them) and reads back what the server says (GOAWAY, RST_STREAM, gRPC status trailers).

Frames are built with hyperframe and header blocks with hpack (Debian: python3-h2,
which brings both); TLS is the ssl module with ALPN "h2".
"""
import socket
import ssl
import struct
import time

from hpack import Decoder, Encoder
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame,
                              PingFrame, RstStreamFrame, SettingsFrame, WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
METHOD = "/istio.v1.auth.IstioCertificateService/CreateCertificate"
REFUSED_STREAM = 0x7
CANCEL = 0x8


def tls_context(root_pem):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=root_pem.decode())
    ctx.set_alpn_protocols(["h2"])
    return ctx


def grpc_message(body, length=None, compressed=0):
    """The 5-byte gRPC prefix (compressed flag, big-endian length) and body; length
    overrides the announced length (a lie, for truncated or huge announcements)."""
    return struct.pack(">BI", compressed, len(body) if length is None else length) + body


def request_headers(token=None, path=METHOD, extra=()):
    h = [(":method", "POST"), (":scheme", "https"), (":path", path),
         (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers")]
    if token is not None:
        h.append(("authorization", "Bearer " + token))
    return h + list(extra)


class H2Conn:
    """One TLS connection speaking HTTP/2 frames as told."""

    def __init__(self, port, root_pem, preface=True, timeout=10):
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock = tls_context(root_pem).wrap_socket(raw, server_hostname="localhost")
        self.enc, self.dec = Encoder(), Decoder()
        self.dec.max_allowed_table_size = 1 << 16
        self.buf = b""
        self.next_id = 1
        self.goaway = None        # (last stream id, error code, debug data)
        self.closed = False       # EOF or reset from the server
        self.rst = {}             # stream id -> error code
        self.trailers = {}        # stream id -> {name: value} of its last HEADERS block
        self.data = {}            # stream id -> bytes received
        self.ended = set()        # streams the server ended (END_STREAM or RST_STREAM)
        self.max_streams = None   # the server's SETTINGS_MAX_CONCURRENT_STREAMS
        self._block = None        # (stream id, header block so far) while CONTINUATIONs come
        self.conn_window = 65535  # what we may still send (send_body keeps to it)
        self.initial_window = 65535
        self.windows = {}         # stream id -> its send window
        if preface:
            self.send(PREFACE + SettingsFrame(0).serialize())

    def send(self, data):
        try:
            self.sock.sendall(data)
            return True
        except (OSError, ssl.SSLError):
            self.closed = True
            return False

    def new_stream(self):
        sid = self.next_id
        self.next_id += 2
        return sid

    def headers_frame(self, sid, headers, end_stream=False, end_headers=True):
        f = HeadersFrame(sid)
        f.data = self.enc.encode(headers)
        if end_headers:
            f.flags.add("END_HEADERS")
        if end_stream:
            f.flags.add("END_STREAM")
        return f.serialize()

    def data_frame(self, sid, payload, end_stream=True):
        f = DataFrame(sid)
        f.data = payload
        if end_stream:
            f.flags.add("END_STREAM")
        return f.serialize()

    def window(self, sid):
        return self.windows.get(sid, self.initial_window)

    def send_flow(self, sid, payload, end_stream, wait=3.0):
        """One DATA frame within the flow-control windows, waiting up to `wait` s for
        the server to open them; False when it does not (or the stream ended)."""
        n = len(payload)
        self.wait(lambda: sid in self.ended or
                  (self.conn_window >= n and self.window(sid) >= n), wait if n else 0)
        if sid in self.ended or self.closed or self.conn_window < n or self.window(sid) < n:
            return False
        self.conn_window -= n
        self.windows[sid] = self.window(sid) - n
        return self.send(self.data_frame(sid, payload, end_stream))

    def send_body(self, sid, body, end_stream=True):
        """body in DATA frames of 16 KiB (the default SETTINGS_MAX_FRAME_SIZE) within
        flow control; stops if the stream or connection ends or the window stays shut."""
        for off in range(0, max(len(body), 1), 16384):
            last = off + 16384 >= len(body)
            if not self.send_flow(sid, body[off:off + 16384], end_stream and last):
                return False
        return True

    def rst_frame(self, sid, code=CANCEL):
        return RstStreamFrame(sid, error_code=code).serialize()

    def call(self, headers, body, end_stream=True):
        """Starts a stream with headers and one DATA frame; returns its id."""
        sid = self.new_stream()
        self.send(self.headers_frame(sid, headers) + self.data_frame(sid, body, end_stream))
        return sid

    def pump(self, timeout=0.0):
        """Reads and handles what the server sent within timeout (0: what is there);
        returns False once the connection is closed."""
        if self.closed:
            return False
        self.sock.settimeout(max(timeout, 0.001))
        try:
            chunk = self.sock.recv(1 << 16)
        except (socket.timeout, ssl.SSLWantReadError):
            return True
        except (OSError, ssl.SSLError):
            self.closed = True
            return False
        if not chunk:
            self.closed = True
            return False
        self.buf += chunk
        self._frames()
        return True

    def wait(self, cond, timeout):
        """Pumps until cond() holds or the connection closes or timeout; returns cond()."""
        deadline = time.monotonic() + timeout
        while not cond() and time.monotonic() < deadline:
            if not self.pump(min(0.2, max(0.0, deadline - time.monotonic()))):
                break
        return cond()

    def _frames(self):
        while len(self.buf) >= 9:
            f, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
            if len(self.buf) < 9 + length:
                return
            f.parse_body(memoryview(self.buf[9:9 + length]))
            self.buf = self.buf[9 + length:]
            self._handle(f)

    def _handle(self, f):
        if isinstance(f, SettingsFrame):
            if "ACK" not in f.flags:
                self.max_streams = f.settings.get(SettingsFrame.MAX_CONCURRENT_STREAMS,
                                                  self.max_streams)
                if SettingsFrame.INITIAL_WINDOW_SIZE in f.settings:
                    new = f.settings[SettingsFrame.INITIAL_WINDOW_SIZE]
                    for sid in self.windows:
                        self.windows[sid] += new - self.initial_window
                    self.initial_window = new
                self.send(SettingsFrame(0, flags=["ACK"]).serialize())
        elif isinstance(f, PingFrame):
            if "ACK" not in f.flags:
                self.send(PingFrame(0, opaque_data=f.opaque_data, flags=["ACK"]).serialize())
        elif isinstance(f, WindowUpdateFrame):
            if f.stream_id == 0:
                self.conn_window += f.window_increment
            else:
                self.windows[f.stream_id] = self.window(f.stream_id) + f.window_increment
        elif isinstance(f, GoAwayFrame):
            self.goaway = (f.last_stream_id, f.error_code, bytes(f.additional_data))
        elif isinstance(f, RstStreamFrame):
            self.rst[f.stream_id] = f.error_code
            self.ended.add(f.stream_id)
        elif isinstance(f, DataFrame):
            self.data[f.stream_id] = self.data.get(f.stream_id, b"") + bytes(f.data)
            if f.flow_controlled_length:  # keep the server able to send
                self.send(WindowUpdateFrame(0, window_increment=f.flow_controlled_length)
                          .serialize() +
                          WindowUpdateFrame(f.stream_id,
                                            window_increment=f.flow_controlled_length)
                          .serialize())
            if "END_STREAM" in f.flags:
                self.ended.add(f.stream_id)
        elif isinstance(f, (HeadersFrame, ContinuationFrame)):
            block = (self._block[1] if self._block else b"") + bytes(f.data)
            if "END_HEADERS" in f.flags:
                self._block = None
                self.trailers[f.stream_id] = dict(self.dec.decode(block))
            else:
                self._block = (f.stream_id, block)
            if "END_STREAM" in f.flags:
                self.ended.add(f.stream_id)

    def status(self, sid):
        """(grpc-status, grpc-message) the server ended sid with, ("RST", code) for a
        reset, or None."""
        t = self.trailers.get(sid, {})
        if "grpc-status" in t:
            return int(t["grpc-status"]), t.get("grpc-message", "")
        if sid in self.rst:
            return "RST", self.rst[sid]
        return None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

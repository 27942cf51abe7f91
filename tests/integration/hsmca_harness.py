"""Starts a real `hsmca dev` (SoftHSM token, signer, front end) for a test."""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import grpc

import hsmca_client as hc

BIN = os.environ.get("HSMCA_BIN", "hsmca")


def scratch_base(base):
    """The directory tests make their dev CAs in: base, made searchable (0711,
    not listable) because a signer started as root drops to hsmca-signer and
    must still reach the token in DIR/tokens; /tmp/hsmca-test when a parent of
    base does not let other users through (a checkout under /root)."""
    base = os.path.abspath(base)
    parent = os.path.dirname(base)
    while parent != "/":
        if not os.stat(parent).st_mode & 0o001:
            base = "/tmp/hsmca-test"
            break
        parent = os.path.dirname(parent)
    os.makedirs(base, exist_ok=True)
    if os.geteuid() == 0 and base != "/tmp":
        os.chmod(base, 0o711)
    return base


TMP = scratch_base(os.environ.get("HSMCA_TEST_TMP", "/tmp"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def with_pkcs11_env(text, variables):
    """The config text with `pkcs11.env` set to variables (a dict of NAME: value), the
    only way a variable reaches the signer and its PKCS#11 module (supervisor/sup_env.h)."""
    lines = "".join("    %s: %s\n" % (k, json.dumps(v)) for k, v in variables.items())
    assert "\npkcs11:\n" in text
    return text.replace("\npkcs11:\n", "\npkcs11:\n  env:\n" + lines, 1)


def audit_entries(audit_dir):
    """The entries of audit_dir/log, parsed, after checking each line is whole,
    canonical JSON (sorted keys, no spaces) and numbered by its index."""
    with open(os.path.join(audit_dir, "log"), "rb") as f:
        data = f.read()
    assert data.endswith(b"\n"), "the log ends in a whole line"
    entries = []
    for i, line in enumerate(data.split(b"\n")[:-1]):
        ent = json.loads(line)
        again = json.dumps(ent, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert again.encode() == line, line
        assert ent["seq"] == i, (i, ent)
        entries.append(ent)
    return entries


class DevServer:
    """`hsmca dev --dir D --listen 127.0.0.1:PORT --ca-key KEY` as a subprocess."""

    def __init__(self, ca_key="ec-p256", name="integ", server_settings=None, edit_config=None,
                 env_extra=None, audit_key=None, pkcs11_env=None):
        """server_settings: lines added under `server:` in the config; edit_config: a
        function from the config's text to the text to run with. When either is
        given, the CA is made with `hsmca dev init` and run with `hsmca serve --config`.
        env_extra: variables added to the supervisor's environment (the children get only
        the few they read, supervisor/sup_env.h). pkcs11_env: a dict written as `pkcs11.env` (the
        signer's and its module's variables; implies `dev init` and `serve`).
        audit_key: `--audit-key` (ed25519, ec-p256), else the default."""
        os.makedirs(TMP, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix=name + ".", dir=TMP)
        self.port = free_port()
        self.addr = "localhost:%d" % self.port
        # The metrics listener on a port of its own, never the default every test would share.
        self.metrics_port = free_port()
        self.metrics_url = "http://127.0.0.1:%d" % self.metrics_port
        metrics = "127.0.0.1:%d" % self.metrics_port
        self.log_path = os.path.join(self.dir, "server.log")
        env = dict(os.environ)
        # LeakSanitizer needs ptrace and clone, which the front end's seccomp filter forbids.
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
        env.update(env_extra or {})
        self.log = open(self.log_path, "wb")
        listen = "127.0.0.1:%d" % self.port
        if server_settings or edit_config or pkcs11_env:
            subprocess.check_call([BIN, "dev", "init", "--dir", self.dir, "--ca-key", ca_key]
                                  + (["--audit-key", audit_key] if audit_key else []),
                                  stdout=self.log, stderr=subprocess.STDOUT, env=env)
            config = os.path.join(self.dir, "hsmca.yaml")
            with open(config) as f:
                text = f.read()
            extra = "".join("  %s\n" % line for line in server_settings or ())
            text = text.replace("server:\n", "server:\n" + extra, 1)
            text = text.replace('listen: "127.0.0.1:15012"', 'listen: "%s"' % listen)
            text = text.replace('listen: "127.0.0.1:15014"', 'listen: "%s"' % metrics)
            if edit_config:
                text = edit_config(text)
            if pkcs11_env:
                text = with_pkcs11_env(text, pkcs11_env)
            with open(config, "w") as f:
                f.write(text)
            argv = [BIN, "serve", "--config", config]
        else:
            argv = [BIN, "dev", "--dir", self.dir, "--listen", listen, "--metrics", metrics,
                    "--ca-key", ca_key]
            argv += ["--audit-key", audit_key] if audit_key else []
        self.argv, self.env = argv, env
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        self.root = None
        self.client = None
        # stop() runs `hsmca audit verify` on the log: every log a test leaves verifies,
        # unless the test breaks it on purpose and says so by setting this False.
        self.verify_log_at_stop = True

    def token(self, ns="default", sa="sleep", aud=None, ttl=None):
        cmd = [BIN, "dev", "token", "--dir", self.dir, "--ns", ns, "--sa", sa]
        if aud:
            cmd += ["--aud", aud]
        if ttl:
            cmd += ["--ttl", str(ttl)]
        return subprocess.check_output(cmd).decode().strip()

    def wait_ready(self, timeout=90):
        """Waits until a valid request succeeds; returns the client."""
        deadline = time.time() + timeout
        root_path = os.path.join(self.dir, "root-cert.pem")
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("hsmca dev exited %d:\n%s" % (self.proc.returncode, self.logtext()))
            if os.path.exists(root_path) and os.path.exists(os.path.join(self.dir, "dev-jwks.json")):
                break
            time.sleep(0.2)
        with open(root_path, "rb") as f:
            self.root = f.read()
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:  # e.g. a config key this binary does not know
                raise RuntimeError("hsmca exited %d:\n%s" % (self.proc.returncode, self.logtext()))
            # A fresh channel and a short deadline per attempt: a channel whose first
            # connect failed (the server not listening yet) backs off for seconds.
            probe = hc.Client(self.addr, self.root)
            try:
                self.issue(client=probe, timeout=3)
                self.client = probe
                return self.client
            except grpc.RpcError as e:
                last = e
                probe.close()
                time.sleep(0.3)
        raise RuntimeError("server not ready: %s\n%s" % (last, self.logtext()))

    def issue(self, ns="default", sa="sleep", key="ec-p256", ttl=0, client=None, timeout=20):
        k = hc.make_key(key)
        csr = hc.make_csr(k, uris=["spiffe://cluster.local/ns/%s/sa/%s" % (ns, sa)])
        return (client or self.client).create(csr, self.token(ns, sa), ttl, timeout=timeout)

    def all_children(self):
        """{role: pid} of every running child of the supervisor: 'signer', 'frontend',
        'metrics' and 'publish' (hsmca-<role>)."""
        out = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != self.proc.pid:
                    continue
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    argv = f.read().split(b"\0")
                name = os.path.basename(argv[0]).decode(errors="replace")
                if name.startswith("hsmca-"):
                    out[name[len("hsmca-"):]] = int(d)
            except (OSError, IndexError, ValueError):
                continue
        return out

    def children(self):
        """{'signer': pid, 'frontend': pid} of the running children."""
        return {k: v for k, v in self.all_children().items() if k in ("signer", "frontend")}

    def wait_children(self, timeout=30, exclude=()):
        deadline = time.time() + timeout
        while time.time() < deadline:
            c = self.children()
            if "signer" in c and "frontend" in c and not set(c.values()) & set(exclude):
                return c
            time.sleep(0.1)
        raise RuntimeError("children did not come up: %s\n%s" % (self.children(), self.logtext()))

    def restart_supervisor(self):
        """Starts the same command again, as systemd would after the supervisor died
        (the caller has killed it). Returns the new process."""
        self.proc.wait()
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env)
        return self.proc

    def logtext(self, tail=6000):
        """The server's log: its last `tail` characters, or all of it (tail None)."""
        self.log.flush()
        with open(self.log_path, "rb") as f:
            text = f.read().decode(errors="replace")
        return text if tail is None else text[-tail:]

    def stop(self):
        """Stops the server; raises if a sanitizer reported anything in any process
        (a child that aborts is restarted, so the report is the only trace)."""
        if self.client:
            self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        with open(self.log_path, "rb") as f:
            text = f.read().decode(errors="replace")
        for marker in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"):
            if marker in text:
                i = text.index(marker)
                raise AssertionError("sanitizer report in %s:\n%s" % (self.log_path,
                                                                      text[max(0, i - 200):i + 3000]))
        audit_dir = os.path.join(self.dir, "audit")
        verify = getattr(self, "verify_log_at_stop", True)  # subclasses may not set it
        if verify and os.path.isfile(os.path.join(audit_dir, "log")):
            p = subprocess.run([BIN, "audit", "verify", audit_dir], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if p.returncode != 0:
                raise AssertionError("the log the test left does not verify (%s):\n%s"
                                     % (audit_dir, p.stdout.decode(errors="replace")[-3000:]))


SHIM = os.environ.get("P11SHIM", "")


class ShimServer(DevServer):
    """A DevServer whose signer reaches the token through the fault-injecting PKCS#11
    module (tests/p11shim/README.md, $P11SHIM), with pkcs11.sign_timeout set; control()
    writes the shim's commands, count() reads its call counts (those of the current
    signer: the counts are per process). server_settings: as DevServer's."""

    def __init__(self, name, sign_timeout=2, server_settings=None):
        d = tempfile.mkdtemp(prefix=name + "ctl.", dir=TMP)
        self.ctl = os.path.join(d, "control")
        self.counts = os.path.join(d, "counts")
        open(self.ctl, "w").close()
        open(self.counts, "w").close()
        os.chmod(self.counts, 0o666)  # the signer may run as its own user

        def shim_config(text):
            text = re.sub(r"(?m)^  module: .*$", "  module: %s" % SHIM, text)
            return text.replace("  sessions: 2\n",
                                "  sessions: 2\n  sign_timeout: %ds\n" % sign_timeout)

        super().__init__("ec-p256", name=name, edit_config=shim_config,
                         server_settings=server_settings,
                         pkcs11_env={"P11SHIM_CONTROL": self.ctl, "P11SHIM_COUNTS": self.counts})

    def control(self, text):
        with open(self.ctl, "r+") as f:  # in place: the shim keeps its fd
            f.truncate(0)
            f.write(text)

    def count(self, fn):
        """(calls, failed) of fn, or ("hanging", N) as (N, 0)."""
        with open(self.counts) as f:
            for line in f:
                parts = line.split()
                if parts and parts[0] == fn:  # "FUNC CALLS FAILED", or "hanging N"
                    return int(parts[1]), int(parts[2]) if len(parts) > 2 else 0
        return 0, 0

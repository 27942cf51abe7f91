#!/usr/bin/python3
"""Both children are confined. The front end: no PKCS#11 module mapped,
no_new_privs, a seccomp filter, the PIN nowhere in its memory, and (as root)
another uid inside a chroot. The signer (docs/ARCHITECTURE.md §3.4): its own unprivileged
uid once the token is open (as root), not dumpable, no core dumps, no_new_privs
and a seccomp filter on every thread, the network refused unless
signer.sandbox.network says otherwise (unix: unix sockets only; inet: also IPv4,
IPv6 and netlink; the deprecated signer.seccomp_allow_network: true is inet), SysV
IPC refused unless signer.sandbox.sysv_ipc, and it still signs through the token
after all of that. A module that cannot sign under the filter stops the start
with exit status 78 and a message that names the sandbox's setting.

Each check has a control that shows it looks in the right place: the
supervisor, which runs unconfined, reads Seccomp 0 / NoNewPrivs 0 where the
children read 2 / 1; a dumpable process of the signer's uid owns its /proc
files where the signer's belong to root."""
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from hsmca_harness import BIN, TMP, DevServer, free_port

SOFTHSM = "libsofthsm2.so"
ROOT = os.geteuid() == 0
NETPROBE = os.environ.get("HSMCA_NETPROBE", "")


def status(pid, tid=None):
    path = "/proc/%d/status" % pid if tid is None else "/proc/%d/task/%s/status" % (pid, tid)
    with open(path) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def threads(pid):
    return os.listdir("/proc/%d/task" % pid)


def maps(pid):
    with open("/proc/%d/maps" % pid) as f:
        return f.read()


def core_limit(pid):
    """(soft, hard) of "Max core file size" in /proc/PID/limits."""
    with open("/proc/%d/limits" % pid) as f:
        m = re.search(r"^Max core file size\s+(\S+)\s+(\S+)\s+bytes\s*$", f.read(), re.M)
    return m.groups()


def proc_owner(pid):
    """The owner the kernel gives /proc/PID/status: the process's uid while it is
    dumpable, root once it is not (task_dump_owner). /proc/PID/status shows no
    dumpable flag and prctl(PR_GET_DUMPABLE) answers only for the caller; this
    is what the flag changes that anyone can see."""
    return os.stat("/proc/%d/status" % pid).st_uid


def memory_contains(pid, needle):
    """Scans every readable private mapping of pid for needle."""
    found = False
    with open("/proc/%d/maps" % pid) as m, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in m:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            path = fields[5] if len(fields) > 5 else ""
            if "r" not in fields[1] or path.startswith("[v") or hi - lo > (1 << 30):
                continue
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            if needle in chunk:
                found = True
                break
    return found


def full_log(server):
    """The whole log (server.logtext() keeps only its tail)."""
    server.log.flush()
    with open(server.log_path, "rb") as f:
        return f.read().decode(errors="replace")


# The signer's sandbox line: its network access and the key in force.
NET = '"msg":"sandbox: signer network access","network":"%s","setting":"%s"'


def after_confinement(log):
    """What the log says once the signer's filter is on."""
    i = log.find('"msg":"sandbox: signer network access"')
    assert i >= 0, log[-3000:]
    return log[i:]


def issue_many(server, n):
    """n requests, alternating RSA-2048 and EC P-256 subject keys."""
    for i in range(n):
        server.issue(key="rsa-2048" if i % 2 else "ec-p256")


class SandboxTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer("ec-p256", name="sandbox")
        cls.server.wait_ready()
        cls.kids = cls.server.wait_children()
        cls.supervisor = cls.server.proc.pid
        with open(os.path.join(cls.server.dir, "pin"), "rb") as f:
            cls.pin = f.read().strip()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_frontend_has_no_pkcs11_module(self):
        self.assertNotIn(SOFTHSM, maps(self.kids["frontend"]))
        self.assertNotIn("libp11", maps(self.kids["frontend"]))
        if ROOT:  # the signer's maps are root's to read: it is not dumpable
            self.assertIn(SOFTHSM, maps(self.kids["signer"]))  # control

    def test_frontend_no_new_privs_and_seccomp(self):
        st = status(self.kids["frontend"])
        self.assertEqual(st["NoNewPrivs"].strip(), "1")
        self.assertEqual(st["Seccomp"].strip(), "2")  # 2 = filter mode
        # Every thread is filtered (TSYNC), not only the main one.
        for tid in threads(self.kids["frontend"]):
            self.assertEqual(status(self.kids["frontend"], tid)["Seccomp"].strip(), "2")
        # Control: the supervisor that started it is not confined, so the 2 was
        # set in the child, not inherited.
        self.assertEqual(status(self.supervisor)["Seccomp"].strip(), "0")
        self.assertEqual(status(self.supervisor)["NoNewPrivs"].strip(), "0")

    def test_signer_seccomp_and_no_new_privs_on_every_thread(self):
        tids = threads(self.kids["signer"])
        # The main thread and one worker per session (the dev config has 2),
        # all started before the filter: TSYNC must have reached them.
        self.assertGreaterEqual(len(tids), 3, tids)
        for tid in tids:
            st = status(self.kids["signer"], tid)
            self.assertEqual(st["Seccomp"].strip(), "2", tid)
            self.assertEqual(st["NoNewPrivs"].strip(), "1", tid)
        self.assertEqual(status(self.supervisor)["Seccomp"].strip(), "0")  # control

    def test_signer_has_no_core_dumps(self):
        self.assertEqual(core_limit(self.kids["signer"]), ("0", "0"))
        self.assertIsNotNone(core_limit(self.supervisor))  # control: the line parses

    def test_signer_is_not_dumpable(self):
        signer_uid = int(status(self.kids["signer"])["Uid"].split()[0])
        self.assertNotEqual(signer_uid, 0)
        self.assertEqual(proc_owner(self.kids["signer"]), 0)
        # Control: a dumpable process of the same uid owns its /proc files.
        kw = {"user": signer_uid} if ROOT else {}
        probe = subprocess.Popen(["sleep", "30"], **kw)
        try:
            deadline = time.time() + 5
            while time.time() < deadline and status(probe.pid)["Uid"].split()[0] != str(signer_uid):
                time.sleep(0.05)
            self.assertEqual(proc_owner(probe.pid), signer_uid)
        finally:
            probe.kill()
            probe.wait()

    @unittest.skipUnless(ROOT, "the uid switch happens only as root")
    def test_signer_dropped_root(self):
        st = status(self.kids["signer"])
        uids, gids = st["Uid"].split(), st["Gid"].split()
        self.assertEqual(len(set(uids)), 1, uids)  # real, effective, saved, fs
        self.assertEqual(len(set(gids)), 1, gids)
        self.assertNotEqual(uids[0], "0")
        self.assertNotEqual(gids[0], "0")
        self.assertNotEqual(uids[0], status(self.kids["frontend"])["Uid"].split()[0])
        self.assertEqual(pwd.getpwuid(int(uids[0])).pw_name, "hsmca-signer")
        self.assertEqual(st["Groups"].strip(), "")
        self.assertEqual(st["CapEff"].strip(), "0000000000000000")
        self.assertEqual(st["CapPrm"].strip(), "0000000000000000")
        self.assertEqual(os.readlink("/proc/%d/cwd" % self.kids["signer"]), "/")
        self.assertEqual(os.readlink("/proc/%d/root" % self.kids["signer"]), "/")  # no chroot
        # Control: the supervisor is still root.
        self.assertEqual(status(self.supervisor)["Uid"].split()[0], "0")

    @unittest.skipUnless(ROOT, "the token is handed to the signer user only as root")
    def test_token_belongs_to_signer_and_pin_to_root(self):
        uid = int(status(self.kids["signer"])["Uid"].split()[0])
        for top, dirs, files in os.walk(os.path.join(self.server.dir, "tokens")):
            for name in [top] + [os.path.join(top, f) for f in files]:
                self.assertEqual(os.stat(name).st_uid, uid, name)
        pin = os.stat(os.path.join(self.server.dir, "pin"))
        self.assertEqual((pin.st_uid, pin.st_mode & 0o777), (0, 0o600))

    def test_signer_signs_after_confinement(self):
        """SoftHSM re-reads the token's files at every C_Sign: as the signer user,
        under the filter."""
        issue_many(self.server, 24)
        log = full_log(self.server)
        if ROOT:
            self.assertIn('"msg":"sandbox: switched user","user":"hsmca-signer"', log)
        else:
            self.assertIn('"msg":"sandbox: not started as root: keeping the uid, no chroot",'
                          '"uid":"%d"' % os.geteuid(), log)
        self.assertIn('"msg":"sandbox: signer network access","network":"denied"', log)
        # Still the same signer: nothing was killed by the filter and restarted.
        self.assertEqual(self.server.children()["signer"], self.kids["signer"])

    def test_pin_not_in_frontend_memory(self):
        self.server.issue()  # after real traffic, not only at start-up
        self.assertEqual(len(self.pin), 32)
        self.assertFalse(memory_contains(self.kids["frontend"], self.pin))
        # Control: the scan does find what the front end holds (its JWKS key id).
        with open(os.path.join(self.server.dir, "dev-jwks.json"), "rb") as f:
            kid = re.search(rb'"kid"\s*:\s*"([^"]+)"', f.read()).group(1)
        self.assertTrue(memory_contains(self.kids["frontend"], kid))

    @unittest.skipUnless(ROOT, "a non-dumpable process's memory is root's (CAP_SYS_PTRACE) to read")
    def test_pin_is_in_signer_memory(self):
        """The signer keeps the PIN (for re-login after a token fault): the same
        scan finds it there, so its absence from the front end means something."""
        self.assertTrue(memory_contains(self.kids["signer"], self.pin))

    def test_pin_not_in_logs(self):
        self.server.issue()
        self.assertNotIn(self.pin.decode(), self.server.logtext())

    @unittest.skipUnless(ROOT, "the uid switch and chroot happen only as root")
    def test_frontend_dropped_root_and_chrooted(self):
        st = status(self.kids["frontend"])
        self.assertNotEqual(st["Uid"].split()[0], "0")
        self.assertEqual(st["CapEff"].strip(), "0000000000000000")
        self.assertEqual(os.readlink("/proc/%d/root" % self.kids["frontend"]), "/var/empty")


class RsaCaTests(unittest.TestCase):
    """The same confinement with an RSA CA key (another SoftHSM mechanism)."""

    def test_rsa_ca_signs_after_confinement(self):
        server = DevServer("rsa-2048", name="sandbox-rsa")
        try:
            server.wait_ready()
            kids = server.wait_children()
            issue_many(server, 24)
            self.assertEqual(status(kids["signer"])["Seccomp"].strip(), "2")
            if ROOT:
                self.assertNotEqual(status(kids["signer"])["Uid"].split()[0], "0")
            self.assertEqual(server.children()["signer"], kids["signer"])
        finally:
            server.stop()


def use_netprobe(allow):
    """The probe module, and the sandbox's network set by the deprecated key."""
    def edit(text):
        text = text.replace("module: /usr/lib/softhsm/libsofthsm2.so", "module: " + NETPROBE)
        text = text.replace("    network: none\n", "")
        return re.sub(r"(?m)^signer:\n", "signer:\n  seccomp_allow_network: %s\n"
                      % ("true" if allow else "false"), text, count=1)
    return edit


def use_sandbox(network=None, sysv_ipc=None, old_key=None):
    """The probe module, with signer.sandbox.network / sysv_ipc and the deprecated
    signer.seccomp_allow_network as given (None: not written)."""
    def edit(text):
        text = text.replace("module: /usr/lib/softhsm/libsofthsm2.so", "module: " + NETPROBE)
        text = text.replace("    network: none\n", "" if network is None
                            else "    network: %s\n" % network)
        text = text.replace("    sysv_ipc: false\n", "" if sysv_ipc is None
                            else "    sysv_ipc: %s\n" % ("true" if sysv_ipc else "false"))
        if old_key is not None:
            text = re.sub(r"(?m)^signer:\n", "signer:\n  seccomp_allow_network: %s\n"
                          % ("true" if old_key else "false"), text, count=1)
        return text
    return edit


class Daemons:
    """What a client library reaches: a unix socket (a local daemon) and a TCP port on
    127.0.0.1 (a network HSM), each accepting and closing every connection."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="netprobe.", dir="/tmp")  # short: sun_path
        os.chmod(self.dir, 0o755)  # the signer's user connects
        self.path = os.path.join(self.dir, "daemon.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.path)
        os.chmod(self.path, 0o666)
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        for s in (self.unix, self.tcp):
            s.listen(64)
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()

    @staticmethod
    def serve(s):
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            c.close()

    def close(self):
        for s in (self.unix, self.tcp):
            s.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@unittest.skipUnless(NETPROBE, "HSMCA_NETPROBE (the test PKCS#11 module) is not set")
class NetworkGateTests(unittest.TestCase):
    """A PKCS#11 module that tries to open a TCP socket in every C_Sign, as a
    network HSM's client does (tests/integration/netprobe_pkcs11.c): the
    signer's real filter decides, with no test-only path in the signer."""

    def run_with(self, allow):
        server = DevServer("ec-p256", name="netgate", edit_config=use_netprobe(allow))
        try:
            server.wait_ready()
            kids = server.wait_children()
            if ROOT:  # control: the signer loaded the probe, not SoftHSM directly
                self.assertIn(os.path.basename(NETPROBE), maps(kids["signer"]))
            server.issue()
            # Start-up signs before the filter; only what follows it counts.
            log = after_confinement(full_log(server))
            # Refused or not, the signer went on signing: EPERM, not a kill.
            self.assertEqual(server.children()["signer"], kids["signer"])
            return log
        finally:
            server.stop()

    def test_network_refused_by_default(self):
        log = self.run_with(False)
        self.assertIn("netprobe: socket(AF_INET) in C_Sign: Operation not permitted", log)
        self.assertNotIn("netprobe: socket(AF_INET) in C_Sign: allowed", log)
        self.assertIn(NET % ("denied", "signer.seccomp_allow_network: false"), log)

    def test_network_allowed_when_configured(self):
        log = self.run_with(True)
        self.assertIn("netprobe: socket(AF_INET) in C_Sign: allowed", log)
        self.assertNotIn("netprobe: socket(AF_INET) in C_Sign: Operation not permitted", log)
        self.assertIn(NET % ("allowed", "signer.seccomp_allow_network: true"), log)


@unittest.skipUnless(NETPROBE, "HSMCA_NETPROBE (the test PKCS#11 module) is not set")
class SandboxModeTests(unittest.TestCase):
    """signer.sandbox.network and sysv_ipc against a module that needs a daemon's unix
    socket, a TCP connection or SysV shared memory in C_Sign, and answers
    CKR_GENERAL_ERROR when refused (NETPROBE_NEED; NETPROBE_TRY only reports)."""

    @classmethod
    def setUpClass(cls):
        cls.daemons = Daemons()
        cls.unix = "unix:" + cls.daemons.path
        cls.inet = "inet:%d" % cls.daemons.port

    @classmethod
    def tearDownClass(cls):
        cls.daemons.close()

    def serves(self, edit, need, try_=""):
        """Serves and signs under the filter; returns the log after confinement."""
        server = DevServer("ec-p256", name="sbmode", edit_config=edit,
                           pkcs11_env={"NETPROBE_NEED": need, "NETPROBE_TRY": try_})
        try:
            server.wait_ready()
            kids = server.wait_children()
            server.issue()
            server.issue()
            self.full = full_log(server)
            log = after_confinement(self.full)
            self.assertIn('"msg":"self-test inside the sandbox: signed and verified",'
                          '"keys":"the CA key and the audit key"', log)
            self.assertEqual(server.children()["signer"], kids["signer"])
            return log
        finally:
            server.stop()

    def stops(self, edit, need):
        """Stops at start with exit status 78; returns the whole log."""
        server = DevServer("ec-p256", name="sbstop", edit_config=edit,
                           pkcs11_env={"NETPROBE_NEED": need, "NETPROBE_TRY": ""})
        try:
            rc = server.proc.wait(90)
            log = full_log(server)
        finally:
            server.stop()
        self.assertEqual(rc, 78, log[-3000:])
        # The signer's own message names the sandbox, not a configuration or PIN error.
        self.assertIn("the PKCS#11 module failed its check inside the sandbox", log)
        self.assertIn("CKR_GENERAL_ERROR", log)
        self.assertNotIn("refusing to serve", log)
        self.assertEqual(log.count("failed its check inside the sandbox"), 1, log[-3000:])
        return log

    def test_unix_daemon_refused_with_network_none(self):
        log = self.stops(use_sandbox(network="none"), self.unix)
        self.assertIn("netprobe: connect(AF_UNIX) in C_Sign: allowed", log)  # before the filter
        self.assertIn("netprobe: connect(AF_UNIX) in C_Sign: Operation not permitted", log)
        self.assertIn("inside the sandbox (signer.sandbox.network: none, sysv_ipc: false): "
                      "CA key (pkcs11.ca_key): sign: C_Sign: CKR_GENERAL_ERROR; a module that "
                      "talks to a daemon needs signer.sandbox.network: unix", log)

    def test_default_is_none(self):
        log = self.stops(use_sandbox(), self.unix)
        self.assertIn("(signer.sandbox.network: none, sysv_ipc: false)", log)

    def test_unix_serves_and_inet_still_refused(self):
        log = self.serves(use_sandbox(network="unix"), self.unix, self.inet)
        self.assertIn(NET % ("unix sockets only", "signer.sandbox.network: unix"), log)
        self.assertIn("netprobe: connect(AF_UNIX) in C_Sign: allowed", log)
        self.assertNotIn("netprobe: connect(AF_UNIX) in C_Sign: Operation not permitted", log)
        self.assertIn("netprobe: connect(AF_INET) in C_Sign: Operation not permitted", log)
        self.assertNotIn("netprobe: connect(AF_INET) in C_Sign: allowed", log)

    def test_inet_needed_with_network_unix_names_inet(self):
        log = self.stops(use_sandbox(network="unix"), self.inet)
        self.assertIn("(signer.sandbox.network: unix, sysv_ipc: false)", log)
        self.assertIn("a network HSM's client needs signer.sandbox.network: inet", log)

    def test_inet_serves_both(self):
        log = self.serves(use_sandbox(network="inet"), self.unix + " " + self.inet)
        self.assertIn(NET % ("allowed", "signer.sandbox.network: inet"), log)
        self.assertIn("netprobe: connect(AF_UNIX) in C_Sign: allowed", log)
        self.assertIn("netprobe: connect(AF_INET) in C_Sign: allowed", log)
        self.assertNotIn("Operation not permitted", log)

    def test_deprecated_key_is_inet(self):
        log = self.serves(use_sandbox(old_key=True), self.unix + " " + self.inet)
        self.assertIn(NET % ("allowed", "signer.seccomp_allow_network: true"), log)
        self.assertIn("netprobe: connect(AF_INET) in C_Sign: allowed", log)
        self.assertIn('"msg":"signer.seccomp_allow_network is deprecated: write '
                      'signer.sandbox.network instead (none, unix or inet)",'
                      '"write":"signer.sandbox.network: inet"', self.full)

    def test_sysv_ipc_refused_by_default(self):
        log = self.stops(use_sandbox(network="inet"), "shm")
        self.assertIn("netprobe: shmget in C_Sign: Operation not permitted", log)
        self.assertIn("(signer.sandbox.network: inet, sysv_ipc: false)", log)
        self.assertIn("a module that uses SysV shared memory needs signer.sandbox.sysv_ipc: true",
                      log)

    def test_sysv_ipc_allowed(self):
        log = self.serves(use_sandbox(sysv_ipc=True), "shm", self.unix)
        self.assertIn('"sysv_ipc":"allowed","sysv_ipc_setting":"signer.sandbox.sysv_ipc: true"',
                      log)
        self.assertIn("netprobe: shmget in C_Sign: allowed", log)
        self.assertNotIn("netprobe: shmget in C_Sign: Operation not permitted", log)
        # The network stays closed: sysv_ipc opens nothing else.
        self.assertIn("netprobe: connect(AF_UNIX) in C_Sign: Operation not permitted", log)

    def test_disagreeing_keys_are_a_config_error(self):
        server = DevServer("ec-p256", name="sbconf",
                           edit_config=use_sandbox(network="unix", old_key=True))
        try:
            rc = server.proc.wait(60)
            log = full_log(server)
        finally:
            server.stop()
        self.assertEqual(rc, 78, log[-3000:])
        self.assertIn("signer.seccomp_allow_network: true (deprecated: it means "
                      "signer.sandbox.network: inet) disagrees with signer.sandbox.network: unix",
                      log)


@unittest.skipUnless(ROOT, "signer.user is looked up only when started as root")
class SignerUserTests(unittest.TestCase):
    def test_missing_signer_user_stops_startup_with_its_name(self):
        os.makedirs(TMP, exist_ok=True)
        d = tempfile.mkdtemp(prefix="nouser.", dir=TMP)
        subprocess.run([BIN, "dev", "init", "--dir", d], check=True, capture_output=True)
        path = os.path.join(d, "hsmca.yaml")
        with open(path) as f:
            text = f.read()
        text = re.sub(r'listen: "[^"]*"', 'listen: "127.0.0.1:%d"' % free_port(), text)
        text = text.replace("user: hsmca-signer", "user: hsmca-no-such-user")
        with open(path, "w") as f:
            f.write(text)
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        r = subprocess.run([BIN, "serve", "--config", path], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL, env=env)
        out = r.stdout + r.stderr
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("signer.user 'hsmca-no-such-user' does not exist: create it with "
                      "useradd --system", out)
        # The supervisor says this only for exit status 78 (EXIT_CONFIG): no retry.
        self.assertRegex(out, r'"msg":"child cannot start: a configuration[^"]*","role":"signer"')
        self.assertEqual(out.count("does not exist"), 1, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)

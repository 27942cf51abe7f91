#!/usr/bin/python3
"""The signer's admin socket (admin.socket, admin.group; `hsmca admin status`) on a real
`hsmca serve` (SoftHSM token, signer, front end), as root with test users:

(a) the signer creates the socket before it drops privileges: signer.user:admin.group,
    mode 0660; `hsmca admin status` answers root and a member of admin.group, naming the
    caller, the keys, the token state and the audit log's size;
(b) a user outside the group is refused by the socket's mode, and, with the mode opened
    by hand, by the signer's own check (SO_PEERCRED/SO_PEERGROUPS);
(c) a client that sends nothing, garbage or an oversized packet neither blocks the
    signer nor gets anything but an error; idle connections are closed after their
    timeout, and workload certificates are issued meanwhile;
(d) `hsmca dev` run by a plain user: its admin.sock (mode 0600, no group) answers that
    user, and nobody else."""
import grp
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import time
import unittest

from hsmca_harness import BIN, TMP, DevServer, free_port
from test_audit_log import read_log, wait_log

SUFFIX = "%d" % (os.getpid() % 100000)
GROUP = "hta-adm" + SUFFIX
USERS = {"alice": True, "bob": True, "carol": True, "eve": False}  # in the group?


def user(name):
    return "hta-%s%s" % (name, SUFFIX)


def make_users():
    subprocess.check_call(["groupadd", GROUP])
    for name, member in USERS.items():
        subprocess.check_call(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin"]
                              + (["-G", GROUP] if member else []) + [user(name)])


def remove_users():
    for name in USERS:
        # userdel refuses (8) while a process of the user still runs (a dev CA stopping).
        deadline = time.time() + 15
        while (subprocess.call(["userdel", user(name)], stderr=subprocess.DEVNULL) == 8
               and time.time() < deadline):
            time.sleep(0.2)
    subprocess.call(["groupdel", GROUP], stderr=subprocess.DEVNULL)


def admin_config(required=2, pending_ttl="24h", extra=""):
    """An edit_config for DevServer: the admin socket with the test group, approvals."""
    def edit(text):
        assert "  # group: hsmca-admin\n" in text
        text = text.replace("  # group: hsmca-admin\n", "  group: %s\n" % GROUP)
        return text + ("approval:\n  required: %d\n  pending_ttl: %s\n" % (required, pending_ttl)
                       + extra)
    return edit


def start_server(name, **kw):
    srv = DevServer(name=name, edit_config=admin_config(**kw))
    srv.wait_ready()
    os.chmod(srv.dir, 0o711)  # the test users reach the socket and read the config
    srv.config = os.path.join(srv.dir, "hsmca.yaml")
    srv.sock = os.path.join(srv.dir, "admin.sock")
    return srv


def hsmca_as(who, args, check=True):
    """`hsmca ARGS` run as test user `who` (None: root); (rc, stdout, stderr)."""
    argv = [BIN] + args
    if who:
        argv = ["runuser", "-u", user(who), "--"] + argv
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    out, err = p.stdout.decode(), p.stderr.decode()
    if check and p.returncode != 0:
        raise AssertionError("hsmca %s as %s: rc %d\n%s%s" % (args, who, p.returncode, out, err))
    return p.returncode, out, err


def signer_kill9(srv):
    """kill -9 of srv's signer; returns once the supervisor's new signer answers on the
    admin socket (it has replayed the log), or raises after 60 s."""
    old = srv.children()["signer"]
    os.kill(old, signal.SIGKILL)
    srv.wait_children(exclude=[old])
    deadline = time.time() + 60
    while time.time() < deadline:
        rc, _, _ = hsmca_as(None, ["admin", "status", "--config", srv.config], check=False)
        if rc == 0:
            return
        time.sleep(0.2)
    raise AssertionError("the new signer did not answer on the admin socket")


def raw(sock_path, payload, timeout=10):
    """One packet to the admin socket and its reply (root)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(timeout)
    s.connect(sock_path)
    s.send(payload)
    data = s.recv(70000)
    s.close()
    return json.loads(data) if data else None


def setUpModule():
    remove_users()
    make_users()


def tearDownModule():
    remove_users()


class AdminSocket(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = start_server("admin")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def status(self, who):
        rc, out, err = hsmca_as(who, ["admin", "status", "--config", self.srv.config, "--json"])
        return json.loads(out)

    def test_a_socket_and_status(self):
        st = os.stat(self.srv.sock)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o660)
        self.assertEqual(pwd.getpwuid(st.st_uid).pw_name, "hsmca-signer")
        self.assertEqual(grp.getgrgid(st.st_gid).gr_name, GROUP)
        for who, name in ((None, "root"), ("alice", user("alice"))):
            r = self.status(who)
            self.assertEqual(r["caller"], name)
            self.assertEqual(r["ca_token"], "ready")
            self.assertEqual(r["audit_token"], "ready")
            self.assertGreater(r["audit_entries"], 3)
            self.assertIn("object=ca-key", r["ca_key"])
        rc, out, err = hsmca_as("bob", ["admin", "status", "--config", self.srv.config])
        self.assertRegex(out, r"caller\s+%s" % user("bob"))

    def test_b_outsider_refused(self):
        rc, out, err = hsmca_as("eve", ["admin", "status", "--config", self.srv.config],
                                check=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("Permission denied", err)
        # Defence in depth: with the mode opened, the signer's own check refuses.
        os.chmod(self.srv.sock, 0o666)
        try:
            rc, out, err = hsmca_as("eve", ["admin", "status", "--socket", self.srv.sock],
                                    check=False)
        finally:
            os.chmod(self.srv.sock, 0o660)
        self.assertEqual(rc, 1, err)
        self.assertIn("neither root nor in admin.group '%s'" % GROUP, err)
        self.assertIn("user %s" % user("eve"), err)
        self.assertIn("admin caller refused", self.srv.logtext())

    def test_c_hostile_clients(self):
        idle = []
        for _ in range(2):  # root's share of the connections (two a user)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(self.srv.sock)
            idle.append(s)
        t0 = time.time()
        self.assertEqual(self.status("alice")["caller"], user("alice"))
        self.assertLess(time.time() - t0, 5, "idle connections held the signer")
        self.srv.issue()  # the signer signs meanwhile
        # The idle ones are closed by the signer after their timeout (10 s).
        for s in idle:
            s.settimeout(30)
            self.assertEqual(s.recv(100), b"")
            s.close()
        self.assertIn("admin connection timed out", self.srv.logtext())
        self.assertIn("not a JSON object", raw(self.srv.sock, b"\xff{{not json")["error"])
        self.assertIn("unknown op", raw(self.srv.sock, b'{"op":"format-disk"}')["error"])
        self.assertIn("longer than 65536", raw(self.srv.sock, b"x" * 66000)["error"])

    def as_user(self, who, script, *args):
        """A Python script run as test user who, talking over pipes (Popen)."""
        return subprocess.Popen(["runuser", "-u", user(who), "--", "/usr/bin/python3", "-c",
                                 script, self.srv.sock] + [str(a) for a in args],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def test_e_one_user_cannot_hold_every_connection(self):
        """alice opens all eight connections and sends nothing: the signer keeps two of them
        and refuses the rest at once, naming the cap, and bob's `admin status` is answered
        while alice still holds her two."""
        holder = self.as_user("alice", HOLDER, 8)
        self.addCleanup(holder.kill)
        first = json.loads(holder.stdout.readline())
        self.assertEqual(first["refused"], 6, first)
        self.assertIn("at most 2 a user", first["messages"][0])
        rc, out, err = hsmca_as("alice", ["admin", "status", "--config", self.srv.config],
                                check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("holds 2 admin connections already (at most 2 a user)", err)
        self.assertEqual(self.status("bob")["caller"], user("bob"))
        holder.stdin.write("go\n")
        holder.stdin.flush()
        second = json.loads(holder.stdout.readline())
        self.assertEqual(second["still_open"], 2, "bob was answered only once alice's "
                                                  "connections had timed out")
        holder.stdin.close()
        holder.stdout.close()
        holder.wait(timeout=30)

    def test_f_refusals_are_budgeted_per_user(self):
        """alice's flood of refused requests fills her own budget of deny entries, not
        bob's: bob's refusals right after are each on the record."""
        def bobs(entries):
            return [e for e in entries if e.get("kind") == "deny"
                    and e.get("requester") == user("bob")]
        self.assertEqual(bobs(read_log(self.srv)), [])
        flood = self.as_user("alice", FLOODER, 40, "alice-junk")
        self.assertEqual(flood.communicate(timeout=60)[0].strip(), "40")
        bob = self.as_user("bob", FLOODER, 3, "bob-marker")
        self.assertEqual(bob.communicate(timeout=60)[0].strip(), "3")
        entries = wait_log(self.srv, lambda es: len(bobs(es)) >= 3)
        self.assertEqual(len(bobs(entries)), 3, "bob's refusals hidden behind alice's")
        alices = [e for e in entries if e.get("kind") == "deny"
                  and e.get("requester") == user("alice")]
        self.assertLessEqual(len(alices), 30)


# Run as a test user: argv[1] the socket, argv[2] how many connections to open. Prints
# {"refused", "messages"} once each refused one has its answer (or after 3 s), then on a
# line from stdin {"still_open"}: how many of the rest the signer has not closed.
HOLDER = r"""
import json, select, socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    socks.append(s)
refused, messages, deadline = set(), [], time.time() + 3
while time.time() < deadline and len(refused) < n - 2:
    ready = select.select([s for s in socks if s not in refused], [], [], 0.1)[0]
    for s in ready:
        data = s.recv(70000)
        refused.add(s)
        if data:
            messages.append(json.loads(data).get("error", ""))
print(json.dumps({"refused": len(refused), "messages": messages}), flush=True)
sys.stdin.readline()
held = [s for s in socks if s not in refused]
ready = select.select(held, [], [], 0)[0]
print(json.dumps({"still_open": len(held) - len(ready)}), flush=True)
"""

# Run as a test user: argv[1] the socket; sends argv[2] requests of an unknown op named
# argv[3], one connection each, and prints how many were refused.
FLOODER = r"""
import json, socket, sys
path, n, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
refused = 0
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    s.send(json.dumps({"op": "%s-%d" % (name, i)}).encode())
    refused += "unknown op" in json.loads(s.recv(70000)).get("error", "")
    s.close()
print(refused)
"""


class DevAsUser(unittest.TestCase):
    def test_d_dev_as_plain_user(self):
        pw = pwd.getpwnam(user("alice"))
        d = os.path.join(TMP, "admin-dev.%d" % os.getpid())
        os.makedirs(d)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        os.chmod(TMP, 0o755)
        home = os.path.join(d, "dev")
        log = open(os.path.join(d, "dev.log"), "wb")
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        proc = subprocess.Popen([BIN, "dev", "--dir", home, "--listen",
                                 "127.0.0.1:%d" % free_port()], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], cwd=d)
        try:
            sock = os.path.join(home, "admin.sock")
            deadline, rc = time.time() + 90, 1
            while time.time() < deadline and proc.poll() is None:
                rc, out, err = hsmca_as("alice", ["admin", "status", "--socket", sock,
                                                  "--json"], check=False)
                if rc == 0:
                    break
                time.sleep(0.3)
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["caller"], user("alice"))
            st = os.stat(sock)
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (pw.pw_uid, 0o600))
            os.chmod(home, 0o755)  # only the socket's mode and the check keep bob out now
            rc, out, err = hsmca_as("bob", ["admin", "status", "--socket", sock], check=False)
            self.assertNotEqual(rc, 0)
            self.assertIn("Permission denied", err)
        finally:
            proc.terminate()
            proc.wait(30)
            log.close()
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)

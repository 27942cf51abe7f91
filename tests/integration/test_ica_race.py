#!/usr/bin/python3
"""The intermediate CA's approval state machine against races, floods and config changes,
on a real `hsmca serve` (SoftHSM), as root with test users (test_admin.py's):

(a) the M-th approval and a deny on two admin connections back to back, 20 times, while a
    load generator asks for workload certificates: every deny is refused naming the
    signature in flight, or comes before the intent, or after the certificate; the log
    verifies, and the CA starts again and serves;
(b) a log with a planted CA-profile rule violation (an approval of a request that does not
    exist, after the last checkpoint): the signer starts and serves workloads with the CA
    profile closed; /readyz stays 200 with a warning naming the seq; `hsmca admin status`
    and a refused intermediate request name it; `hsmca audit verify` fails saying it is a
    CA-profile rule and that the rest verified;
(c) approval.required raised after a request reaches it (2 -> 3: two approvals do not
    sign, a third does), lowered (-> 1) never weakens one made at 2; the log verifies;
(d) one user's flood of requests is refused past approval.max_pending_per_user, naming
    the key, while another user still requests; and after a restart too;
(e) a signature cut by a crash (intent, no result): the next start records it as
    unknown and the request can be signed again."""
import grp
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

from hsmca_harness import BIN, TMP
from test_admin import GROUP, hsmca_as, make_users, remove_users, start_server, user

LOADGEN = os.environ.get("HSMCA_LOADGEN", "build/tests/loadgen")


def connect_as(path, who):
    """A connection to the admin socket whose peer credentials are test user `who`'s
    (None: root): the effective ids and groups at connect() are what SO_PEERCRED and
    SO_PEERGROUPS report."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(60)
    if who is None:
        s.connect(path)
        return s
    pw = pwd.getpwnam(user(who))
    os.setgroups([grp.getgrnam(GROUP).gr_gid])
    os.setegid(pw.pw_gid)
    os.seteuid(pw.pw_uid)
    try:
        s.connect(path)
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups([])
    return s


def answer(s):
    data = s.recv(70000)
    s.close()
    return json.loads(data)


def op(path, who, msg):
    s = connect_as(path, who)
    s.send(json.dumps(msg).encode())
    return answer(s)


def make_csr(work):
    key, csr = os.path.join(work, "istiod.key"), os.path.join(work, "istiod.csr")
    subprocess.check_call(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                           "ec_paramgen_curve:P-256", "-out", key], stderr=subprocess.DEVNULL)
    subprocess.check_call(["openssl", "req", "-new", "-key", key, "-out", csr, "-subj",
                           "/CN=istiod"])
    with open(csr) as f:
        return f.read()


def audit_verify(srv):
    p = subprocess.run([BIN, "audit", "verify", os.path.join(srv.dir, "audit")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode, p.stdout.decode()


def restart(srv, edit=None):
    """SIGTERM to serve, the config edited, serve started again; returns once it signs."""
    srv.proc.send_signal(signal.SIGTERM)
    srv.proc.wait(30)
    if edit:
        with open(srv.config) as f:
            text = f.read()
        with open(srv.config, "w") as f:
            f.write(edit(text))
    srv.client.close()
    srv.restart_supervisor()
    srv.wait_ready()
    os.chmod(srv.dir, 0o711)


def set_required(m):
    return lambda text: re.sub(r"\n  required: \d+\n", "\n  required: %d\n" % m, text)


def setUpModule():
    remove_users()
    make_users()


def tearDownModule():
    remove_users()


class Race(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="ica-race.", dir=TMP)
        os.chmod(self.work, 0o755)
        self.csr = make_csr(self.work)
        self.srv = None

    def tearDown(self):
        try:
            if self.srv:
                self.srv.stop()
        finally:
            shutil.rmtree(self.work, ignore_errors=True)

    def request(self, who, cluster="cluster-a"):
        r = op(self.srv.sock, who, {"op": "ica-request", "csr": self.csr, "cluster": cluster})
        self.assertTrue(r.get("ok"), r)
        return r["id"]

    def test_a_approve_deny_race_under_load(self):
        self.srv = start_server("icarace", required=1)
        load = subprocess.Popen(
            [LOADGEN, "--dir", self.srv.dir, "--addr", self.srv.addr, "--connections", "2",
             "--concurrency", "8", "--rate", "200", "--requests", "4000", "--pods", "10"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        outcomes = {}
        try:
            for _ in range(20):
                rid = self.request("alice")
                # Both connected first (the approver in the lower slot), then both sent.
                a = connect_as(self.srv.sock, "bob")
                d = connect_as(self.srv.sock, None)
                a.send(json.dumps({"op": "ica-approve", "id": rid}).encode())
                d.send(json.dumps({"op": "ica-deny", "id": rid, "reason": "race"}).encode())
                ra, rd = answer(a), answer(d)
                if rd.get("ok"):  # the deny came before any intent: nothing was signed
                    self.assertFalse(ra.get("ok") and ra.get("state") == "issued", (ra, rd))
                    kind = "deny first"
                elif "a signature is in flight" in rd["error"]:
                    self.assertIn("intermediate request %d: a signature is in flight (intent "
                                  "seq " % rid, rd["error"])
                    self.assertIn("deny refused: revoke the certificate once it is issued",
                                  rd["error"])
                    kind = "in flight"
                else:
                    self.assertIn("is signed already: revoke it instead", rd["error"])
                    kind = "after the certificate"
                if not rd.get("ok"):
                    self.assertTrue(ra.get("ok") and ra["state"] == "issued", (ra, rd))
                outcomes[kind] = outcomes.get(kind, 0) + 1
        finally:
            out, err = load.communicate(timeout=300)
        m = re.search(r"^result ok=(\d+) ", out, re.M)
        print("deny outcomes:", outcomes, "load:", m.group(0) if m else out + err)
        self.assertTrue(m and int(m.group(1)) > 0, out + err)  # the load was real
        rc, out = audit_verify(self.srv)
        self.assertEqual(rc, 0, out)
        restart(self.srv)  # the CA starts again and serves
        self.srv.issue()
        r = op(self.srv.sock, None, {"op": "status"})
        self.assertEqual(r["ca_profile"], "open")

    def test_b_planted_violation_closes_the_ca_profile_only(self):
        self.srv = start_server("icaplant", required=2)
        self.srv.verify_log_at_stop = False  # a planted violation: verify must fail (below)
        self.request("alice")
        self.srv.proc.send_signal(signal.SIGTERM)
        self.srv.proc.wait(30)
        log = os.path.join(self.srv.dir, "audit", "log")
        with open(log, "rb") as f:
            seq = f.read().count(b"\n")
        line = ('{"kind":"intermediate-approve","request_id":999999,"requester":"mallory",'
                '"seq":%d,"time":%d}\n' % (seq, int(time.time())))
        with open(log, "a") as f:  # after the last checkpoint: only the rules can object
            f.write(line)
        self.srv.client.close()
        self.srv.restart_supervisor()
        self.srv.wait_ready()  # workloads are served
        os.chmod(self.srv.dir, 0o711)
        self.srv.issue()
        st = op(self.srv.sock, None, {"op": "status"})
        self.assertIn("the CA profile is closed: the signing log breaks a CA-profile rule at "
                      "seq %d" % seq, st["ca_profile"])
        self.assertIn("intermediate request 999999 does not exist", st["ca_profile"])
        r = op(self.srv.sock, "alice", {"op": "ica-request", "csr": self.csr,
                                        "cluster": "cluster-b"})
        self.assertFalse(r["ok"])
        self.assertIn("the CA profile is closed", r["error"])
        rc, out, err = hsmca_as(None, ["admin", "status", "--config", self.srv.config])
        self.assertIn("ca_profile", out)
        self.assertIn("seq %d" % seq, out)
        # /readyz: 200 (workloads are served) with a warning line naming the seq.
        want = "warning: the CA profile is closed: the signing log breaks a CA-profile rule " \
               "at seq %d" % seq
        deadline, body = time.time() + 30, ""
        while time.time() < deadline and want not in body:
            with urllib.request.urlopen(self.srv.metrics_url + "/readyz", timeout=5) as resp:
                self.assertEqual(resp.status, 200)
                body = resp.read().decode()
            time.sleep(0.3)
        self.assertIn(want, body)
        rc, out = audit_verify(self.srv)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("a CA-profile rule is broken at log seq %d" % seq, out)
        self.assertIn("The rest verified", out)

    def test_c_required_raised_and_lowered(self):
        self.srv = start_server("icareq", required=2)
        rid, rid2 = self.request("alice"), self.request("alice")  # both made at 2
        restart(self.srv, set_required(3))
        for who in ("bob", "carol"):
            r = op(self.srv.sock, who, {"op": "ica-approve", "id": rid})
            self.assertTrue(r["ok"], r)
            self.assertEqual((r["state"], r["required"]), ("pending", 3), r)
        r = op(self.srv.sock, None, {"op": "ica-approve", "id": rid})
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["state"], "issued", r)
        restart(self.srv, set_required(1))
        r = op(self.srv.sock, "bob", {"op": "ica-approve", "id": rid2})
        self.assertEqual((r["state"], r["required"]), ("pending", 2), r)
        r = op(self.srv.sock, "carol", {"op": "ica-approve", "id": rid2})
        self.assertEqual(r["state"], "issued", r)
        rid3 = self.request("alice")  # made at 1
        r = op(self.srv.sock, "bob", {"op": "ica-approve", "id": rid3})
        self.assertEqual(r["state"], "issued", r)
        rc, out = audit_verify(self.srv)
        self.assertEqual(rc, 0, out)

    def test_d_flood_bounded_per_user(self):
        self.srv = start_server("icaflood", required=2)
        for _ in range(4):  # approval.max_pending_per_user's default
            self.request("alice")
        for _ in range(2):
            r = op(self.srv.sock, "alice", {"op": "ica-request", "csr": self.csr,
                                            "cluster": "cluster-a"})
            self.assertFalse(r["ok"])
            self.assertIn("has 4 intermediate requests waiting (approval.max_pending_per_user "
                          "is 4)", r["error"])
        self.request("bob")
        restart(self.srv)
        r = op(self.srv.sock, "alice", {"op": "ica-request", "csr": self.csr,
                                        "cluster": "cluster-a"})
        self.assertIn("approval.max_pending_per_user", r["error"])
        self.request("carol")
        rc, out = audit_verify(self.srv)
        self.assertEqual(rc, 0, out)

    def test_e_signature_cut_by_a_crash(self):
        """The M-th approval's intent written, the signer gone before its result (crafted
        after the last checkpoint): the next start records the outcome as unknown, and the
        request is no longer in flight: a fetch signs it, the log verifies."""
        self.srv = start_server("icacrash", required=2)
        rid = self.request("alice")
        r = op(self.srv.sock, "bob", {"op": "ica-approve", "id": rid})
        self.assertEqual(r["state"], "pending", r)
        self.srv.proc.send_signal(signal.SIGTERM)
        self.srv.proc.wait(30)
        log = os.path.join(self.srv.dir, "audit", "log")
        with open(log, "rb") as f:
            seq = f.read().count(b"\n")
        now = int(time.time())
        lines = [{"kind": "intermediate-approve", "request_id": rid,
                  "requester": user("carol"), "seq": seq, "time": now,
                  "uid": pwd.getpwnam(user("carol")).pw_uid},
                 {"csr_sha256": "ab" * 32, "kind": "issue-intent", "not_after": now + 86400,
                  "not_before": now, "profile": "intermediate", "request_id": rid,
                  "requester": user("carol"), "sans": "URI:cluster.local", "seq": seq + 1,
                  "serial": "4c" * 16, "tbs_sha256": "cd" * 32, "time": now}]
        with open(log, "a") as f:
            for e in lines:
                f.write(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n")
        self.srv.client.close()
        self.srv.restart_supervisor()
        self.srv.wait_ready()
        os.chmod(self.srv.dir, 0o711)
        with open(log) as f:
            self.assertIn('"code":"UNKNOWN"', f.read())
        r = op(self.srv.sock, None, {"op": "ica-fetch", "id": rid})
        self.assertTrue(r.get("ok"), r)
        self.assertIn("BEGIN CERTIFICATE", r["ca_cert"])
        rc, out = audit_verify(self.srv)
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)

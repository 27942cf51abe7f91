#!/usr/bin/python3
"""Two replicas of one CA on two tokens (docs/HA.md): the second replica's SoftHSM token
is a copy of the first's token directory (as an HSM cluster clones a partition: the same
CA key, a token store of its own) with its own softhsm2.conf (pkcs11.softhsm2_conf); each
`hsmca serve` has its own token, audit directory, admin socket and origin (audit.replica),
and both serve one client. The second's signer is shown to use its own store: its
SOFTHSM2_CONF is its own file, and once the first's token directory is gone a new signer
of the second's logs in and signs. `hsmca audit verify DIR1 DIR2` verifies both logs and
checks them together: it refuses one log given twice (one origin) and a serial that is
in both logs (an intent of one copied into the other, which still verifies on its own),
naming the serial and both logs."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

import hsmca_client as hc
from hsmca_harness import BIN, TMP, DevServer, free_port


def verify(*dirs):
    p = subprocess.run([BIN, "audit", "verify"] + list(dirs), capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def forged_copy(d, work):
    """A copy of the log directory d."""
    out = os.path.join(work, "copy")
    shutil.copytree(d, out)
    return out


def clone_token(first, name):
    """DIR/tokens-NAME: a copy of the first replica's token directory (its files' owners
    and modes kept: the signer reads them as signer.user), and DIR/softhsm2-NAME.conf
    naming it, owned and readable as the first's. Returns the conf's file name."""
    tokens = os.path.join(first.dir, "tokens-%s" % name)
    subprocess.check_call(["cp", "-a", os.path.join(first.dir, "tokens"), tokens])
    src = os.path.join(first.dir, "softhsm2.conf")
    with open(src) as f:
        text = f.read()
    old = "directories.tokendir = %s\n" % os.path.join(first.dir, "tokens")
    assert old in text, text
    conf = "softhsm2-%s.conf" % name
    path = os.path.join(first.dir, conf)
    with open(path, "w") as f:
        f.write(text.replace(old, "directories.tokendir = %s\n" % tokens))
    st = os.stat(src)
    os.chown(path, st.st_uid, st.st_gid)
    os.chmod(path, st.st_mode & 0o7777)
    return conf


class Replica(DevServer):
    """`hsmca serve --config DIR/hsmca-NAME.yaml`: another replica of the dev CA in DIR (its
    CA and audit key, in a clone of the first's token), with its own token directory and
    softhsm2.conf, port, audit directory, admin socket, CRL file and audit.replica."""

    def __init__(self, first, name):
        self.dir, self.env = first.dir, first.env
        self.port = free_port()
        self.addr = "localhost:%d" % self.port
        self.softhsm2_conf = os.path.join(self.dir, clone_token(first, name))
        with open(os.path.join(first.dir, "hsmca.yaml")) as f:
            text = f.read()
        text = text.replace('listen: "127.0.0.1:%d"' % first.port,
                            'listen: "127.0.0.1:%d"' % self.port)
        for old, new in (("  dir: audit\n  replica: a\n", "  dir: audit-%s\n  replica: %s\n"
                          % (name, name)),
                         ("socket: admin.sock", "socket: admin-%s.sock" % name),
                         ("path: crl/ca-crl.pem", "path: crl/ca-crl-%s.pem" % name),
                         ("softhsm2_conf: softhsm2.conf\n",
                          "softhsm2_conf: %s\n" % os.path.basename(self.softhsm2_conf))):
            assert old in text, old
            text = text.replace(old, new)
        config = os.path.join(self.dir, "hsmca-%s.yaml" % name)
        with open(config, "w") as f:
            f.write(text)
        self.log_path = os.path.join(self.dir, "server-%s.log" % name)
        self.log = open(self.log_path, "wb")
        self.argv = [BIN, "serve", "--config", config]
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env)
        self.root = None
        self.client = None


def signer_softhsm2_conf(srv):
    """SOFTHSM2_CONF in the environment of srv's signer."""
    pid = srv.wait_children()["signer"]
    with open("/proc/%d/environ" % pid, "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    return env.get(b"SOFTHSM2_CONF", b"").decode()


def with_replica(text):
    return text.replace("audit:\n  dir: audit\n", "audit:\n  dir: audit\n  replica: a\n")


class Replicas(unittest.TestCase):
    def test_two_replicas_one_client(self):
        a = DevServer(name="ha", edit_config=with_replica)
        b = None
        work = tempfile.mkdtemp(prefix="ha-work.", dir=TMP)
        try:
            a.wait_ready()
            b = Replica(a, "b")
            b.wait_ready()
            # One client, both replicas: the same root verifies every certificate.
            for srv in (a, b, a, b):
                self.assertEqual(len(srv.issue()), 2)
            # Each signer's SoftHSM reads its own configuration, naming its own store.
            self.assertEqual(signer_softhsm2_conf(a), os.path.join(a.dir, "softhsm2.conf"))
            self.assertEqual(signer_softhsm2_conf(b), b.softhsm2_conf)
            a.stop()
            # The first's token store gone, a new signer of the second's (its token opened
            # and logged in again, from its own directory) still signs.
            os.rename(os.path.join(a.dir, "tokens"), os.path.join(a.dir, "tokens-a-gone"))
            old = b.wait_children()["signer"]
            os.kill(old, signal.SIGKILL)
            b.wait_children(exclude=[old])
            b.client.close()
            b.client = None
            b.wait_ready()
            self.assertEqual(len(b.issue()), 2)
        finally:
            if b:
                b.stop()
            if a.proc.poll() is None:
                a.stop()
        da, db = os.path.join(a.dir, "audit"), os.path.join(a.dir, "audit-b")
        rc, out, err = verify(da, db)
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out, r"audit \(origin [^ ]+/a\): OK")
        self.assertRegex(out, r"audit-b \(origin [^ ]+/b\): OK")
        m = re.search(r"OK: 2 logs together: origins distinct, (\d+) serials", out)
        self.assertTrue(m, out)
        self.assertGreaterEqual(int(m.group(1)), 5)
        rc, out, err = verify(da, da)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("have one origin", err)
        rc, out, err = verify(db, forged_copy(db, work))
        self.assertEqual(rc, 1, out + err)
        self.assertIn("have one origin", err)
        # An intent of a's copied into (a copy of) b's log, as its next entry.
        with open(os.path.join(da, "log")) as f:
            intent = [json.loads(l) for l in f if '"kind":"issue-intent"' in l][-1]
        forged = os.path.join(work, "audit-b")
        shutil.copytree(db, forged)
        with open(os.path.join(forged, "log")) as f:
            n = sum(1 for _ in f)
        intent["seq"] = n
        with open(os.path.join(forged, "log"), "a") as f:
            f.write(json.dumps(intent, sort_keys=True, separators=(",", ":"),
                               ensure_ascii=False) + "\n")
        rc, out, err = verify(forged)
        self.assertEqual(rc, 0, out + err)  # alone it verifies: only both logs show it
        rc, out, err = verify(da, forged)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("FAILED: %s: log seq %d " % (forged, n), err)
        self.assertIn("serial %s of CA key" % intent["serial"], err)
        self.assertIn("is also in %s (log seq " % da, err)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()

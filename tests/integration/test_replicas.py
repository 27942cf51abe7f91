#!/usr/bin/python3
"""Two replicas of one CA (docs/HA.md): two `hsmca serve` on one SoftHSM token, each with its
own token session, audit directory, admin socket and origin (audit.replica), serve one
client; `hsmca audit verify DIR1 DIR2` verifies both logs and checks them together: it
refuses one log given twice (one origin) and a serial that is in both logs (an intent of
one copied into the other, which still verifies on its own), naming the serial and both
logs."""
import json
import os
import re
import shutil
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


class Replica(DevServer):
    """`hsmca serve --config DIR/hsmca-NAME.yaml`: another replica of the dev CA in DIR (its
    token, CA and audit key), with its own port, audit directory, admin socket, CRL file
    and audit.replica."""

    def __init__(self, first, name):
        self.dir, self.env = first.dir, first.env
        self.port = free_port()
        self.addr = "localhost:%d" % self.port
        with open(os.path.join(first.dir, "hsmca.yaml")) as f:
            text = f.read()
        text = text.replace('listen: "127.0.0.1:%d"' % first.port,
                            'listen: "127.0.0.1:%d"' % self.port)
        for old, new in (("  dir: audit\n  replica: a\n", "  dir: audit-%s\n  replica: %s\n"
                          % (name, name)),
                         ("socket: admin.sock", "socket: admin-%s.sock" % name),
                         ("path: crl/ca-crl.pem", "path: crl/ca-crl-%s.pem" % name)):
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
        finally:
            if b:
                b.stop()
            a.stop()
        da, db = os.path.join(a.dir, "audit"), os.path.join(a.dir, "audit-b")
        rc, out, err = verify(da, db)
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out, r"audit \(origin [^ ]+/a\): OK")
        self.assertRegex(out, r"audit-b \(origin [^ ]+/b\): OK")
        m = re.search(r"OK: 2 logs together: origins distinct, (\d+) serials", out)
        self.assertTrue(m, out)
        self.assertGreaterEqual(int(m.group(1)), 4)
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

#!/usr/bin/python3
"""The audit directory failing under load (issue 10 item 5), on a real server:

- A full disk: audit.dir on a small tmpfs that the test fills until ENOSPC while
  clients issue. Issuance stops with UNAVAILABLE naming "No space left on device"
  (fail closed: no intent can be made durable, so nothing is signed), every certificate
  a client got has its intent, and once space is freed issuance resumes in the same
  signer (no restart), checkpoints resume, and the log verifies. Then full again with
  the signer killed: its successor cannot write its start entry and exits, the
  supervisor keeps restarting it (a full disk is not a permanent failure), and it
  serves once space returns.
- A read-only audit directory: every directory of audit.dir made unwritable to the
  signer (mode 0500; it runs as its own user) while DIR/log itself stays writable.
  What should happen, and does: issuance goes on, because the intent is durable in
  DIR/log (the file is open, and appends to it need no directory entry), which is what
  invariant 8 asks; the publisher cannot create its temp files, so no tile or checkpoint
  is written, which it logs once per reason and retries every second; a signer killed
  meanwhile starts again (it opens DIR/log before dropping root, and the files it needs
  at start exist); and once the directories are writable again a checkpoint covers the
  whole log. A log file that cannot be written itself (a read-only remount, an
  immutable file) is the fail-closed case of test_audit_log's chattr test.

Each needs root: the first mounts a tmpfs (skipped without CAP_SYS_ADMIN), the second
needs a signer that is not root (skipped when it is: directory modes do not bind root)."""
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

import grpc

from hsmca_harness import TMP, DevServer, audit_entries
from test_crash import RETRYABLE, RecordingLoad, audit_verify, checkpoint_size, missing_intents

ENOSPC_TEXT = "No space left on device"
PUBLISH_FAILED = "audit publish: no checkpoint this round"


def server_log(server):
    server.log.flush()
    with open(server.log_path, "rb") as f:
        return f.read().decode(errors="replace")


def publish_errors(server):
    """(signer pid, error) of each of the publisher's 'no checkpoint this round' lines."""
    out = []
    for line in server_log(server).splitlines():
        if PUBLISH_FAILED in line:
            m = re.search(r'"error":"((?:[^"\\]|\\.)*)"', line)
            pid = re.search(r'"pid":(\d+)', line)
            out.append((pid.group(1) if pid else "?", m.group(1) if m else line))
    return out


def repeated_reasons(errs):
    """The errors logged again by the same signer for the same reason: the same text
    but for its numbers (the tile's width, the log's size), which change every round."""
    seen, again = set(), []
    for pid, msg in errs:
        key = (pid, re.sub(r"[0-9]+", "N", msg))
        if key in seen:
            again.append(msg)
        seen.add(key)
    return again


class DiskFaultMixin:
    def signer_pid(self):
        return self.server.wait_children()["signer"]

    def wait_for(self, cond, timeout, what):
        deadline = time.time() + timeout
        while not cond():
            if time.time() > deadline:
                if getattr(self, "mnt", None):  # how full the test's file system is
                    print(subprocess.run("df -k %s; ls -la %s %s/audit; wc -l %s/audit/log" % (
                        self.mnt, self.mnt, self.mnt, self.mnt), shell=True,
                        stdout=subprocess.PIPE).stdout.decode())
                self.fail("%s: not within %d s\n%s" % (what, timeout, self.server.logtext()))
            time.sleep(0.05)

    def wait_checkpoint_covers_log(self, audit_dir, timeout=10):
        size = len(audit_entries(audit_dir))
        self.wait_for(lambda: checkpoint_size(audit_dir) >= size, timeout,
                      "a checkpoint covering the log's %d entries" % size)

    def finish_and_check(self, load, audit_dir):
        """Stops load and the server; checks the answers, the log and every certificate."""
        load.finish()
        self.assertTrue(set(load.codes) <= RETRYABLE,
                        "a valid request got a non-retryable answer: %s %s" %
                        (load.codes, load.examples))
        self.server.stop()
        rc, out = audit_verify(audit_dir)
        self.assertEqual(rc, 0, out)
        # Stopped cleanly: every intent has its result, also those whose request the
        # failed log refused (their lines reached the disk when it came back).
        self.assertNotIn("without a result", out)
        missing, _ = missing_intents(audit_dir, load.certs)
        print("certificates looked up in the log: %d, missing = %d" %
              (len(load.certs), len(missing)))
        self.assertEqual(missing, [], "certificates in clients' hands without their intent")
        return audit_entries(audit_dir)


class FullDisk(DiskFaultMixin, unittest.TestCase):
    # Room for the log's growth after space returns: a resumed load signs about 2,000
    # certificates a second here (2.5 MB of log a second), and a smaller file system
    # filled up again before the test's checks ran.
    SIZE = "64m"

    def setUp(self):
        self.mnt = tempfile.mkdtemp(prefix="fulldisk.", dir=TMP)
        os.chmod(self.mnt, 0o755)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % self.SIZE,
                            "hsmca-test", self.mnt], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if r.returncode != 0:
            os.rmdir(self.mnt)
            self.skipTest("cannot mount a tmpfs for a full disk (needs root with "
                          "CAP_SYS_ADMIN): %s" % r.stdout.decode(errors="replace").strip())
        self.addCleanup(self.unmount)
        self.audit_dir = os.path.join(self.mnt, "audit")
        self.server = DevServer("ec-p256", name="fulldisk", edit_config=lambda t: t.replace(
            "  dir: audit\n", "  dir: %s\n" % self.audit_dir))
        self.addCleanup(self.server.stop)
        self.server.wait_ready()

    def unmount(self):
        subprocess.run(["umount", "-l", self.mnt])
        os.rmdir(self.mnt)

    def fill(self, path):
        """Writes path until the file system is full; the bytes written."""
        n = 0
        with open(path, "ab", buffering=0) as f:
            for chunk in (1 << 20, 65536, 4096, 512, 1):
                try:
                    while True:
                        n += f.write(b"\0" * chunk)
                except OSError as e:
                    self.assertEqual(e.errno, 28, e)  # ENOSPC
        return n

    def test_full_disk_stops_issuance_then_resumes(self):
        signer = self.signer_pid()
        load = RecordingLoad(self.server)
        self.addCleanup(load.finish)  # before the server's stop (cleanups run last first)
        filler = os.path.join(self.mnt, "filler")
        t0 = time.monotonic()
        try:
            self.wait_for(lambda: load.ok() >= 20, 15, "certificates before the disk fills")
            filled = self.fill(filler)

            def enospc():
                with load.lock:
                    return sum(n for (c, d), n in load.details.items()
                               if c == grpc.StatusCode.UNAVAILABLE and ENOSPC_TEXT in d)

            self.wait_for(lambda: enospc() > 0, 10, "UNAVAILABLE naming " + ENOSPC_TEXT)
            # Full: no intent can be made durable, so nothing more is signed (the
            # publisher's freeing a temp file may let a line or two through).
            ok0, bad0 = load.ok(), enospc()
            time.sleep(2.5)
            ok_full, bad_full = load.ok() - ok0, enospc() - bad0
            self.assertLessEqual(ok_full, 4, "certificates issued on a full disk")
            self.assertGreater(bad_full, 10)
            self.assertIn("audit log: write failed: " + ENOSPC_TEXT, server_log(self.server))
            errs = publish_errors(self.server)
            self.assertEqual(repeated_reasons(errs), [],
                             "the publisher's failure logged more than once per reason")
            os.unlink(filler)
            t_freed = time.monotonic()
            # The writer retries at most once a second: back within a few.
            self.wait_for(lambda: load.ok() >= ok0 + ok_full + 10, 10,
                          "issuance after space returned")
            t_back = time.monotonic()
            self.assertEqual(self.signer_pid(), signer, "the signer was restarted")
            self.wait_checkpoint_covers_log(self.audit_dir)

            # Full again, and the signer killed: a new one cannot write its start entry.
            # That is not a permanent failure (exit 78 would stop the service): the
            # supervisor keeps restarting it, and it serves once there is space.
            bad1 = enospc()
            size1 = len(audit_entries(self.audit_dir))
            self.fill(filler)
            self.wait_for(lambda: enospc() > bad1, 10, "UNAVAILABLE on the second fill")
            os.kill(signer, signal.SIGKILL)
            self.wait_for(lambda: re.search(
                "cannot serve yet .*, will retry: audit .*" + ENOSPC_TEXT,
                server_log(self.server)), 15, "a new signer refusing to start on the full disk")
            ok2 = load.ok()
            time.sleep(1)
            self.assertIsNone(self.server.proc.poll(), "the supervisor gave up on a full disk")
            self.assertLessEqual(load.ok() - ok2, 4, "certificates with no signer running")
            os.unlink(filler)
            t_freed2 = time.monotonic()
            self.wait_for(lambda: load.ok() >= ok2 + 10, 20, "issuance after the restart")
            t_back2 = time.monotonic()
        finally:
            load.finish()
            if os.path.exists(filler):
                os.unlink(filler)
        print("full disk: filled with %d bytes; UNAVAILABLE (%s) %d times and %d "
              "certificates in 2.5 s while full; issuing again %.2f s after space returned; "
              "publisher failures logged: %s; signer killed on a full disk: serving %.2f s "
              "after space returned; %.1f s in all" %
              (filled, ENOSPC_TEXT, bad_full, ok_full, t_back - t_freed, [m for _, m in errs],
               t_back2 - t_freed2, time.monotonic() - t0))
        self.assertIn("audit log: writable again", server_log(self.server))
        entries = self.finish_and_check(load, self.audit_dir)
        # The intents whose sync hit the full disk (if the failing sync held any: it may
        # have held only results) signed nothing and say so; those the kill left open
        # were closed as UNKNOWN by the next start (verify checked every intent has one).
        refused = sum(1 for e in entries if e["kind"] == "issue-result" and
                      e.get("code") == "UNAVAILABLE" and ENOSPC_TEXT in e.get("error", ""))
        unknown = [e["intent_seq"] for e in entries if e["kind"] == "issue-result" and
                   e.get("code") == "UNKNOWN"]
        # None from the first fill: those were closed when the log came back.
        self.assertEqual([q for q in unknown if q < size1], [],
                         "intents of the first fill left open until the restart")
        print("intents refused by the full disk: %d with result UNAVAILABLE, %d UNKNOWN "
              "after the kill" % (refused, len(unknown)))


class ReadOnlyAuditDir(DiskFaultMixin, unittest.TestCase):
    def setUp(self):
        self.server = DevServer("ec-p256", name="rodir")
        self.addCleanup(self.server.stop)
        self.server.wait_ready()
        self.audit_dir = os.path.join(self.server.dir, "audit")
        with open("/proc/%d/status" % self.signer_pid()) as f:
            uid = int(re.search(r"(?m)^Uid:\s+\d+\s+(\d+)", f.read()).group(1))
        if uid == 0:
            self.skipTest("the signer runs as root here: directory modes do not bind it")

    def dirs(self):
        out = []
        for root, ds, _ in os.walk(self.audit_dir):
            out += [os.path.join(root, d) for d in ds]
        return [self.audit_dir] + out

    def test_read_only_dir_keeps_issuing_checkpoints_resume(self):
        modes = {}
        load = None
        t0 = time.monotonic()
        try:
            self.wait_checkpoint_covers_log(self.audit_dir)
            for d in self.dirs():
                modes[d] = os.stat(d).st_mode & 0o7777
                os.chmod(d, 0o500)
            cp0 = checkpoint_size(self.audit_dir)
            # A slow trickle first: each round finds a few lines more, so the partial tile
            # it fails to write has another width each time (the same reason).
            for _ in range(10):
                self.server.issue()
                time.sleep(0.3)
            self.assertTrue(publish_errors(self.server), "the publisher's failure not logged")
            load = RecordingLoad(self.server)
            self.addCleanup(load.finish)
            ok0 = load.ok()
            time.sleep(2)
            # A signer killed now starts again: it opens the log before dropping root.
            old = self.signer_pid()
            os.kill(old, signal.SIGKILL)
            self.server.wait_children(exclude=[old])
            ok1 = load.ok()
            self.wait_for(lambda: load.ok() >= ok1 + 20, 20, "issuance after the signer's kill")
            time.sleep(2)
            errs = publish_errors(self.server)
            ok_ro, cp_ro = load.ok() - ok0, checkpoint_size(self.audit_dir)
            self.assertEqual(cp_ro, cp0, "a checkpoint was written into a read-only directory")
            self.assertGreater(ok_ro, 40, "issuance stopped with a read-only directory")
            self.assertTrue(all("Permission denied" in m for _, m in errs), errs)
            self.assertGreaterEqual(len(set(p for p, _ in errs)), 2, "both signers' failures")
            self.assertEqual(repeated_reasons(errs), [],
                             "the publisher's failure logged more than once per reason")
        finally:
            for d, m in modes.items():
                os.chmod(d, m)
        t_rw = time.monotonic()
        try:
            self.wait_checkpoint_covers_log(self.audit_dir)
            t_cp = time.monotonic()
        finally:
            if load:
                load.finish()
        print("read-only audit dir: %d certificates while read-only (a signer kill among "
              "them), checkpoint stayed at %d; publisher failures logged %d: %s; checkpoint "
              "covering the log %.2f s after it was writable; %.1f s in all" %
              (ok_ro, cp_ro, len(errs), sorted(set(m for _, m in errs)), t_cp - t_rw,
               time.monotonic() - t0))
        self.assertIn('"msg":"audit publish: checkpoints resume","size":"', server_log(self.server))
        self.finish_and_check(load, self.audit_dir)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/python3
"""Token faults under load, through the fault-injecting PKCS#11 shim
(tests/p11shim/) in front of SoftHSM, with the real signer and front end and a
real gRPC client: a dead session costs no request, a removed token answers
UNAVAILABLE and comes back without a restart (and so does a client library whose
daemon went away: CKR_GENERAL_ERROR, CKR_FUNCTION_FAILED), a hung C_Sign ends its request
in bounded time while the others go on, and a wrong PIN at re-login is tried
exactly once. Each test prints what it counted."""
import os
import signal
import threading
import time
import unittest

import grpc

import hsmca_client as hc
from hsmca_harness import ShimServer

SIGN_TIMEOUT = 2

class TokenFaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ShimServer("tokenfaults", sign_timeout=SIGN_TIMEOUT)
        cls.server.wait_ready()
        cls.token = cls.server.token()
        key = hc.make_key("ec-p256")
        cls.csr = hc.make_csr(key, uris=["spiffe://cluster.local/ns/default/sa/sleep"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()



    def call(self):
        """(grpc status name, details) of one CreateCertificate."""
        try:
            self.server.client.create(self.csr, self.token, timeout=30)
            return "OK", ""
        except grpc.RpcError as e:
            return e.code().name, e.details()

    def load(self, n, threads=8, during=None):
        """n calls from `threads` threads; `during(i)` runs before call i. Returns
        the list of (status, details, seconds)."""
        out, lock, it = [], threading.Lock(), iter(range(n))

        def run():
            while True:
                with lock:
                    i = next(it, None)
                if i is None:
                    return
                if during:
                    during(i)
                t0 = time.monotonic()
                st, det = self.call()
                with lock:
                    out.append((st, det, time.monotonic() - t0))

        ts = [threading.Thread(target=run) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out

    def test_1_dead_session_costs_no_request(self):
        self.server.control("")
        sign0 = self.server.count("C_Sign")
        res = self.load(200, during=lambda i: i == 40 and self.server.control(
            "fail C_Sign CKR_SESSION_HANDLE_INVALID once\n"))
        bad = [r for r in res if r[0] != "OK"]
        calls, failed = (a - b for a, b in zip(self.server.count("C_Sign"), sign0))
        print("dead session: %d requests, %d failed, C_Sign calls %d, injected failures %d"
              % (len(res), len(bad), calls, failed))
        self.assertEqual(failed, 1)
        self.assertEqual(bad, [])

    def test_2_token_removed_and_back_without_restart(self):
        self.server.control("")
        pid = self.server.children()["signer"]
        self.assertEqual(self.call()[0], "OK")
        t0 = time.monotonic()
        self.server.control("remove\n")
        st, det = self.call()
        took = time.monotonic() - t0
        print("token removed: %s in %.2f s (%s)" % (st, took, det))
        self.assertEqual(st, "UNAVAILABLE")
        self.assertLess(took, 5)
        self.server.control("# reinserted\n")
        t0 = time.monotonic()
        while self.call()[0] != "OK":
            self.assertLess(time.monotonic() - t0, 15, "no recovery after reinsertion")
            time.sleep(0.1)
        print("token back: serving again after %.2f s" % (time.monotonic() - t0))
        self.assertEqual(self.server.children()["signer"], pid)

    def test_2b_client_library_fault_and_back_without_restart(self):
        """What a client library answers when its daemon goes away (tpm2-pkcs11 without
        tpm2-abrmd, p11-kit's remote client without its server): CKR_GENERAL_ERROR or
        CKR_FUNCTION_FAILED from C_Sign on sessions that signed before. A device fault:
        UNAVAILABLE while it lasts, the module re-initialized, and serving again with
        no restart; never a configuration error."""
        for rv in ("CKR_GENERAL_ERROR", "CKR_FUNCTION_FAILED"):
            self.server.control("# before %s\n" % rv)
            pid = self.server.children()["signer"]
            self.assertEqual(self.call()[0], "OK")
            init0 = self.server.count("C_Initialize")[0]
            fin0 = self.server.count("C_Finalize")[0]
            t0 = time.monotonic()
            self.server.control("fail C_Sign %s always\n" % rv)
            statuses = {}
            while time.monotonic() - t0 < 2.5:  # over two reconnect attempts
                st, det = self.call()
                statuses[st] = statuses.get(st, 0) + 1
                self.assertEqual(st, "UNAVAILABLE", det)
                time.sleep(0.1)
            print("%s from C_Sign (daemon gone): %s over 2.5 s (%s)" % (rv, statuses, det))
            self.server.control("# daemon back after %s\n" % rv)
            t0 = time.monotonic()
            while self.call()[0] != "OK":
                self.assertLess(time.monotonic() - t0, 15, "no recovery after %s" % rv)
                time.sleep(0.1)
            inits = self.server.count("C_Initialize")[0] - init0
            fins = self.server.count("C_Finalize")[0] - fin0
            print("%s: serving again after %.2f s, C_Finalize %d, C_Initialize %d"
                  % (rv, time.monotonic() - t0, fins, inits))
            self.assertGreater(inits, 0)
            self.assertGreater(fins, 0)
            self.assertEqual(self.server.children()["signer"], pid)
        log = self.server.logtext()
        self.assertNotIn("cannot start", log)
        self.assertNotIn("refused the PIN", log)

    def test_3_hung_sign_ends_its_request_only(self):
        self.server.control("hang C_Sign once\n")
        hung = []

        def hung_call():
            res = self.call()
            hung.append((time.monotonic(), res))

        t = threading.Thread(target=hung_call)
        t0 = time.monotonic()
        t.start()
        # The hung call holds one of the two sessions: the other goes on.
        while self.server.count("hanging")[0] == 0:  # "hanging N" line of the counts file
            self.assertLess(time.monotonic() - t0, 10, "the hang did not take")
            time.sleep(0.02)
        during = self.load(20, threads=2)
        ok_during = sum(1 for r in during if r[0] == "OK")
        t.join(SIGN_TIMEOUT + 15)
        self.assertFalse(t.is_alive())
        end, (st, det) = hung[0]
        print("hung C_Sign: answered %s after %.2f s (%s); %d/20 others OK meanwhile"
              % (st, end - t0, det, ok_during))
        self.assertEqual(st, "UNAVAILABLE")
        self.assertIn("did not answer", det)
        self.assertLess(end - t0, SIGN_TIMEOUT + 10)
        self.assertEqual(ok_during, 20)
        self.server.control("release\n")
        time.sleep(0.3)
        res = self.load(20, threads=4)
        self.assertEqual([r for r in res if r[0] != "OK"], [])

    def test_4_wrong_pin_at_relogin_tried_once(self):
        pid = self.server.children()["signer"]
        login0 = self.server.count("C_Login")[0]
        self.server.control("fail C_Sign CKR_DEVICE_ERROR once\nfail C_Login CKR_PIN_INCORRECT always\n")
        statuses, named = {}, 0
        t_end = time.monotonic() + 5
        while time.monotonic() < t_end:
            st, det = self.call()
            statuses[st] = statuses.get(st, 0) + 1
            named += "refused the PIN" in det
            time.sleep(0.05)
        logins = self.server.count("C_Login")[0] - login0
        print("wrong PIN at re-login: %s over 5 s, %d named the PIN, C_Login tried %d time(s), "
              "retried PINs = %d" % (statuses, named, logins, logins - 1))
        self.assertEqual(logins, 1)
        self.assertEqual(set(statuses), {"UNAVAILABLE"})
        self.assertGreater(named, 0)
        self.assertEqual(self.server.children()["signer"], pid)
        # The operator fixes the PIN file: a fresh signer reads it and logs in once.
        self.server.control("")
        self.replace_pin_file()
        t0 = time.monotonic()
        while self.call()[0] != "OK":
            self.assertLess(time.monotonic() - t0, 20, "no recovery after the PIN file changed")
            time.sleep(0.2)
        new_pid = self.server.children()["signer"]
        print("PIN file changed: signer %d replaced by %d, serving after %.2f s"
              % (pid, new_pid, time.monotonic() - t0))
        self.assertNotEqual(new_pid, pid)

    def replace_pin_file(self):
        """The operator's fix: the PIN file written anew (same PIN, a new file), which is
        what makes a PIN-refused signer exit to be restarted."""
        pin_path = os.path.join(self.server.dir, "pin")
        with open(pin_path, "rb") as f:
            pin = f.read()
        tmp = pin_path + ".new"
        with open(tmp, "wb") as f:
            f.write(pin)
        os.chmod(tmp, 0o600)
        os.rename(tmp, pin_path)

    def test_4b_sighup_after_pin_refusal_keeps_the_signer(self):
        """SIGHUP to `hsmca serve` reloads (docs/OPERATIONS.md "Reload"): it neither
        restarts a signer whose token refused the PIN nor makes it try the PIN again (a
        hardware token counts every try). The way back stays the PIN file's change."""
        pid = self.server.children()["signer"]
        self.server.control("fail C_Sign CKR_DEVICE_ERROR once\nfail C_Login CKR_PIN_INCORRECT always\n")
        t0 = time.monotonic()
        while "refused the PIN" not in self.call()[1]:
            self.assertLess(time.monotonic() - t0, 10, "the PIN refusal did not take")
            time.sleep(0.05)
        logins = self.server.count("C_Login")[0]
        self.server.control("")  # the token would accept the PIN again; nothing tries it
        reloads = self.server.logtext(tail=None).count("SIGHUP: reloading")
        os.kill(self.server.proc.pid, signal.SIGHUP)
        t0 = time.monotonic()
        while self.server.logtext(tail=None).count("SIGHUP: reloading") == reloads:
            self.assertLess(time.monotonic() - t0, 10, "SIGHUP was not taken")
            time.sleep(0.05)
        time.sleep(1.5)  # what a restart would take: none comes
        st, det = self.call()
        self.assertEqual(st, "UNAVAILABLE", det)
        self.assertIn("refused the PIN", det)
        self.assertEqual(self.server.children()["signer"], pid)
        self.assertEqual(self.server.count("C_Login")[0], logins)
        # The PIN file changed: a fresh signer reads it and logs in, as in test_4.
        self.replace_pin_file()
        t0 = time.monotonic()
        while self.call()[0] != "OK":
            self.assertLess(time.monotonic() - t0, 20, "no recovery after the PIN file changed")
            time.sleep(0.2)
        self.assertNotEqual(self.server.children()["signer"], pid)
        print("SIGHUP after a PIN refusal: signer %d kept, C_Login not tried; PIN file "
              "changed: serving after %.2f s" % (pid, time.monotonic() - t0))

    def test_5_sigterm_stops_promptly_while_the_token_hangs(self):
        """Last: it stops the server. SIGTERM while a C_Sign hangs (and requests
        wait behind it) stops every process without the supervisor's SIGKILL."""
        self.server.control("hang C_Sign always\n")
        for _ in range(4):
            threading.Thread(target=self.call, daemon=True).start()
        t0 = time.monotonic()
        while self.server.count("hanging")[0] < 2:  # both sessions held
            self.assertLess(time.monotonic() - t0, 10, "the hang did not take")
            time.sleep(0.02)
        kids = self.server.children()
        t0 = time.monotonic()
        self.server.proc.terminate()
        self.server.proc.wait(30)
        took = time.monotonic() - t0
        gone = not any(os.path.exists("/proc/%d" % p) for p in kids.values())
        print("SIGTERM with a hung token: supervisor stopped in %.2f s, children gone: %s"
              % (took, gone))
        self.assertEqual(self.server.proc.returncode, 0)
        self.assertNotIn("of SIGTERM: killing it", self.server.logtext())
        self.assertTrue(gone)
        self.server.control("")


if __name__ == "__main__":
    unittest.main(verbosity=2)

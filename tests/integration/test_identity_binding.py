#!/usr/bin/python3
"""Identity binding (docs/ARCHITECTURE.md §3.2, signer/signer_bind.h) on a real `hsmca dev`: with
auth.jwt.bind on (the default), the supervisor pushes the issuer keys to the signer as
well as the front end, the front end forwards a jwt caller's token with the TBS, and
normal issuance goes on; each such issue-intent records "bound":"jwt", and `hsmca audit
verify` accepts the log. A renewal by client certificate cannot be bound: it is signed
unbound (no "bound"), unless auth.jwt.bind_required refuses it with the reason. With
auth.jwt.bind: false nothing is bound. (The hostile front end, tests/hostile/hostile_bind.c,
shows the signer refusing what a compromised front end could send.)"""
import os
import re
import unittest

import grpc
from cryptography import x509

import hsmca_client as hc
from hsmca_harness import DevServer
from test_audit_log import read_log, wait_log
from test_crash import audit_verify

ID = "spiffe://cluster.local/ns/default/sa/sleep"


def intent_of(server, cert_pem):
    serial = "%x" % x509.load_pem_x509_certificate(cert_pem.encode()).serial_number
    intents = [e for e in read_log(server)
               if e["kind"] == "issue-intent" and e["serial"].lstrip("0") == serial]
    assert len(intents) == 1, intents
    return intents[0]


def set_bind(bind=None, required=None):
    """An edit_config adding auth.jwt.bind / bind_required to the dev config."""
    def edit(text):
        lines = ""
        if bind is not None:
            lines += "    bind: %s\n" % ("true" if bind else "false")
        if required is not None:
            lines += "    bind_required: %s\n" % ("true" if required else "false")
        out, n = re.subn(r"(\n  jwt:\n)", r"\1" + lines.replace("\\", "\\\\"), text, count=1)
        assert n == 1, text
        return out
    return edit


class BindingOnTests(unittest.TestCase):
    def setUp(self):
        self.server = DevServer("ec-p256", name="bind")
        self.server.wait_ready()

    def tearDown(self):
        self.server.stop()

    def test_issuance_is_bound(self):
        chains = [self.server.issue() for _ in range(3)]
        chains.append(self.server.issue(ns="bookinfo", sa="productpage"))
        for chain in chains:
            intent = intent_of(self.server, chain[0])
            self.assertEqual(intent.get("bound"), "jwt", intent)
        self.assertIn("identity binding: issuer keys received", self.server.logtext())
        # The log with the new field still verifies.
        wait_log(self.server, lambda es: sum(e["kind"] == "issue-result" for e in es) >= 4)
        rc, out = audit_verify(os.path.join(self.server.dir, "audit"))
        self.assertEqual(rc, 0, out)

    def test_client_certificate_renewal_is_unbound(self):
        key = hc.make_key()
        chain = self.server.client.create(hc.make_csr(key, uris=[ID]), self.server.token())
        renewer = hc.Client(self.server.addr, self.server.root,
                            "".join(chain[:-1]).encode(), hc.key_pem(key))
        self.addCleanup(renewer.close)
        got = renewer.create(hc.make_csr(hc.make_key(), uris=[ID]), None)  # no token
        self.assertNotIn("bound", intent_of(self.server, got[0]))
        self.assertEqual(intent_of(self.server, chain[0]).get("bound"), "jwt")


class BindingRequiredTests(unittest.TestCase):
    def setUp(self):
        self.server = DevServer("ec-p256", name="bindreq", edit_config=set_bind(required=True))
        self.server.wait_ready()

    def tearDown(self):
        self.server.stop()

    def test_unbound_renewal_refused(self):
        key = hc.make_key()
        chain = self.server.client.create(hc.make_csr(key, uris=[ID]), self.server.token())
        self.assertEqual(intent_of(self.server, chain[0]).get("bound"), "jwt")
        renewer = hc.Client(self.server.addr, self.server.root,
                            "".join(chain[:-1]).encode(), hc.key_pem(key))
        self.addCleanup(renewer.close)
        with self.assertRaises(grpc.RpcError) as cm:
            renewer.create(hc.make_csr(hc.make_key(), uris=[ID]), None)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED,
                         cm.exception.details())
        self.assertIn("identity binding: a request from authenticator \"client_cert\"",
                      cm.exception.details())


class BindingOffTests(unittest.TestCase):
    def setUp(self):
        self.server = DevServer("ec-p256", name="bindoff", edit_config=set_bind(bind=False))
        self.server.wait_ready()

    def tearDown(self):
        self.server.stop()

    def test_nothing_bound(self):
        chain = self.server.issue()
        self.assertNotIn("bound", intent_of(self.server, chain[0]))
        self.assertIn('"msg":"identity binding off","reason":"auth.jwt.bind: false"',
                      self.server.logtext(tail=None))


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/python3
"""hsmca through p11-kit's RPC: `p11-kit server` exports the SoftHSM token `hsmca dev
init` made, and the signer loads p11-kit-client.so (tokens_p11kit.py), configured by
hsm-config/p11-kit-remote.yaml.

With signer.sandbox.network: unix, `hsmca serve` with the audit log on and an ECDSA
P-256 audit key in that token serves certificates that verify; checkpoints verify under
`hsmca audit verify` and `cryptography`. When the server is killed, requests fail
UNAVAILABLE; once it is back new requests succeed within a deadline, from the same
signer process. With network: none the signer stops at start with the sandbox's
message."""
import os
import unittest

from hsmca_harness import DevServer
from tokens_common import (TokenChecks, full_log, module_env_config,
                           splice_fragment)
from tokens_p11kit import P11KitServer


class RemoteServer(DevServer):
    """`hsmca serve` through p11-kit: the dev directory's token served by p11kit, and
    hsm-config/p11-kit-remote.yaml's sections in place of the config's own; the client
    module's environment is p11kit.env, written as the fragment's pkcs11.env."""

    def __init__(self, p11kit, network="unix"):
        self.p11kit, self.network = p11kit, network
        super().__init__("ec-p256", name="p11kit", edit_config=self.remote_config,
                         audit_key="ec-p256")

    def remote_config(self, text):
        self.p11kit.start(os.path.join(self.dir, "softhsm2.conf"))
        text = splice_fragment(text, "p11-kit-remote.yaml",
                               {"/etc/hsmca/secret/pin": os.path.join(self.dir, "pin")})
        text = module_env_config(text, self.p11kit.env)
        if self.network != "unix":
            text = text.replace("network: unix", "network: " + self.network)
        return text


class P11KitTests(TokenChecks, unittest.TestCase):
    def setUp(self):
        self.p11kit = P11KitServer()
        self.addCleanup(self.p11kit.remove)
        self.addCleanup(self.p11kit.stop)

    def start_server(self, network="unix"):
        self.server = RemoteServer(self.p11kit, network)
        self.addCleanup(self.server.stop)
        return self.server

    def test_serves_audits_and_recovers(self):
        self.start_server().wait_ready(timeout=120)
        self.check_serves()
        report = self.token_check(would_start=True)
        self.assertIn("ok   pkcs11.audit_key: opened as serve opens it: ecdsa-p256", report)
        codes = self.check_recovers(self.p11kit.kill, self.p11kit.start)
        print("p11-kit server outage: %d requests answered %s" % (len(codes), sorted(set(codes))))

    def test_network_none_stops_at_start(self):
        """p11-kit-client signs over the socket it connected before the filter with read
        and write alone; its reconnect needs socket(AF_UNIX). The signer re-initializes
        the module inside the sandbox before it serves (p11_pool_reinit_module), so
        network: none stops the start with the sandbox's message instead of serving
        until the server's first restart and never again."""
        server = self.start_server(network="none")
        rc = server.proc.wait(120)
        log = full_log(server)
        self.assertEqual(rc, 78, log)
        self.assertIn("pkcs11: re-initializing the module once, as after a token fault", log)
        self.assertIn("the PKCS#11 module failed its check inside the sandbox "
                      "(signer.sandbox.network: none, sysv_ipc: false): CA key (pkcs11.ca_key): "
                      "token unavailable: reconnect failed: pool: re-initialize module: ", log)
        self.assertIn("a module that talks to a daemon needs signer.sandbox.network: unix", log)
        report = self.token_check(would_start=False)
        self.assertIn("FAIL signer.sandbox.network: the PKCS#11 module failed its "
                      "re-initialization (as after a token fault) inside the signer's sandbox "
                      "(signer.sandbox.network: none", report)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/python3
"""hsmca through p11-kit's RPC: `p11-kit server` exports the SoftHSM token `hsmca dev
init` made, and the signer loads p11-kit-client.so (tokens_p11kit.py), configured by
hsm-config/p11-kit-remote.yaml.

With signer.sandbox.network: unix, `hsmca serve` with the audit log on and an ECDSA
P-256 audit key in that token serves certificates that verify; checkpoints verify under
`hsmca audit verify` and `cryptography`. When the server is killed, requests fail
UNAVAILABLE; once it is back new requests succeed within a deadline, from the same
signer process. With network: none it serves until the server restarts, and never
reconnects."""
import os
import unittest

import grpc

from hsmca_harness import DevServer
from tokens_common import TokenChecks, full_log, splice_fragment, wait_for
from tokens_p11kit import P11KitServer


class RemoteServer(DevServer):
    """`hsmca serve` through p11-kit: the dev directory's token served by p11kit, and
    hsm-config/p11-kit-remote.yaml's sections in place of the config's own."""

    def __init__(self, p11kit, network="unix"):
        self.p11kit, self.network = p11kit, network
        super().__init__("ec-p256", name="p11kit", edit_config=self.remote_config,
                         audit_key="ec-p256", env_extra=p11kit.env)

    def remote_config(self, text):
        self.p11kit.start(os.path.join(self.dir, "softhsm2.conf"))
        text = splice_fragment(text, "p11-kit-remote.yaml",
                               {"/etc/hsmca/secret/pin": os.path.join(self.dir, "pin")})
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
        codes = self.check_recovers(self.p11kit.kill, self.p11kit.start)
        print("p11-kit server outage: %d requests answered %s" % (len(codes), sorted(set(codes))))

    def test_network_none_cannot_reconnect(self):
        """p11-kit-client signs over the socket it connected before the filter with
        read and write alone, so network: none serves at first; the first reconnect
        needs socket(AF_UNIX), refused: after a server restart the signer stays
        UNAVAILABLE. Why hsm-config/p11-kit-remote.yaml says unix."""
        server = self.start_server(network="none")
        server.wait_ready(timeout=120)
        self.assertIn("signer network access denied (signer.sandbox.network: none)",
                      full_log(server))
        self.verify_chain(server.issue())
        self.p11kit.kill()
        self.p11kit.start()
        failed = "reconnect to token 'hsmca' (key 'ca-key') failed"

        def refused():
            with self.assertRaises(grpc.RpcError) as cm:
                server.issue(timeout=10)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
            return full_log(server).count(failed) >= 3
        wait_for("failed reconnects with the server back", refused, self.RECOVER_S, step=0.2)


if __name__ == "__main__":
    unittest.main()

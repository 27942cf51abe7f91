#!/usr/bin/python3
"""hsmca on a TPM 2.0: a software TPM (swtpm) behind tpm2-abrmd, reached by tpm2-pkcs11
over D-Bus (tests/integration/tokens_tpm.py), configured by hsm-config/tpm2-abrmd.yaml.

With signer.sandbox.network: unix, `hsmca serve` with the audit log on and an ECDSA
P-256 audit key in the TPM serves certificates that verify against a root signed by the
TPM's CA key; its checkpoints verify under `hsmca audit verify` and under Python's
`cryptography`. When tpm2-abrmd is killed, requests fail UNAVAILABLE (or wait), and once
it is back new requests succeed within a deadline, from the same signer process. With
network: none the signer stops at start with the sandbox's message."""
import os
import subprocess
import unittest

import grpc
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from audit_tree import leaf, log_lines, mth
from hsmca_harness import BIN, DevServer
from test_audit_ecdsa import open_checkpoint, parse_ec_vkey
from tokens_tpm import TPM_MODULE, USER_PIN, TpmToken, make_root, splice_fragment, wait_for

# Deadlines for a loaded two-core machine: a TPM command queues behind the others.
RECOVER_S = 60


class TpmServer(DevServer):
    """`hsmca serve` on the TPM token: the config `hsmca dev init` wrote with
    hsm-config/tpm2-abrmd.yaml's sections in place of its own (with this test's PIN
    file), and the dev root replaced by one the TPM's CA key signed. The module's
    environment is token.env."""

    def __init__(self, token, network="unix"):
        self.tpm, self.network = token, network
        super().__init__("ec-p256", name="tpm", edit_config=self.tpm_config,
                         audit_key="ec-p256", env_extra=token.env)

    def tpm_config(self, text):
        pin = os.path.join(self.dir, "tpm-pin")
        with open(pin, "w") as f:
            f.write(USER_PIN + "\n")
        os.chmod(pin, 0o600)
        make_root(TPM_MODULE, self.tpm.tool_env, os.path.join(self.dir, "root-cert.pem"))
        text = splice_fragment(text, "tpm2-abrmd.yaml", {"/etc/hsmca/secret/tpm-pin": pin})
        if self.network != "unix":
            text = text.replace("network: unix", "network: " + self.network)
        return text


def verify_chain(test, chain, root_pem):
    """The leaf is signed by the root the TPM's key signed, and carries a SPIFFE URI."""
    leaf_cert = x509.load_pem_x509_certificate(chain[0].encode())
    root = x509.load_pem_x509_certificate(root_pem)
    root.public_key().verify(leaf_cert.signature, leaf_cert.tbs_certificate_bytes,
                             ec.ECDSA(leaf_cert.signature_hash_algorithm))
    test.assertEqual(leaf_cert.issuer, root.subject)
    test.assertEqual(x509.load_pem_x509_certificate(chain[-1].encode()), root)
    san = leaf_cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    test.assertEqual(san.get_values_for_type(x509.UniformResourceIdentifier),
                     ["spiffe://cluster.local/ns/default/sa/sleep"])


def read(d, name):
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


def audit(*args):
    return subprocess.run([BIN, "audit"] + list(args), capture_output=True, text=True,
                          timeout=120)


class TpmTests(unittest.TestCase):
    def setUp(self):
        self.token = TpmToken()
        self.addCleanup(self.token.remove)
        self.token.start()
        self.addCleanup(self.token.stop)
        self.token.make_token()

    def start_server(self, network="unix"):
        self.server = TpmServer(self.token, network)
        self.addCleanup(self.server.stop)
        return self.server

    def test_serves_audits_and_recovers(self):
        server = self.start_server()
        server.wait_ready(timeout=120)
        log = server.logtext()
        self.assertIn("signer network access unix sockets only (signer.sandbox.network: unix)",
                      log)
        self.assertRegex(log, r'"msg":"audit key ready","key":"pkcs11:token=hsmca;'
                         r'object=audit-key;type=private","type":"ECDSA P-256"')
        with open(os.path.join(server.dir, "root-cert.pem"), "rb") as f:
            root_pem = f.read()
        for _ in range(3):
            verify_chain(self, server.issue(), root_pem)

        audit_dir = os.path.join(server.dir, "audit")
        vkey = parse_ec_vkey(read(audit_dir, "vkey").decode())
        count = len(log_lines(audit_dir))

        def checkpoint():
            cp = open_checkpoint(read(audit_dir, "checkpoint"), vkey)
            return cp if cp[1] >= count else None
        cp = wait_for("a checkpoint covering the log", checkpoint, 30)
        self.assertEqual(cp[2], mth([leaf(l) for l in log_lines(audit_dir)[:cp[1]]]))
        r = audit("verify", audit_dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"^OK: \d+ entries")

        # tpm2-abrmd dies and comes back; the signer recovers by itself.
        signer = server.wait_children()["signer"]
        self.token.kill_abrmd()
        codes = []

        def outage_seen():
            """Requests while tpm2-abrmd is away: each UNAVAILABLE (never a certificate
            signed by nothing, nor another error); true once the signer has tried, and
            failed, to re-initialize the module at least twice."""
            try:
                server.issue(timeout=15)
                self.fail("a certificate while tpm2-abrmd is down")
            except grpc.RpcError as e:
                codes.append(e.code())
                self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e)
            return server.logtext().count("reconnect to token 'hsmca' (key 'ca-key') failed") >= 2
        wait_for("failed reconnects while tpm2-abrmd is down", outage_seen, RECOVER_S, step=0.2)
        self.token.start_abrmd()

        def serves():
            try:
                return server.issue(timeout=10)
            except grpc.RpcError as e:
                codes.append(e.code())
                self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e)
                return None
        verify_chain(self, wait_for("a certificate after tpm2-abrmd's restart", serves,
                                    RECOVER_S, step=0.2), root_pem)
        self.assertEqual(server.wait_children()["signer"], signer, "the signer kept its pid")
        self.assertIn("pkcs11: reconnected to token 'hsmca' (key 'ca-key')", server.logtext())
        # The audit key, in the same TPM, signs checkpoints again.
        count = len(log_lines(audit_dir))
        cp = wait_for("a checkpoint after the restart", checkpoint, 30)
        r = audit("verify", audit_dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_network_none_stops_at_start(self):
        server = self.start_server(network="none")
        rc = server.proc.wait(120)
        log = server.logtext()
        self.assertEqual(rc, 78, log)
        self.assertIn("the PKCS#11 module failed its first signature inside the sandbox "
                      "(signer.sandbox.network: none, sysv_ipc: false)", log)
        self.assertIn("a module that talks to a daemon needs signer.sandbox.network: unix", log)


if __name__ == "__main__":
    unittest.main()

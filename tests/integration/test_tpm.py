#!/usr/bin/python3
"""hsmca on a TPM 2.0: a software TPM (swtpm) behind tpm2-abrmd, reached by tpm2-pkcs11
over D-Bus (tokens_tpm.py), configured by hsm-config/tpm2-abrmd.yaml.

With signer.sandbox.network: unix, `hsmca serve` with the audit log on and an ECDSA
P-256 audit key in the TPM serves certificates that verify against a root the TPM's CA
key signed; its checkpoints verify under `hsmca audit verify` and under Python's
`cryptography`. When tpm2-abrmd is killed, requests fail UNAVAILABLE, and once it is
back new requests succeed within a deadline, from the same signer process. With
network: none the signer stops at start with the sandbox's message."""
import os
import unittest

from hsmca_harness import DevServer
from tokens_common import (TokenChecks, full_log, make_root, module_env_config,
                           splice_fragment)
from tokens_tpm import TPM_MODULE, USER_PIN, TpmToken


class TpmServer(DevServer):
    """`hsmca serve` on the TPM token: the config `hsmca dev init` wrote with
    hsm-config/tpm2-abrmd.yaml's sections in place of its own (with this test's PIN
    file), and the dev root replaced by one the TPM's CA key signed. The module's
    environment is tpm.env, written as the fragment's pkcs11.env."""

    def __init__(self, tpm, network="unix", give_store=True):
        self.tpm, self.network, self.give_store = tpm, network, give_store
        super().__init__("ec-p256", name="tpm", edit_config=self.tpm_config,
                         audit_key="ec-p256")

    def tpm_config(self, text):
        if self.give_store and os.geteuid() == 0:  # the signer drops to signer.user
            self.tpm.chown_store()
        pin = os.path.join(self.dir, "tpm-pin")
        with open(pin, "w") as f:
            f.write(USER_PIN + "\n")
        os.chmod(pin, 0o600)
        make_root(TPM_MODULE, self.tpm.tool_env, os.path.join(self.dir, "root-cert.pem"),
                  USER_PIN)
        text = splice_fragment(text, "tpm2-abrmd.yaml", {"/etc/hsmca/secret/tpm-pin": pin})
        text = module_env_config(text, self.tpm.env)
        if self.network != "unix":
            text = text.replace("network: unix", "network: " + self.network)
        return text


class TpmTests(TokenChecks, unittest.TestCase):
    def setUp(self):
        self.tpm = TpmToken()
        self.addCleanup(self.tpm.remove)
        self.tpm.start()
        self.addCleanup(self.tpm.stop)
        self.tpm.make_token()

    def start_server(self, network="unix", give_store=True):
        self.server = TpmServer(self.tpm, network, give_store)
        self.addCleanup(self.server.stop)
        return self.server

    def test_serves_audits_and_recovers(self):
        self.start_server().wait_ready(timeout=120)
        self.check_serves()
        report = self.token_check(would_start=True)
        self.assertIn("ok   pkcs11.audit_key: opened as serve opens it: ecdsa-p256", report)
        self.assertIn("signer.sandbox.network: unix", report)
        codes = self.check_recovers(self.tpm.kill_abrmd, self.tpm.start_abrmd)
        print("tpm2-abrmd outage: %d requests answered %s" % (len(codes), sorted(set(codes))))

    def test_store_signer_user_cannot_write_stops_at_start(self):
        """tpm2-pkcs11 opens its store's lock file again at every C_Initialize: a store
        signer.user cannot write would serve until the first fault and never recover;
        the signer's re-initialization inside the sandbox stops the start instead."""
        if os.geteuid() != 0:
            self.skipTest("needs root: the signer keeps our uid, which owns the store")
        server = self.start_server(give_store=False)
        rc = server.proc.wait(120)
        log = full_log(server)
        self.assertEqual(rc, 78, log)
        self.assertIn("tpm2_pkcs11.sqlite3.lock\", error: Permission denied", log)
        self.assertIn("reconnect failed: pool: re-initialize module: CKR_GENERAL_ERROR", log)
        self.assertRegex(log, r"the check re-initializes the module as uid \d+ \(signer.user\), "
                         r"as after a token fault, then signs with each key: that user must "
                         r"be able to open the module's files")

    def test_network_none_stops_at_start(self):
        server = self.start_server(network="none")
        rc = server.proc.wait(120)
        log = full_log(server)
        self.assertEqual(rc, 78, log)
        self.assertIn("the PKCS#11 module failed its check inside the sandbox "
                      "(signer.sandbox.network: none, sysv_ipc: false)", log)
        self.assertIn("a module that talks to a daemon needs signer.sandbox.network: unix", log)
        self.assertNotIn("refusing to serve", log)
        report = self.token_check(would_start=False)
        self.assertIn("FAIL signer.sandbox.network: the PKCS#11 module failed its "
                      "re-initialization (as after a token fault) inside the signer's sandbox "
                      "(signer.sandbox.network: none", report)
        self.assertIn("ok   pkcs11.ca_key: opened as serve opens it", report)


if __name__ == "__main__":
    unittest.main()

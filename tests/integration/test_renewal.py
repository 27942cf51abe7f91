#!/usr/bin/python3
"""The front end's own TLS certificate is renewed through the signer before it
expires and presented on new connections without a restart. Runs `hsmca serve`
with server.serving_cert_ttl: 300 (2 min backdated, renewed at 2/3 of the rest:
after about 2 minutes)."""
import subprocess
import time
import unittest

from cryptography import x509

from hsmca_harness import DevServer


def served_certificate(port):
    """The leaf the server presents to a new TLS connection (ALPN h2, as gRPC)."""
    out = subprocess.run(
        ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-alpn", "h2",
         "-servername", "localhost"], input=b"", capture_output=True, timeout=20).stdout
    begin = out.index(b"-----BEGIN CERTIFICATE-----")
    end = out.index(b"-----END CERTIFICATE-----") + len(b"-----END CERTIFICATE-----")
    return x509.load_pem_x509_certificate(out[begin:end])


class RenewalTests(unittest.TestCase):
    def test_serving_certificate_renewed_without_restart(self):
        server = DevServer("ec-p256", name="renewal", server_settings=["serving_cert_ttl: 300"])
        try:
            server.wait_ready()
            kids = server.wait_children()
            first = served_certificate(server.port)
            self.assertEqual((first.not_valid_after - first.not_valid_before).total_seconds(), 300)
            root = x509.load_pem_x509_certificate(server.root)
            self.assertEqual(first.issuer, root.subject)
            deadline = time.time() + 240
            renewed = first
            while time.time() < deadline and renewed.serial_number == first.serial_number:
                time.sleep(3)
                renewed = served_certificate(server.port)
            self.assertNotEqual(renewed.serial_number, first.serial_number,
                                "not renewed:\n" + server.logtext())
            self.assertGreater(renewed.not_valid_after, first.not_valid_after)
            self.assertEqual(renewed.issuer, root.subject)
            # Same processes: renewed in place, not by a restart.
            self.assertEqual(server.children(), kids)
            self.assertEqual(len(server.issue()), 2)
            self.assertIn("serving certificate renewed", server.logtext())
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)

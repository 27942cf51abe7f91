#!/usr/bin/python3
"""Each program linked only with what it runs (docs/ARCHITECTURE.md §1, docs/SECURITY.md
§1). The privileged signer maps its own short list of libraries and the PKCS#11 module
with what that module needs, nothing else: no gRPC, abseil, upb, re2, c-ares,
libcurl, libssl. The front end maps no PKCS#11 code. hsmca-publish (what
`hsmca k8s publish-roots` runs) maps its own short list and libcurl with what libcurl
needs: no gRPC, abseil, libstdc++, and no PKCS#11 module (libcurl brings p11-kit's
library, which loads none).

Read from the running processes of a real `hsmca dev` (the supervisor, then
hsmca-signer and hsmca-frontend), of `hsmca k8s publish-roots` against the
Kubernetes API stand-in, and from the programs' own link lines."""
import os
import re
import signal
import subprocess
import tempfile
import unittest

from hsmca_harness import BIN, TMP, DevServer
from k8s_api_standin import Standin
from pki_fixture import make_server_pki
from test_publish_roots import LEASE, wait_for

HERE = os.path.dirname(BIN)
SIGNER_BIN = os.path.join(HERE, "hsmca-signer")
FRONTEND_BIN = os.path.join(HERE, "hsmca-frontend")
PUBLISH_BIN = os.path.join(HERE, "hsmca-publish")

# What hsmca-signer itself is linked with: the C library, OpenSSL's libcrypto,
# protobuf-c (the IPC), jansson (log lines, JWKS), libyaml (config, policy file)
# and libseccomp. The whole reading list of third-party code in the signer.
SIGNER_OWN = {"ld-linux-x86-64", "libc", "libm", "libcrypto", "libprotobuf-c", "libjansson",
              "libyaml-0", "libseccomp"}
# A sanitizer build's runtime (ASan, UBSan) unwinds with libgcc_s: allowed there only.
SANITIZER_RUNTIME = {"libgcc_s"}
# Never in the signer, whatever module it loads.
SIGNER_NEVER = ("libgrpc", "libgpr", "libabsl_", "libupb", "libre2", "libcares", "libcurl",
                "libssl", "libaddress_sorting", "libz.")
# PKCS#11 code: never in the front end.
PKCS11 = ("softhsm", "libp11", "p11-kit", "pkcs11", "opensc", "libtpm2", "opencryptoki")
# What hsmca-publish itself is linked with: the C library, libcrypto (the roots, the
# CRL), jansson (the API's JSON, log lines) and libyaml (config, kubeconfig). libcurl
# is loaded with dlopen (http/curl_dl.h), with what it needs.
PUBLISH_OWN = {"ld-linux-x86-64", "libc", "libm", "libcrypto", "libjansson", "libyaml-0"}
CURL = "libcurl.so.4"
# gRPC's stack and C++: never in hsmca-publish, whatever libcurl brings.
PUBLISH_NEVER = ("libgrpc", "libgpr", "libabsl_", "libupb", "libre2", "libcares",
                 "libaddress_sorting", "libstdc++", "libprotobuf")
# PKCS#11 modules: a library that p11-kit (or anything) would load as a token.
MODULES = ("softhsm", "opensc", "p11-kit-proxy", "p11-kit-trust", "libtpm2", "opencryptoki",
           "pkcs11/")


def stem(path):
    """libfoo.so.1.2 -> libfoo; ld-linux-x86-64.so.2 -> ld-linux-x86-64."""
    return os.path.basename(path).split(".so")[0]


def mapped_objects(pid):
    """The paths of the shared objects mapped in pid."""
    with open("/proc/%d/maps" % pid) as f:
        paths = {line.split()[5] for line in f if len(line.split()) > 5}
    return {p for p in paths if re.search(r"\.so(\.|$)", os.path.basename(p))}


def sanitized(path):
    """Whether path was built with AddressSanitizer (its runtime is linked in)."""
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


def needed(path):
    """The shared objects ldd resolves for path (its own link line and theirs)."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    return {stem(line.split()[0]) for line in out.splitlines()
            if line.strip() and not line.strip().startswith("linux-vdso")}


class ProgramTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer("ec-p256", name="programs")
        cls.server.wait_ready()
        cls.kids = cls.server.wait_children()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_children_are_their_own_programs(self):
        for role, path in (("signer", SIGNER_BIN), ("frontend", FRONTEND_BIN)):
            self.assertEqual(os.path.realpath("/proc/%d/exe" % self.kids[role]),
                             os.path.realpath(path), role)

    def test_metrics_program_links_no_grpc_and_loads_no_module(self):
        """hsmca-metrics: HTTP (libmicrohttpd) and common/ only. libmicrohttpd brings GnuTLS
        and with it libp11-kit (for HTTPS, which hsmca-metrics does not serve): no PKCS#11
        module may be mapped for it."""
        own = needed(os.path.join(HERE, "hsmca-metrics"))
        self.assertIn("libmicrohttpd", own)  # control: ldd read the program
        self.assertEqual([o for o in own if o.startswith(SIGNER_NEVER[:7])], [],
                         "hsmca-metrics links gRPC")
        pid = self.server.all_children().get("metrics")
        self.assertIsNotNone(pid, "no hsmca-metrics child")
        modules = [o for o in mapped_objects(pid) if any(p in o for p in MODULES)]
        self.assertEqual(modules, [], "hsmca-metrics maps a PKCS#11 module")

    def test_signer_link_line(self):
        own = needed(SIGNER_BIN)
        allowed = SIGNER_OWN | (SANITIZER_RUNTIME if sanitized(SIGNER_BIN) else set())
        self.assertLessEqual(own, allowed, "hsmca-signer links more than its list")
        self.assertIn("libcrypto", own)  # control: ldd read the program

    def test_signer_maps_only_its_allowlist(self):
        objs = mapped_objects(self.kids["signer"])
        modules = [p for p in objs if "softhsm" in p]
        self.assertEqual(len(modules), 1, objs)  # control: the token's module is there
        allowed = SIGNER_OWN | {stem(modules[0])} | needed(modules[0])
        if sanitized(SIGNER_BIN):
            allowed |= SANITIZER_RUNTIME
        extra = sorted(p for p in objs if stem(p) not in allowed)
        self.assertEqual(extra, [], "the signer maps libraries outside its allowlist")
        for p in objs:
            for bad in SIGNER_NEVER:
                self.assertNotIn(bad, os.path.basename(p))

    def test_frontend_maps_no_pkcs11_code(self):
        objs = mapped_objects(self.kids["frontend"])
        self.assertTrue(any("libgrpc" in p for p in objs), objs)  # control
        for p in objs:
            for bad in PKCS11:
                self.assertNotIn(bad, os.path.basename(p).lower(), p)
        self.assertFalse(needed(FRONTEND_BIN) & {"libp11", "libp11-kit", "libcurl"})

    def test_leaf_certificates_built_by_the_frontend_never_the_signer(self):
        """leafcert/ (CSR parsing, the TBS builder) is linked into the programs that issue
        workload certificates; the signer checks TBSs and builds none, so none of it is in
        its reading list."""
        def leaf_symbols(path):
            out = subprocess.run(["nm", "--defined-only", path], capture_output=True,
                                 text=True, check=True).stdout
            return {line.split()[-1] for line in out.splitlines()
                    if line.split()[-1].startswith("leaf_")}
        self.assertIn("leaf_tbs_build", leaf_symbols(FRONTEND_BIN))
        self.assertIn("leaf_csr_parse", leaf_symbols(FRONTEND_BIN))
        self.assertEqual(leaf_symbols(SIGNER_BIN), set(), "hsmca-signer links leafcert/")


def curl_path():
    """The path of the libcurl that hsmca-publish dlopens, as the loader resolves it."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.strip().startswith(CURL + " ") and "x86-64" in line:
            return line.split("=>")[1].strip()
    raise AssertionError("ldconfig -p lists no " + CURL)


class PublishProgramTests(unittest.TestCase):
    """`hsmca k8s publish-roots`, run against the stand-in until it holds the Lease (its
    libcurl loaded and used), is the program hsmca-publish and maps only its allowlist."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="programs-publish.", dir=TMP)
        self.api = Standin(self.dir)
        self.api.tokens = {"tok-p": "p"}
        self.api.add_namespace("app", {"istio-injection": "enabled"})
        self.addCleanup(self.api.stop)
        root = make_server_pki(self.dir, ("root.pem", "leaf.pem", "leaf-key.pem"), "root", "leaf")
        config = os.path.join(self.dir, "hsmca.yaml")
        with open(config, "w") as f:
            f.write("ca:\n  cert: %s\n  root_bundle: %s\npublish:\n  lease_duration: 3s\n"
                    "  interval: 1h\n  timeout: 5s\n" % (root[0], root[0]))
        kc = self.api.kubeconfig(os.path.join(self.dir, "kc"), "tok-p")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.addCleanup(self.log.close)
        self.proc = subprocess.Popen([BIN, "k8s", "publish-roots", "--config", config,
                                      "--kubeconfig", kc, "--identity", "programs"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)

    def test_link_line(self):
        own = needed(PUBLISH_BIN)
        allowed = PUBLISH_OWN | (SANITIZER_RUNTIME if sanitized(PUBLISH_BIN) else set())
        self.assertLessEqual(own, allowed, "hsmca-publish links more than its list")
        self.assertIn("libjansson", own)  # control: ldd read the program

    def test_runs_as_its_own_program_and_maps_only_its_allowlist(self):
        pid = self.proc.pid
        wait_for(lambda: (self.api.get(*LEASE) or {}).get("spec", {}).get("holderIdentity")
                 == "programs", 30, "hsmca-publish holds the Lease")
        self.assertEqual(os.path.realpath("/proc/%d/exe" % pid), os.path.realpath(PUBLISH_BIN))
        objs = mapped_objects(pid)
        curl = [p for p in objs if stem(p) == "libcurl"]
        self.assertEqual(len(curl), 1, objs)  # control: libcurl was loaded and is read here
        allowed = PUBLISH_OWN | {"libcurl"} | needed(curl_path())
        if sanitized(PUBLISH_BIN):
            allowed |= SANITIZER_RUNTIME
        extra = sorted(p for p in objs if stem(p) not in allowed)
        self.assertEqual(extra, [], "hsmca-publish maps libraries outside its allowlist")
        for p in objs:
            name = os.path.basename(p)
            for bad in PUBLISH_NEVER:
                self.assertNotIn(bad, name)
            self.assertFalse(any(m in p for m in MODULES), "a PKCS#11 module is mapped: " + p)


if __name__ == "__main__":
    unittest.main()

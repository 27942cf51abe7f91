#!/usr/bin/python3
"""Each program linked only with what it runs (docs/ARCHITECTURE.md §1, docs/SECURITY.md
§1). The privileged signer maps its own short list of libraries and the PKCS#11 module
with what that module needs, nothing else: no gRPC, abseil, upb, re2, c-ares,
libcurl, libssl. The front end maps no PKCS#11 code. The supervisor
(hsmca-supervisor, which `hsmca dev` and `hsmca serve` exec: the same pid) maps its own
short list, never libcurl; the key fetcher (hsmca-keyfetch, with an OIDC issuer) that
list and libcurl with what libcurl needs: p11-kit's library among them, but no PKCS#11
module. hsmca-publish (what `hsmca k8s publish-roots` runs) maps its own short list and
libcurl with what libcurl needs: no gRPC, abseil, libstdc++, and no PKCS#11 module
(libcurl brings p11-kit's library, which loads none).

Read from the running processes of a real `hsmca dev` (the supervisor, then
hsmca-signer and hsmca-frontend), of `hsmca k8s publish-roots` against the
Kubernetes API stand-in, and from the programs' own link lines."""
import json
import os
import pwd
import re
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from hsmca_harness import BIN, TMP, DevServer
from k8s_api_standin import Standin
from oidc_issuer import OidcIssuer, projected_claims
from pki_fixture import make_server_pki
from test_oidc import auth_config, issue, wait_issued
from test_publish_roots import LEASE, wait_for
from test_restart import child_ctl

HERE = os.path.dirname(BIN)
SIGNER_BIN = os.path.join(HERE, "hsmca-signer")
FRONTEND_BIN = os.path.join(HERE, "hsmca-frontend")
SUPERVISOR_BIN = os.path.join(HERE, "hsmca-supervisor")
KEYFETCH_BIN = os.path.join(HERE, "hsmca-keyfetch")
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
# What hsmca-supervisor itself is linked with: the C library, libcrypto, jansson (JWKS,
# discovery, log lines), libyaml (config, policy file), libseccomp (common/'s sandbox).
SUPERVISOR_OWN = {"ld-linux-x86-64", "libc", "libm", "libcrypto", "libjansson", "libyaml-0",
                  "libseccomp"}
# Never in the supervisor: gRPC and what it brings, C++, PKCS#11 modules.
SUPERVISOR_NEVER = ("libgrpc", "libgpr", "libabsl_", "libupb", "libre2", "libcares",
                    "libaddress_sorting", "libstdc++", "libprotobuf-c", "softhsm", "opensc",
                    "p11-kit-proxy", "p11-kit-trust", "libtpm2", "opencryptoki", "pkcs11/")
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


def supervisor_extra(pid, allowed):
    """What the supervisor pid maps outside allowed (stems), and what it must never map."""
    objs = mapped_objects(pid)
    extra = sorted(p for p in objs if stem(p) not in allowed)
    never = sorted(p for p in objs if any(b in p for b in SUPERVISOR_NEVER))
    return extra, never


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


    def test_supervisor_is_its_own_program_with_the_same_pid(self):
        """`hsmca dev` execs hsmca-supervisor: the pid the caller started (systemd's
        MainPID) is the supervisor, and the children are its own."""
        pid = self.server.proc.pid
        self.assertEqual(os.path.realpath("/proc/%d/exe" % pid), os.path.realpath(SUPERVISOR_BIN))
        self.assertEqual(set(self.server.all_children()) & {"signer", "frontend", "metrics"},
                         {"signer", "frontend", "metrics"})

    def test_supervisor_link_line(self):
        own = needed(SUPERVISOR_BIN)
        allowed = SUPERVISOR_OWN | (SANITIZER_RUNTIME if sanitized(SUPERVISOR_BIN) else set())
        self.assertIn("libcrypto", own)  # control: ldd read the program
        self.assertLessEqual(own, allowed, "hsmca-supervisor links more than its list")

    def test_supervisor_maps_only_its_allowlist(self):
        """With a JWKS file (hsmca dev) no libcurl is loaded: its own list only."""
        allowed = SUPERVISOR_OWN | (SANITIZER_RUNTIME if sanitized(SUPERVISOR_BIN) else set())
        extra, never = supervisor_extra(self.server.proc.pid, allowed)
        self.assertEqual(extra, [], "the supervisor maps libraries outside its allowlist")
        self.assertEqual(never, [])


class SupervisorWithIssuerTests(unittest.TestCase):
    """With an OIDC issuer (auth.jwt.discovery) the keys are fetched by hsmca-keyfetch, a
    child that runs as frontend.user: it loads libcurl (http/curl_dl.c), and maps libcurl
    and the libraries it needs, p11-kit's library among them, and nothing else, no
    PKCS#11 module. The root supervisor maps no libcurl: it only relays the keys."""

    @classmethod
    def setUpClass(cls):
        cls.server = None
        cls.issuer = OidcIssuer(os.path.join(os.environ.get("HSMCA_TEST_TMP", "/tmp"),
                                             "programs-oidc-%d" % os.getpid()))
        cls.key = cls.issuer.add_key("ec-1", "EC")
        cls.server = DevServer(name="programs-oidc", edit_config=auth_config([
            "chain: [jwt]",
            "jwt:",
            "  issuer: \"%s\"" % cls.issuer.url,
            "  audiences: [istio-ca]",
            "  discovery: true",
            "  ca_bundle: %s" % cls.issuer.ca_path]))
        wait_issued(cls.server, lambda: cls.issuer.token(projected_claims(cls.issuer.url),
                                                         cls.key))

    @classmethod
    def tearDownClass(cls):
        if cls.server:
            cls.server.stop()
        cls.issuer.stop()

    def test_supervisor_maps_no_libcurl(self):
        allowed = SUPERVISOR_OWN | (SANITIZER_RUNTIME if sanitized(SUPERVISOR_BIN) else set())
        extra, never = supervisor_extra(self.server.proc.pid, allowed)
        self.assertEqual(extra, [], "the supervisor maps libraries outside its allowlist")
        self.assertEqual(never, [])

    def test_keyfetch_maps_libcurl_and_what_it_needs_only(self):
        pid = self.server.all_children().get("keyfetch")
        self.assertIsNotNone(pid, "no hsmca-keyfetch child")
        self.assertLessEqual(needed(KEYFETCH_BIN),
                             SUPERVISOR_OWN | (SANITIZER_RUNTIME if sanitized(KEYFETCH_BIN)
                                               else set()), "hsmca-keyfetch's link line")
        curl = [p for p in mapped_objects(pid) if stem(p) == "libcurl"]
        self.assertEqual(len(curl), 1, mapped_objects(pid))  # control: the fetcher loaded it
        allowed = SUPERVISOR_OWN | {"libcurl"} | needed(curl[0])
        if sanitized(KEYFETCH_BIN):
            allowed |= SANITIZER_RUNTIME
        self.assertIn("libp11-kit", allowed)  # what this test allows beyond libcurl's list
        extra, never = supervisor_extra(pid, allowed)
        self.assertEqual(extra, [], "the key fetcher maps libraries outside its allowlist")
        self.assertEqual(never, [], "the key fetcher maps a PKCS#11 module or gRPC")

    def test_keyfetch_runs_as_frontend_user(self):
        pid = self.server.all_children().get("keyfetch")
        with open("/proc/%d/status" % pid) as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        uids = status["Uid"].split()
        if os.geteuid() == 0:
            self.assertEqual(set(uids), {str(pwd.getpwnam("nobody").pw_uid)}, status["Uid"])
        self.assertEqual(status["NoNewPrivs"].strip(), "1")

    def test_supervisor_refuses_what_is_not_a_sealed_memfd(self):
        """What the key fetcher sends up must be a sealed memfd: a pipe (which would block
        the supervisor's read), or a memfd its sender can still change, is refused and
        logged, the last good keys stay, and the supervisor goes on (SIGHUP handled, a
        token with the issuer's key still accepted)."""
        pid = self.server.all_children()["keyfetch"]
        sock = socket.socket(fileno=child_ctl(pid))
        r, w = os.pipe()
        mfd = os.memfd_create("unsealed", os.MFD_ALLOW_SEALING)
        os.write(mfd, json.dumps({"keys": []}).encode())
        try:
            socket.send_fds(sock, [b"J"], [r])
            socket.send_fds(sock, [b"J"], [mfd])
        finally:
            for fd in (r, w, mfd):
                os.close(fd)
            sock.close()
        deadline = time.time() + 30
        while self.server.logtext(None).count("key fetcher: not a sealed memfd") < 2:
            self.assertLess(time.time(), deadline, self.server.logtext())
            time.sleep(0.2)
        os.kill(self.server.proc.pid, signal.SIGHUP)
        while "SIGHUP: reloading the issuer keys" not in self.server.logtext(None):
            self.assertLess(time.time(), deadline, self.server.logtext())
            time.sleep(0.2)
        issue(self.server.client, self.issuer.token(projected_claims(self.issuer.url), self.key))


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

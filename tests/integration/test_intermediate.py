#!/usr/bin/python3
"""istiod intermediates under M-of-N approval (`hsmca intermediate ...`) on a real
`hsmca serve` (SoftHSM), as root with test users (test_admin.py's):

(a) the requester's approval does not count, the same user twice counts once, M-1
    approvals sign nothing, the approvals survive `kill -9` of the signer (its
    supervisor restarts it and it rebuilds them from the log), the M-th signs;
(b) what is signed is the signer's profile, not the CSR's: a CSR asking for CA:TRUE
    pathlen 5, other key usages and another subject gets CA:TRUE pathlen 0 (critical),
    keyCertSign|cRLSign|digitalSignature (critical), name constraints (critical)
    permitting the trust domain's SPIFFE URIs, istiod's own DNS names (the default
    intermediate.istiod_names) and intermediate.dns_suffixes, no e-mail name, and excluding
    every IP address (no intermediate.ip_ranges), the configured subject and
    intermediate.max_ttl from a notBefore backdated 5 minutes; a longer --ttl, a weak key
    and a CSR whose signature does not verify are refused;
(c) fetch writes the cacerts directory; the intermediate verifies under the root with
    openssl; certificates that an istiod-like signer (openssl here) makes under it verify
    for the trust domain, istiod's serving names and the suffix, and fail on the name
    constraints for another trust domain, www.google.com, another istio-system service,
    an IPv4 or IPv6 address and an e-mail address, with OpenSSL and with GnuTLS for the
    types it enforces (not URI);
(d) a denied request cannot be approved; an expired one cannot either; a user outside
    admin.group is refused;
(e) `hsmca audit verify` passes on the log with every step, and `hsmca audit show` lists
    them with the users; a tampered approval makes verify fail;
(f) a C_Sign that hangs (the p11shim's hang control) while the CA key signs an
    intermediate, at the approval and again at a fetch, does not stall the signer:
    workload certificates are issued meanwhile, the approver and the fetcher are told
    within pkcs11.sign_timeout that the token did not answer, a fetch while the hung
    call is still out is refused, a fetch after it signs; the log verifies and the
    signer replays it."""
import calendar
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import hsmca_client as hc
from hsmca_harness import BIN, SHIM, TMP, DevServer, ShimServer
from test_admin import (admin_config, hsmca_as, make_users, remove_users, signer_kill9,
                        start_server, user)

MAX_TTL = 30 * 86400
EXTRA = ("intermediate:\n  subject_prefix: \"O=Hsmca Test,OU=Mesh\"\n"
         "  dns_suffixes: [mesh.example]\n  max_ttl: 30d\n")
PERMITTED = ("URI:cluster.local DNS:istiod.istio-system.svc DNS:istiod-remote.istio-system.svc "
             "DNS:istio-pilot.istio-system.svc DNS:mesh.example email:invalid")


def sh(*argv, check=True, **kw):
    p = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s: rc %d\n%s" % (argv, p.returncode, p.stdout.decode()))
    return p.returncode, p.stdout.decode()


class Istiod:
    """istiod's side: its key and a CSR that asks for more than the profile gives."""

    def __init__(self, work, name="istiod", keyalg=("-algorithm", "EC", "-pkeyopt",
                                                    "ec_paramgen_curve:P-256")):
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir)
        os.chmod(work, 0o755)
        os.chmod(self.dir, 0o755)
        self.key = os.path.join(self.dir, "ca-key.pem")
        self.csr = os.path.join(self.dir, "istiod.csr")
        sh("openssl", "genpkey", *keyalg, "-out", self.key)
        sh("openssl", "req", "-new", "-key", self.key, "-out", self.csr, "-subj",
           "/O=Evil/CN=root-of-everything", "-addext",
           "basicConstraints=critical,CA:TRUE,pathlen:5", "-addext",
           "keyUsage=critical,keyCertSign,cRLSign,digitalSignature,keyEncipherment",
           "-addext", "nameConstraints=critical,permitted;URI:evil.example")
        os.chmod(self.csr, 0o644)
        self.key_sha256 = hashlib.sha256(subprocess.check_output(
            ["openssl", "pkey", "-in", self.key, "-pubout", "-outform", "DER"])).hexdigest()


class Intermediates(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        remove_users()
        make_users()
        cls.srv = start_server("ica", required=2, extra=EXTRA)
        cls.work = tempfile.mkdtemp(prefix="ica-work.", dir=TMP)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.srv.stop()  # raises on a sanitizer report: the users go anyway
        finally:
            shutil.rmtree(cls.work, ignore_errors=True)
            remove_users()

    def ica(self, who, *args, check=True):
        return hsmca_as(who, ["intermediate"] + list(args) + ["--config", self.srv.config],
                        check=check)

    def request(self, who, istiod, cluster, *extra):
        rc, out, err = self.ica(who, "request", "--csr", istiod.csr, "--cluster", cluster,
                                *extra)
        m = re.search(r"request (\d+): pending, 2 approvals needed", out)
        self.assertTrue(m, out)
        self.assertIn(istiod.key_sha256, out)  # what both sides compare out of band
        return m.group(1)

    def show(self, rid):
        return json.loads(self.ica(None, "show", rid, "--json")[1])

    def refused(self, who, why, *args):
        rc, out, err = self.ica(who, *args, check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertIn(why, err)

    def test_a_approvals_sign_and_verify(self):
        istiod = Istiod(self.work)
        self.refused("alice", "at most intermediate.max_ttl", "request",
                     "--csr", istiod.csr, "--cluster", "cluster-a", "--ttl", "400d")
        rid = self.request("alice", istiod, "cluster-a")
        self.refused("alice", "a requester's own approval does not count", "approve", rid)
        self.ica("bob", "approve", rid)
        self.refused("bob", "approved it already (the same user counts once)", "approve", rid)
        q = self.show(rid)
        self.assertEqual(q["request"]["state"], "pending")
        self.assertEqual(q["request"]["approvers"], [user("bob")])
        self.assertEqual(q["profile"]["basic_constraints"], "critical, CA:TRUE, pathlen:0")
        self.assertEqual(q["profile"]["subject"], "O=Hsmca Test,OU=Mesh,CN=cluster-a")
        self.assertEqual(q["profile"]["permitted"], PERMITTED)
        self.assertEqual(q["profile"]["excluded"], "IP:0.0.0.0/0 IP:::/0")
        self.refused("carol", "is pending, not signed", "fetch", rid, "--out",
                     os.path.join(self.work, "nothing"))
        # M-1 approvals: nothing signed, nothing CA-like in the log.
        self.assertNotIn('"profile":"intermediate"', self.audit_text())
        signer_kill9(self.srv)
        q = self.show(rid)
        self.assertEqual((q["request"]["state"], q["request"]["approvers"]),
                         ("pending", [user("bob")]), "the approval survives kill -9")
        self.refused("bob", "approved it already", "approve", rid)
        signed_from = int(time.time())
        rc, out, err = self.ica("carol", "approve", rid)
        signed_by = int(time.time()) + 1
        self.assertIn("2 of 2 approvals; issued", out)
        out_dir = os.path.join(self.work, "cacerts")
        rc, out, err = self.ica(None, "fetch", rid, "--out", out_dir)
        self.assertIn("kubectl create secret generic cacerts -n istio-system", out)
        # The dev config's crl.path: the CA's CRL goes into ca-crl.pem.
        self.assertIn("ca-crl.pem: the CA's CRL", out)
        nb = self.check_cacerts(out_dir, istiod)
        # notBefore backdated 5 minutes: an istiod whose clock lags accepts it at once.
        self.assertTrue(signed_from - 300 <= nb <= signed_by - 300, (signed_from, nb, signed_by))
        self.check_planted_links(rid, out_dir, istiod)
        self.check_audit(rid)

    def check_planted_links(self, rid, out_dir, istiod):
        """--out never writes through a link planted where it writes: a link at a file it
        writes, at the temp name beside it, or as fetch's directory is refused (or never
        opened), and the file the link names is untouched."""
        victim = os.path.join(self.work, "victim.txt")
        with open(victim, "w") as f:
            f.write("precious\n")
        planted = os.path.join(self.work, "planted")
        os.mkdir(planted, 0o755)
        os.symlink(victim, os.path.join(planted, "ca-cert.pem"))
        rc, out, err = self.ica(None, "fetch", rid, "--out", planted, check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("ca-cert.pem: it is a symbolic link", err)
        elsewhere = os.path.join(self.work, "elsewhere")
        os.mkdir(elsewhere, 0o755)
        linked_dir = os.path.join(self.work, "linked-dir")
        os.symlink(elsewhere, linked_dir)
        rc, out, err = self.ica(None, "fetch", rid, "--out", linked_dir, check=False)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("refusing a symbolic link", err)
        self.assertEqual(os.listdir(elsewhere), [])
        # `intermediate crl --out F`: a link at F is refused; one at F.tmp is never opened.
        crl = os.path.join(self.work, "own.crl")
        os.symlink(victim, crl + ".tmp")
        sh(BIN, "intermediate", "crl", "--cert", os.path.join(out_dir, "ca-cert.pem"),
           "--key", istiod.key, "--out", crl)
        self.assertTrue(os.path.islink(crl + ".tmp"))
        os.symlink(victim, os.path.join(self.work, "crl-link"))
        rc, out = sh(BIN, "intermediate", "crl", "--cert", os.path.join(out_dir, "ca-cert.pem"),
                     "--key", istiod.key, "--out", os.path.join(self.work, "crl-link"),
                     check=False)
        self.assertEqual(rc, 1, out)
        self.assertIn("crl-link: it is a symbolic link", out)
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")

    def check_cacerts(self, out_dir, istiod):
        self.assertEqual(sorted(os.listdir(out_dir)),
                         ["ca-cert.pem", "ca-crl.pem", "cert-chain.pem", "root-cert.pem"])
        ca, root = os.path.join(out_dir, "ca-cert.pem"), os.path.join(out_dir, "root-cert.pem")
        with open(os.path.join(out_dir, "cert-chain.pem")) as f:
            chain = f.read()
        with open(ca) as f, open(root) as g:
            self.assertEqual(chain, f.read() + g.read())  # intermediate, then the root
        self.assertIn(": OK", sh("openssl", "verify", "-CAfile", root, ca)[1])
        _, text = sh("openssl", "x509", "-in", ca, "-noout", "-text", "-nameopt", "RFC2253")
        self.assertIn("Subject: CN=cluster-a,OU=Mesh,O=Hsmca Test", text)
        self.assertRegex(text, r"Basic Constraints: critical\s+CA:TRUE, pathlen:0\n")
        self.assertRegex(text, r"Key Usage: critical\s+Digital Signature, Certificate Sign, "
                               r"CRL Sign\n")
        self.assertRegex(text, r"Name Constraints: critical\s+Permitted:\s+" +
                         r"\s+".join(PERMITTED.split()) +
                         r"\s+Excluded:\s+IP:0.0.0.0/0.0.0.0\s+IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0\n")
        self.assertIn("Subject Key Identifier", text)
        self.assertIn("Authority Key Identifier", text)
        self.assertNotIn("evil", text.lower())
        _, dates = sh("openssl", "x509", "-in", ca, "-noout", "-startdate", "-enddate")
        nb, na = [calendar.timegm(time.strptime(l.split("=", 1)[1].replace(" GMT", ""),
                                                "%b %d %H:%M:%S %Y"))
                  for l in dates.strip().splitlines()]
        self.assertEqual(na - nb, MAX_TTL)
        self.check_workloads(ca, root, istiod)
        return nb

    def check_workloads(self, ca, root, istiod, cases=None):
        """istiod's part: workload certificates signed with its key under the intermediate,
        checked by OpenSSL and, where installed, GnuTLS (certtool; Debian 12's 3.7 enforces
        the DNS, IP and e-mail constraints but not URI ones, docs/CEREMONY.md). cases:
        (SANs, verifies, GnuTLS checks it), else EXTRA's."""
        cases = cases or (("URI:spiffe://cluster.local/ns/default/sa/sleep", True, False),
                 ("URI:spiffe://other.domain/ns/default/sa/sleep", False, False),
                 ("DNS:istiod.istio-system.svc,DNS:istiod-remote.istio-system.svc,"
                  "DNS:istio-pilot.istio-system.svc", True, True),
                 ("DNS:api.mesh.example", True, True),
                 ("DNS:evil.example", False, True),
                 ("DNS:www.google.com", False, True),
                 ("DNS:kube-dns.istio-system.svc", False, True),
                 ("IP:10.0.0.1", False, True),
                 ("IP:fd00::1", False, True),
                 ("email:admin@example.com", False, True))
        for i, (san, ok, gnutls) in enumerate(cases):
            key, crt, ext = [os.path.join(self.work, "w%d.%s" % (i, x))
                             for x in ("key", "pem", "ext")]
            with open(ext, "w") as f:
                f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                        "subjectAltName=critical,%s\n" % san)
            sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
               "-nodes", "-keyout", key, "-subj", "/", "-out", crt + ".csr")
            sh("openssl", "x509", "-req", "-in", crt + ".csr", "-CA", ca, "-CAkey", istiod.key,
               "-CAcreateserial", "-days", "1", "-extfile", ext, "-out", crt)
            rc, out = sh("openssl", "verify", "-CAfile", root, "-untrusted", ca, crt, check=False)
            if ok:
                self.assertEqual(rc, 0, out)
            else:
                self.assertNotEqual(rc, 0, out)
                self.assertRegex(out, "(permitted|excluded) subtree violation")
            if gnutls and shutil.which("certtool"):
                with open(crt) as f, open(ca) as g, open(crt + ".chain", "w") as h:
                    h.write(f.read() + g.read())
                rc, out = sh("certtool", "--verify", "--load-ca-certificate", root, "--infile",
                             crt + ".chain", check=False)
                self.assertEqual("Chain verification output: Verified." in out, ok, out)

    def audit_text(self):
        with open(os.path.join(self.srv.dir, "audit", "log")) as f:
            return f.read()

    def check_audit(self, rid):
        audit_dir = os.path.join(self.srv.dir, "audit")
        sh(BIN, "audit", "verify", audit_dir)
        rc, out = sh(BIN, "audit", "show", audit_dir, "--kind", "intermediate-approve")
        self.assertIn(user("bob"), out)
        self.assertIn(user("carol"), out)
        rc, out = sh(BIN, "audit", "show", audit_dir)
        for kind in ("intermediate-request", "intermediate-approve", "issue-intent",
                     "intermediate-cert", "intermediate-fetch"):
            self.assertIn(kind, out)
        rc, out = sh(BIN, "audit", "show", audit_dir, "--kind", "intermediate-fetch")
        self.assertIn("root", out)
        # A tampered approval: carol's replaced by alice's (the requester's) fails verify.
        bad = tempfile.mkdtemp(prefix="ica-tampered.", dir=TMP)
        with open(os.path.join(audit_dir, "log")) as f:
            lines = f.read().splitlines(True)
        for i, line in enumerate(lines):
            e = json.loads(line)
            if e["kind"] == "intermediate-approve" and e["requester"] == user("carol"):
                e["requester"] = user("alice")
                e["uid"] = pwd.getpwnam(user("alice")).pw_uid  # users are compared by uid
                lines[i] = json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n"
        with open(os.path.join(bad, "log"), "w") as f:
            f.writelines(lines)
        rc, out = sh(BIN, "audit", "verify", bad, check=False)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("a requester's own approval does not count", out)

    def test_b_deny_then_approve(self):
        istiod = Istiod(self.work, "istiod-b")
        rid = self.request("alice", istiod, "cluster-b")
        self.refused("bob", "a denial needs a reason", "deny", rid, "--reason", "")
        self.ica("bob", "deny", rid, "--reason", "not our key")
        self.refused("carol", "was denied by %s: it cannot be approved" % user("bob"),
                     "approve", rid)
        self.refused("carol", "was denied already", "deny", rid, "--reason", "again")
        self.assertEqual(self.show(rid)["request"]["state"], "denied")

    def test_c_bad_csrs_and_outsider(self):
        weak = Istiod(self.work, "weak", ("-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"))
        self.refused("alice", "an RSA key must have 2048 to 8192 bits", "request", "--csr",
                     weak.csr, "--cluster", "c")
        good = Istiod(self.work, "forged")
        der = subprocess.check_output(["openssl", "req", "-in", good.csr, "-outform", "DER"])
        forged = bytearray(der)
        forged[-5] ^= 0x01  # inside the signature
        path = os.path.join(good.dir, "forged.csr")
        pem = subprocess.run(["openssl", "req", "-inform", "DER", "-outform", "PEM"],
                             input=bytes(forged), stdout=subprocess.PIPE).stdout
        with open(path, "wb") as f:
            f.write(pem)
        os.chmod(path, 0o644)
        self.refused("alice", "csr: ", "request", "--csr", path, "--cluster", "c")
        rc, out, err = self.ica("eve", "list", check=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("Permission denied", err)


CONFIGURED = ("intermediate:\n  istiod_names: [istiod-canary.istio-system.svc]\n"
              "  ip_ranges: [10.1.0.0/16]\n  email_domains: [mesh.example]\n  max_ttl: 30d\n")


class ConfiguredNames(unittest.TestCase):
    """intermediate.istiod_names, ip_ranges and email_domains set: the intermediate permits
    those DNS names, that IPv4 range (IPv6 stays excluded) and that e-mail host, and
    nothing else of each type."""
    ica, request, show = Intermediates.ica, Intermediates.request, Intermediates.show
    check_workloads = Intermediates.check_workloads

    @classmethod
    def setUpClass(cls):
        remove_users()
        make_users()
        cls.srv = start_server("ica-names", required=2, extra=CONFIGURED)
        cls.work = tempfile.mkdtemp(prefix="ica-names.", dir=TMP)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.srv.stop()
        finally:
            shutil.rmtree(cls.work, ignore_errors=True)
            remove_users()

    def test_configured_names(self):
        istiod = Istiod(self.work)
        rid = self.request("alice", istiod, "cluster-n")
        q = self.show(rid)["profile"]
        self.assertEqual(q["permitted"], "URI:cluster.local DNS:istiod-canary.istio-system.svc "
                                         "IP:10.1.0.0/16 email:mesh.example")
        self.assertEqual(q["excluded"], "IP:::/0")
        self.ica("bob", "approve", rid)
        self.ica("carol", "approve", rid)
        out_dir = os.path.join(self.work, "cacerts")
        self.ica(None, "fetch", rid, "--out", out_dir)
        ca, root = os.path.join(out_dir, "ca-cert.pem"), os.path.join(out_dir, "root-cert.pem")
        self.check_workloads(ca, root, istiod, (
            ("DNS:istiod-canary.istio-system.svc", True, True),
            ("DNS:istiod.istio-system.svc", False, True),
            ("IP:10.1.2.3", True, True),
            ("IP:10.2.0.1", False, True),
            ("IP:fd00::1", False, True),
            ("email:ops@mesh.example", True, True),
            ("email:admin@example.com", False, True)))
        sh(BIN, "audit", "verify", os.path.join(self.srv.dir, "audit"))


class Expiry(unittest.TestCase):
    def test_expired_request_cannot_be_approved(self):
        remove_users()
        make_users()
        srv = start_server("ica-exp", required=1, pending_ttl="2s")
        work = tempfile.mkdtemp(prefix="ica-exp.", dir=TMP)
        try:
            istiod = Istiod(work)
            rc, out, err = hsmca_as("alice", ["intermediate", "request", "--csr", istiod.csr,
                                              "--cluster", "x", "--config", srv.config])
            rid = re.search(r"request (\d+)", out).group(1)
            deadline = time.time() + 30
            state = None
            while time.time() < deadline and state != "expired":
                state = json.loads(hsmca_as(None, ["intermediate", "show", rid, "--json",
                                                   "--config", srv.config])[1])["request"]["state"]
                time.sleep(0.2)
            self.assertEqual(state, "expired")
            rc, out, err = hsmca_as("bob", ["intermediate", "approve", rid, "--config",
                                            srv.config], check=False)
            self.assertEqual(rc, 1)
            self.assertIn("expired (approval.pending_ttl)", err)
            sh(BIN, "audit", "verify", os.path.join(srv.dir, "audit"))
        finally:
            try:
                srv.stop()
            finally:
                shutil.rmtree(work, ignore_errors=True)
                remove_users()


SIGN_TIMEOUT = 2


def crl_config(text, dirs):
    """crl.path in a directory owned by the config's signer.user (made before the start),
    appended to dirs; test_crl.py's servers too."""
    signer = re.search(r"signer:\n  user: (\S+)\n", text).group(1)
    d = tempfile.mkdtemp(prefix="crl-out.", dir=TMP)
    os.chmod(d, 0o755)
    pw = pwd.getpwnam(signer)
    os.chown(d, pw.pw_uid, pw.pw_gid)
    dirs.append(d)
    # In place of the dev config's own crl section (a section appears once).
    text = text.replace("crl:\n  path: crl/ca-crl.pem\n", "")
    return text + "crl:\n  path: %s/ca-crl.pem\n  validity: 2d\n" % d


class ShimAdminServer(ShimServer):
    """ShimServer's token faults (control, count) on a server with the admin socket."""

    def __init__(self, name):
        d = tempfile.mkdtemp(prefix=name + "ctl.", dir=TMP)
        self.ctl, self.counts = os.path.join(d, "control"), os.path.join(d, "counts")
        open(self.ctl, "w").close()
        open(self.counts, "w").close()
        os.chmod(self.counts, 0o666)
        admin = admin_config(required=1, extra=EXTRA)
        dirs = []

        def edit(text):
            text = crl_config(admin(text), dirs)
            # No audit key: its checkpoints' C_Sign would race the CA's for the shim's
            # "hang C_Sign once" (the shim tells no key from another).
            text = re.sub(r"(?m)^  audit_key: .*\n", "", text)
            text = re.sub(r"(?m)^  module: .*$", "  module: %s" % SHIM, text)
            return text.replace("  sessions: 2\n",
                                "  sessions: 2\n  sign_timeout: %ds\n" % SIGN_TIMEOUT)

        DevServer.__init__(self, "ec-p256", name=name, edit_config=edit,
                           pkcs11_env={"P11SHIM_CONTROL": self.ctl, "P11SHIM_COUNTS": self.counts})
        self.wait_ready()
        os.chmod(self.dir, 0o711)
        self.config = os.path.join(self.dir, "hsmca.yaml")
        self.crl = os.path.join(dirs[0], "ca-crl.pem")


class HungCaSignature(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        remove_users()
        make_users()
        cls.srv = ShimAdminServer("ica-hang")
        cls.work = tempfile.mkdtemp(prefix="ica-hang.", dir=TMP)
        cls.csr = hc.make_csr(hc.make_key("ec-p256"),
                              uris=["spiffe://cluster.local/ns/default/sa/sleep"])

    @classmethod
    def tearDownClass(cls):
        try:
            cls.srv.stop()
        finally:
            shutil.rmtree(cls.work, ignore_errors=True)
            shutil.rmtree(os.path.dirname(cls.srv.crl), ignore_errors=True)
            remove_users()

    def run_as(self, who, *args):
        return hsmca_as(who, list(args) + ["--config", self.srv.config], check=False)

    def ica(self, who, *args):
        return self.run_as(who, "intermediate", *args)

    def workload(self):
        try:
            self.srv.client.create(self.csr, self.srv.token(), timeout=30)
            return "OK"
        except Exception as e:  # grpc.RpcError: its status name
            return e.code().name if hasattr(e, "code") else repr(e)

    def wait_hanging(self, n):
        deadline = time.monotonic() + 15
        while self.srv.count("hanging")[0] != n:
            self.assertLess(time.monotonic(), deadline, "hanging never became %d" % n)
            time.sleep(0.02)

    def while_hung(self, who, *args):
        """hsmca ARGS run by who while the shim holds the CA signature's C_Sign: (rc, out,
        err, seconds, the workload calls' statuses meanwhile)."""
        res, statuses = [], []
        t0 = time.monotonic()
        th = threading.Thread(target=lambda: res.append(self.run_as(who, *args)))
        th.start()
        self.wait_hanging(1)
        while th.is_alive():
            statuses.append(self.workload())
        th.join()
        rc, out, err = res[0]
        return rc, out, err, time.monotonic() - t0, statuses

    def revoke(self, serial):
        """ca revoke SERIAL, tried again while a CA signature is still out."""
        deadline = time.monotonic() + 40  # the tick may be retrying the CRL
        while True:
            rc, out, err = self.run_as(None, "ca", "revoke", serial, "--reason", "superseded",
                                       "--force-unknown")
            if rc == 0 or "has not returned" not in err or time.monotonic() > deadline:
                return rc, out, err
            time.sleep(0.1)

    def hung_crl(self):
        """A revoke whose CRL's signature hangs: revoked, the CRL not new yet; workloads go
        on; the next revoke's CRL lists both."""
        self.srv.control("hang C_Sign once\n# 4\n")
        rc, out, err, secs, during = self.while_hung(None, "ca", "revoke", "0badc0de",
                                                     "--reason", "superseded", "--force-unknown")
        print("revoke: rc %d after %.2f s (%s), %d workload calls meanwhile"
              % (rc, secs, out.strip(), len(during)))
        self.assertEqual(rc, 0, err)
        self.assertIn("no new CRL yet", out)
        self.assertIn("did not answer within pkcs11.sign_timeout", out)
        self.assertLess(secs, SIGN_TIMEOUT + 10)
        self.assertEqual([s for s in during if s != "OK"], [])
        self.srv.control("release\n# 5\n")
        self.wait_hanging(0)
        rc, out, err = self.revoke("0badc0df")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("no new CRL yet", out)
        text = sh("openssl", "crl", "-in", self.srv.crl, "-noout", "-text")[1]
        self.assertIn("0BADC0DE", text)
        self.assertIn("0BADC0DF", text)

    def test_hung_ca_signature(self):
        # The start's CRL (the first tick's) signed first: the hangs below hold ours.
        deadline = time.monotonic() + 15
        while not os.path.exists(self.srv.crl):
            self.assertLess(time.monotonic(), deadline, "no CRL at start")
            time.sleep(0.1)
        istiod = Istiod(self.work)
        rc, out, err = self.ica("alice", "request", "--csr", istiod.csr, "--cluster", "hang")
        rid = re.search(r"request (\d+): pending", out).group(1)
        # The approval's signature hangs: the approver hears so; workloads go on.
        self.srv.control("hang C_Sign once\n")
        rc, out, err, secs, during = self.while_hung("bob", "intermediate", "approve", rid)
        print("approve: rc %d after %.2f s, %d workload calls meanwhile: %s"
              % (rc, secs, len(during), sorted(set(during))))
        self.assertEqual(rc, 0, err)
        self.assertIn("not signed yet (fetch tries again)", out)
        self.assertIn("did not answer within pkcs11.sign_timeout", out)
        self.assertLess(secs, SIGN_TIMEOUT + 10)
        self.assertTrue(during)
        self.assertEqual([s for s in during if s != "OK"], [])
        # Still hung: a fetch is refused up front, nothing waits on the token.
        rc, out, err = self.ica(None, "fetch", rid, "--out", os.path.join(self.work, "no"))
        self.assertEqual(rc, 1)
        self.assertIn("has not returned", err)
        self.srv.control("release\n")
        self.wait_hanging(0)
        # A fetch whose signature hangs: told to fetch again.
        out_dir = os.path.join(self.work, "cacerts")
        self.srv.control("hang C_Sign once\n# 2\n")
        rc, out, err, secs, during = self.while_hung(None, "intermediate", "fetch", rid,
                                                     "--out", out_dir)
        print("fetch: rc %d after %.2f s (%s), %d workload calls meanwhile"
              % (rc, secs, err.strip(), len(during)))
        self.assertEqual(rc, 1)
        self.assertIn("did not answer within pkcs11.sign_timeout", err)
        self.assertIn("fetch again", err)
        self.assertLess(secs, SIGN_TIMEOUT + 10)
        self.assertEqual([s for s in during if s != "OK"], [])
        self.srv.control("release\n# 3\n")
        self.wait_hanging(0)
        # Once the late signature is back (and discarded), a fetch signs.
        deadline = time.monotonic() + 15
        while True:
            rc, out, err = self.ica(None, "fetch", rid, "--out", out_dir)
            if rc == 0 or "has not returned" not in err or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(rc, 0, err)
        self.assertTrue(os.path.exists(os.path.join(out_dir, "ca-cert.pem")))
        self.hung_crl()
        audit_dir = os.path.join(self.srv.dir, "audit")
        with open(os.path.join(audit_dir, "log")) as f:
            text = f.read()
        self.assertEqual(text.count("pkcs11.sign_timeout"), 2, "two results, not signed")
        sh(BIN, "audit", "verify", audit_dir)
        # The signer replays the log at its start: a new one answers.
        old = self.srv.children()["signer"]
        os.kill(old, signal.SIGKILL)
        self.srv.wait_children(exclude=[old])
        deadline = time.monotonic() + 60
        while hsmca_as(None, ["admin", "status", "--config", self.srv.config],
                       check=False)[0] != 0:
            self.assertLess(time.monotonic(), deadline, "no new signer on the admin socket")
            time.sleep(0.2)
        self.assertEqual(self.workload(), "OK")


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""What the tests on other tokens share (test_tpm.py, test_p11kit.py): daemons killed in
teardown whatever happens (Procs), waiting for a condition with a deadline (wait_for), a
root certificate for a key that only a token can sign with (make_root), an hsm-config/
fragment spliced into the config `hsmca dev init` wrote (splice_fragment), and the checks
each token passes: certificates that verify, checkpoints that verify, and recovery from
an outage of the token's daemon without a restart of the signer (TokenChecks)."""
import datetime
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from audit_tree import leaf, log_lines, mth
from hsmca_harness import BIN
from test_audit_ecdsa import open_checkpoint, openssl_verify, parse_ec_vkey

HSM_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "hsm-config")
SIGNER_USER = "hsmca-signer"  # signer.user in the config hsmca dev init writes


def wait_for(what, cond, timeout, step=0.1, detail=None):
    """cond()'s first true value, polled until timeout seconds; raises naming what, with
    detail() (a log's end, say) when given."""
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out after %gs waiting for %s%s" % (
                timeout, what, "\n" + detail() if detail else ""))
        time.sleep(step)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children_of(pid):
    """The processes whose parent is pid, from /proc."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


class Procs:
    """The daemons a fixture started, by pid, each killed by stop() (SIGTERM, then
    SIGKILL after a deadline) with the children it forked (a server with a process per
    client); stop_all() in teardown, also after a failure. None is a daemon of its own
    (no --daemon, no new session): they stay in the test's process group."""

    def __init__(self):
        self.pids = {}
        self.popens = {}

    def add(self, name, pid, popen=None):
        self.pids[name] = pid
        if popen:
            self.popens[pid] = popen

    def stop(self, name, sig=signal.SIGTERM, timeout=10):
        pid = self.pids.pop(name, None)
        if pid is None:
            return
        popen = self.popens.pop(pid, None)
        victims = [pid] + children_of(pid)
        for v in victims:
            try:
                os.kill(v, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + timeout
        while any(pid_alive(v) for v in victims) and time.time() < deadline:
            if popen:
                popen.poll()  # our child: reap it
            time.sleep(0.05)
        for v in victims:
            if pid_alive(v):
                os.kill(v, signal.SIGKILL)
        if popen:
            popen.wait()

    def stop_all(self):
        for name in list(self.pids)[::-1]:
            self.stop(name)


def token_public_key(module, env, label, pin, token="hsmca"):
    """The public key of label's key pair, read through the module."""
    out = subprocess.run(["pkcs11-tool", "--module", module, "--token-label", token,
                          "--login", "--pin", pin, "--read-object", "--type", "pubkey",
                          "--label", label], env=env, capture_output=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError("pkcs11-tool --read-object: %s" % out.stderr.decode())
    return serialization.load_der_public_key(out.stdout)


def _der_len(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def make_root(module, env, path, pin, label="ca-key", token="hsmca"):
    """A self-signed root for a key only the token can sign with: the TBS is built by
    `cryptography` with the token's public key (signed by a throwaway key of the same
    type, for its bytes only), signed by the token through pkcs11-tool, and assembled
    as Certificate ::= SEQUENCE { tbs, signatureAlgorithm, BIT STRING }."""
    pub = token_public_key(module, env, label, pin, token)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "hsmca test"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "hsmca %s root" % label)])
    now = datetime.datetime.now(datetime.timezone.utc)
    ski = x509.SubjectKeyIdentifier.from_public_key(pub)
    tmp = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(pub)
           .serial_number(x509.random_serial_number())
           .not_valid_before(now - datetime.timedelta(minutes=5))
           .not_valid_after(now + datetime.timedelta(days=30))
           .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
           .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                        False), critical=True)
           .add_extension(ski, critical=False)
           .add_extension(x509.AuthorityKeyIdentifier(ski.digest, None, None), critical=False)
           .sign(ec.generate_private_key(ec.SECP256R1()), hashes.SHA256()))
    tbs = tmp.tbs_certificate_bytes
    work = tempfile.mkdtemp(prefix="root.", dir=os.path.dirname(os.path.abspath(path)))
    digest, sig = os.path.join(work, "digest"), os.path.join(work, "sig")
    with open(digest, "wb") as f:
        f.write(hashlib.sha256(tbs).digest())
    subprocess.run(["pkcs11-tool", "--module", module, "--token-label", token, "--login",
                    "--pin", pin, "--sign", "--mechanism", "ECDSA", "--label", label,
                    "--signature-format", "openssl", "--input-file", digest,
                    "--output-file", sig], env=env, check=True, capture_output=True, timeout=60)
    with open(sig, "rb") as f:
        signature = f.read()
    shutil.rmtree(work)
    alg = bytes.fromhex("300a06082a8648ce3d040302")  # ecdsa-with-SHA256
    bits = b"\x03" + _der_len(len(signature) + 1) + b"\x00" + signature
    body = tbs + alg + bits
    cert = x509.load_der_x509_certificate(b"\x30" + _der_len(len(body)) + body)
    pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(hashes.SHA256()))
    with open(path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    return cert


def module_env_config(text, env):
    """text (a config with a fragment spliced in) with the fragment's pkcs11.env block,
    its example values, replaced by env (TpmToken.env, P11KitServer.env): the only way
    a variable reaches the module (supervisor/sup_env.h). Every name the fragment writes must be
    in env, so the worked example names only variables the module is run with here."""
    m = re.search(r"(?m)^  env:\n((?:    .*\n)+)", text)
    assert m, "the fragment writes pkcs11.env"
    names = set(re.findall(r"(?m)^    ([A-Za-z_][A-Za-z0-9_]*):", m.group(1)))
    assert names and names <= set(env), (names, sorted(env))
    lines = "".join('    %s: "%s"\n' % kv for kv in sorted(env.items()))
    return text[:m.start(1)] + lines + text[m.end(1):]


def _sections(text):
    """{top-level key: its block of lines} and the order of the keys."""
    blocks, order, cur = {}, [], None
    for line in text.splitlines(keepends=True):
        m = re.match(r"^([a-z_0-9]+):", line)
        if m:
            cur = m.group(1)
            order.append(cur)
            blocks[cur] = ""
        if cur:
            blocks[cur] += line
    return blocks, order


def splice_fragment(config_text, fragment_name, subs):
    """config_text with each top-level section of hsm-config/<fragment_name> put in place
    of the section of that name; subs maps a string in the fragment (an example path) to
    what this test uses instead, and each must occur in it, so the fragment cannot drift
    from what the tests run."""
    with open(os.path.join(HSM_CONFIG, fragment_name)) as f:
        frag = f.read()
    for old, new in subs.items():
        assert old in frag, "%s no longer contains %r" % (fragment_name, old)
        frag = frag.replace(old, new)
    fblocks, forder = _sections(frag)
    cblocks, corder = _sections(config_text)
    assert forder, "no section in " + fragment_name
    for k in forder:
        cblocks[k] = fblocks[k]
    return "".join(cblocks[k] for k in corder + [k for k in forder if k not in corder])


def read(d, name):
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


def audit(*args):
    return subprocess.run([BIN, "audit"] + list(args), capture_output=True, text=True,
                          timeout=120)


def full_log(server):
    """The server's whole log (DevServer.logtext() keeps only its end)."""
    server.log.flush()
    with open(server.log_path, "rb") as f:
        return f.read().decode(errors="replace")


class TokenChecks:
    """Mixed into a unittest.TestCase whose self.server is a running DevServer on the
    token under test, with the audit log on and an ECDSA P-256 audit key in that token."""

    RECOVER_S = 60  # a loaded two-core machine: the token's daemon starts slowly

    def log_end(self):
        return full_log(self.server)[-5000:]

    def root_pem(self):
        return read(self.server.dir, "root-cert.pem")

    def verify_chain(self, chain):
        """The leaf is signed by the CA root (the token's key), ends in it, and names the
        workload's SPIFFE ID."""
        leaf_cert = x509.load_pem_x509_certificate(chain[0].encode())
        root = x509.load_pem_x509_certificate(self.root_pem())
        root.public_key().verify(leaf_cert.signature, leaf_cert.tbs_certificate_bytes,
                                 ec.ECDSA(leaf_cert.signature_hash_algorithm))
        self.assertEqual(leaf_cert.issuer, root.subject)
        self.assertEqual(x509.load_pem_x509_certificate(chain[-1].encode()), root)
        san = leaf_cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        self.assertEqual(san.get_values_for_type(x509.UniformResourceIdentifier),
                         ["spiffe://cluster.local/ns/default/sa/sleep"])

    def check_checkpoints(self):
        """A checkpoint covering the whole log appears, signed by the audit key (checked
        by `cryptography` and by the openssl command from the published vkey, its root
        recomputed here), and `hsmca audit verify` passes."""
        audit_dir = os.path.join(self.server.dir, "audit")
        vkey = parse_ec_vkey(read(audit_dir, "vkey").decode())
        count = len(log_lines(audit_dir))

        def covering():
            cp = open_checkpoint(read(audit_dir, "checkpoint"), vkey)
            return cp if cp[1] >= count else None
        cp = wait_for("a checkpoint covering the log's %d entries" % count, covering, 30,
                      detail=self.log_end)
        self.assertEqual(cp[2], mth([leaf(line) for line in log_lines(audit_dir)[:cp[1]]]))
        self.assertEqual(openssl_verify(read(audit_dir, "checkpoint"), vkey, self.server.dir), 1)
        r = audit("verify", audit_dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"^OK: \d+ entries")
        return cp

    def token_check(self, would_start):
        """`hsmca token check` on the server's config (it may run beside serve): exit 0 and
        "serve would start", or 1 and "would not start". Returns its report."""
        config = os.path.join(self.server.dir, "hsmca.yaml")
        r = subprocess.run([BIN, "token", "check", "--config", config], capture_output=True,
                           text=True, timeout=120, env=self.server.env,
                           stdin=subprocess.DEVNULL)
        report = r.stdout + r.stderr
        self.assertEqual(r.returncode, 0 if would_start else 1, report)
        self.assertIn("verdict: serve would start" if would_start
                      else "verdict: serve would not start", r.stdout)
        return r.stdout

    def check_serves(self, n=3):
        log = full_log(self.server)
        self.assertIn('"msg":"sandbox: signer network access","network":"unix sockets only",'
                      '"setting":"signer.sandbox.network: unix"', log)
        ready = [json.loads(line) for line in log.splitlines()
                 if '"msg":"audit key ready"' in line]
        self.assertTrue(ready, "no \"audit key ready\" line")
        self.assertEqual(ready[-1]["key"], "pkcs11:token=hsmca;object=audit-key;type=private")
        self.assertEqual(ready[-1]["type"], "ECDSA P-256")
        # The recovery, rehearsed inside the sandbox before serving (p11_pool_reinit_module).
        self.assertIn("pkcs11: re-initializing the module once, as after a token fault", log)
        self.assertIn('"msg":"pkcs11: reconnected to the token","token":"hsmca","key":"ca-key"',
                      log)
        for _ in range(n):
            self.verify_chain(self.server.issue())
        return self.check_checkpoints()

    def check_recovers(self, kill, start):
        """kill() takes the token's daemon away: requests fail UNAVAILABLE (none is
        answered otherwise) until the signer has tried and failed to re-initialize the
        module twice; start() brings it back: a request succeeds within RECOVER_S, from
        the same signer process, and checkpoints go on. Returns the codes seen."""
        server = self.server
        signer = server.wait_children()["signer"]
        failed = '"msg":"pkcs11: reconnect to the token failed","token":"hsmca","key":"ca-key"'
        back = '"msg":"pkcs11: reconnected to the token","token":"hsmca","key":"ca-key"'
        before = full_log(server).count(failed)
        back_before = full_log(server).count(back)
        kill()
        codes = []

        def attempt():
            try:
                # Longer than pkcs11.sign_timeout (10s in the fragments): a token call
                # that hangs is answered UNAVAILABLE by the signer, not cut by the client.
                return server.issue(timeout=25)
            except grpc.RpcError as e:
                codes.append(e.code().name)
                self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE,
                                 "%s\n%s" % (e.details(), self.log_end()))
                return None

        def outage_seen():
            self.assertIsNone(attempt(), "a certificate while the token's daemon is down")
            return full_log(server).count(failed) >= before + 2
        wait_for("failed re-initializations during the outage", outage_seen, self.RECOVER_S,
                 step=0.2, detail=self.log_end)
        start()
        self.verify_chain(wait_for("a certificate after the restart", attempt,
                                   self.RECOVER_S, step=0.2, detail=self.log_end))
        self.assertEqual(server.wait_children()["signer"], signer, "the signer kept its pid")
        self.assertGreater(full_log(server).count(back), back_before, "the pool reconnected")
        self.check_checkpoints()
        return codes

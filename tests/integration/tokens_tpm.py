"""A TPM token for the integration tests: a software TPM (swtpm) behind its resource
manager tpm2-abrmd on a private D-Bus bus, and a tpm2-pkcs11 store holding token
"hsmca" with an EC P-256 CA key (label ca-key) and an EC P-256 audit key (label
audit-key), generated inside the TPM (sensitive, never extractable).

Also what test_tpm.py and test_p11kit.py share: processes killed in teardown whatever
happens (Procs), waiting for a condition with a deadline (wait_for), a root certificate
for a key that only a token can sign with (make_root), and an hsm-config/ fragment
spliced into the config `hsmca dev init` wrote (splice_fragment)."""
import datetime
import hashlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

TPM_MODULE = "/usr/lib/x86_64-linux-gnu/pkcs11/libtpm2_pkcs11.so"
HSM_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "hsm-config")
USER_PIN = "1234"
SIGNER_USER = "hsmca-signer"  # signer.user in the config hsmca dev init writes


def wait_for(what, cond, timeout, step=0.1):
    """cond()'s first true value, polled until timeout seconds; raises naming what."""
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out after %gs waiting for %s" % (timeout, what))
        time.sleep(step)


def free_port_pair():
    """A free TCP port P on 127.0.0.1 with P+1 free too: the swtpm TCTI reaches the
    TPM's control channel on the port after the command port."""
    for _ in range(100):
        a = socket.socket()
        a.bind(("127.0.0.1", 0))
        b = socket.socket()
        try:
            b.bind(("127.0.0.1", a.getsockname()[1] + 1))
            return a.getsockname()[1]
        except OSError:
            continue
        finally:
            a.close()
            b.close()
    raise RuntimeError("no two consecutive free ports")


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


class Procs:
    """The daemons a fixture started, by pid, each killed by stop() (SIGTERM, then
    SIGKILL after a deadline); stop_all() in teardown, also after a failure."""

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
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + timeout
        popen = self.popens.get(pid)
        while pid_alive(pid) and time.time() < deadline:
            if popen:
                popen.poll()  # our child: reap it
            time.sleep(0.05)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
        popen = self.popens.pop(pid, None)
        if popen:
            popen.wait()

    def stop_all(self):
        for name in list(self.pids)[::-1]:
            self.stop(name)


def read_pid(path, timeout=20):
    def pid():
        try:
            with open(path) as f:
                return f.read().strip()
        except FileNotFoundError:
            return None
    return int(wait_for("pid file " + path, pid, timeout))


# A private bus for tpm2-abrmd. A session bus admits only the uid that started it: the
# signer, which drops to signer.user, connects again as that user when it re-initializes
# the module, so this bus admits every local user (EXTERNAL authentication still names
# them).
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class TpmToken:
    """swtpm, a private D-Bus bus and tpm2-abrmd, started by start(), stopped by stop();
    env is what the module needs in the signer's environment (the one place it is
    written: it becomes pkcs11.env)."""

    def __init__(self, name="tpm"):
        # Short: the bus socket's path must fit sun_path.
        self.dir = tempfile.mkdtemp(prefix=name + ".", dir="/tmp")
        os.chmod(self.dir, 0o711)
        self.procs = Procs()
        self.tpm_port = free_port_pair()
        self.ctrl_port = self.tpm_port + 1
        self.store = os.path.join(self.dir, "store")
        self.bus = os.path.join(self.dir, "bus")
        self.log = open(os.path.join(self.dir, "daemons.log"), "ab")
        tcti = "tabrmd:bus_type=session"
        self.env = {
            "TPM2_PKCS11_TCTI": tcti,
            "TPM2_PKCS11_STORE": self.store,
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=" + self.bus,
        }
        self.tool_env = dict(os.environ, TPM2TOOLS_TCTI=tcti, **self.env)

    def logtext(self):
        self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def start(self):
        try:
            self._start_swtpm()
            self._start_bus()
            self.start_abrmd()
        except BaseException:
            self.stop()
            raise

    def _start_swtpm(self):
        state = os.path.join(self.dir, "state")
        os.mkdir(state)
        pidf = os.path.join(self.dir, "swtpm.pid")
        # Absolute paths: swtpm --daemon changes directory to /.
        subprocess.check_call(
            ["swtpm", "socket", "--tpmstate", "dir=" + state, "--tpm2",
             "--server", "type=tcp,port=%d" % self.tpm_port,
             "--ctrl", "type=tcp,port=%d" % self.ctrl_port,
             "--flags", "not-need-init,startup-clear", "--daemon", "--pid", "file=" + pidf],
            stdout=self.log, stderr=subprocess.STDOUT, timeout=30)
        self.procs.add("swtpm", read_pid(pidf))

    def _start_bus(self):
        conf = os.path.join(self.dir, "bus.conf")
        with open(conf, "w") as f:
            f.write(BUS_CONFIG % self.bus)
        p = subprocess.Popen(["dbus-daemon", "--config-file=" + conf, "--nofork", "--nopidfile"],
                             stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.add("dbus", p.pid, p)
        wait_for("the D-Bus socket", lambda: os.path.exists(self.bus), 20)
        os.chmod(self.bus, 0o666)

    def abrmd_on_bus(self):
        r = subprocess.run(["dbus-send", "--bus=unix:path=" + self.bus, "--print-reply",
                            "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                            "org.freedesktop.DBus.NameHasOwner", "string:com.intel.tss2.Tabrmd"],
                           capture_output=True, text=True, timeout=10)
        return "boolean true" in r.stdout

    def start_abrmd(self):
        """Starts tpm2-abrmd and returns once it owns its name on the bus."""
        p = subprocess.Popen(["tpm2-abrmd", "--session", "--allow-root",
                              "--tcti=swtpm:host=127.0.0.1,port=%d" % self.tpm_port],
                             env=self.tool_env, stdout=self.log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        self.procs.add("abrmd", p.pid, p)
        wait_for("tpm2-abrmd on the bus", lambda: p.poll() is not None or self.abrmd_on_bus(), 30)
        if p.poll() is not None:
            raise RuntimeError("tpm2-abrmd exited %d:\n%s" % (p.returncode, self.logtext()))

    def kill_abrmd(self):
        self.procs.stop("abrmd", signal.SIGKILL)

    def run(self, argv, timeout=120):
        r = subprocess.run(argv, env=self.tool_env, capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("%s exited %d:\n%s%s\n%s" % (argv, r.returncode, r.stdout,
                                                            r.stderr, self.logtext()))
        return r.stdout

    def make_token(self, owner=SIGNER_USER):
        """Token "hsmca" with keys ca-key (id 01) and audit-key (id 02); the store then
        belongs to owner, who must write it (tpm2-pkcs11 keeps a SQLite database and
        its lock there, opened again at every C_Initialize)."""
        os.mkdir(self.store)
        self.run(["tpm2_ptool", "init"])
        self.run(["tpm2_ptool", "addtoken", "--pid=1", "--sopin=sopin",
                  "--userpin=" + USER_PIN, "--label=hsmca"])
        for label, kid in (("ca-key", "01"), ("audit-key", "02")):
            self.run(["pkcs11-tool", "--module", TPM_MODULE, "--token-label", "hsmca",
                      "--login", "--pin", USER_PIN, "--keypairgen", "--key-type",
                      "EC:prime256v1", "--label", label, "--id", kid, "--usage-sign"])
        pw = pwd.getpwnam(owner)
        for root, dirs, files in os.walk(self.store):
            for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                os.chown(n, pw.pw_uid, pw.pw_gid)

    def stop(self):
        self.procs.stop_all()
        self.log.close()

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def token_public_key(module, env, label, pin=USER_PIN, token="hsmca"):
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


def make_root(module, env, path, label="ca-key", pin=USER_PIN, token="hsmca"):
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

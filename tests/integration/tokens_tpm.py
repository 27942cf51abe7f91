"""A TPM token for the integration tests: a software TPM (swtpm) behind its resource
manager tpm2-abrmd on a private D-Bus bus, and a tpm2-pkcs11 store holding token
"hsmca" with an EC P-256 CA key (label ca-key) and an EC P-256 audit key (label
audit-key), generated inside the TPM (sensitive, never extractable)."""
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile

from tokens_common import SIGNER_USER, Procs, wait_for

TPM_MODULE = "/usr/lib/x86_64-linux-gnu/pkcs11/libtpm2_pkcs11.so"
USER_PIN = "1234"


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


# A private bus for tpm2-abrmd. A session bus admits only the uid that started it; the
# signer connects as root, before it switches to signer.user, and GLib keeps that
# connection across C_Finalize, but after a restart of the bus it would connect as
# signer.user: this bus admits every local user, as the system bus does (EXTERNAL
# authentication still names them).
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
        """swtpm in the foreground, our child in our process group (not --daemon, which
        would leave it behind if this test were killed), ready once it accepts a
        connection on its control port."""
        state = os.path.join(self.dir, "state")
        os.mkdir(state)
        p = subprocess.Popen(
            ["swtpm", "socket", "--tpmstate", "dir=" + state, "--tpm2",
             "--server", "type=tcp,port=%d" % self.tpm_port,
             "--ctrl", "type=tcp,port=%d" % self.ctrl_port,
             "--flags", "not-need-init,startup-clear"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.add("swtpm", p.pid, p)

        def listening():
            if p.poll() is not None:
                raise RuntimeError("swtpm exited %d:\n%s" % (p.returncode, self.logtext()))
            try:
                socket.create_connection(("127.0.0.1", self.ctrl_port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_for("swtpm listening", listening, 30)

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

    def make_token(self):
        """Token "hsmca" with keys ca-key (id 01) and audit-key (id 02), in a store of
        ours; chown_store hands it to the signer's user."""
        os.mkdir(self.store)
        self.run(["tpm2_ptool", "init"])
        self.run(["tpm2_ptool", "addtoken", "--pid=1", "--sopin=sopin",
                  "--userpin=" + USER_PIN, "--label=hsmca"])
        for label, kid in (("ca-key", "01"), ("audit-key", "02")):
            self.run(["pkcs11-tool", "--module", TPM_MODULE, "--token-label", "hsmca",
                      "--login", "--pin", USER_PIN, "--keypairgen", "--key-type",
                      "EC:prime256v1", "--label", label, "--id", kid, "--usage-sign"])

    def chown_store(self, owner=SIGNER_USER):
        """The store to owner, who must write it: tpm2-pkcs11 keeps a SQLite database
        and its lock there, opened again at every C_Initialize. Run as root, after
        `hsmca dev init` has made the user."""
        pw = pwd.getpwnam(owner)
        for root, dirs, files in os.walk(self.store):
            for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                os.chown(n, pw.pw_uid, pw.pw_gid)

    def stop(self):
        self.procs.stop_all()
        self.log.close()

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)



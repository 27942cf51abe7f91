"""A remote token for the integration tests: `p11-kit server` exporting the SoftHSM
token "hsmca" that `hsmca dev init` made (its CA key and ECDSA P-256 audit key), on a
unix socket, for p11-kit-client.so in the signer. p11-kit's RPC carries no EdDSA
mechanism, hence the ECDSA audit key."""
import os
import pwd
import shutil
import signal
import subprocess
import tempfile

from tokens_tpm import SIGNER_USER, Procs, wait_for

CLIENT_MODULE = "/usr/lib/x86_64-linux-gnu/pkcs11/p11-kit-client.so"
SOFTHSM = "/usr/lib/softhsm/libsofthsm2.so"


class P11KitServer:
    """`p11-kit server` in front of SoftHSM; start() with the token's SOFTHSM2_CONF,
    kill() and start() again for an outage. env is what the client module needs in the
    signer's environment (the one place it is written: it becomes pkcs11.env)."""

    def __init__(self, name="p11kit"):
        self.dir = tempfile.mkdtemp(prefix=name + ".", dir="/tmp")  # short: sun_path
        os.chmod(self.dir, 0o711)
        self.sock = os.path.join(self.dir, "sock")
        self.procs = Procs()
        self.log = open(os.path.join(self.dir, "server.log"), "ab")
        self.env = {"P11_KIT_SERVER_ADDRESS": "unix:path=" + self.sock}
        self.softhsm2_conf = None

    def logtext(self):
        self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def start(self, softhsm2_conf=None, owner=SIGNER_USER):
        """Serves the token; the socket then belongs to owner: p11-kit server checks no
        peer credentials, the socket's mode (0711, rwx for its owner) decides who may
        connect, and the signer connects again as signer.user after a fault."""
        self.softhsm2_conf = softhsm2_conf or self.softhsm2_conf
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        env = dict(os.environ, SOFTHSM2_CONF=self.softhsm2_conf)
        p = subprocess.Popen(["p11-kit", "server", "--provider", SOFTHSM, "-n", self.sock,
                              "-f", "pkcs11:token=hsmca"], env=env, stdout=self.log,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.add("server", p.pid, p)
        wait_for("p11-kit server's socket",
                 lambda: p.poll() is not None or os.path.exists(self.sock), 20)
        if p.poll() is not None:
            raise RuntimeError("p11-kit server exited %d:\n%s" % (p.returncode, self.logtext()))
        if os.geteuid() == 0:  # else the signer keeps our uid, which owns the socket
            pw = pwd.getpwnam(owner)
            os.chown(self.sock, pw.pw_uid, pw.pw_gid)

    def kill(self):
        """SIGKILL to the server and the child it forked for each client."""
        self.procs.stop("server", signal.SIGKILL)

    def stop(self):
        self.procs.stop_all()
        self.log.close()

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)

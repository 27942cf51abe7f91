#!/bin/sh
# Installs the Debian 12 packages hsmca needs to build, run and test.
# Idempotent: installs only what is missing. Needs root (or sudo).
# The second PKCS#11 implementations of integration.test_tpm and test_p11kit: a
# software TPM (swtpm), its resource manager (tpm2-abrmd) and the TCTI that reaches
# it, tpm2-pkcs11 and its set-up tool (tpm2_ptool, which runs tpm2-tools), a
# private D-Bus bus (dbus-daemon, dbus-send), p11-kit server and p11-kit-client.so.
# The container image (deploy/container/build.sh, integration.test_container): mmdebstrap
# builds its root filesystem from Debian packages, podman imports and runs it on runc;
# systemd-analyze checks deploy/systemd (integration.test_systemd_units).
set -eu
PKGS="build-essential cmake pkg-config clang libclang-rt-14-dev
libssl-dev libgrpc-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
libjansson-dev libyaml-dev libcurl4-openssl-dev libseccomp-dev libcmocka-dev libp11-dev libp11-kit-dev
softhsm2 opensc openssl libengine-pkcs11-openssl gnutls-bin
python3-grpcio python3-cryptography python3-jwt python3-h2
golang-go golang-golang-x-mod-dev
swtpm tpm2-abrmd libtss2-tcti-tabrmd0 libtpm2-pkcs11-1 libtpm2-pkcs11-tools tpm2-tools
dbus-daemon dbus-bin p11-kit p11-kit-modules
python3-kubernetes python3-yaml
mmdebstrap podman runc systemd
libmicrohttpd-dev prometheus"
# kubectl, for `kubectl kustomize` (integration.test_k8s_manifests): Debian's
# kubernetes-client, unless a kubectl is installed already (another package's would
# conflict with its /usr/bin/kubectl).
command -v kubectl >/dev/null 2>&1 || PKGS="$PKGS kubernetes-client"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing:$missing"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing

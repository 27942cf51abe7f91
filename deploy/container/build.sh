#!/bin/sh
# Builds the hsmca container image from Debian 12 packages only, without pulling
# from any image registry: mmdebstrap makes a root filesystem of the runtime
# libraries the built programs load (found with ldd and dpkg -S on this machine),
# the programs are copied in from the cmake build directory, and `podman import`
# makes it the image hsmca:<version> (hsmca:<version>-demo with --demo).
#
#   deploy/container/build.sh [--demo] [--tag T] [--build-dir B]
#
# --demo adds SoftHSM2, for `hsmca dev` in the container; the plain image holds no
# PKCS#11 module: a real HSM's client library and its config come from a volume.
# The root filesystem (everything but the programs) is cached in B/container/ under
# a name derived from the package list and this script, so a rebuild after a code
# change only copies the programs in again. Needs root (mmdebstrap, chroot for the
# library check, and podman's root storage, the one `podman run` uses here), and
# Debian's package archive (HSMCA_DEBIAN_MIRROR, HSMCA_DEBIAN_SECURITY to change it).
set -eu

SCRIPT=$(readlink -f "$0")
SRC=$(dirname "$(dirname "$(dirname "$SCRIPT")")")
SUITE=bookworm
MIRROR=${HSMCA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${HSMCA_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
# The user ids are fixed so that manifests can name them (runAsUser, fsGroup) and
# files on a volume keep their owner from one image to the next; above the range
# Debian hands out to system and login users, so that they collide with no host user.
SIGNER_UID=10001
FE_UID=10002
# Libraries loaded with dlopen, which ldd does not see: libcurl for the OIDC key
# fetch and hsmca-publish's Kubernetes API client (http/curl_dl.c); ca-certificates
# for the HTTPS servers they reach that the config gives no CA bundle for.
DLOPENED="libcurl.so.4"
EXTRA_PKGS="ca-certificates"
# softhsm2-common's postinst runs groupadd without depending on passwd, which has it.
DEMO_PKGS="softhsm2 passwd"

die() { echo "build.sh: $*" >&2; exit 1; }

usage() {
    sed -n '2,16s/^# \{0,1\}//p' "$SCRIPT"
    exit "$1"
}

DEMO=0 TAG="" BUILD="$SRC/build"
while [ $# -gt 0 ]; do
    case "$1" in
    --demo) DEMO=1 ;;
    --tag) [ $# -ge 2 ] || die "--tag needs a value"; TAG=$2; shift ;;
    --build-dir) [ $# -ge 2 ] || die "--build-dir needs a value"; BUILD=$2; shift ;;
    -h | --help) usage 0 ;;
    *) echo "build.sh: unknown argument: $1" >&2; usage 2 ;;
    esac
    shift
done

[ "$(id -u)" -eq 0 ] || die "run as root: mmdebstrap, chroot and podman's root storage need it"
for c in mmdebstrap podman dpkg ldd ldconfig tar sha256sum; do
    command -v "$c" >/dev/null || die "$c is missing: run scripts/install-deps.sh"
done
BUILD=$(readlink -f "$BUILD")
[ -x "$BUILD/hsmca" ] || die "$BUILD/hsmca not found: build first (cmake --build), or pass --build-dir"
# The image runs the programs as they are: a sanitizer build would carry its
# runtime's cost and reports into production.
if grep -q AddressSanitizer "$BUILD/hsmca"; then
    die "$BUILD is a sanitizer build (HSMCA_SANITIZE=ON): build the image from a release build"
fi
VERSION=$("$BUILD/hsmca" version | awk 'NR == 1 { print $2 }')
COMMIT=$("$BUILD/hsmca" version | sed -n '1s/.*(commit \(.*\)).*/\1/p')
[ -n "$VERSION" ] || die "$BUILD/hsmca version printed no version"
if [ -z "$TAG" ]; then
    TAG="hsmca:$VERSION"
    [ "$DEMO" -eq 0 ] || TAG="hsmca:$VERSION-demo"
fi

# The programs: hsmca in /usr/bin, the ones it starts (hsmca-supervisor, which starts
# hsmca-signer, hsmca-frontend and the others; hsmca-publish for `hsmca k8s publish-roots`;
# any other hsmca-* the build made) in /usr/libexec/hsmca, where they are looked for.
CHILDREN=""
for f in "$BUILD"/hsmca-*; do
    [ -f "$f" ] && [ -x "$f" ] && CHILDREN="$CHILDREN $f"
done
for need in hsmca-supervisor hsmca-signer hsmca-frontend hsmca-publish; do
    [ -x "$BUILD/$need" ] || die "$BUILD/$need not found: build all targets"
done

LIBS=$(for f in "$BUILD/hsmca" $CHILDREN; do
    ldd "$f" | awk '/=> not found/ { print "NOTFOUND:" $1 } / => \// { print $3 }'
done | sort -u)
for lib in $DLOPENED; do
    p=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|64bit/ { print $NF; exit }')
    [ -n "$p" ] || die "$lib (loaded at run time) is not installed here: run scripts/install-deps.sh"
    LIBS="$LIBS $p"
done
case "$LIBS" in *NOTFOUND:*) die "ldd finds no $(echo "$LIBS" | sed -n 's/^NOTFOUND://p' | head -n 1) on this machine" ;; esac

# The package that owns each library: dpkg records a library under /lib or /usr/lib,
# whichever its package ships, while ldd prints the path it loaded it from, so each
# is looked up under every spelling, in one dpkg -S (it reads its whole database).
variants() {
    for lib in $LIBS; do
        printf '%s\n' "$lib" "$(readlink -f "$lib")" "/usr$lib" "${lib#/usr}"
    done | sort -u
}
# shellcheck disable=SC2046 # one path per word
OWNERS=$(dpkg -S $(variants) 2>/dev/null | grep -v '^diversion' || true)
PKGS=""
for lib in $LIBS; do
    pkg=$(printf '%s\n' "$OWNERS" | awk -v a="$lib" -v b="$(readlink -f "$lib")" \
        -v c="/usr$lib" -v d="${lib#/usr}" \
        '{ p = $NF } p == a || p == b || p == c || p == d { sub(/[:,].*/, ""); print; exit }')
    [ -n "$pkg" ] || die "$lib: no Debian package owns it (dpkg -S): the image can only hold packaged libraries"
    PKGS="$PKGS $pkg"
done
PKGS="$PKGS $EXTRA_PKGS"
[ "$DEMO" -eq 0 ] || PKGS="$PKGS $DEMO_PKGS"
# shellcheck disable=SC2086 # one package per word
PKGS=$(printf '%s\n' $PKGS | sort -u | paste -sd ' ')
echo "build.sh: packages: $PKGS"

# The root filesystem, cached by what makes it.
CACHE="$BUILD/container"
mkdir -p "$CACHE"
KEY=$(printf '%s\n' "$PKGS" "$MIRROR" "$SECURITY" | cat - "$SCRIPT" | sha256sum | cut -c1-16)
FLAVOUR=plain
[ "$DEMO" -eq 0 ] || FLAVOUR=demo
ROOTFS="$CACHE/rootfs-$FLAVOUR-$KEY.tar"
if [ ! -s "$ROOTFS" ]; then
    echo "build.sh: building the root filesystem with mmdebstrap (about a minute)"
    t0=$(date +%s)
    # Essential packages (dpkg and its database stay, for scanners that read it) plus
    # the libraries; no apt, no compiler. Documentation except the licences, manual
    # pages and translations are never unpacked.
    # Merged /usr the way debootstrap makes it (the hook installs usr-is-merged):
    # otherwise apt satisfies init-system-helpers with usrmerge, which brings perl.
    mmdebstrap --variant=essential --format=tar --include="$(echo "$PKGS" | tr ' ' ',')" \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/lintian/*' \
        "$SUITE" "$ROOTFS.part" \
        "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \
        "deb $SECURITY $SUITE-security main" >&2 ||
        { rm -f "$ROOTFS.part"; die "mmdebstrap failed (is $MIRROR reachable?)"; }
    rm -f "$CACHE"/rootfs-"$FLAVOUR"-*.tar
    mv "$ROOTFS.part" "$ROOTFS"
    echo "build.sh: root filesystem built in $(($(date +%s) - t0)) s"
else
    echo "build.sh: root filesystem from the cache: $ROOTFS"
fi

STAGE=$(mktemp -d "$CACHE/stage.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT INT TERM
tar -C "$STAGE" --numeric-owner -xpf "$ROOTFS"
# What apt, run from outside by mmdebstrap, left (apt itself is not installed),
# the info index, the install's logs and backups, and the host's resolv.conf and
# hostname (podman provides its own).
rm -rf "$STAGE"/etc/apt "$STAGE"/var/lib/apt "$STAGE"/var/cache/apt "$STAGE"/var/log/apt \
    "$STAGE"/usr/share/info/*
rm -f "$STAGE"/var/log/*.log "$STAGE"/var/cache/debconf/*-old "$STAGE"/var/lib/dpkg/*-old \
    "$STAGE"/etc/resolv.conf "$STAGE"/etc/hostname "$STAGE"/etc/machine-id

# Users: the front end's (hsmca) and the signer's (hsmca-signer), no login, no
# home, no password. The supervisor starts as root and each child switches down.
add_user() { # name uid comment
    grep -q "^$1:" "$STAGE/etc/passwd" && die "user $1 is already in the base system"
    echo "$1:x:$2:$2:$3:/nonexistent:/usr/sbin/nologin" >>"$STAGE/etc/passwd"
    echo "$1:x:$2:" >>"$STAGE/etc/group"
    [ ! -f "$STAGE/etc/shadow" ] || echo "$1:!:1::::::" >>"$STAGE/etc/shadow"
    [ ! -f "$STAGE/etc/gshadow" ] || echo "$1:!::" >>"$STAGE/etc/gshadow"
}
add_user hsmca-signer "$SIGNER_UID" "hsmca signer"
add_user hsmca-frontend "$FE_UID" "hsmca front end"

install -m 0755 "$BUILD/hsmca" "$STAGE/usr/bin/hsmca"
install -d -m 0755 "$STAGE/usr/libexec/hsmca" "$STAGE/etc/hsmca" "$STAGE/var/empty"
for f in $CHILDREN; do
    install -m 0755 "$f" "$STAGE/usr/libexec/hsmca/"
done
# The state directory, root's and traversable as hsmca.service's StateDirectory=:
# the signer's own directories (audit.dir, a SoftHSM token directory) go inside it.
# A volume mounted there (tmpfs, emptyDir) starts with this mode.
install -d -m 0711 "$STAGE/var/lib/hsmca"

# Every program's libraries must resolve inside the image, not just here.
for f in /usr/bin/hsmca $(for c in $CHILDREN; do echo "/usr/libexec/hsmca/${c##*/}"; done); do
    out=$(chroot "$STAGE" /usr/bin/ldd "$f" 2>&1) ||
        die "$f does not load in the image: $out"
    case "$out" in *"not found"*) die "$f: a library is missing from the image: $out" ;; esac
done
chroot "$STAGE" /usr/bin/hsmca version >/dev/null || die "hsmca version failed inside the image"

if [ "$DEMO" -eq 1 ]; then
    CMD='["dev", "--dir", "/var/lib/hsmca/dev", "--listen", "0.0.0.0:15012"]'
else
    CMD='["serve", "--config", "/etc/hsmca/hsmca.yaml"]'
fi
# USER 0: the supervisor starts as root only to switch each child to its own user
# (docs/SECURITY.md); run it as another user and the children share that user.
OLD_ID=$(podman image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)
tar -C "$STAGE" --numeric-owner -cf - . | podman import \
    --change 'ENTRYPOINT ["/usr/bin/hsmca"]' \
    --change "CMD $CMD" \
    --change 'USER 0:0' \
    --change 'WORKDIR /var/lib/hsmca' \
    --change 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'EXPOSE 15012' \
    --change 'STOPSIGNAL SIGTERM' \
    --change "LABEL org.opencontainers.image.title=hsmca" \
    --change "LABEL org.opencontainers.image.version=$VERSION" \
    --change "LABEL org.opencontainers.image.revision=$COMMIT" \
    - "$TAG" >/dev/null || die "podman import failed"

# The image this tag named before, unless a container still uses it.
if [ -n "$OLD_ID" ] && [ "$OLD_ID" != "$(podman image inspect --format '{{.Id}}' "$TAG")" ]; then
    podman image rm "$OLD_ID" >/dev/null 2>&1 || true
fi
SIZE=$(podman image inspect --format '{{.Size}}' "$TAG")
echo "build.sh: image $TAG: $((SIZE / 1000000)) MB ($SIZE bytes)"

#!/bin/sh
# crosscheck.sh GO SRC OUT WRITER - the audit log checked by an independent implementation.
# Builds auditcheck.go offline (GOPATH mode against Debian's golang-golang-x-mod-dev, no
# network, no module proxy) into OUT, then: WRITER writes a log with hsmca's audit/,
# auditcheck verifies it with Go's sumdb note and tlog packages and writes its own
# checkpoint and proofs, and WRITER verifies those. Fails if either side disagrees.
set -eu
GO=$1 SRC=$2 OUT=$3 WRITER=$4
GOSRC=/usr/share/gocode
if [ ! -x "$GO" ] && ! command -v "$GO" >/dev/null 2>&1; then
    echo "crosscheck: no Go toolchain ($GO): install golang-go (scripts/install-deps.sh)" >&2
    exit 1
fi
if [ ! -f "$GOSRC/src/golang.org/x/mod/sumdb/note/note.go" ]; then
    echo "crosscheck: no $GOSRC/src/golang.org/x/mod: install golang-golang-x-mod-dev" \
         "(scripts/install-deps.sh)" >&2
    exit 1
fi
mkdir -p "$OUT/gopath" "$OUT/gocache"
OUT=$(cd "$OUT" && pwd) # GOPATH entries must be absolute
rm -rf "$OUT/work"
mkdir -p "$OUT/work"
env GO111MODULE=off GOPATH="$OUT/gopath:$GOSRC" GOCACHE="$OUT/gocache" GOPROXY=off \
    GOFLAGS= GOENV=off CGO_ENABLED=0 HOME="$OUT" \
    "$GO" build -o "$OUT/auditcheck" "$SRC/auditcheck.go"
"$WRITER" write "$OUT/work"
"$OUT/auditcheck" "$OUT/work"
"$WRITER" check "$OUT/work"

#!/bin/sh
# Installs what is missing (Debian 12), builds hsmca and runs the development CA
# on the embedded default: SoftHSM2 token, CA key and root in ./hsmca-dev, server
# on 127.0.0.1:15012. Extra arguments go to `hsmca dev` (try --help).
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
cmake -S . -B build -DCMAKE_C_COMPILER=gcc >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target hsmca
exec ./build/hsmca dev --dir ./hsmca-dev "$@"

#!/bin/sh
# bench_shim.sh - does hsmca keep a slow token busy? (issue 8, the slow-token targets)
# The CA key is reached through tests/p11shim with `delay C_Sign MS` (default 20 ms,
# a network HSM's round trip) and pkcs11.sessions N (default 32): the token's ceiling
# is N * 1000 / MS signatures a second (1,600 for 32 x 20 ms).
#   1. `hsmca dev init` (ec-p256) on a free port; the module set to the shim, the
#      sessions to N, the rate limit raised (else it would be the figure);
#   2. closed loop: loadgen with 4 * N calls in flight for S seconds: certificates
#      a second against the ceiling (target: at least 90%);
#   3. open loop at 80% of the ceiling for S seconds: latency (target: p99 <= 60 ms).
# A benchmark: it prints figures and asserts nothing about timings.
#
# usage: bench_shim.sh [--bin build/hsmca] [--delay-ms 20] [--sessions 32] [--seconds 10]
set -u
bin=build/hsmca delay=20 sessions=32 seconds=10
while [ $# -gt 0 ]; do
    case $1 in
    --bin) bin=$2; shift 2 ;;
    --delay-ms) delay=$2; shift 2 ;;
    --sessions) sessions=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_shim: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
tests=$(dirname "$bin")/tests
loadgen=$tests/loadgen shim=$(cd "$tests" 2>/dev/null && pwd)/libp11shim.so
for f in "$bin" "$loadgen" "$shim"; do
    [ -e "$f" ] || { echo "bench_shim: $f missing: cmake --build build --target hsmca loadgen p11shim" >&2; exit 2; }
done
# shellcheck source=bench_server.sh
. "$(dirname "$0")/bench_server.sh"
bench_workdir bench-shim
port=$(free_port)
d=$work/ca
if ! "$bin" dev init --dir "$d" --ca-key ec-p256 --listen "127.0.0.1:$port" >"$work/init.log" 2>&1; then
    echo "bench_shim: hsmca dev init failed:" >&2
    cat "$work/init.log" >&2
    exit 1
fi
# The shim reads its rules from this file and writes its call counts beside it.
printf 'delay C_Sign %s\n' "$delay" >"$work/control"
: >"$work/counts"
chmod 666 "$work/counts" "$work/control"
# The shim's files reach it through pkcs11.env: the signer inherits nothing else.
sed -i -e "s|^  module: .*|  module: $shim|" -e "s/^  sessions: [0-9]*$/  sessions: $sessions/" \
    -e "s|^pkcs11:\$|pkcs11:\n  env:\n    P11SHIM_CONTROL: \"$work/control\"\n    P11SHIM_COUNTS: \"$work/counts\"|" \
    -e 's/^issuance:$/issuance:\n  rate_per_second: 1000000\n  rate_burst: 1000000/' "$d/hsmca.yaml"
"$bin" serve --config "$d/hsmca.yaml" >"$d/server.log" 2>&1 &
server=$!
wait_for "$d/server.log" "over TLS on" || exit 1

ceiling=$((sessions * 1000 / delay))
common="--dir $d --addr 127.0.0.1:$port --seconds $seconds --pods 200 --connections 8 --server-pid $server"
echo "== token: C_Sign + $delay ms through the shim, $sessions sessions: ceiling $ceiling signatures/s"
echo "== closed loop, $((4 * sessions)) calls in flight, $seconds s"
# shellcheck disable=SC2086 # common is split on purpose
"$loadgen" $common --concurrency $((4 * sessions)) >"$work/closed.txt" 2>&1
grep -v '^result ' "$work/closed.txt"
rate=$(sed -n 's/^result .*certs_per_s=\([0-9.]*\).*/\1/p' "$work/closed.txt")
open=$((ceiling * 8 / 10))
echo "== open loop at $open/s (80% of the ceiling), $seconds s"
# shellcheck disable=SC2086
"$loadgen" $common --rate "$open" --concurrency $((8 * sessions)) >"$work/open.txt" 2>&1
grep -v '^result ' "$work/open.txt"
p99=$(sed -n 's/^result .*p99_ms=\([0-9.]*\).*/\1/p' "$work/open.txt")
echo
python3 - "$rate" "$ceiling" "$p99" <<'EOF'
import sys
rate, ceiling, p99 = float(sys.argv[1] or 0), float(sys.argv[2]), sys.argv[3] or "?"
print("summary: %.0f certs/s of the token's %.0f = %.2f (target >= 0.90); p99 at 80%%: %s ms "
      "(target <= 60)" % (rate, ceiling, rate / ceiling, p99))
EOF

#!/bin/sh
# soak.sh - hsmca at half load for a long time (issue 8: "10 minutes at half load:
# RSS, fds and threads flat"). Not run by CI: it takes minutes and asserts nothing.
#
#   1. `hsmca dev init` a fresh dev CA (EC P-256) and `hsmca serve` it, the rate
#      limit raised as in tests/bench/bench_load.sh (else it would be the load);
#   2. the maximum rate: tests/bench/loadgen closed loop for --probe S seconds
#      (skipped with --rate R);
#   3. the soak: loadgen open loop at half that rate (or R) for --minutes M;
#   4. VmRSS, open descriptors and threads of every hsmca process (supervisor,
#      frontend, signer) right after a short warm-up and at the end, and the change.
#
# usage: scripts/soak.sh [--bin build/hsmca] [--minutes 10] [--rate R] [--probe 10]
#                        [--connections 16] [-- extra loadgen options]
set -u
bin=build/hsmca minutes=10 rate= probe=10 conns=16
while [ $# -gt 0 ]; do
    case $1 in
    --bin) bin=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --probe) probe=$2; shift 2 ;;
    --connections) conns=$2; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
loadgen=$(dirname "$bin")/tests/loadgen
for f in "$bin" "$loadgen"; do
    [ -x "$f" ] || { echo "soak: $f missing: cmake --build build --target hsmca loadgen" >&2; exit 2; }
done
# shellcheck source=../tests/bench/bench_server.sh
. "$(dirname "$0")/../tests/bench/bench_server.sh"
bench_workdir soak
port=$(free_port)
d=$work/dev
"$bin" dev init --dir "$d" --ca-key ec-p256 --listen "127.0.0.1:$port" >"$work/init.log" 2>&1 ||
    { cat "$work/init.log" >&2; exit 1; }
sed -i 's/^issuance:$/issuance:\n  rate_per_second: 1000000\n  rate_burst: 1000000/' "$d/hsmca.yaml"
"$bin" serve --config "$d/hsmca.yaml" >"$work/server.log" 2>&1 &
server=$!
wait_for "$work/server.log" "over TLS on" || exit 1

# The server's processes: the supervisor and its children.
pids() {
    echo "$server"
    for p in /proc/[0-9]*; do
        [ "$(awk '{print $4}' "$p/stat" 2>/dev/null)" = "$server" ] && echo "${p#/proc/}"
    done
}

# One line per process: name pid rss_kib fds threads.
sample() {
    for p in $(pids); do
        # The supervisor is `hsmca serve`; its children are hsmca-signer, hsmca-frontend.
        name=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null |
            awk '{n = $1; sub(/.*\//, "", n); print n == "hsmca" ? $2 : substr(n, 7)}')
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null)
        thr=$(awk '/^Threads:/ {print $2}' "/proc/$p/status" 2>/dev/null)
        fds=$(ls "/proc/$p/fd" 2>/dev/null | wc -l)
        echo "${name:-?} $p ${rss:-0} $fds ${thr:-0}"
    done
}

common="--dir $d --addr 127.0.0.1:$port --server-pid $server --connections $conns --pods 200"
if [ -z "$rate" ]; then
    echo "== soak: the maximum rate, closed loop for $probe s"
    # shellcheck disable=SC2086 # common is split on purpose
    "$loadgen" $common --seconds "$probe" --concurrency 64 "$@" 2>&1 | tee "$work/probe.txt" | grep -v '^loadgen:'
    max=$(sed -n 's/^result .* certs_per_s=\([0-9.]*\).*/\1/p' "$work/probe.txt")
    [ -n "$max" ] || { echo "soak: no rate measured" >&2; exit 1; }
    rate=$(echo "$max" | awk '{printf "%d", $1 / 2}')
fi
seconds=$(echo "$minutes" | awk '{printf "%d", $1 * 60}')
# A short warm-up at the soak's rate first, so that "start" is the steady state
# (allocator arenas, gRPC's threads, the connections), not the empty server.
# shellcheck disable=SC2086
"$loadgen" $common --seconds 5 --rate "$rate" --concurrency 256 "$@" >/dev/null 2>&1
sample >"$work/start.txt"
echo "== soak: open loop at $rate certs/s for $minutes min ($seconds s), $conns connections"
# shellcheck disable=SC2086
"$loadgen" $common --seconds "$seconds" --rate "$rate" --concurrency 256 "$@" 2>&1 | grep -v '^loadgen:'
sleep 2 # the last answers
sample >"$work/end.txt"
echo
echo "== soak: hsmca processes at the start and the end (VmRSS, open descriptors, threads)"
printf '%-10s %7s %13s %13s %9s %9s %9s %8s\n' process pid "RSS start" "RSS end" "fds start" "fds end" "thr start" "thr end"
while read -r name pid rss fds thr; do
    set -- $(awk -v p="$pid" '$2 == p {print $3, $4, $5}' "$work/end.txt")
    printf '%-10s %7s %9s KiB %9s KiB %9s %9s %9s %8s\n' "$name" "$pid" "$rss" "${1:-gone}" "$fds" "${2:-gone}" "$thr" "${3:-gone}"
done <"$work/start.txt"
echo "(load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"

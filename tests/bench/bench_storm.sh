#!/bin/sh
# bench_storm.sh - issue 8's storm target in one run: "20,000 requests from 2,000
# connections at once: nothing crashes, front-end RSS stays <= 256 MiB, every call ends
# (OK, RESOURCE_EXHAUSTED or UNAVAILABLE), and the retrying client has all 20,000
# certificates within 1.3 x (20,000 / the measured maximum rate) plus its backoff".
#   1. `hsmca dev init` a fresh dev CA (EC P-256), the rate limit raised as in
#      bench_load.sh (the default 1000/s would be the rate otherwise), any --set lines
#      added under `server:`; with --shim-ms D the token is tests/p11shim adding D ms
#      to every C_Sign, with --sessions S (default 32) sessions: a real HSM's pace,
#      slower than the front end (SoftHSM is about as fast as it);
#   2. the maximum rate R: `hsmca serve`, loadgen closed loop for --probe S seconds
#      (4 warm connections, 64 in flight or 4 per shim session, 100 pods), then the
#      server is stopped;
#   3. the storm on a fresh `hsmca serve` of the same token (so its VmHWM is the
#      storm's): loadgen --requests N --connections K --concurrency N --pods K --cold
#      --retry --max-rate R (istio-agent backoff: 0.5 s doubling to 60 s, jittered);
#      --warm: the K connections are made (one call each) before the timed phase, as
#      for connected proxies asking at once after a trust-bundle change; --threads T:
#      the load generator's threads (default 2: one thread cannot make 2,000 TLS
#      connections as fast as the server accepts them);
#   4. the server's exit status (crashes), and a summary line: time to the last
#      certificate, the backoff slept by the request answered last (the target's "its
#      backoff"), the target 1.3 x N / R + that backoff and the ratio, front-end and
#      signer VmHWM, outcomes.
# A benchmark: it asserts nothing about timings.
#
# usage: bench_storm.sh [--bin build/hsmca] [--requests 20000] [--connections 2000]
#                       [--probe 5] [--warm] [--threads 2] [--shim-ms D [--sessions 32]]
#                       [--set 'max_queued_requests: 4096']...
set -u
bin=build/hsmca requests=20000 conns=2000 probe=5 sets='' cold=--cold threads=2 shim_ms='' sessions=32
while [ $# -gt 0 ]; do
    case $1 in
    --bin) bin=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --connections) conns=$2; shift 2 ;;
    --probe) probe=$2; shift 2 ;;
    --set) sets="$sets  $2\n"; shift 2 ;;
    --warm) cold=; shift ;;
    --threads) threads=$2; shift 2 ;;
    --shim-ms) shim_ms=$2; shift 2 ;;
    --sessions) sessions=$2; shift 2 ;;
    -h | --help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_storm: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
tests=$(dirname "$bin")/tests
loadgen=$tests/loadgen shim=
[ -n "$shim_ms" ] && shim=$(cd "$tests" 2>/dev/null && pwd)/libp11shim.so
for f in "$bin" "$loadgen" ${shim:+"$shim"}; do
    [ -e "$f" ] || { echo "bench_storm: $f missing: cmake --build build --target hsmca loadgen p11shim" >&2; exit 2; }
done
# shellcheck source=tests/bench/bench_server.sh
# shellcheck disable=SC2154 # it sets $work
. "$(dirname "$0")/bench_server.sh"
bench_workdir bench-storm
port=$(free_port)
d=$work/dev
"$bin" dev init --dir "$d" --ca-key ec-p256 --listen "127.0.0.1:$port" >"$work/init.log" 2>&1 ||
    { cat "$work/init.log" >&2; exit 1; }
sed -i 's/^issuance:$/issuance:\n  rate_per_second: 1000000\n  rate_burst: 1000000/' "$d/hsmca.yaml"
if [ -n "$shim" ]; then
    printf 'delay C_Sign %s\n' "$shim_ms" >"$work/control"
    : >"$work/counts"
    chmod 666 "$work/counts" "$work/control"
    # The shim's files reach it through pkcs11.env: the signer inherits nothing else.
    sed -i -e "s|^  module: .*|  module: $shim|" -e "s/^  sessions: [0-9]*$/  sessions: $sessions/" \
        -e "s|^pkcs11:\$|pkcs11:\n  env:\n    P11SHIM_CONTROL: \"$work/control\"\n    P11SHIM_COUNTS: \"$work/counts\"|" \
        "$d/hsmca.yaml"
fi
if [ -n "$sets" ]; then
    if grep -q '^server:$' "$d/hsmca.yaml"; then
        sed -i "s/^server:\$/server:\n$sets/" "$d/hsmca.yaml"
    else
        printf 'server:\n%b' "$sets" >>"$d/hsmca.yaml"
    fi
fi

serve() {
    : >"$work/server.log"
    "$bin" serve --config "$d/hsmca.yaml" >"$work/server.log" 2>&1 &
    server=$!
    wait_for "$work/server.log" "over TLS on" || exit 1
}

# value KEY FILE: KEY's value on the loadgen's last "result" line.
value() {
    grep '^result ' "$2" | tail -1 | tr ' ' '\n' | sed -n "s/^$1=//p"
}

# In flight for the probe: 64 (bench_load.sh's), or 4 per session through the shim
# (bench_shim.sh's), enough to keep every session signing.
probe_conc=64
[ -n "$shim" ] && probe_conc=$((4 * sessions))
serve
grep -o 'limits: .*' "$work/server.log" | head -1
echo "== bench_storm: the maximum rate, closed loop for $probe s"
"$loadgen" --dir "$d" --addr "127.0.0.1:$port" --server-pid "$server" --seconds "$probe" \
    --connections 4 --concurrency "$probe_conc" --pods 100 2>&1 | tee "$work/probe.txt" | grep -v '^loadgen:'
rate=$(value certs_per_s "$work/probe.txt")
if [ -z "$rate" ] || [ "$rate" = 0.0 ]; then
    echo "bench_storm: no rate measured" >&2
    exit 1
fi
kill "$server"
wait "$server"
server=

serve
echo "== bench_storm: $requests requests from $conns ${cold:+cold }connections at once, retrying (R = $rate/s${shim:+; token: shim, C_Sign + $shim_ms ms, $sessions sessions})"
"$loadgen" --dir "$d" --addr "127.0.0.1:$port" --server-pid "$server" --requests "$requests" \
    --connections "$conns" --concurrency "$requests" --pods "$conns" --retry $cold \
    --threads "$threads" --timeout 60 --max-rate "$rate" 2>&1 | tee "$work/storm.txt" | grep -v '^loadgen:'
alive=yes
kill -0 "$server" 2>/dev/null || alive="NO (exited)"
kill "$server"
wait "$server"
st=$?
server=
# What the supervisor says when a child dies (cli/supervisor.c), before the stop.
died='killed by signal|exited with status|restarting (the )?(frontend|signer|front end)'
crashes=$(grep -c -E "$died" "$work/server.log")
refused=$(grep -c 'front end busy' "$work/server.log")
f=$work/storm.txt
echo
echo "== bench_storm summary ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo "R (closed loop, ${probe} s) $rate certs/s; storm: $(value ok "$f") of $requests OK," \
    "last at $(value last_s "$f") s; its backoff $(value backoff_last_s "$f") s;" \
    "target 1.3 x $requests / R + backoff = $(value target_s "$f") s," \
    "ratio $(echo "$(value last_s "$f") $(value target_s "$f")" | awk '$2 > 0 {printf "%.2f", $1 / $2}');" \
    "mean backoff per request $(value backoff_mean_s "$f") s; FE VmHWM $(value fe_hwm_mib "$f") MiB (bound 256)," \
    "signer $(value signer_hwm_mib "$f") MiB; $(sed -n 's/.* \([0-9]*\) retries).*/\1/p' "$f") retries"
# The server's CPU per certificate, front end + signer, in the storm and in the probe:
# what the storm costs the server beyond the closed loop, whoever else uses the cores.
echo "server CPU per certificate (front end + signer): storm $(value fe_cpu_us "$f") + $(value signer_cpu_us "$f") us," \
    "closed loop $(value fe_cpu_us "$work/probe.txt") + $(value signer_cpu_us "$work/probe.txt") us," \
    "ratio $(echo "$(value fe_cpu_us "$f") $(value signer_cpu_us "$f") $(value fe_cpu_us "$work/probe.txt") $(value signer_cpu_us "$work/probe.txt")" |
        awk '$3 + $4 > 0 {printf "%.2f", ($1 + $2) / ($3 + $4)}'); the load generator" \
    "$(value loadgen_cpu_us "$f") us in the storm, $(value loadgen_cpu_us "$work/probe.txt") us closed loop"
echo "$(grep '^outcomes' "$f"); server alive after the storm: $alive (stop status $st); server log lines" \
    "saying a child died or restarted: $crashes; 'front end busy' refusal lines: $refused (at most one per 10 s)"
grep -E "$died" "$work/server.log" | head -5 | cut -c1-240

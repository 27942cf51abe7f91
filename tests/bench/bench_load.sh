#!/bin/sh
# bench_load.sh - end-to-end issuance under load, per CA key type, in one run:
#   1. `hsmca dev init` a fresh dev CA (ec-p256, then rsa-2048) on a free port;
#   2. the raw C_Sign rate of its token and CA key, 1 and 2 threads
#      (`bench_signer --raw-only`; 2 threads = the dev config's 2 sessions);
#   3. raise the rate limit in DIR/hsmca.yaml (to 1,000,000/s: the default would be
#      the figure otherwise), `hsmca serve --config DIR/hsmca.yaml` on the existing
#      token, timing start to first certificate (one-call loadgens retried every
#      10 ms; one such call's own time on the running server beside it), and run
#      tests/bench/loadgen against it (its own figures: certs/s, latency, outcomes,
#      front-end and signer CPU per certificate, peak RSS);
#   4. when `cfssl` is on PATH: `cfssl serve` with a software key of the same type and
#      the same load (same CSRs, same concurrency; HTTPS with a P-256 server key,
#      HTTP/1.1 keep-alive, one call per connection), and the ratio hsmca/cfssl.
# Then one summary line per key type. A benchmark: it asserts nothing about timings.
#
# usage: bench_load.sh [--bin build/hsmca] [--seconds S] [--raw-seconds S]
#                      [--keys "ec-p256 rsa-2048"] [-- loadgen options...]
# loadgen options default to: --connections 4 --concurrency 64 --pods 100.
set -u
bin=build/hsmca seconds=10 raw_seconds=3 keys="ec-p256 rsa-2048"
while [ $# -gt 0 ]; do
    case $1 in
    --bin) bin=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --raw-seconds) raw_seconds=$2; shift 2 ;;
    --keys) keys=$2; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_load: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || set -- --connections 4 --concurrency 64 --pods 100
tests=$(dirname "$bin")/tests
loadgen=$tests/loadgen bench_signer=$tests/bench_signer
for f in "$bin" "$loadgen" "$bench_signer"; do
    [ -x "$f" ] || { echo "bench_load: $f missing: cmake --build build --target hsmca loadgen bench_signer" >&2; exit 2; }
done
conc=64 # the loadgen's concurrency, for cfssl's connections
prev=
for a in "$@"; do
    [ "$prev" = --concurrency ] && conc=$a
    prev=$a
done
# shellcheck source=bench_server.sh
. "$(dirname "$0")/bench_server.sh"
bench_workdir bench-load

stop_server() {
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    server=
}

# value KEY FILE: KEY's value on the loadgen's "result" line.
value() {
    sed -n "s/^result .*[ ]$1=\([^ ]*\).*/\1/p" "$2" | tail -1
}

summary=
for key in $keys; do
    d=$work/$key
    port=$(free_port)
    echo "== $key: dev CA in $d on 127.0.0.1:$port"
    if ! "$bin" dev init --dir "$d" --ca-key "$key" --listen "127.0.0.1:$port" >"$work/init-$key.log" 2>&1; then
        echo "bench_load: hsmca dev init failed:" >&2
        cat "$work/init-$key.log" >&2
        exit 1
    fi
    "$bench_signer" --raw-only --key "$key" --dir "$d" --seconds "$raw_seconds" >"$work/raw-$key.txt" 2>&1
    grep '^raw ' "$work/raw-$key.txt"
    raw2=$(sed -n 's/^raw key=.* threads=2 signs_per_s=\([0-9.]*\).*/\1/p' "$work/raw-$key.txt")

    sed -i 's/^issuance:$/issuance:\n  rate_per_second: 1000000\n  rate_burst: 1000000/' "$d/hsmca.yaml"
    # Start to first certificate: a one-call loadgen (1 pod, 1 cold connection),
    # started again every 10 ms until it has a certificate; then the same call on
    # the running server, which is the client's own share of that time.
    one="--dir $d --addr 127.0.0.1:$port --requests 1 --pods 1 --connections 1 --concurrency 1 --cold --csr-key ec-p256"
    t0=$(date +%s%N)
    "$bin" serve --config "$d/hsmca.yaml" >"$d/server.log" 2>&1 &
    server=$!
    # shellcheck disable=SC2086 # one is split on purpose
    until "$loadgen" $one >/dev/null 2>&1; do
        if [ $(($(date +%s%N) - t0)) -gt 60000000000 ] || ! kill -0 "$server" 2>/dev/null; then
            wait_for "$d/server.log" "over TLS on" || exit 1
            break
        fi
        sleep 0.01
    done
    t1=$(date +%s%N)
    # shellcheck disable=SC2086
    "$loadgen" $one >/dev/null 2>&1
    t2=$(date +%s%N)
    first_ms=$(((t1 - t0) / 1000000)) client_ms=$(((t2 - t1) / 1000000))
    echo "start to first certificate: $first_ms ms (hsmca serve started, then a one-call loadgen until it has a certificate; that loadgen alone on the running server: $client_ms ms)"
    "$loadgen" --dir "$d" --addr "127.0.0.1:$port" --seconds "$seconds" --csr-key ec-p256 \
        --server-pid "$server" "$@" 2>&1 | tee "$work/hsmca-$key.txt"
    stop_server
    ok=$(value certs_per_s "$work/hsmca-$key.txt")
    line="$key: start to first certificate $first_ms ms (client $client_ms ms); hsmca ${ok:-?} certs/s, p99 $(value p99_ms "$work/hsmca-$key.txt") ms, front end $(value fe_cpu_us "$work/hsmca-$key.txt") us + signer $(value signer_cpu_us "$work/hsmca-$key.txt") us CPU/cert; raw C_Sign (2 threads) ${raw2:-?}/s"
    [ -n "$ok" ] && [ -n "$raw2" ] && line="$line; hsmca/raw $(echo "$ok $raw2" | awk '{printf "%.2f", $1 / $2}')"

    if command -v cfssl >/dev/null 2>&1; then
        c=$work/cfssl-$key
        mkdir -p "$c"
        if [ "$key" = rsa-2048 ]; then kopt="-newkey rsa:2048"; else kopt="-newkey ec -pkeyopt ec_paramgen_curve:P-256"; fi
        # shellcheck disable=SC2086 # kopt is split on purpose
        openssl req -x509 $kopt -nodes -keyout "$c/ca-key.pem" -out "$c/ca.pem" \
            -subj "/CN=cfssl bench $key" -days 30 >/dev/null 2>&1
        # Its TLS server certificate, P-256, trusted by the load generator (--root).
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -keyout "$c/tls-key.pem" -out "$c/tls.pem" -subj /CN=127.0.0.1 \
            -addext subjectAltName=IP:127.0.0.1 -days 30 >/dev/null 2>&1
        cport=$(free_port)
        cfssl serve -ca "$c/ca.pem" -ca-key "$c/ca-key.pem" -address 127.0.0.1 -port "$cport" \
            -tls-cert "$c/tls.pem" -tls-key "$c/tls-key.pem" -loglevel 2 >"$c/serve.log" 2>&1 &
        server=$!
        python3 -c 'import socket, sys, time
for _ in range(600):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)' "$cport" || { echo "bench_load: cfssl serve not listening:" >&2; cat "$c/serve.log" >&2; exit 1; }
        echo "-- cfssl serve, software $key key, the same CSRs over HTTPS, $conc connections"
        "$loadgen" --cfssl "https://127.0.0.1:$cport" --root "$c/tls.pem" --seconds "$seconds" --concurrency "$conc" \
            --csr-key ec-p256 --frontend-pid "$server" 2>&1 | tee "$work/cfssl-$key.txt"
        stop_server
        cok=$(value certs_per_s "$work/cfssl-$key.txt")
        line="$line; cfssl ${cok:-?} certs/s"
        [ -n "$ok" ] && [ -n "$cok" ] && line="$line; hsmca/cfssl $(echo "$ok $cok" | awk '{printf "%.2f", $1 / $2}')"
    else
        line="$line; cfssl not installed: skipped"
    fi
    summary="$summary$line
"
done
echo
echo "== bench_load summary ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%s' "$summary"

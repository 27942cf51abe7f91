# bench_server.sh - sourced by the scripts that run an hsmca server for a measurement
# (tests/bench/bench_load.sh, bench_shim.sh, scripts/soak.sh): a scratch directory
# removed at exit with the server, a free port, and waiting for a log line.
#
#   . tests/bench/bench_server.sh
#   bench_workdir NAME      sets $work (mode 755: the signer drops to its own user and
#                           must reach DIR/tokens); at exit $server is killed, $work removed
#   free_port               prints a free TCP port on 127.0.0.1
#   wait_for FILE PATTERN   until FILE has PATTERN (60 s at most, or while $server
#                           lives); else prints NAME's failure and FILE's tail, returns 1

bench_workdir() {
    bench_name=$1
    base=${HSMCA_TEST_TMP:-/tmp}
    mkdir -p "$base"
    work=$(mktemp -d "$base/$bench_name.XXXXXX")
    chmod 755 "$work"
    server=
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
}

bench_cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$work"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 600 ] || ! kill -0 "$server" 2>/dev/null; then
            echo "$bench_name: server not ready; its log:" >&2
            tail -20 "$1" >&2
            return 1
        fi
        sleep 0.1
    done
}

#!/bin/sh
# Runs every libFuzzer target (tests/fuzz/fuzz_*.c) for a time budget each and prints,
# per target, the executions, the coverage (libFuzzer's cov and ft) and the crashes.
# A crash, leak, timeout or out-of-memory input is copied into the target's seed
# corpus (tests/fuzz/corpus/<target>/regress-<sha1>), so the seeded ctest run that CI
# makes replays it from then on: commit it with the fix. Exit status 1 when any target
# found something, 2 on bad usage.
#
#   scripts/fuzz-long.sh [--budget SECONDS] [--targets "csr tbs ..."] [--out DIR]
#                        [--build-dir DIR] [--no-build]
#
# Defaults: 600 s per target, every target, fuzz-out/ for the corpora and logs (kept
# between runs, so a second run starts from what the first found), build-fuzz/ built
# with clang as docs/DEVELOPMENT.md "Fuzzing" says. Runs one target at a time on one core.
set -eu
cd "$(dirname "$0")/.."

budget=600
targets=""
out=fuzz-out
build="build-fuzz"
do_build=1
while [ $# -gt 0 ]; do
    case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz-long.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
case "$budget" in
''|*[!0-9]*) echo "fuzz-long.sh: --budget needs whole seconds, not '$budget'" >&2; exit 2 ;;
esac
if [ -z "$targets" ]; then
    for f in tests/fuzz/fuzz_*.c; do
        t=$(basename "$f" .c); t=${t#fuzz_}
        [ -d "tests/fuzz/corpus/$t" ] && targets="$targets $t"
    done
fi

if [ "$do_build" = 1 ]; then
    cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DHSMCA_FUZZ=ON >/dev/null
    cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target fuzz_all >/dev/null
fi

found=0
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
for t in $targets; do
    bin="$build/tests/fuzz_$t"
    if [ ! -x "$bin" ]; then
        echo "fuzz-long.sh: no $bin (build with --target fuzz_all, or drop --no-build)" >&2
        exit 2
    fi
    mkdir -p "$out/$t/corpus" "$out/$t/artifacts"
    rm -f "$out/$t/artifacts"/* # this run's findings only (earlier ones are seeds now)
    log="$out/$t/log"
    echo "== fuzz_$t: $budget s (log: $log)"
    start=$(date +%s)
    # libFuzzer exits non-zero on a finding; the artifacts say what it found.
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$bin" -max_total_time="$budget" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/$t/artifacts/" \
        "$out/$t/corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1 || true
    secs=$(( $(date +%s) - start ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    n=0
    for a in "$out/$t/artifacts"/crash-* "$out/$t/artifacts"/leak-* \
             "$out/$t/artifacts"/timeout-* "$out/$t/artifacts"/oom-*; do
        [ -f "$a" ] || continue
        n=$((n + 1))
        seed="tests/fuzz/corpus/$t/regress-$(sha1sum "$a" | cut -c1-40)"
        if [ ! -f "$seed" ]; then
            cp "$a" "$seed"
            echo "   found $(basename "$a"): kept as $seed (a regression seed)"
        fi
    done
    [ "$n" -gt 0 ] && found=1
    printf '%-10s %6s %12s %7s %7s %8s\n' "$t" "$secs" "${execs:-?}" "${cov:-?}" "${ft:-?}" \
        "$n" >>"$summary"
done

echo
printf '%-10s %6s %12s %7s %7s %8s\n' target seconds executions cov ft findings
cat "$summary"
if [ "$found" = 1 ]; then
    echo "findings above: each is now a seed under tests/fuzz/corpus/<target>/regress-*;"
    echo "replay one with $build/tests/fuzz_<target> <file>, fix, and commit both"
    exit 1
fi
echo "no findings"

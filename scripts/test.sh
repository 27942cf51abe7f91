#!/bin/sh
# Installs what is missing (Debian 12), builds hsmca twice and runs the whole test
# suite on each build: clang with AddressSanitizer + UndefinedBehaviorSanitizer,
# then gcc with warnings as errors; in between, a short seeded run of each
# libFuzzer target on its seed corpus (tests/fuzz/). Every stage must pass.
# Output ends in ctest's summary of the gcc build.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
JOBS=$(nproc 2>/dev/null || echo 2)

echo "== ASan+UBSan build (clang) =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
      -DHSMCA_WERROR=ON -DHSMCA_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$JOBS"
ctest --test-dir build-asan --output-on-failure -j"$JOBS"

echo "== libFuzzer targets (clang), a short seeded run each =="
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DHSMCA_FUZZ=ON -DHSMCA_WERROR=ON >/dev/null
cmake --build build-fuzz -j"$JOBS" --target fuzz_all
ctest --test-dir build-fuzz -L fuzz --output-on-failure -j"$JOBS"

echo "== Release build (gcc, -Werror) =="
cmake -S . -B build -DCMAKE_C_COMPILER=gcc -DHSMCA_WERROR=ON >/dev/null
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS"

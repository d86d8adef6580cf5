#!/usr/bin/env bash
# Runs every test InferScope has on this machine: the main build's tests (C++, tools, Python), an
# ASan+UBSan build of the C++ tests, a TSan build of the buffer tests, a bounded fuzzing run, an
# install + find_package check, and a wheel (pip install .) installed into a fresh venv. GPU tests skip with their reason where there is no GPU.
# Ends with one line "N passed, N failed, N skipped"; exits non-zero when anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=${JOBS:-$(nproc)}
scripts/deps.sh || exit 1

PASSED=0; FAILED=0; SKIPPED=0; FAILURES=()
# run_ctest NAME BUILD_DIR [ctest args...]: runs ctest and adds its counts to the totals.
run_ctest() {
  local name=$1 dir=$2; shift 2
  echo "=== ctest ($name)"
  local log; log=$(mktemp)
  (cd "$dir" && ctest -j "$JOBS" --output-on-failure --timeout 900 "$@") 2>&1 | tee "$log"
  local total failed skipped
  total=$(sed -nE 's/.* tests failed out of ([0-9]+).*/\1/p' "$log" | tail -1)
  failed=$(sed -nE 's/.*, ([0-9]+) tests failed out of.*/\1/p' "$log" | tail -1)
  skipped=$(grep -cE '\*\*\*Skipped|Not Run' "$log" || true)
  if [ -z "$total" ] && grep -q "No tests were found" "$log"; then total=0; failed=0; fi
  total=${total:-0}; failed=${failed:-1}
  PASSED=$((PASSED + total - failed - skipped)); FAILED=$((FAILED + failed)); SKIPPED=$((SKIPPED + skipped))
  [ "$failed" -eq 0 ] || FAILURES+=("$name")
  rm -f "$log"
}
step_failed() { echo "FAILED: $1"; FAILED=$((FAILED + 1)); FAILURES+=("$1"); }

echo "=== build (RelWithDebInfo)"
if BUILD_DIR=build scripts/build.sh; then
  run_ctest main build -LE "gpu|pip"
  echo "=== GPU tests (label gpu): each skips with its reason when there is no GPU"
  run_ctest gpu build -L gpu -V
  # Alone, not beside the other tests: it is a Release build of its own using every core.
  echo "=== pip install . into a fresh venv (label pip)"
  run_ctest pip build -L pip
else
  step_failed "main build"
fi

echo "=== ASan+UBSan build of the C++ tests"
if BUILD_DIR=build-asan BUILD_TYPE=Debug scripts/build.sh -DINFERSCOPE_SANITIZE=address,undefined \
     -DINFERSCOPE_BUILD_BENCH=OFF -DINFERSCOPE_BUILD_PYTHON=OFF -DINFERSCOPE_BUILD_CUDA_SAMPLES=OFF; then
  # Tests that LD_PRELOAD the library (label preload) cannot run here: the sanitizer runtime must be the
  # first library of a process, and the programs they start are not instrumented. The browser checks (label
  # browser) spend their time in Chromium, which is not instrumented; the main build runs them, and here they
  # took 250 of their 300 s limit.
  ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest asan build-asan -LE "gpu|compile|python|bench|preload|browser"
else
  step_failed "asan build"
fi

echo "=== TSan build of the buffer tests"
if BUILD_DIR=build-tsan BUILD_TYPE=RelWithDebInfo TARGETS="test_ring test_session test_sampled_session" scripts/build.sh \
     -DINFERSCOPE_SANITIZE=thread -DINFERSCOPE_BUILD_BENCH=OFF -DINFERSCOPE_BUILD_PYTHON=OFF \
     -DINFERSCOPE_BUILD_SAMPLES=OFF -DINFERSCOPE_BUILD_CUDA_SAMPLES=OFF; then
  TSAN_OPTIONS=halt_on_error=1 run_ctest tsan build-tsan -L buffers
else
  step_failed "tsan build"
fi

if [ -x scripts/fuzz.sh ]; then
  echo "=== fuzzing (bounded)"
  # A fixed seed: the same inputs every run, so a red fuzz step means a change broke something.
  if FUZZ_SECONDS=${FUZZ_SECONDS:-30} FUZZ_SEED=${FUZZ_SEED:-1} scripts/fuzz.sh build-fuzz-ci; then PASSED=$((PASSED + 1)); else step_failed fuzz; fi
fi

echo "=== install + find_package(inferscope)"
if scripts/check-install.sh build; then PASSED=$((PASSED + 1)); else step_failed "install check"; fi

echo
[ ${#FAILURES[@]} -eq 0 ] || echo "failed steps: ${FAILURES[*]}"
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ]

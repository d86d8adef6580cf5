#!/usr/bin/env bash
# Everything that needs the GPU machine, from the repository root, in parts that each fit one device call
# each (the build stays on the machine between calls while it is warm):
#   scripts/gpu-all.sh tests    # Release build, every GPU-labelled test, the CPU suite on Python 3.12,
#                               # runtime/Python/system benchmarks
#   scripts/gpu-all.sh overhead # GPT-2 overhead (GPU collection, + Python tracing, torch.profiler) and the
#                               # planted-bottleneck programs through iscope-run and iscope-analyze
#   scripts/gpu-all.sh sampled  # sampled mode: its GPU test (planted slow steps caught and explained) and the
#                               # GPT-2 batch-1 overhead of sampled mode against no session (in-process A/B)
#   scripts/gpu-all.sh fixtures # small real dumps of a few planted programs for tests/fixtures/
#   scripts/gpu-all.sh analyzer # the first planted suite (primary, predicted vs measured saving) and
#                               # torch.profiler traces of three programs beside their own dumps (~6 min)
#   scripts/gpu-all.sh validate # the second suite, samples/validation (~6 min); ONLY_V limits it
#   scripts/gpu-all.sh overhead-table     # every overhead budget with its interval and verdict, one command
#                                         # (bench/gpu/overhead_table.py; <= 8.8 min with the build, which is only the
#                                         # Python module and the runtime: docs/benchmarks.md, "Current figures")
#   scripts/gpu-all.sh overhead-decompose # where full capture's cost goes (--decompose; ~7.5 min with the build)
#   (the overhead parts fit CALL_S seconds, default 525, build included: the table gets what the build leaves;
#   QUICK=1 runs their smoke test; TABLE_GROUPS=a,b runs only those groups: overhead_table.py --list names them; TABLE_ROUNDS=n sets every group's rounds)
#   (each part builds first unless the build is there: the two suites no longer fit one 10-minute call together)
# Logs and figures go to $OUT (default ./out-gpu).
set -u
START=$(date +%s)
PART=${1:-tests}
OUT=${OUT:-$PWD/out-gpu}
BUILD=${BUILD:-build-gpu}
PY=${PYTHON:-$(command -v python3)}
mkdir -p "$OUT"
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1); cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
export PYTHONUNBUFFERED=1

# build [TARGET...]: the Release build (everything, or only the targets named).
build() {
  local t0; t0=$(date +%s)
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PY" \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 &&
    ninja -C "$BUILD" -j"$(nproc)" "$@" >> "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
}

if [ "$PART" = tests ]; then
  build
  (cd "$BUILD" && ctest -L gpu -V --timeout 300) > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests rc=$?"
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|tests failed|kernels linked|SKIP|skipped:" "$OUT/gpu-tests.log" | tail -30
  (cd "$BUILD" && ctest -LE "gpu|compile" -j8 --output-on-failure --timeout 300) > "$OUT/cpu-tests.log" 2>&1
  echo "cpu tests on the device host (Python $($PY -c 'import sys;print(sys.version.split()[0])')) rc=$?"
  grep -E "tests passed|tests failed|\*\*\*Failed" "$OUT/cpu-tests.log" | tail -10
  "$BUILD/bench/runtime/bench_scope" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_min_time=0.3s > "$OUT/bench_scope.txt" 2>&1
  grep -E "median|Benchmark" "$OUT/bench_scope.txt"
  "$BUILD/bench/runtime/bench_sampling" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    > "$OUT/bench_sampling.txt" 2>&1
  grep -E "median" "$OUT/bench_sampling.txt"
  PYTHONPATH="$BUILD/python" "$PY" bench/python_overhead.py --rounds 21 > "$OUT/python_overhead.txt" 2>&1
  tail -12 "$OUT/python_overhead.txt"
  for b in "$BUILD"/bench/system/*bench*; do [ -x "$b" ] && "$b" > "$OUT/system_bench.txt" 2>&1 && tail -12 "$OUT/system_bench.txt"; done
  ls "$BUILD"/bench/analyze/ 2>/dev/null | head -3
fi

if [ "$PART" = overhead ]; then
  [ -x "$BUILD/tools/iscope-run/iscope-run" ] || build
  RUN="$BUILD/tools/iscope-run/iscope-run"
  "$RUN" -q -o /tmp/gpt2-bench.iscope -- "$PY" bench/gpu/gpt2_overhead.py --mode inferscope --batches 1,32 \
    --rounds ${ROUNDS:-10} --sets "kernel;default;default+python;default+python_full" > "$OUT/gpt2_inferscope.txt" 2>&1
  echo "gpt2 inferscope rc=$?"; grep -E "^\||^##|^#" "$OUT/gpt2_inferscope.txt"
  "$PY" bench/gpu/gpt2_overhead.py --mode torch-profiler --batches 1 --rounds ${ROUNDS:-10} > "$OUT/gpt2_torch.txt" 2>&1
  echo "gpt2 torch.profiler rc=$?"; grep -E "^\||^##" "$OUT/gpt2_torch.txt"
  if [ -x scripts/planted-bottlenecks.sh ]; then
    BUILD_DIR="$BUILD" PYTHON="$PY" scripts/planted-bottlenecks.sh "$OUT/planted" > "$OUT/planted.txt" 2>&1
    echo "planted rc=$?"; tail -25 "$OUT/planted.txt"
  fi
fi

if [ "$PART" = sampled ]; then
  [ -x "$BUILD/tools/iscope-run/iscope-run" ] || build
  (cd "$BUILD" && ctest -L sampled -V --timeout 300) > "$OUT/sampled-tests.log" 2>&1
  echo "sampled tests rc=$?"
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|tests failed|evidence:|sampled:|planted=|SKIP|skipped:" "$OUT/sampled-tests.log" | tail -30
  # Not under iscope-run: the benchmark starts and stops its own sessions.
  PYTHONPATH="$BUILD/python" "$PY" bench/gpu/gpt2_overhead.py --mode sampled --batches ${BATCHES:-1} \
    --rounds ${ROUNDS:-10} > "$OUT/gpt2_sampled.txt" 2>&1
  echo "gpt2 sampled rc=$?"; grep -E "^\||^##|^#" "$OUT/gpt2_sampled.txt"
fi

if [ "$PART" = analyzer ]; then
  [ -x "$BUILD/tools/iscope-run/iscope-run" ] || build
  BUILD_DIR="$BUILD" PYTHON="$PY" AB_ROUNDS=${AB_ROUNDS:-5} scripts/planted-bottlenecks.sh "$OUT/planted" \
    > "$OUT/planted.txt" 2>&1
  echo "planted rc=$?"; tail -12 "$OUT/planted.txt"
  PYTHONPATH="$PWD/$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" timeout 200 "$PY" scripts/record-kineto-traces.py --out "$OUT/kineto" --iscope-analyze "$BUILD/tools/iscope-analyze/iscope-analyze" --iscope-run "$BUILD/tools/iscope-run/iscope-run" \
    > "$OUT/kineto.txt" 2>&1
  echo "kineto rc=$?"; grep -v Warning "$OUT/kineto.txt" | tail -24
fi

if [ "$PART" = validate ]; then
  [ -x "$BUILD/tools/iscope-run/iscope-run" ] || build
  ONLY=${ONLY_V:-} BUILD_DIR="$BUILD" PYTHON="$PY" AB_ROUNDS=${AB_ROUNDS:-5} WORK="$BUILD/validate" \
    scripts/validate-unseen.sh "$OUT/validate" > "$OUT/validate.txt" 2>&1
  echo "validate rc=$?"; tail -16 "$OUT/validate.txt"
fi

if [ "$PART" = fixtures ]; then
  [ -x "$BUILD/tools/iscope-run/iscope-run" ] || build
  mkdir -p "$OUT/fixtures"
  ONLY=${FIXTURES:-"sync_bound h2d_bound launch_bound"} WORK="$BUILD/fixtures" BUILD_DIR="$BUILD" PYTHON="$PY" \
    scripts/planted-bottlenecks.sh > "$OUT/fixtures.txt" 2>&1
  tail -6 "$OUT/fixtures.txt"
  for f in "$BUILD"/fixtures/*.iscope; do
    # Small enough to live in the repository (CI reads them on every run).
    [ "$(stat -c %s "$f")" -le $((3 * 1024 * 1024)) ] && cp "$f" "$OUT/fixtures/planted_$(basename "$f")"
  done
  ls -la "$OUT/fixtures"
fi

if [ "$PART" = overhead-table ] || [ "$PART" = overhead-decompose ]; then
  # In-process sessions only (no iscope-run): the Python module and the runtime it loads are all it needs.
  PKG="$BUILD/python/inferscope_py"
  ls "$PKG"/__init__.py "$PKG"/_native*.so > /dev/null 2>&1 || build inferscope_py
  BUDGET=$(( ${CALL_S:-525} - ($(date +%s) - START) - 15 ))
  [ "$PART" = overhead-decompose ] && MODE=--decompose || MODE=
  echo "$PART: time budget ${BUDGET} s"
  # Everything to $OUT/$PART.txt; here the progress and the table as they come (the table last).
  PYTHONPATH="$BUILD/python" "$PY" bench/gpu/overhead_table.py $MODE ${QUICK:+--quick} \
    ${TABLE_GROUPS:+--groups "$TABLE_GROUPS"} ${TABLE_ROUNDS:+--rounds "$TABLE_ROUNDS"} --budget-s "$BUDGET" \
    --json "$OUT/$PART.json" 2>&1 | tee "$OUT/$PART.txt" | grep --line-buffered -E "^\||^#|^- |^##|Error"
  echo "$PART rc=${PIPESTATUS[0]}"
fi

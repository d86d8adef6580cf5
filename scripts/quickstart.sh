#!/usr/bin/env bash
# The first five minutes on a fresh Debian 12 machine: install what the first report needs, build only that (the
# tools, the runtime library and the sample they profile), profile the bundled multi-threaded C++ sample and show
# what InferScope found. The tests are not built here: scripts/test.sh builds them in its own tree (build/), so
# this build (build-quickstart/: Release, no tests, benchmarks, Python module or CUDA samples, files compiled in
# batches, cmake/UnityBuild.cmake) never changes its settings. docs/quickstart-timing.md has what this costs on
# 2 cores and how it was measured.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh first-report
BUILD=${BUILD_DIR:-build-quickstart}
build() {
  BUILD_DIR=$BUILD BUILD_TYPE=${BUILD_TYPE:-Release} TARGETS="iscope-run iscope-analyze inferscope sample_cpp_server" \
    scripts/build.sh -DINFERSCOPE_BUILD_TESTS=OFF -DINFERSCOPE_BUILD_BENCH=OFF -DINFERSCOPE_BUILD_PYTHON=OFF \
    -DINFERSCOPE_BUILD_CUDA_SAMPLES=OFF "$@"
}
if ! build -DCMAKE_UNITY_BUILD=ON "$@"; then
  # Two files of one batch defining the same file-local name break a unity build only (cmake/UnityBuild.cmake
  # lists the known ones): the first report still comes, from a build of one file at a time.
  echo "=== the batched build failed (see cmake/UnityBuild.cmake); building one file at a time"
  build -DCMAKE_UNITY_BUILD=OFF "$@"
fi
OUT=${OUT:-$BUILD/quickstart}
mkdir -p "$OUT"
echo "=== profiling samples/cpp_server under InferScope"
"$BUILD/tools/iscope-run/iscope-run" -o "$OUT/server.iscope" -- "$BUILD/samples/cpp_server/sample_cpp_server" --requests 512
echo "=== iscope-analyze $OUT/server.iscope --summary"
"$BUILD/tools/iscope-analyze/iscope-analyze" "$OUT/server.iscope" --summary
if "$BUILD/tools/iscope-analyze/iscope-analyze" "$OUT/server.iscope" -o "$OUT/report.md" 2>/dev/null; then
  echo "=== what InferScope found (the whole report: $OUT/report.md)"
  # The report's top: the latency, the primary cause, what to do first and the first finding.
  sed -n '1,/^### 2\./p' "$OUT/report.md" | head -n 40
fi

#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build, profile the bundled
# multi-threaded C++ sample and show what InferScope found.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
BUILD_DIR=build scripts/build.sh
OUT=${OUT:-build/quickstart}
mkdir -p "$OUT"
echo "=== profiling samples/cpp_server under InferScope"
if [ -x build/tools/iscope-run/iscope-run ]; then
  build/tools/iscope-run/iscope-run -o "$OUT/server.iscope" -- build/samples/cpp_server/sample_cpp_server --requests 512
else
  INFERSCOPE_ENABLE=1 INFERSCOPE_OUTPUT="$OUT/server.iscope" build/samples/cpp_server/sample_cpp_server --requests 512
fi
echo "=== iscope-analyze $OUT/server.iscope --summary"
build/tools/iscope-analyze/iscope-analyze "$OUT/server.iscope" --summary
if build/tools/iscope-analyze/iscope-analyze "$OUT/server.iscope" -o "$OUT/report.md" 2>/dev/null; then
  echo "=== report: $OUT/report.md"
  cat "$OUT/report.md"
fi

#!/usr/bin/env bash
# Builds what recording on the GPU machine needs, once per device call (the runtime, the Python module,
# iscope-run, iscope-analyze; no tests): Release, into $BUILD (default build-gpu), quietly, its log
# in $WORK/build.log. Sourced by scripts/gpu-suite.sh and scripts/gpu-live-serving.sh; exits on a failed build.
BUILD=${BUILD:-build-gpu}
PY=${PYTHON:-$(command -v python3)}
WORK=${WORK:-/tmp/suite}
mkdir -p "$WORK"
if [ ! -x "$BUILD/tools/iscope-analyze/iscope-analyze" ]; then
  _t0=$(date +%s)
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PY" -DINFERSCOPE_BUILD_TESTS=OFF \
    -DINFERSCOPE_BUILD_BENCH=OFF -DINFERSCOPE_BUILD_SAMPLES=OFF -DINFERSCOPE_BUILD_CUDA_SAMPLES=OFF > "$WORK/build.log" 2>&1 &&
    ninja -C "$BUILD" -j"$(nproc)" >> "$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - _t0 )) s"
fi

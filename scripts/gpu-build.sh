#!/usr/bin/env bash
# What every GPU device call starts with, sourced by scripts/gpu-suite.sh, gpu-live-serving.sh and gpu-try.sh:
# $OUT (default ./out-gpu) and $WORK (/tmp/suite) made, the device named on stdout, what recording needs built once
# per call (the runtime, the Python module, iscope-run, iscope-analyze; no tests: Release, into $BUILD, default
# build-gpu, quietly, its log in $WORK/build.log; exits on a failed build), and the built Python package first on
# PYTHONPATH, unbuffered.
OUT=${OUT:-$PWD/out-gpu}
BUILD=${BUILD:-build-gpu}
PY=${PYTHON:-$(command -v python3)}
WORK=${WORK:-/tmp/suite}
mkdir -p "$OUT" "$WORK"
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"
if [ ! -x "$BUILD/tools/iscope-analyze/iscope-analyze" ]; then
  _t0=$(date +%s)
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PY" -DINFERSCOPE_BUILD_TESTS=OFF \
    -DINFERSCOPE_BUILD_BENCH=OFF -DINFERSCOPE_BUILD_SAMPLES=OFF -DINFERSCOPE_BUILD_CUDA_SAMPLES=OFF > "$WORK/build.log" 2>&1 &&
    ninja -C "$BUILD" -j"$(nproc)" >> "$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - _t0 )) s"
fi
for d in "$BUILD/python" "$BUILD/bindings/python"; do
  [ -d "$d" ] && export PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}"
done
export PYTHONUNBUFFERED=1

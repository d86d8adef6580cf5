#!/usr/bin/env bash
# GPU collector checks on a machine with an NVIDIA GPU (the device machine), from the repository root:
#   scripts/gpu-cupti-tests.sh            # build, CUPTI/iscope-run tests incl. label gpu, fixture, benchmark
#   SKIP_BENCH=1 scripts/gpu-cupti-tests.sh
# Results go to $OUT (default ./out-gpu): ctest.log, cuda_sample.iscope (the committed fixture
# tests/fixtures/cuda_sample.iscope comes from here), cuda_sample_summary.txt, bench_*.txt.
set -u
OUT=${OUT:-$PWD/out-gpu}
BUILD=${BUILD:-build-gpu}
BENCH_ROUNDS=${BENCH_ROUNDS:-15}
BENCH_BATCHES=${BENCH_BATCHES:-1 32}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then PY=/opt/torch/.venv/bin/python3; else PY=python3; fi
fi
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt" 2>&1
echo "device: $(cat "$OUT/device.txt")"

t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERSCOPE_BUILD_BENCH=OFF -DINFERSCOPE_BUILD_PYTHON=OFF \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
ninja -C "$BUILD" -j"$(nproc)" inferscope iscope-run iscope-analyze sample_cuda_infer sample_cpp_server iscope_run_child \
  test_gpu_cuda_sample test_cupti_translate test_cupti_degrade test_iscope_run test_cuda_fixture >> "$OUT/build.log" 2>&1 \
  || { tail -60 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"

(cd "$BUILD" && ctest -R "cupti|iscope_run|cuda" -V --output-on-failure) > "$OUT/ctest.log" 2>&1
echo "ctest rc=$?"
grep -E "^[0-9]+/[0-9]+ Test|kernels linked|status:|tests passed|skipped:" "$OUT/ctest.log"

# A small real dump for the CI fixture (tests/fixtures/cuda_sample.iscope).
"$BUILD/tools/iscope-run/iscope-run" -q -o "$OUT/cuda_sample.iscope" -- "$BUILD/samples/cuda_infer/sample_cuda_infer" --kernels 200
"$BUILD/tools/iscope-analyze/iscope-analyze" "$OUT/cuda_sample.iscope" > "$OUT/cuda_sample_summary.txt" 2>&1
ls -la "$OUT/cuda_sample.iscope"
if [ -f tests/fixtures/cuda_sample.iscope ] || cp "$OUT/cuda_sample.iscope" tests/fixtures/cuda_sample.iscope 2>/dev/null; then
  (cd "$BUILD" && ctest -R test_cuda_fixture --output-on-failure) | grep -E "Test #|passed"
fi

[ "${SKIP_BENCH:-0}" = 1 ] && exit 0
for b in $BENCH_BATCHES; do
  timeout 300 "$BUILD/tools/iscope-run/iscope-run" -q --no-python -o /tmp/iscope-bench.iscope -- \
    "$PY" bench/gpu/gpt2_overhead.py --mode inferscope --batches "$b" --rounds "$BENCH_ROUNDS" > "$OUT/bench_inferscope_b$b.txt" 2>&1
  cat "$OUT/bench_inferscope_b$b.txt" | grep -v "^$" | tail -8
  timeout 200 "$PY" bench/gpu/gpt2_overhead.py --mode torch-profiler --batches "$b" --rounds "$BENCH_ROUNDS" \
    > "$OUT/bench_torch_b$b.txt" 2>&1
  cat "$OUT/bench_torch_b$b.txt" | grep -v "^$" | grep -v Warning | tail -6
done

#!/usr/bin/env bash
# GPU collector checks on a machine with an NVIDIA GPU (the device machine), from the repository root:
#   scripts/gpu-cupti-tests.sh            # build, CUPTI/iscope-run tests incl. label gpu, fixture, benchmark
#   SKIP_BENCH=1 scripts/gpu-cupti-tests.sh
# Results go to $OUT (default ./out-gpu): ctest.log; cuda_sample.iscope (iscope-run) and cuda_sample_env.iscope
# (INFERSCOPE_ENABLE in-process), from which tests/fixtures/cuda_sample.iscope is taken; summary.txt;
# bench_b<batch>.txt (InferScope activity sets and torch.profiler on the GPT-2 step).
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
S="$OUT/summary.txt"
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)" | tee "$S"

t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERSCOPE_BUILD_BENCH=OFF -DINFERSCOPE_BUILD_PYTHON=OFF \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 > /tmp/iscope-build.log 2>&1 \
  || { tail -40 /tmp/iscope-build.log; exit 1; }
ninja -C "$BUILD" -j"$(nproc)" inferscope iscope-run iscope-analyze sample_cuda_infer sample_cpp_server iscope_run_child \
  test_gpu_cuda_sample test_cupti_translate test_cupti_degrade test_iscope_run test_cuda_fixture >> /tmp/iscope-build.log 2>&1 \
  || { tail -60 /tmp/iscope-build.log; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"

(cd "$BUILD" && ctest -R "cupti|iscope_run|cuda" -V --output-on-failure) > "$OUT/ctest.log" 2>&1
echo "ctest rc=$?"
grep -E "^[0-9]+/[0-9]+ Test|kernels linked|status:|tests passed|skipped:|ERROR|values:" "$OUT/ctest.log" | head -40

# Small real dumps for the CI fixture (tests/fixtures/cuda_sample.iscope), through both start paths.
LIB=$(ls "$BUILD"/lib/runtime/libinferscope.so.*.*.* | head -1)
SAMPLE="$BUILD/samples/cuda_infer/sample_cuda_infer"
"$BUILD/tools/iscope-run/iscope-run" -q -o "$OUT/cuda_sample.iscope" -- "$SAMPLE" --kernels 200; echo "iscope-run sample rc=$?" | tee -a "$S"
INFERSCOPE_ENABLE=1 INFERSCOPE_OUTPUT="$OUT/cuda_sample_env.iscope" "$SAMPLE" --kernels 200; echo "env sample rc=$?" | tee -a "$S"
for f in cuda_sample cuda_sample_env; do
  "$BUILD/tools/iscope-analyze/iscope-analyze" "$OUT/$f.iscope" >> "$S" 2>&1
done
grep -E "^- (status|records|cupti)|rc=" "$S"
if ! grep -q "iscope-run sample rc=0" "$S" && command -v gdb > /dev/null; then
  LD_PRELOAD="$LIB" CUDA_INJECTION64_PATH="$LIB" INFERSCOPE_ENABLE=1 INFERSCOPE_OUTPUT=/tmp/gdb.iscope \
    gdb -batch -ex run -ex bt -ex "thread apply all bt 8" --args "$SAMPLE" --kernels 200 >> "$S" 2>&1
  grep -A30 "SIGSEGV" "$S" | head -40
fi
mkdir -p tests/fixtures && cp "$OUT/cuda_sample.iscope" tests/fixtures/cuda_sample.iscope
(cd "$BUILD" && ctest -R test_cuda_fixture --output-on-failure) | grep -E "Test #|passed|ERROR|values"

[ "${SKIP_BENCH:-0}" = 1 ] && exit 0
for b in $BENCH_BATCHES; do
  timeout 240 "$BUILD/tools/iscope-run/iscope-run" -q --no-python -o /tmp/iscope-bench.iscope -- \
    "$PY" bench/gpu/gpt2_overhead.py --mode inferscope --batches "$b" --rounds "$BENCH_ROUNDS" > "$OUT/bench_b$b.txt" 2>&1
  echo "bench inferscope rc=$?" >> "$OUT/bench_b$b.txt"
  "$BUILD/tools/iscope-analyze/iscope-analyze" /tmp/iscope-bench.iscope 2>&1 | grep -E "^- (status|records|dropped|cupti)" >> "$OUT/bench_b$b.txt"
  timeout 150 "$PY" bench/gpu/gpt2_overhead.py --mode torch-profiler --batches "$b" --rounds "$BENCH_ROUNDS" \
    2>&1 | grep -v -i warn >> "$OUT/bench_b$b.txt"
  grep -v "^$" "$OUT/bench_b$b.txt" | grep -E "^\||^##|rc=|^- "
done

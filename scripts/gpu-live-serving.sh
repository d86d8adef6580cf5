#!/usr/bin/env bash
# The live serving metrics' evidence (docs/live.md, "Serving metrics"), recorded on the GPU machine in one device
# call: two serving programs of samples/serving under iscope-run, small enough to keep as fixtures (no CUPTI, Python
# calls 6 frames deep: the meter reads the Python calls alone), each printing its own timers; and the continuous-
# batching engine recorded whole (mode=full), whose default capture kept only its warm-up pass (docs/serving-suite.md).
# The recordings are replayed through the live tap here, not there: the GPU machine has no cpp-httplib to serve the
# page (tests/live/live_replay DUMP prints what /data and /metrics would have said).
#
#   OUT=out scripts/gpu-live-serving.sh       # then: build/tests/live/live_replay out/live_generate.iscope
set -u
. "$(dirname "$0")/gpu-build.sh"  # $OUT, $WORK, the device line, the build, PYTHONPATH
run=$BUILD/tools/iscope-run/iscope-run
small=(--set cupti=false --set python_max_depth=6)
timeout 150 "$run" -q "${small[@]}" -o "$OUT/live_generate.iscope" -- \
  python3 samples/serving/hf_generate_streamer.py --fixed --calls 6 > "$OUT/live_generate.log" 2>&1
echo "live_generate: rc $? $(tail -1 "$OUT/live_generate.log")"
timeout 150 "$run" -q "${small[@]}" -o "$OUT/live_batcher.iscope" -- \
  python3 samples/serving/aiohttp_batcher.py --requests 3000 --warmup 300 > "$OUT/live_batcher.log" 2>&1
echo "live_batcher: rc $? $(tail -1 "$OUT/live_batcher.log")"
timeout 200 "$run" -q --set mode=full -o "$WORK/cb_full.iscope" -- \
  python3 samples/serving/continuous_batching.py > "$OUT/cb_full.log" 2>&1
echo "cb_full: rc $? $(tail -1 "$OUT/cb_full.log")"
timeout 120 "$BUILD/tools/iscope-analyze/iscope-analyze" "$WORK/cb_full.iscope" --json "$OUT/cb_full.json" -o "$OUT/cb_full.md" \
  > "$OUT/cb_full.analyze.log" 2>&1
echo "cb_full analysed: rc $?; $(head -3 "$OUT/cb_full.md" | tail -1 | cut -c1-200)"
xz -T0 -6 < "$WORK/cb_full.iscope" | split -b 15M -a 1 - "$OUT/cb_full.iscope.xz."
ls -la "$OUT"

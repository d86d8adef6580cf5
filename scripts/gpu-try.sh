#!/usr/bin/env bash
# iscope-run --try on the GPU machine, in one device call (docs/try.md, "Checked on a GPU"): the two programs of
# samples/try, each measured by --try with the knob its report suggests, and by its own in-process A/B of the same
# change (windows of the two settings alternating in one process), the independent measurement --try is checked
# against. Everything lands in $OUT: each --try's stderr and result JSON, each A/B's last lines, and the baseline
# reports (the predictions).
#
#   OUT=out scripts/gpu-try.sh              # env: ROUNDS (pairs per --try, default 4), ONLY (a subset of
#                                           # "dataloader fp32_gemm refused"), BATCHES (dataloader_bound's, default 96)
set -u
. "$(dirname "$0")/gpu-build.sh"  # $OUT, $WORK, the device line, the build, PYTHONPATH
run=$BUILD/tools/iscope-run/iscope-run
rounds=${ROUNDS:-4}
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
try_one() {  # name, program (with its arguments, one word), knobs...
  local name=$1 prog=$2
  shift 2
  local args=()
  for k in "$@"; do args+=(--try "$k"); done
  # shellcheck disable=SC2086  # the program's arguments, split
  timeout 280 "$run" "${args[@]}" --try-rounds "$rounds" -o "$WORK/$name.iscope" -- python3 samples/try/$prog \
    > "$OUT/$name.try.log" 2>&1
  echo "$name --try: rc $?"
  grep -v "^{" "$OUT/$name.try.log" | tail -8
  cp "$WORK/$name.try.json" "$OUT/" 2>/dev/null
  "$BUILD/tools/iscope-analyze/iscope-analyze" "$WORK/$name.try/base.1.iscope" -o "$OUT/$name.base.md" > /dev/null 2>&1
}
if want dataloader; then
  try_one dataloader "dataloader_bound.py --batches ${BATCHES:-96}" num_workers=8 persistent_workers=true
  timeout 120 python3 samples/try/dataloader_bound.py --ab 6 > "$OUT/dataloader.ab.log" 2>&1
  echo "dataloader --ab: rc $? $(grep '^AB' "$OUT/dataloader.ab.log")"
fi
if want fp32_gemm; then
  try_one fp32_gemm fp32_gemm.py allow_tf32=true
  timeout 120 python3 samples/try/fp32_gemm.py --ab 10 > "$OUT/fp32_gemm.ab.log" 2>&1
  echo "fp32_gemm --ab: rc $? $(grep '^AB' "$OUT/fp32_gemm.ab.log")"
fi
if want refused; then  # a knob that does not apply: a DataLoader knob on the GEMM program, refused after one run
  timeout 120 "$run" --try num_workers=4 -o "$WORK/refused.iscope" -- python3 samples/try/fp32_gemm.py --steps 200 \
    > "$OUT/refused.try.log" 2>&1
  echo "refused: rc $? $(grep -i refused "$OUT/refused.try.log" | tail -1)"
fi
ls -la "$OUT"

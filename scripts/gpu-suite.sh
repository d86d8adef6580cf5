#!/usr/bin/env bash
# The unseen-program suite on the GPU machine, in one device call: builds what recording needs (the runtime, the
# Python module, iscope-run, iscope-analyze; no tests), records the parts named (scripts/record-suite.sh, without
# the plain re-runs), analyses every dump there (iscope-analyze --json and -o .md), and packs what comes back into
# at most 8 files under $OUT: results.tar.gz (logs, reports, the record-suite summaries) and the dumps as
# dumps.tar.xz split into 15 MiB parts (the device tool returns files of 16 MiB at most).
#
#   scripts/gpu-suite.sh serving            # or: advice try   (several parts run in order, sharing BUDGET_S)
#   env: OUT (default ./out-gpu), BUILD (default build-gpu), BUDGET_S (default 540: seconds for all parts, the build
#        included), AB_ROUNDS, ONLY (as record-suite.sh)
set -u
START=$(date +%s)
. "$(dirname "$0")/gpu-build.sh"  # $OUT, $WORK, the device line, the build
for part in "$@"; do
  left=$(( ${BUDGET_S:-540} - ($(date +%s) - START) - 40 ))
  [ "$left" -gt 30 ] || { echo "gpu-suite: no time left for $part"; continue; }
  BUILD=$BUILD BUDGET_S=$left PLAIN=0 scripts/record-suite.sh "$part" "$WORK/$part" 2>&1 | tee "$WORK/$part.summary.txt" | tail -20
done
analyze=$BUILD/tools/iscope-analyze/iscope-analyze
for d in "$WORK"/*/*.iscope; do
  [ -f "$d" ] || continue
  timeout 60 "$analyze" "$d" --json "${d%.iscope}.json" -o "${d%.iscope}.md" > "${d%.iscope}.analyze.log" 2>&1
  echo "analysed $(basename "$d"): rc $? $(ls -la "$d" | awk '{print $5}') bytes"
done
(cd "$WORK" && tar czf "$OUT/results.tar.gz" --exclude='*.iscope' --exclude='server' .)
(cd "$WORK" && find . -name '*.iscope' | tar cf - -T - | xz -T0 -6 | split -b 15M -a 1 - "$OUT/dumps.tar.xz.")
ls -la "$OUT"
echo "gpu-suite: $(( $(date +%s) - START )) s"

#!/usr/bin/env bash
# Runs every planted-bottleneck program (samples/planted/*.py) under iscope-run, analyses the dump and prints
# expected vs. actual primary category; for a program with a fix (HAS_FIX, the default), also the analyzer's
# predicted saving of that category's first estimated suggestion against the saving measured by
# `prog --ab AB_ROUNDS` (the planted and fixed steps alternating in one process, without the profiler). With an argument, also writes that Markdown table (for
# docs/planted-bottlenecks.md): to the file when it ends in .md, else to OUT/planted-bottlenecks.md in that
# directory. Dumps, reports and logs stay in WORK (only the table goes to the output, so it stays small).
#
#   scripts/planted-bottlenecks.sh [OUT.md | OUTDIR]
#   env: BUILD or BUILD_DIR (build dir, default build), PYTHON (default python3), WORK (dumps, reports and logs,
#        default $BUILD/planted), ONLY="sync_bound h2d_bound" to run a subset, TIMEOUT per program (default 60 s),
#        AB_ROUNDS (default 5; 0: no A/B), REUSE=1 (analyse the dumps and A/B logs already in WORK: run nothing)
# Exit status: 0 when every program ran and every primary matched, 1 otherwise.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-${BUILD_DIR:-$root/build}}
case $build in /*) ;; *) build=$PWD/$build ;; esac
python=${PYTHON:-python3}
# shellcheck source=scripts/lib/savings.sh
. "$root/scripts/lib/savings.sh"
ab_rounds=${AB_ROUNDS:-5}
reuse=${REUSE:-}  # 1: analyse the dumps and A/B logs already in WORK (recorded on another machine), run nothing
work=${WORK:-$build/planted}
timeout_s=${TIMEOUT:-60}
run=$build/tools/iscope-run/iscope-run
analyze=$build/tools/iscope-analyze/iscope-analyze
out_md=${1:-}
if [ -n "$out_md" ] && [ "${out_md%.md}" = "$out_md" ]; then
  mkdir -p "$out_md"
  out_md=$out_md/planted-bottlenecks.md
fi
mkdir -p "$work"
for tool in "$run" "$analyze"; do
  [ -x "$tool" ] || { echo "planted-bottlenecks: $tool is missing; build it first (ninja -C $build iscope-run iscope-analyze)"; exit 1; }
done
# The bindings (inferscope_py) when built: each program then marks its steps with inferscope_py.scope("step").
for d in "$build/bindings/python" "$build/python"; do
  [ -d "$d" ] && export PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}"
done

names=${ONLY:-$(cd "$root/samples/planted" && ls [a-z]*.py | sed 's/\.py$//')}

# "pred meas diff within" for program $1 (analysed into $work/$1.json): its planted category's predicted saving
# and the A/B's measured one; n/a where the program has no fix, the A/B is off or the finding has no estimate.
# (Runs in a subshell: the caller counts.)
compare_saving() {
  local pred meas diff=n/a ok=n/a
  pred=$(pred_for "$1" "$(preds_of "$python" "$work/$1.json")")
  meas=n/a
  if [ "$ab_rounds" -gt 0 ] && [ "$(has_fix "$python" "$root/samples/planted/$1.py")" = True ]; then
    [ -n "$reuse" ] || timeout "$timeout_s" "$python" "$root/samples/planted/$1.py" --ab "$ab_rounds" >"$work/$1.ab.log" 2>&1
    meas=$(ab_saving "$work/$1.ab.log")
    [ -n "$meas" ] || meas=FAILED
  fi
  if [ "$pred" != n/a ] && [ "$meas" != n/a ] && [ "$meas" != FAILED ]; then
    diff=$(awk -v p="$pred" -v m="$meas" 'BEGIN{printf "%+.1f", p - m}')
    ok=$(awk -v d="$diff" 'BEGIN{print (d <= 20 && d >= -20) ? "yes" : "no"}')
  fi
  echo "$pred $meas $diff $ok"
}
rows=()
ok=0 bad=0 within=0 compared=0
fmt='%-16s %-16s %-16s %-6s %-5s %7s %7s %7s %-5s %s\n'
printf "$fmt" program expected primary match conf "pred %" "meas %" diff "±20" "impact"
for name in $names; do
  dump=$work/$name.iscope
  [ -n "$reuse" ] || rm -f "$dump"
  start=$(date +%s.%N)
  rc=0
  [ -n "$reuse" ] || { timeout "$timeout_s" "$run" -o "$dump" -- "$python" "$root/samples/planted/$name.py" >"$work/$name.run.log" 2>&1; rc=$?; }
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  if [ "$rc" = 77 ]; then
    printf '%-16s %-16s %s\n' "$name" "$name" "skipped: $(tail -1 "$work/$name.run.log")"
    rows+=("| $name | $name | skipped | - | - | - | $(tail -1 "$work/$name.run.log") |")
    continue
  fi
  if [ ! -s "$dump" ]; then
    printf '%-16s %-16s %s\n' "$name" "$name" "FAILED (exit $rc, no dump; see $work/$name.run.log)"
    rows+=("| $name | $name | no dump (exit $rc) | no | - | - | $(tail -1 "$work/$name.run.log" | tr '|' '/') |")
    bad=$((bad + 1))
    continue
  fi
  # Steps: the inferscope_py.scope("step") ranges when the binding was importable; otherwise the Python
  # function step() that iscope-run's Python tracing recorded.
  "$analyze" "$dump" --findings --json "$work/$name.json" -o "$work/$name.md" \
      >"$work/$name.digest" 2>"$work/$name.analyze.log"
  if grep -q '^steps name=(whole trace)' "$work/$name.digest"; then
    "$analyze" "$dump" --step step --findings --json "$work/$name.json" -o "$work/$name.md" \
        >"$work/$name.digest" 2>"$work/$name.analyze.log"
  fi
  line=$(grep ' primary=1 ' "$work/$name.digest" | head -1)
  primary=${line%% *}
  [ -n "$primary" ] || primary="(none)"
  conf=$(sed -n 's/.*confidence=\([0-9.]*\).*/\1/p' <<<"$line")
  impact=$(sed -n 's/.*impact_ms=\([0-9.]*\) impact_pct=\([0-9]*\).*/\1 ms (\2 %)/p' <<<"$line")
  others=$(grep -v ' primary=1 ' "$work/$name.digest" | grep -v '^steps ' | awk '{print $1}' | paste -sd, -)
  match=no
  [ "$primary" = "$name" ] && match=yes
  if [ $match = yes ]; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
  read -r pred meas diff within_20 <<<"$(compare_saving "$name")"
  [ "$within_20" != n/a ] && compared=$((compared + 1))
  [ "$within_20" = yes ] && within=$((within + 1))
  printf "$fmt" "$name" "$name" "$primary" "$match" "${conf:--}" "$pred" "$meas" "$diff" "$within_20" \
    "${impact:--} ${others:+(also: $others)}"
  did=$(grep -v '^iscope' "$work/$name.run.log" | tail -1 | tr '|' '/')
  rows+=("| $name | $name | $primary | $match | ${conf:--} | $pred | $meas | $diff | $within_20 | ${impact:--} | ${others:--}; run ${secs} s: $did |")
done
echo "planted-bottlenecks: $ok matched, $bad did not, $within of $compared savings within ±20 points (dumps, reports and logs in $work)"

if [ -n "$out_md" ]; then
  {
    echo "# Planted bottlenecks"
    echo
    echo "Each program in samples/planted/ plants one bottleneck; scripts/planted-bottlenecks.sh runs it under"
    echo "iscope-run and compares the analyzer's primary finding with the planted category."
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
    echo "- machine: ${gpu:-no GPU found by nvidia-smi} (name, driver), $(nproc) CPUs, $(uname -r)"
    echo "- command: scripts/planted-bottlenecks.sh $out_md"
    echo
    echo "| program | expected | primary | match | confidence | predicted saving % | measured saving % (A/B) | diff (points) | within ±20 | impact per step | other findings; run |"
    echo "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "$ok matched, $bad did not; $within of $compared predicted savings within ±20 points (AB_ROUNDS=$ab_rounds)."
  } >"$out_md"
  echo "planted-bottlenecks: wrote $out_md"
fi
[ $bad = 0 ]

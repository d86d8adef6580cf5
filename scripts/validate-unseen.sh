#!/usr/bin/env bash
# The second, independent bottleneck suite: every program in samples/validation/ (Python, plus the C++ CUDA
# program in samples/validation/cpp/, built here with nvcc) plants one bottleneck in ordinary, unannotated
# inference code. For each program this script
#   (a) runs the broken variant under iscope-run and analyses the dump (iscope-analyze --json, no --step: the
#       analyzer must find the steps itself),
#   (b) runs `prog --ab ROUNDS` without the profiler: broken and fixed variants alternate in one process and
#       the program prints "AB broken_ms=.. fixed_ms=.. saving_pct=..",
#   (c) compares the primary finding with the cause whose fix saved the most: the program's EXPECTED category,
#       or a competing cause whose fix the program also measures (AB_ALT lines) when that fix saved more; and
#       that cause's predicted saving (its finding's first estimated suggestion, impact_ms / end_to_end_ms) with
#       the measured one.
# With an argument, also writes the Markdown table: to the file when it ends in .md, else to
# OUT/validate-unseen.md in that directory.
#
#   scripts/validate-unseen.sh [OUT.md | OUTDIR]
#   env: BUILD or BUILD_DIR (build dir, default build), PYTHON (default python3), WORK (dumps, reports, logs;
#        default $BUILD/validate), ONLY="decode_item io_wait" for a subset, TIMEOUT per run (default 120 s),
#        STEPS (passed as --steps; default: each program's own), AB_ROUNDS (default 8), NVCC, CUDA_ARCH
#        (default sm_90), REUSE=1 (analyse the dumps and A/B logs already in WORK, recorded on another machine:
#        record, build and run nothing)
# Exit status: 0 when every program ran (matched or not: the table is the result), 1 when something failed to
# run (no dump, analyzer error, no AB line, build failure).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-${BUILD_DIR:-$root/build}}
case $build in /*) ;; *) build=$PWD/$build ;; esac
python=${PYTHON:-python3}
# shellcheck source=scripts/lib/savings.sh
. "$root/scripts/lib/savings.sh"
work=${WORK:-$build/validate}
case $work in /*) ;; *) work=$PWD/$work ;; esac
timeout_s=${TIMEOUT:-120}
ab_rounds=${AB_ROUNDS:-8}
steps_arg=()
[ -n "${STEPS:-}" ] && steps_arg=(--steps "$STEPS")
run=$build/tools/iscope-run/iscope-run
analyze=$build/tools/iscope-analyze/iscope-analyze
src=$root/samples/validation
out_md=${1:-}
if [ -n "$out_md" ] && [ "${out_md%.md}" = "$out_md" ]; then
  mkdir -p "$out_md"
  out_md=$out_md/validate-unseen.md
fi
mkdir -p "$work"
for tool in "$run" "$analyze"; do
  [ -x "$tool" ] || { echo "validate-unseen: $tool is missing; build it first (ninja -C $build iscope-run iscope-analyze)"; exit 1; }
done
for d in "$build/bindings/python" "$build/python"; do
  [ -d "$d" ] && export PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}"
done
export PYTHONUNBUFFERED=1

names=${ONLY:-"$(cd "$src" && ls [a-z]*.py | sed 's/\.py$//') cuda_graph_app"}

# expected NAME -> "EXPECTED HAS_FIX" read from the program's source, without importing it.
expected() {
  if [ "$1" = cuda_graph_app ]; then
    echo "$(sed -n 's|^// EXPECTED: *\([a-z_]*\).*|\1|p' "$src/cpp/cuda_graph_app.cu" | head -1) True"
  else
    "$python" -c 'import ast, sys
vals = {"EXPECTED": "?", "HAS_FIX": True}
for node in ast.parse(open(sys.argv[1]).read()).body:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
            and node.targets[0].id in vals:
        vals[node.targets[0].id] = ast.literal_eval(node.value)
print(vals["EXPECTED"], vals["HAS_FIX"])' "$src/$1.py"
  fi
}

# summary JSON -> "primary others end_to_end_ms preds steps_name steps_count"; preds: preds_of (scripts/lib/savings.sh)
summarize() {
  local preds
  preds=$(preds_of "$python" "$1")
  "$python" - "$1" "$preds" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
fs = r.get("findings") or []
cat = lambda f: f.get("category") or f.get("bottleneck_type") or "?"
prim = next((f for f in fs if f.get("primary")), fs[0] if fs else None)
e2e = r.get("end_to_end_ms")
others = ",".join(cat(f) for f in fs if f is not prim) or "-"
st = r.get("steps") or {}
print(cat(prim) if prim else "(none)", others, "%.2f" % e2e if isinstance(e2e, (int, float)) else "-", sys.argv[2],
      (st.get("name") or "-").replace(" ", "_"), st.get("count", 0))
PY
}

# The cause whose measured fix saved the most: "category saving_pct". $1: the planted category, $2: its A/B
# saving, $3: the A/B log (AB_ALT lines: competing fixes measured in the same rotation).
truth_of() {
  { echo "$1 $2"; sed -n 's/^AB_ALT category=\([a-z_]*\) .*saving_pct=\([-0-9.]*\).*/\1 \2/p' "$3" 2>/dev/null; } |
    awk '$2 != "n/a" && $2 != "FAILED" { if (best == "" || $2 + 0 > max) { best = $1; max = $2 + 0 } }
         END { if (best == "") print "'"$1"' n/a"; else printf "%s %.1f\n", best, max }'
}


reuse=${REUSE:-}

cmd_of() {  # the program's command line
  if [ "$1" = cuda_graph_app ]; then echo "$work/cuda_graph_app"; else echo "$python $src/$1.py"; fi
}

rows=()
ran=0 failed=0 matched=0 within=0 compared=0
fmt='%-15s %-14s %-14s %-7s %9s %9s %7s %-6s %s\n'
printf "$fmt" program expected primary match "pred %" "meas %" "diff" "±20" "notes"
for name in $names; do
  read -r exp has_fix <<<"$(expected "$name")"
  log=$work/$name.run.log
  dump=$work/$name.iscope
  [ -n "$reuse" ] || rm -f "$dump"
  rm -f "$work/$name.json" "$work/$name.md"
  if [ "$name" = cuda_graph_app ] && [ -z "$reuse" ]; then
    nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
    if [ ! -x "$nvcc" ]; then
      printf "$fmt" "$name" "$exp" skipped - - - - - "no nvcc"
      rows+=("| $name | $exp | skipped | - | - | - | - | - | no nvcc |")
      continue
    fi
    if ! "$nvcc" -O2 -arch="${CUDA_ARCH:-sm_90}" -o "$work/cuda_graph_app" "$src/cpp/cuda_graph_app.cu" \
        >"$work/$name.build.log" 2>&1; then
      printf "$fmt" "$name" "$exp" FAILED - - - - - "nvcc failed: see $work/$name.build.log"
      rows+=("| $name | $exp | build failed | - | - | - | - | - | $(tail -1 "$work/$name.build.log" | tr '|' '/') |")
      failed=$((failed + 1))
      continue
    fi
  fi
  rc=0
  # shellcheck disable=SC2046
  [ -n "$reuse" ] || { timeout "$timeout_s" "$run" -o "$dump" -- $(cmd_of "$name") "${steps_arg[@]}" >"$log" 2>&1; rc=$?; }
  if [ "$rc" = 77 ]; then
    printf "$fmt" "$name" "$exp" skipped - - - - - "$(tail -1 "$log")"
    rows+=("| $name | $exp | skipped | - | - | - | - | - | $(tail -1 "$log" | tr '|' '/') |")
    continue
  fi
  if [ ! -s "$dump" ]; then
    printf "$fmt" "$name" "$exp" FAILED - - - - - "exit $rc, no dump (see $log)"
    rows+=("| $name | $exp | no dump (exit $rc) | - | - | - | - | - | $(tail -1 "$log" | tr '|' '/') |")
    failed=$((failed + 1))
    continue
  fi
  if ! "$analyze" "$dump" --json "$work/$name.json" -o "$work/$name.md" >"$work/$name.analyze.log" 2>&1 \
      || [ ! -s "$work/$name.json" ]; then
    printf "$fmt" "$name" "$exp" FAILED - - - - - "iscope-analyze failed (see $work/$name.analyze.log)"
    rows+=("| $name | $exp | analyze failed | - | - | - | - | - | $(tail -1 "$work/$name.analyze.log" | tr '|' '/') |")
    failed=$((failed + 1))
    continue
  fi
  read -r primary others e2e preds stepname stepcount <<<"$(summarize "$work/$name.json")"
  ran=$((ran + 1))
  # (b) the in-process A/B, without the profiler: the planted fix and any competing fix the program measures
  meas=n/a truth=$exp
  if [ "$has_fix" = True ]; then
    abrc=0
    # shellcheck disable=SC2046
    [ -n "$reuse" ] || { timeout "$timeout_s" $(cmd_of "$name") --ab "$ab_rounds" >"$work/$name.ab.log" 2>&1; abrc=$?; }
    abline=$(grep -E '^AB(_ALT)? ' "$work/$name.ab.log" | tr '\n' ';')
    meas=$(grep '^AB ' "$work/$name.ab.log" | tail -1 | sed -n 's/.*saving_pct=\([-0-9.]*\).*/\1/p')
    if [ "$abrc" = 77 ]; then
      meas=n/a
    elif [ -z "$meas" ]; then
      meas=FAILED
      failed=$((failed + 1))
    else
      read -r truth meas <<<"$(truth_of "$exp" "$meas" "$work/$name.ab.log")"
    fi
  fi
  case $truth in
    wait) if [ "$primary" = wait ]; then match=yes
          elif [ "$primary" != cpu_contention ] && [ "$primary" != cpu_bound ]; then match="partly"
          else match=no; fi ;;
    gpu_bound) if [ "$primary" = gpu_bound ] || [ "$primary" = "(none)" ]; then match=yes; else match=no; fi ;;
    *) if [ "$primary" = "$truth" ]; then match=yes; else match=no; fi ;;
  esac
  [ "$match" = yes ] && matched=$((matched + 1))
  pred=$(pred_for "$truth" "$preds")
  impact=$(tr ',' '\n' <<<"$preds" | awk -F= -v c="$primary" '$1 == c { print $2; exit }')
  diff=n/a ok=n/a
  if [ "$pred" != n/a ] && [ "$meas" != n/a ] && [ "$meas" != FAILED ]; then
    diff=$(awk -v p="$pred" -v m="$meas" 'BEGIN{printf "%+.1f", p - m}')
    ok=$(awk -v d="$diff" 'BEGIN{print (d <= 20 && d >= -20) ? "yes" : "no"}')
    compared=$((compared + 1))
    [ "$ok" = yes ] && within=$((within + 1))
  fi
  [ "$truth" != "$exp" ] && exp="$exp (fix of $truth saves more)"
  did=$(grep -v '^iscope' "$log" | grep -E 'ms/step|steps in' | tail -1 | tr '|' '/')
  notes="step=$stepname x$stepcount, ${e2e} ms, primary's saving ${impact:-n/a} ms; also: $others"
  printf "$fmt" "$name" "$exp" "$primary" "$match" "$pred" "$meas" "$diff" "$ok" "$notes"
  rows+=("| $name | $exp | $primary | $match | $pred | $meas | $diff | $ok | $notes; ${abline:-no A/B}; run: ${did:--} |")
  abline=
done
echo "validate-unseen: $ran ran, $matched matched, $within of $compared savings within ±20 points, $failed failed to run (dumps, reports and logs in $work)"

if [ -n "$out_md" ]; then
  {
    echo "# Second suite (samples/validation): unseen programs"
    echo
    echo "Each program plants one bottleneck in unannotated inference code; scripts/validate-unseen.sh runs the"
    echo "broken variant under iscope-run, analyses it, and compares the analyzer's primary finding and predicted"
    echo "saving with an in-process A/B of the broken and fixed variants (AB_ROUNDS=$ab_rounds)."
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
    echo "- machine: ${gpu:-no GPU found by nvidia-smi} (name, driver), $(nproc) CPUs, $(uname -r)"
    echo "- command: scripts/validate-unseen.sh $out_md"
    echo
    echo "| program | expected | primary | match | predicted saving % | measured saving % (A/B) | diff (points) | within ±20 | notes |"
    echo "| --- | --- | --- | --- | ---: | ---: | ---: | --- | --- |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "$ran ran, $matched matched, $within of $compared savings within ±20 points, $failed failed to run."
  } >"$out_md"
  echo "validate-unseen: wrote $out_md"
fi
[ $failed = 0 ]

#!/usr/bin/env bash
# The third suite: samples/multithread, programs whose step waits on someone else (DataLoader workers, a producer
# thread, the GIL, a lock, a thread or process pool, an event loop, C++ worker threads), written by someone who
# had not read the analyzer. Two parts, so the recording (GPU machine) and the checking (anywhere) can run apart:
#
#   scripts/validate-multithread.sh record OUTDIR   # each program under iscope-run (its broken variant, no flag
#                                                   # of ours: no --follow-children), then `prog --ab ROUNDS`
#   scripts/validate-multithread.sh check OUTDIR [OUT.md]   # iscope-analyze each dump; compare with the program
#
# `check` asks of each report what a user would: does a finding name whom the step waited on (one of the program's
# WAITS_ON_NAMES in its title or evidence: the primary, or the largest finding that does, as a GIL holder's next to
# a launch-bound primary) and what that party ran (one of its HOT_FUNCTIONS), does a high-priority suggestion of that
# finding propose the program's fix (one of its FIX_WORDS), and is its predicted saving within ±20 points of the
# fix's measured saving (the A/B). The table's "primary" column shows the primary and, after "+", that finding. Constants are read from each program
# with `ast` (the C++ program: its header comment), never by importing it.
#
#   env: BUILD or BUILD_DIR (default build), PYTHON (python3), ONLY="producer_thread metrics_thread", AB_ROUNDS (5),
#        TIMEOUT per run (120 s), NVCC, CUDA_ARCH (sm_90), SRC (the programs' folder, default samples/multithread;
#        samples/multithread/holdout holds the programs kept back while the analyzer was tuned)
# Exit status: 0 when every program ran and was checked (matched or not: the table is the result), 1 otherwise.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
out=${2:-}
[ -n "$mode" ] && [ -n "$out" ] || { echo "usage: $0 record|check OUTDIR [OUT.md]" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${BUILD:-${BUILD_DIR:-$root/build}}
case $build in /*) ;; *) build=$root/$build ;; esac
python=${PYTHON:-python3}
src=${SRC:-$root/samples/multithread}
case $src in /*) ;; *) src=$root/$src ;; esac
run=$build/tools/iscope-run/iscope-run
analyze=$build/tools/iscope-analyze/iscope-analyze
timeout_s=${TIMEOUT:-120}
ab_rounds=${AB_ROUNDS:-5}
names=${ONLY:-"$(cd "$src" && ls [a-z]*.py | sed 's/\.py$//') $(cd "$src" && ls cpp/*.cu 2>/dev/null | sed 's|^cpp/||; s/\.cu$//')"}
for d in "$build/bindings/python" "$build/python"; do
  [ -d "$d" ] && export PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}"
done
export PYTHONUNBUFFERED=1

is_cpp() { [ -f "$src/cpp/$1.cu" ]; }
cmd_of() { if is_cpp "$1"; then echo "$out/$1"; else echo "$python $src/$1.py"; fi; }

if [ "$mode" = record ]; then
  [ -x "$run" ] || { echo "validate-multithread: $run is missing; build it first"; exit 1; }
  failed=0
  for name in $names; do
    if is_cpp "$name"; then
      nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
      if ! "$nvcc" -O2 -std=c++17 -arch="${CUDA_ARCH:-sm_90}" -I"$root/include" "$src/cpp/$name.cu" \
          -L"$build/lib/runtime" -linferscope -Xlinker -rpath -Xlinker "$build/lib/runtime" -o "$out/$name" \
          >"$out/$name.build.log" 2>&1; then
        echo "$name: build failed"; tail -5 "$out/$name.build.log"; failed=$((failed + 1)); continue
      fi
    fi
    rm -f "$out/$name.iscope"
    t0=$(date +%s)
    # shellcheck disable=SC2046
    timeout "$timeout_s" "$run" -q -o "$out/$name.iscope" -- $(cmd_of "$name") >"$out/$name.run.log" 2>&1
    rc=$?
    # shellcheck disable=SC2046
    timeout "$timeout_s" $(cmd_of "$name") --ab "$ab_rounds" >"$out/$name.ab.log" 2>&1
    abrc=$?
    echo "$name: run rc=$rc ($(( $(date +%s) - t0 )) s with the A/B), dump $(stat -c %s "$out/$name.iscope" 2>/dev/null || echo none) bytes; A/B rc=$abrc: $(grep '^AB ' "$out/$name.ab.log" | tail -1)"
    [ "$rc" = 0 ] && [ -s "$out/$name.iscope" ] && [ "$abrc" = 0 ] || failed=$((failed + 1))
  done
  [ "$failed" = 0 ]
  exit
fi

[ "$mode" = check ] || { echo "usage: $0 record|check OUTDIR [OUT.md]" >&2; exit 2; }
[ -x "$analyze" ] || { echo "validate-multithread: $analyze is missing; build it first"; exit 1; }
md=${3:-}
rows=()
ran=0 named=0 hot=0 fixed=0 within=0 compared=0 failed=0
for name in $names; do
  dump=$out/$name.iscope
  if [ ! -s "$dump" ]; then echo "$name: no dump"; failed=$((failed + 1)); continue; fi
  if ! "$analyze" "$dump" --json "$out/$name.json" -o "$out/$name.md" >"$out/$name.analyze.log" 2>&1; then
    echo "$name: iscope-analyze failed: $(tail -1 "$out/$name.analyze.log")"; failed=$((failed + 1)); continue
  fi
  ran=$((ran + 1))
  prog=$src/$name.py
  is_cpp "$name" && prog=$src/cpp/$name.cu
  line=$("$python" - "$out/$name.json" "$prog" "$out/$name.ab.log" <<'PY'
import ast, json, re, sys
report, prog, ablog = sys.argv[1:4]
text = open(prog).read()
consts = {}
if prog.endswith(".py"):
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
else:  # "//   NAME = value" lines in the header comment
    for m in re.finditer(r"^//\s+([A-Z_]+)\s*=\s*(.+)$", text, re.M):
        try:
            consts[m.group(1)] = ast.literal_eval(m.group(2).strip())
        except (ValueError, SyntaxError):
            pass
r = json.load(open(report))
fs = [f for f in r.get("findings") or [] if not f.get("informational")]
prim = next((f for f in fs if f.get("primary")), None)
e2e = r.get("end_to_end_ms") or 0
names = [n.lower() for n in consts.get("WAITS_ON_NAMES", [])]
hots = [h.lower() for h in consts.get("HOT_FUNCTIONS", [])]
words = [w.lower() for w in consts.get("FIX_WORDS", [])]
said = lambda f: (f.get("title", "") + " " + " ".join(f.get("evidence") or [])).lower()
# The finding that names whom the step waited on: the primary when it does, else the largest one that does
# (a GIL holder next to a launch-bound primary: the contention must be found and named, not be the primary).
who = next((f for f in fs if any(n in said(f) for n in names)), None)
named = who is not None
hot = named and any(h in said(who) for h in hots)
fix = None
for s in (who or {}).get("suggestions") or []:
    if s.get("priority") == "high" and any(w in s.get("action", "").lower() for w in words):
        fix = s
        break
pred = "n/a"
if fix and fix.get("estimated") is not False and isinstance(fix.get("impact_ms"), (int, float)) and e2e > 0:
    pred = "%.1f" % (fix["impact_ms"] / e2e * 100)
meas = "n/a"
for l in open(ablog) if ablog else []:
    m = re.match(r"AB .*saving_pct=([-0-9.]+)", l)
    if m:
        meas = m.group(1)
cat = lambda f: f.get("category") or f.get("bottleneck_type") or "-"
title = ((who or prim or {}).get("title") or "(no finding)").replace("|", "/")
where = cat(prim or {}) + ("" if who is None or who is prim else "+" + cat(who))
print("\t".join([where, "yes" if named else "no", "yes" if hot else "no",
                 "yes" if fix else "no", pred, meas, title,
                 ((fix or {}).get("action") or "-").replace("|", "/")[:160]]))
PY
  )
  IFS=$'\t' read -r cat nm ht fx pred meas title action <<<"$line"
  diff=n/a ok=n/a
  if [ "$pred" != n/a ] && [ "$meas" != n/a ]; then
    diff=$(awk -v p="$pred" -v m="$meas" 'BEGIN{printf "%+.1f", p - m}')
    ok=$(awk -v d="$diff" 'BEGIN{print (d <= 20 && d >= -20) ? "yes" : "no"}')
    compared=$((compared + 1)); [ "$ok" = yes ] && within=$((within + 1))
  fi
  [ "$nm" = yes ] && named=$((named + 1)); [ "$ht" = yes ] && hot=$((hot + 1)); [ "$fx" = yes ] && fixed=$((fixed + 1))
  printf '%-24s %-15s named=%-3s hot=%-3s fix=%-3s pred=%-6s meas=%-6s diff=%-6s  %s\n' "$name" "$cat" "$nm" "$ht" "$fx" \
    "$pred" "$meas" "$diff" "$title"
  rows+=("| $name | $cat | $nm | $ht | $fx | $pred | $meas | $diff | $ok | $title | $action |")
done
echo "validate-multithread: $ran checked; whom named $named, hot function $hot, fix proposed $fixed; $within of $compared savings within ±20 points; $failed failed"
if [ -n "$md" ]; then
  {
    echo "| program | primary (+ the finding naming whom) | names whom | names its hot function | proposes the fix | predicted saving % | measured saving % (A/B) | diff (points) | within ±20 | primary finding | the suggestion |"
    echo "| --- | --- | --- | --- | --- | ---: | ---: | ---: | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "$ran checked; whom named $named, hot function $hot, fix proposed $fixed; $within of $compared savings within ±20 points; $failed failed."
  } >"$md"
fi
[ "$failed" = 0 ]

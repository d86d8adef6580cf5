#!/usr/bin/env bash
# The fourth suite: samples/multigpu, programs whose step is slowed by how work is spread over two GPUs (a straggler
# rank, a communication-bound tensor-parallel stack, all_reduces not overlapped with independent compute, a two-GPU
# pipeline run one micro-batch at a time through host memory), written by someone who had not read the analyzer.
# The recording needs a host with 2 GPUs (NCCL); the checking can run anywhere.
#
#   scripts/validate-multigpu.sh record OUTDIR   # each program's broken variant under iscope-run, then the
#                                                # program's in-process A/B (--ab ROUNDS) without InferScope
#   scripts/validate-multigpu.sh check OUTDIR    # iscope-analyze each recording (a launcher's with its ranks)
#                                                # and compare with the program: the cause (the run's primary),
#                                                # whom (the straggler rank and what it ran), a high suggestion
#                                                # with one of FIX_WORDS, and its saving against the A/B (±20)
#
# The torchrun programs are recorded with --follow-children: the launcher's dump is OUTDIR/NAME.iscope and each
# rank's lands beside it as OUTDIR/NAME.<pid>.iscope. pipeline_two_gpus is one process driving cuda:0 and cuda:1:
# one dump. Each A/B's output goes to OUTDIR/NAME.ab.log (its 'AB {json}' line: broken_ms, fixed_ms, saving_pct),
# each recorded run's to OUTDIR/NAME.run.log. Each program declares, as module constants read with `ast`: CAUSE,
# STRAGGLER_RANK, WHAT_STRAGGLER_DOES, FIX, FIX_WORDS (samples/multigpu/README.md).
#
#   env: BUILD or BUILD_DIR (default build), PYTHON (python3), ONLY="straggler_rank comm_bound", AB_ROUNDS (5),
#        TIMEOUT per run (150 s), NPROC (ranks per torchrun program, 2), TORCHRUN_ARGS (more torchrun options),
#        SRC (the programs' folder, default samples/multigpu), ISCOPE_MG_SMOKE=1 (the programs' CPU smoke sizes,
#        gloo: to try this script on a machine without GPUs)
# Exit status: 0 when every program was recorded (its dumps written) and its A/B printed its line, 1 otherwise.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
out=${2:-}
{ [ "$mode" = record ] || [ "$mode" = check ]; } && [ -n "$out" ] || { echo "usage: $0 record|check OUTDIR" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${BUILD:-${BUILD_DIR:-$root/build}}
case $build in /*) ;; *) build=$root/$build ;; esac
python=${PYTHON:-python3}
src=${SRC:-$root/samples/multigpu}
case $src in /*) ;; *) src=$root/$src ;; esac
run=$build/tools/iscope-run/iscope-run
timeout_s=${TIMEOUT:-150}
ab_rounds=${AB_ROUNDS:-5}
nproc=${NPROC:-2}
names=${ONLY:-$(cd "$src" && ls [a-z]*.py | sed 's/\.py$//')}
for d in "$build/bindings/python" "$build/python"; do
  [ -d "$d" ] && export PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}"
done
export PYTHONUNBUFFERED=1
# Never NVLink multicast on the shared hosts (a setting already made wins).
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}

# A program that starts torch.distributed (the harness's Dist) runs under torchrun; the others are one process.
uses_torchrun() { grep -q 'Dist(' "$src/$1.py"; }
# shellcheck disable=SC2086
cmd_of() {
  if uses_torchrun "$1"; then
    echo "$python -m torch.distributed.run --nproc_per_node $nproc ${TORCHRUN_ARGS:-} $src/$1.py"
  else
    echo "$python $src/$1.py"
  fi
}

if [ "$mode" = check ]; then
  analyze=$build/tools/iscope-analyze/iscope-analyze
  [ -x "$analyze" ] || { echo "validate-multigpu: $analyze is missing; build it first"; exit 1; }
  for name in $names; do
    [ -f "$out/$name.iscope" ] && "$analyze" "$out/$name.iscope" --json "$out/$name.check.json" >"$out/$name.check.log" 2>&1
  done
  exec "$python" - "$src" "$out" $names <<'PY'
import ast, json, os, re, sys
src, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
EXPECTED = {"straggler": "collective_wait", "communication_bound": "communication", "no_overlap": "communication",
            "pipeline_p2p": "pipeline_bubble"}
def constants(path):
    c = {}
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                c[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return c
rows, failed, ok_all = [], 0, 0
print("| program | expected | primary | names whom | high suggestion with the fix | predicted % | measured % (A/B) | diff | within ±20 |")
print("| --- | --- | --- | --- | --- | ---: | ---: | ---: | --- |")
for name in names:
    c = constants(os.path.join(src, name + ".py"))
    try:
        rep = json.load(open(os.path.join(out, name + ".check.json")))
    except (OSError, ValueError):
        print(f"| {name} | - | no report | | | | | | no |"); failed += 1; continue
    run = rep.get("run")
    findings = run["findings"] if run and run.get("findings") else rep["findings"]
    step = run["step_ms"] if run and run.get("findings") else rep["breakdown"]["step_ms"]
    primary = next((f for f in findings if f.get("primary")), None)
    expected = EXPECTED.get(c.get("CAUSE"), "?")
    got = primary["bottleneck_type"] if primary else "-"
    whom = "n/a"
    if c.get("STRAGGLER_RANK") is not None:
        did = (run or {}).get("straggler_did", "")
        hot = c.get("HOT_FUNCTIONS", [])
        whom = "yes" if run and run.get("straggler") == c["STRAGGLER_RANK"] and (not hot or any(h in did for h in hot)) else "no"
    words = [w.lower() for w in c.get("FIX_WORDS", [])]
    fix = None
    for s in (primary or {}).get("suggestions", []):
        if s.get("priority") == "high" and any(w in s.get("action", "").lower() for w in words):
            fix = s; break
    m = None
    try:
        line = [l for l in open(os.path.join(out, name + ".ab.log")) if "AB {" in l][-1]
        m = json.loads(line[line.index("AB {") + 3:])["saving_pct"]
    except (OSError, IndexError, ValueError, KeyError):
        pass
    pred = fix["impact_ms"] / step * 100 if fix and fix.get("estimated") and step > 0 else None
    diff = pred - m if pred is not None and m is not None else None
    within = "yes" if diff is not None and abs(diff) <= 20 else "no"
    good = got == expected and whom in ("yes", "n/a") and fix is not None and within == "yes"
    ok_all += good
    f2 = lambda v: "-" if v is None else f"{v:.1f}"
    print(f"| {name} | {expected} | {got} | {whom} | {'yes' if fix else 'no'} | {f2(pred)} | {f2(m)} | {f2(diff)} | {within} |")
print(f"\n{len(names)} checked; {ok_all} with the right cause, whom, fix and saving; {failed} without a report")
sys.exit(1 if failed else 0)
PY
fi

[ -x "$run" ] || { echo "validate-multigpu: $run is missing; build it first"; exit 1; }
failed=0
rows=()
t_all=$(date +%s)
for name in $names; do
  [ -f "$src/$name.py" ] || { echo "$name: no $src/$name.py"; failed=$((failed + 1)); rows+=("$name|no program|0|-"); continue; }
  rm -f "$out/$name.iscope" "$out/$name".[0-9]*.iscope "$out/$name.run.log" "$out/$name.ab.log"
  follow=()
  want=1
  if uses_torchrun "$name"; then follow=(--follow-children); want=$((nproc + 1)); fi
  t0=$(date +%s)
  # shellcheck disable=SC2046
  timeout -k 10 "$timeout_s" "$run" -q "${follow[@]}" -o "$out/$name.iscope" -- $(cmd_of "$name") \
    >"$out/$name.run.log" 2>&1
  rc=$?
  t1=$(date +%s)
  # shellcheck disable=SC2046
  timeout -k 10 "$timeout_s" $(cmd_of "$name") --ab "$ab_rounds" >"$out/$name.ab.log" 2>&1
  abrc=$?
  t2=$(date +%s)
  dumps=0
  for f in "$out/$name.iscope" "$out/$name".[0-9]*.iscope; do [ -s "$f" ] && dumps=$((dumps + 1)); done
  abline=$(grep -o 'AB {.*}' "$out/$name.ab.log" | tail -1)
  saving=$(printf '%s\n' "${abline#AB }" | "$python" -c '
import json, sys
try:
    r = json.loads(sys.stdin.read())
    print("%.1f %% (%.3f -> %.3f ms)" % (r["saving_pct"], r["broken_ms"], r["fixed_ms"]))
except Exception:
    print("-")' 2>/dev/null || echo -)
  ok=no
  [ "$rc" = 0 ] && [ "$dumps" -ge "$want" ] && ok=yes
  echo "$name: run rc=$rc in $((t1 - t0)) s, $dumps dump(s) (want $want); A/B rc=$abrc in $((t2 - t1)) s: ${abline:-no AB line}"
  if [ "$ok" != yes ] || [ "$abrc" != 0 ] || [ -z "$abline" ]; then
    failed=$((failed + 1))
    tail -5 "$out/$name.run.log" "$out/$name.ab.log" | sed 's/^/    /'
  fi
  rows+=("$name|$ok (rc $rc, $((t1 - t0)) s)|$dumps|$saving")
done
echo
printf '%-20s %-22s %-6s %s\n' program "recorded ok" dumps "A/B saving (broken -> fixed)"
for r in "${rows[@]}"; do
  IFS='|' read -r n o d s <<<"$r"
  printf '%-20s %-22s %-6s %s\n' "$n" "$o" "$d" "$s"
done
echo "validate-multigpu: $(( $(date +%s) - t_all )) s in all; $failed failed"
[ "$failed" = 0 ]

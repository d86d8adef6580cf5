#!/usr/bin/env bash
# The fourth suite: samples/multigpu, programs whose step is slowed by how work is spread over two GPUs (a straggler
# rank, a communication-bound tensor-parallel stack, all_reduces not overlapped with independent compute, a two-GPU
# pipeline run one micro-batch at a time through host memory), written by someone who had not read the analyzer.
# The recording needs a host with 2 GPUs (NCCL); the checking can run anywhere (a `check` mode is to come).
#
#   scripts/validate-multigpu.sh record OUTDIR   # each program's broken variant under iscope-run, then the
#                                                # program's in-process A/B (--ab ROUNDS) without InferScope
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
[ "$mode" = record ] && [ -n "$out" ] || { echo "usage: $0 record OUTDIR" >&2; exit 2; }
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

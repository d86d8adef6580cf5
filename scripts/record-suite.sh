#!/usr/bin/env bash
# Records one part of the unseen-program suite (samples/serving, samples/advice, samples/try) on the GPU machine,
# in one call of at most ~9 minutes. For each program of the part:
#   (a) `prog --ab ROUNDS` (no profiler): the program's own in-process A/B, log OUTDIR/<name>.ab.log
#       (its "AB broken_ms=.. fixed_ms=.. saving_pct=.." line, and AB_ALT lines where a competing fix is measured);
#   (b) the broken variant under `iscope-run -q -o OUTDIR/<name>.iscope -- prog`, log OUTDIR/<name>.run.log (its
#       last line is the program's own JSON timers, measured while recorded);
#   (c) the broken variant once more without the profiler, log OUTDIR/<name>.plain.log (the same JSON, unrecorded).
# The C++ server (samples/advice/cpp_server/server.cu) is built with nvcc into OUTDIR first. This script analyses
# nothing: it only records; the dumps and logs are the input of whoever judges the analyzer.
#
#   scripts/record-suite.sh PART OUTDIR        PART: serving | advice | try
#   env: BUILD (default build-gpu; iscope-run at $BUILD/tools/iscope-run/iscope-run, Python module dir $BUILD/python)
#        PYTHON (default python3), ONLY="name1 name2" (a subset, names without .py; cpp_server for the C++ one),
#        AB_ROUNDS (overrides every program's default rounds), BUDGET_S (default 510: no run starts, and every run's
#        timeout is cut, so that the whole part ends within it), NVCC (default nvcc), CUDA_ARCH (default sm_90),
#        PROG_ARGS (extra arguments for every Python program, e.g. "--device cpu" for a smoke run without a GPU),
#        PLAIN=0 (skip (c): the recorded run's own timers are the comparison for the headline; saves a run each)
#
# Expected times on one H200 (estimates; programs are sized for them), per program: --ab / recorded / plain
#   serving: hf_generate_streamer ~25/~20/~14 s, aiohttp_batcher ~15/~15/~12 s, continuous_batching ~30/~20/~15 s,
#            blocking_handler ~30/~16/~14 s                                          -> part ~4.5 min
#   advice:  host_sampling ~16/~20/~15 s, per_sequence_item ~14/~15/~12 s, fp16_gemm_mlp ~15/~14/~12 s,
#            static_tensor_copy ~10/~14/~11 s, cpp_server (nvcc ~30 s) ~18/~14/~13 s -> part ~4.5 min
#   try:     dataloader_bound ~20/~16/~13 s, fp32_gemm ~10/~14/~12 s                 -> part ~1.5 min
# Per-run timeouts: 90 s (--ab), 100 s (recorded), 70 s (plain), further cut by BUDGET_S.
# Exit status: 0 when every run exited 0, 1 otherwise (a failing program never stops the others), 2 for bad usage.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
part=${1:-}
out=${2:-}
case $part in serving|advice|try) ;; *) echo "usage: $0 serving|advice|try OUTDIR"; exit 2 ;; esac
[ -n "$out" ] || { echo "usage: $0 serving|advice|try OUTDIR"; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${BUILD:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
python=${PYTHON:-python3}
run=$build/tools/iscope-run/iscope-run
budget=${BUDGET_S:-510}
src=$root/samples/$part
[ -x "$run" ] || { echo "record-suite: $run is missing; build it first"; exit 1; }
for d in "$build/python" "$build/bindings/python"; do
  [ -d "$d" ] && export PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}"
done
export PYTHONUNBUFFERED=1
t_start=$(date +%s)

# Default --ab rounds per program (each sized so its --ab run takes ~10-35 s on an H200).
default_rounds() {
  case $1 in
    hf_generate_streamer) echo 6 ;; aiohttp_batcher) echo 5 ;; continuous_batching) echo 3 ;;
    blocking_handler) echo 4 ;; host_sampling) echo 8 ;; per_sequence_item) echo 6 ;; fp16_gemm_mlp) echo 10 ;;
    static_tensor_copy) echo 8 ;; cpp_server) echo 8 ;; dataloader_bound) echo 6 ;; fp32_gemm) echo 10 ;;
    *) echo 6 ;;
  esac
}

names=${ONLY:-}
if [ -z "$names" ]; then
  names=$(cd "$src" && ls [a-z]*.py 2>/dev/null | sed 's/\.py$//' | tr '\n' ' ')
  [ "$part" = advice ] && names="$names cpp_server"
fi

# timeout for the next run: min(wanted, what the budget has left); prints 0 when too little is left.
budgeted() {
  local left=$(( budget - ($(date +%s) - t_start) ))
  if [ "$left" -lt 15 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# run_logged LOG TIMEOUT CMD... -> sets rc (124/137 on timeout, 125 when skipped for the budget)
run_logged() {
  local log=$1 t
  t=$(budgeted "$2")
  shift 2
  if [ "$t" = 0 ]; then
    echo "record-suite: skipped, the ${budget}s budget is spent" > "$log"
    rc=125
    return
  fi
  timeout --kill-after=10 "$t" "$@" > "$log" 2>&1
  rc=$?
}

last_json() { grep '^{' "$1" 2>/dev/null | tail -1; }

server_bin=""
if [ "$part" = advice ] && [[ " $names " == *" cpp_server "* ]]; then
  echo "record-suite: building cpp_server with ${NVCC:-nvcc}"
  t=$(date +%s)
  if "${NVCC:-nvcc}" -O2 -std=c++17 -arch="${CUDA_ARCH:-sm_90}" "$src/cpp_server/server.cu" -o "$out/server" \
      > "$out/cpp_server.build.log" 2>&1; then
    server_bin=$out/server
  else
    echo "record-suite: cpp_server build failed (see $out/cpp_server.build.log)"
  fi
  echo "record-suite: build took $(( $(date +%s) - t )) s"
fi

status=0
summary=()
for name in $names; do
  t0=$(date +%s)
  if [ "$name" = cpp_server ]; then
    if [ -z "$server_bin" ]; then
      summary+=("$name: NOT BUILT (see cpp_server.build.log)")
      status=1
      continue
    fi
    cmd=("$server_bin")
  elif [ -f "$src/$name.py" ]; then
    cmd=("$python" "$src/$name.py")
    # shellcheck disable=SC2206
    [ -n "${PROG_ARGS:-}" ] && cmd+=(${PROG_ARGS})
  else
    summary+=("$name: no such program in samples/$part")
    status=1
    continue
  fi
  rounds=${AB_ROUNDS:-$(default_rounds "$name")}
  echo "== $name (--ab $rounds)"

  ta=$(date +%s)
  run_logged "$out/$name.ab.log" 90 "${cmd[@]}" --ab "$rounds"
  ab_rc=$rc
  ta=$(( $(date +%s) - ta ))

  tr=$(date +%s)
  rm -rf "$out/$name.iscope"
  run_logged "$out/$name.run.log" 100 "$run" -q -o "$out/$name.iscope" -- "${cmd[@]}"
  run_rc=$rc
  tr=$(( $(date +%s) - tr ))

  tp=$(date +%s)
  if [ "${PLAIN:-1}" = 0 ]; then
    echo "record-suite: skipped (PLAIN=0)" > "$out/$name.plain.log"
    plain_rc=0
  else
    run_logged "$out/$name.plain.log" 70 "${cmd[@]}"
    plain_rc=$rc
  fi
  tp=$(( $(date +%s) - tp ))

  for r in $ab_rc $run_rc $plain_rc; do [ "$r" = 0 ] || status=1; done
  ab_line=$(grep -E '^AB ' "$out/$name.ab.log" 2>/dev/null | tail -1)
  alt_line=$(grep -E '^AB_ALT ' "$out/$name.ab.log" 2>/dev/null | tr '\n' ' ')
  head="$name: rc ab=$ab_rc run=$run_rc plain=$plain_rc; seconds ab=$ta run=$tr plain=$tp total=$(( $(date +%s) - t0 ))"
  echo "$head"
  echo "   ${ab_line:-no AB line} ${alt_line}"
  echo "   run:   $(last_json "$out/$name.run.log")"
  echo "   plain: $(last_json "$out/$name.plain.log")"
  for f in ab run plain; do
    r_var=${f}_rc
    if [ "${!r_var}" != 0 ]; then
      echo "   --- tail of $name.$f.log"
      tail -5 "$out/$name.$f.log" 2>/dev/null | sed 's/^/   | /'
    fi
  done
  summary+=("$head | ${ab_line:-no AB line} ${alt_line}| run: $(last_json "$out/$name.run.log")")
done

echo
echo "=== record-suite $part: $(( $(date +%s) - t_start )) s, logs and dumps in $out"
for line in "${summary[@]}"; do echo "$line"; done
exit $status

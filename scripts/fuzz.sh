#!/usr/bin/env bash
# Builds the libFuzzer targets fuzz/fuzz_*.cpp with clang (ASan + UBSan) straight from the sources, generates
# a seed corpus, and runs each target for a bounded time. Exit status: 0 when no target found anything, 1 when
# one found a crash, a leak, undefined behaviour or an out-of-memory input (the input is left in
# OUTDIR/artifacts/; reproduce with OUTDIR/bin/TARGET ARTIFACT, and add it to fuzz/regressions/TARGET/),
# 2 when the fuzzers cannot be built.
#
#   scripts/fuzz.sh [OUTDIR]     default OUTDIR: build-fuzz (the corpus there grows from run to run)
#   FUZZ_SECONDS=60              time per target, seconds
#   FUZZ_TARGETS="a b"           only these targets (names without .cpp); default: all
#   JOBS=N                       compiles at a time (default: nproc)
#   FUZZ_SEED=1                  libFuzzer's random seed (default 0: a new one each run). CI fixes it, so a
#                                run explores the same inputs every time and main does not turn red by luck;
#                                fuzz longer with other seeds by hand to find new bugs
#   FUZZ_CXX=clang++             the compiler; needs -fsanitize=fuzzer (Debian: clang + libclang-rt-14-dev,
#                                installed with apt-get when missing)
#
# Each target names what it needs in its first lines:
#   // fuzz-sources: lib/dump/reader.cpp ...     (relative to the repository root; globs such as lib/dump/*.cpp)
#   // fuzz-seeds: dump | json | config          (dump: small valid dumps from fuzz/make_seeds.cpp;
#                                                  json, config: fuzz/seeds/json/, fuzz/seeds/config/)
#   // fuzz-flags: -fno-sanitize=...             (optional: a known finding switched off, with the reason)
# A target naming a source that does not exist fails the run (exit 2): a target skipped for it went unfuzzed
# without anyone noticing once (fuzz_dump_reader, after lib/report/escape.cpp moved to lib/text).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/build-fuzz}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SECS=${FUZZ_SECONDS:-60}
CXX=${FUZZ_CXX:-clang++}

have_libfuzzer() {
  command -v "$CXX" >/dev/null 2>&1 || return 1
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    >"$OUT/probe.cpp"
  "$CXX" -fsanitize=fuzzer,address "$OUT/probe.cpp" -o "$OUT/probe" >/dev/null 2>&1
}
if ! have_libfuzzer; then
  echo "fuzz.sh: $CXX cannot build libFuzzer targets; installing clang and libclang-rt-14-dev"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y clang libclang-rt-14-dev || true
  if ! have_libfuzzer; then
    echo "fuzz.sh: $CXX cannot build with -fsanitize=fuzzer" >&2
    exit 2
  fi
fi

mkdir -p "$OUT/bin" "$OUT/artifacts" "$OUT/seeds/json"
CXXFLAGS=(-std=c++20 -g -O1 -I"$ROOT/include" -I"$ROOT/lib" -I"$ROOT/fuzz")
SAN=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)

echo "fuzz.sh: seed corpus in $OUT/seeds"
"$CXX" "${CXXFLAGS[@]}" "$ROOT/fuzz/make_seeds.cpp" "$ROOT/lib/dump/format.cpp" -o "$OUT/bin/make_seeds"
"$OUT/bin/make_seeds" "$OUT/seeds/dump" >/dev/null
for kind in "$ROOT"/fuzz/seeds/*/; do  # json, config, ...: the folder a target names in its fuzz-seeds line
  mkdir -p "$OUT/seeds/$(basename "$kind")"
  cp "$kind"* "$OUT/seeds/$(basename "$kind")/" 2>/dev/null || true
done

# Temporary files a target may create go to memory (the JSON importer no longer makes any: it works in memory).
export TMPDIR=${FUZZ_TMPDIR:-/dev/shm}
[ -w "$TMPDIR" ] || export TMPDIR=/tmp

status=0
ran=0
# Three phases. (1) Each selected target's sources are resolved and each (flags, source) pair becomes one compile
# job: the analyzer's ~150 files are shared by fuzz_analyze_dump and fuzz_json_trace, and compiling every target's
# sources in one clang call built them twice, on one core (CI's fuzz step grew past a quarter of its time budget).
# (2) The jobs run JOBS at a time. (3) Each target links its objects and runs.
JOBS=${JOBS:-$(nproc)}
OBJ="$OUT/obj"
rm -rf "$OBJ"
mkdir -p "$OBJ"
: >"$OBJ/jobs"
declare -A job_seen
targets=()
declare -A t_src t_seeds t_flags t_libs t_objs
for src in "$ROOT"/fuzz/fuzz_*.cpp; do
  name=$(basename "$src" .cpp)
  if [ -n "${FUZZ_TARGETS:-}" ] && [[ " $FUZZ_TARGETS " != *" $name "* ]]; then continue; fi
  sources=$(sed -n 's#^// fuzz-sources: ##p' "$src" | head -1)
  flags=$(sed -n 's#^// fuzz-flags: ##p' "$src" | head -1)
  paths=()
  missing=""
  for s in $sources; do  # a source may be a glob (lib/analyze/*.cpp): the lists then follow the libraries
    matched=0
    for f in "$ROOT"/$s; do
      if [ -f "$f" ]; then paths+=("$f"); matched=1; fi
    done
    [ "$matched" = 1 ] || missing="$missing $s"
  done
  if [ -n "$missing" ]; then  # a source moved or renamed: the list is out of date, and the target would go unfuzzed
    echo "fuzz.sh: $name names sources that do not exist:$missing (fix its // fuzz-sources: line)" >&2
    status=2
    continue
  fi
  key=$(printf '%s' "$flags" | md5sum | cut -c1-8)  # objects are shared by targets with the same flags
  mkdir -p "$OBJ/$key"
  printf '%s\n' "$flags" >"$OBJ/$key/flags"
  objs=""
  for f in "${paths[@]}"; do
    o="$OBJ/$key/${f#"$ROOT"/}.o"
    objs="$objs $o"
    if [ -z "${job_seen[$o]:-}" ]; then
      job_seen[$o]=1
      printf '%s %s %s\n' "$key" "$f" "$o" >>"$OBJ/jobs"
    fi
  done
  targets+=("$name")
  t_src[$name]=$src
  t_seeds[$name]=$(sed -n 's#^// fuzz-seeds: ##p' "$src" | head -1)
  t_flags[$name]=$flags
  t_libs[$name]=$(sed -n 's#^// fuzz-libs: ##p' "$src" | head -1)  # after the objects, where ld wants them
  t_objs[$name]=$objs
done

# One compile job: KEY SOURCE OBJECT. Coverage instrumentation without libFuzzer's main (fuzzer-no-link); the
# target's own file brings the main when it links. A failed compile leaves OBJECT.log and no OBJECT.
compile_one() {
  local key=$1 f=$2 o=$3
  mkdir -p "$(dirname "$o")"
  read -r -a extra <"$OBJ/$key/flags" || true
  "$CXX" "${CXXFLAGS[@]}" -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
    -fno-omit-frame-pointer "${extra[@]}" -c "$f" -o "$o" 2>"$o.log" || rm -f "$o"
}
export -f compile_one
export CXX OBJ
export CXXFLAGS_STR="${CXXFLAGS[*]}"
n_jobs=$(wc -l <"$OBJ/jobs")
echo "fuzz.sh: compiling $n_jobs sources for ${#targets[@]} target(s), $JOBS at a time"
# CXXFLAGS is an array: rebuilt in each job from its string (the paths in it hold no spaces: the repository's own).
xargs -P "$JOBS" -L 1 bash -c 'read -r -a CXXFLAGS <<<"$CXXFLAGS_STR"; compile_one "$@"' _ <"$OBJ/jobs"

for name in "${targets[@]}"; do
  src=${t_src[$name]}
  read -r -a flags <<<"${t_flags[$name]}"
  read -r -a libs <<<"${t_libs[$name]}"
  read -r -a objs <<<"${t_objs[$name]}"
  echo "fuzz.sh: building $name"
  broken=""
  for o in "${objs[@]}"; do [ -f "$o" ] || broken="$broken $o"; done
  if [ -n "$broken" ]; then
    echo "fuzz.sh: $name does not build:" >&2
    for o in $broken; do tail -20 "$o.log" >&2; done
    status=2
    continue
  fi
  if ! "$CXX" "${CXXFLAGS[@]}" "${SAN[@]}" "${flags[@]}" "$src" "${objs[@]}" "${libs[@]}" -o "$OUT/bin/$name" 2>"$OUT/$name.build.log"; then
    echo "fuzz.sh: $name does not build:" >&2
    tail -20 "$OUT/$name.build.log" >&2
    status=2
    continue
  fi
  seeds=${t_seeds[$name]}
  corpus="$OUT/corpus/$name"
  mkdir -p "$corpus"
  regress=()
  [ -d "$ROOT/fuzz/regressions/$name" ] && regress=("$ROOT/fuzz/regressions/$name")
  echo "fuzz.sh: running $name for ${SECS}s"
  # -rss_limit_mb / -malloc_limit_mb: a parser must not let a small input allocate gigabytes.
  if "$OUT/bin/$name" "$corpus" "$OUT/seeds/${seeds:-dump}" "${regress[@]}" -max_total_time="$SECS" -seed="${FUZZ_SEED:-0}" -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$OUT/artifacts/$name-" >"$OUT/$name.log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/$name.log")
    echo "fuzz.sh: $name: ${runs:-?} inputs, no crash"
  else
    echo "fuzz.sh: $name FAILED; the end of $OUT/$name.log:" >&2
    grep -v '^    #' "$OUT/$name.log" | tail -25 >&2
    status=1
  fi
  ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || { echo "fuzz.sh: no target was run" >&2; [ "$status" -ne 0 ] || status=2; }
exit $status

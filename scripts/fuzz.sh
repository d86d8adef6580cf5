#!/usr/bin/env bash
# Builds the libFuzzer targets under fuzz/ with clang (ASan + UBSan) straight from the sources, generates a
# seed corpus of small valid dumps, and runs each target for a bounded time. Exit status is non-zero when a
# target finds a crash, a leak, undefined behaviour or an out-of-memory input; the input that triggered it is
# left in OUTDIR/artifacts/ (reproduce with: OUTDIR/bin/TARGET ARTIFACT).
#
#   scripts/fuzz.sh [OUTDIR]          default OUTDIR: build-fuzz
#   FUZZ_SECONDS=60                   time per target (seconds)
#   FUZZ_CXX=clang++                  the compiler (needs -fsanitize=fuzzer: Debian's clang + libclang-rt-14-dev)
#
# Targets: fuzz_dump_reader (lib/dump reader + the Perfetto writer over it). The analyzer's JSON-trace input
# gets a target once it exists (fuzz/fuzz_json_trace.cpp is picked up automatically, seeded from
# fuzz/seeds/json/ when present).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "${1:-$ROOT/build-fuzz}" && cd "${1:-$ROOT/build-fuzz}" && pwd)
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
  $SUDO apt-get install -y clang libclang-rt-14-dev
  have_libfuzzer || { echo "fuzz.sh: $CXX still cannot build with -fsanitize=fuzzer" >&2; exit 2; }
fi

mkdir -p "$OUT/bin" "$OUT/artifacts"
CXXFLAGS=(-std=c++20 -g -O1 -I"$ROOT/include" -I"$ROOT/lib")
SAN=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
DUMP_SRC=("$ROOT/lib/dump/format.cpp" "$ROOT/lib/dump/reader.cpp" "$ROOT/lib/dump/clock_model.cpp")

echo "fuzz.sh: building the seed generator and the targets in $OUT/bin"
"$CXX" "${CXXFLAGS[@]}" "$ROOT/fuzz/make_seeds.cpp" "${DUMP_SRC[@]}" -o "$OUT/bin/make_seeds"
"$OUT/bin/make_seeds" "$OUT/seeds/dump"
"$CXX" "${CXXFLAGS[@]}" "${SAN[@]}" "$ROOT/fuzz/fuzz_dump_reader.cpp" "${DUMP_SRC[@]}" \
  "$ROOT/lib/report/escape.cpp" "$ROOT/lib/report/perfetto.cpp" -o "$OUT/bin/fuzz_dump_reader"
TARGETS=(fuzz_dump_reader:dump)

if [ -f "$ROOT/fuzz/fuzz_json_trace.cpp" ]; then
  # The JSON importer lives in lib/analyze; its target lists what it needs in a comment line
  # "// fuzz-sources: lib/analyze/json_trace.cpp ..." (paths relative to the repository root).
  extra=$(sed -n 's#^// fuzz-sources: ##p' "$ROOT/fuzz/fuzz_json_trace.cpp" | head -1)
  srcs=()
  for s in $extra; do srcs+=("$ROOT/$s"); done
  "$CXX" "${CXXFLAGS[@]}" "${SAN[@]}" "$ROOT/fuzz/fuzz_json_trace.cpp" "${srcs[@]}" "${DUMP_SRC[@]}" \
    -o "$OUT/bin/fuzz_json_trace"
  mkdir -p "$OUT/seeds/json"
  [ -d "$ROOT/fuzz/seeds/json" ] && cp -r "$ROOT/fuzz/seeds/json/." "$OUT/seeds/json/"
  TARGETS+=(fuzz_json_trace:json)
fi

status=0
for t in "${TARGETS[@]}"; do
  name=${t%%:*}
  seeds=${t##*:}
  corpus="$OUT/corpus/$name"
  mkdir -p "$corpus"
  echo "fuzz.sh: running $name for ${SECS}s"
  # -rss_limit_mb / -malloc_limit_mb: a parser must not let a small input allocate gigabytes.
  if ! "$OUT/bin/$name" "$corpus" "$OUT/seeds/$seeds" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$name-" \
      >"$OUT/$name.log" 2>&1; then
    echo "fuzz.sh: $name FAILED; last lines of $OUT/$name.log:" >&2
    tail -40 "$OUT/$name.log" >&2
    status=1
  else
    grep -E "^stat::number_of_executed_units|^#[0-9]+ +DONE" "$OUT/$name.log" | tail -2 || true
    echo "fuzz.sh: $name: no crash"
  fi
done
exit $status

#!/bin/sh
# check_no_cuda_needed.sh LIB: LIB has no link dependency on the CUDA libraries, which it opens with dlopen
# so that it loads on machines without a driver. Exit 77 (ctest: skipped) when readelf is missing.
lib=$1
if ! command -v readelf >/dev/null 2>&1; then
  echo "skipped: readelf is not installed (binutils)"
  exit 77
fi
needed=$(readelf -d "$lib") || { echo "FAIL: readelf -d $lib failed"; exit 1; }
echo "$needed" | grep -q NEEDED || { echo "FAIL: readelf -d $lib lists no NEEDED entry at all"; exit 1; }
bad=$(echo "$needed" | grep NEEDED | grep -E 'libcupti|libcuda|libcudart|libnvToolsExt')
if [ -n "$bad" ]; then
  echo "FAIL: $lib links CUDA libraries it must open at run time:"
  echo "$bad"
  exit 1
fi
echo "ok: $lib needs none of libcupti, libcuda, libcudart, libnvToolsExt"

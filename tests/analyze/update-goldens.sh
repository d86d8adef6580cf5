#!/bin/sh
# Regenerates tests/fixtures/*.expected (findings digests) from the current analyzer: the synthetic scenarios
# and every tests/fixtures/*.iscope. Review `git diff tests/fixtures` before committing.
#   tests/analyze/update-goldens.sh [BUILD_DIR]        (default: build)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ninja -C "$build" test_analyze
INFERSCOPE_UPDATE_GOLDENS=1 "$build/tests/analyze/test_analyze" -tc='golden*'
git -C "$root" status --short tests/fixtures

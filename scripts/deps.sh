#!/usr/bin/env bash
# Installs what InferScope needs from Debian 12's packages, only when something is missing.
#   scripts/deps.sh                everything: the build, every test, the browser checks, the wheel
#   scripts/deps.sh first-report   only what scripts/quickstart.sh builds (the tools, the runtime library, the
#                                  C++ sample): no test framework, browser, node, Python headers or sanitizer runtime
set -euo pipefail
FIRST_REPORT=(build-essential cmake ninja-build pkg-config
              libboost1.81-dev libboost-json1.81-dev libcxxopts-dev libyaml-cpp-dev zlib1g-dev)
PKGS=(build-essential cmake ninja-build pkg-config
      libboost1.81-dev libboost-json1.81-dev   # Debian 12's default Boost (1.74) has no Boost.JSON
      doctest-dev libcxxopts-dev libyaml-cpp-dev libbenchmark-dev
      zlib1g-dev                                  # gzipped torch.profiler traces (iscope-analyze)
      libsqlite3-dev sqlite3                      # iscope-analyze --sqlite; its tests read the database back
      libmuparser-dev                             # rule files: their expressions (docs/rules.md)
      nodejs                                      # runs the HTML report's sort script in a test
      chromium python3-websocket                  # the HTML reports in a real browser (tests/report/browser_check.py)
      libcpp-httplib-dev                          # the live page and /metrics (lib/live, docs/live.md)
      python3 python3-dev python3-pytest
      python3-venv python3-pip python3-setuptools python3-wheel   # pip install . (tests/pip), offline
      clang libclang-rt-14-dev binutils)
case "${1:-all}" in
  all) ;;
  first-report) PKGS=("${FIRST_REPORT[@]}") ;;
  *) echo "usage: scripts/deps.sh [all|first-report]" >&2; exit 2 ;;
esac
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: everything is installed"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"

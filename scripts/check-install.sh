#!/usr/bin/env bash
# Installs a build into a temporary prefix and builds a user project against it with
# find_package(inferscope) + inferscope::inferscope, then runs it with a session and reads the dump back.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PREFIX=$(mktemp -d)
trap 'rm -rf "$PREFIX"' EXIT
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
[ -s "$PREFIX/share/doc/inferscope/LICENSE" ] || { echo "install check: no share/doc/inferscope/LICENSE"; exit 1; }
mkdir -p "$PREFIX/user"
cat > "$PREFIX/user/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(user CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(inferscope REQUIRED)
add_executable(user main.cpp)
target_link_libraries(user PRIVATE inferscope::inferscope)
CM
cat > "$PREFIX/user/main.cpp" <<'CPP'
#include <inferscope/scope.hpp>
int main() {
  inferscope::Config cfg;
  cfg.output = "user.iscope";
  inferscope::Session s(cfg);
  for (int i = 0; i < 10; ++i) { ISCOPE_RANGE("user_step"); }
  return s.ok() ? 0 : 1;
}
CPP
cmake -S "$PREFIX/user" -B "$PREFIX/user/build" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$PREFIX/user/build" >/dev/null
(cd "$PREFIX/user/build" && ./user)
"$PREFIX/bin/iscope-analyze" "$PREFIX/user/build/user.iscope" --summary | grep -qF '| `user_step` | 10 |'
echo "install check: find_package(inferscope) project built, ran and its dump reads back (prefix $PREFIX)"

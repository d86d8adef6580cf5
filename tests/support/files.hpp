// File helpers the tests share: the checked-in fixtures, and whole files read or written at once.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace inferscope::testsupport {

/// tests/fixtures in the source tree (needs INFERSCOPE_SOURCE_DIR, as every test target defines it).
inline std::filesystem::path fixtures() { return std::filesystem::path(INFERSCOPE_SOURCE_DIR) / "tests" / "fixtures"; }

/// The file's bytes ("" when it cannot be read).
inline std::string read(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

/// Replaces the file with `s`.
inline void write(const std::filesystem::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

}  // namespace inferscope::testsupport

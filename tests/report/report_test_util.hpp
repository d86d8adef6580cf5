// Helpers shared by the report tests.
#pragma once

#include "report/escape.hpp"
#include "report/report.hpp"

#include <sstream>

#include <string>

namespace inferscope::report::testing {

/// The HTML report of `a`, as a string.
inline std::string html(const analyze::Analysis& a) {
  std::ostringstream out;
  report::write_html(a, out);
  return out.str();
}

/// The Markdown report of `a`, as a string.
inline std::string markdown(const analyze::Analysis& a) {
  std::ostringstream out;
  report::write_markdown(a, out);
  return out.str();
}

/// True when the whole string is well-formed UTF-8.
inline bool is_valid_utf8(const std::string& s) { return valid_utf8(s) == s; }

inline size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

}  // namespace inferscope::report::testing

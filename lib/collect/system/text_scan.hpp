// Small text helpers shared by the /proc parsers (proc_parse.cpp) and the cgroup parsers (cgroup_cpu.cpp): a
// failure with its reason, whole-token numbers, trimming, whitespace tokens and lines. Internal to the system
// collector; everything is on string_views of the file's text, nothing allocates but the token list.
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace inferscope::sys::text {

/// Sets *error (when given) to the reason and returns false.
inline bool fail(std::string* error, std::string message) {
  if (error) *error = std::move(message);
  return false;
}

/// The whole of `s` as a number (integer or floating point); false for an empty string or anything left over.
template <class T>
bool to_num(std::string_view s, T& v) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

/// Space, tab, newline, carriage return and NUL: what separates and surrounds values in these files.
inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0'; }

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

/// Tokens between runs of is_space characters.
inline std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !is_space(s[j])) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

/// Calls f(line) for each '\n'-separated line (a last line without '\n' included).
template <class F>
void for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    f(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

}  // namespace inferscope::sys::text

// Edit distance for "did you mean" in messages about names the user typed: settings keys (config's
// settings_table.cpp), rule files' names (rulefile) and the metrics they read (analyze/rules/metrics.cpp).
// Header-only, in lib/text with the other readings of names, below all three.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferscope::text {

/// Insertions, deletions and substitutions that turn `a` into `b`.
inline size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// Beyond about a third of the word, the "closest" name is a guess that misleads more than it helps.
inline size_t close_name_limit(std::string_view typed) { return std::max<size_t>(2, typed.size() / 3); }

/// Up to `n` of `names` closest to `typed`, closest first (ties in the given order), within close_name_limit. A
/// name typed in part ("h2d" for h2d_share, "buffer" for buffer_mode) is as good a guess as a one-letter typo.
template <class Names>
std::vector<std::string> closest_names(std::string_view typed, const Names& names, size_t n = 1) {
  std::vector<std::pair<size_t, std::string_view>> scored;
  for (std::string_view name : names) {
    size_t d = edit_distance(typed, name);
    if (typed.size() >= 3 && name.find(typed) != std::string_view::npos) d = std::min<size_t>(d, 1);
    if (d <= close_name_limit(typed)) scored.emplace_back(d, name);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && out.size() < n; ++i) out.emplace_back(scored[i].second);
  return out;
}

}  // namespace inferscope::text

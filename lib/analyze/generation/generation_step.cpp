// The generation call as the step (generation.hpp: generating_name, holds_token_calls).
#include "analyze/generation/generation.hpp"

#include <algorithm>

namespace inferscope::analyze::detail {

bool holds_token_calls(std::span<const std::pair<int64_t, int64_t>> outer, std::span<const std::pair<int64_t, int64_t>> inner) {
  if (outer.empty()) return false;
  size_t holding = 0;
  for (const auto& [s, e] : outer) {
    auto lo = std::lower_bound(inner.begin(), inner.end(), s, [](const std::pair<int64_t, int64_t>& c, int64_t v) { return c.first < v; });
    size_t n = 0;
    for (auto it = lo; it != inner.end() && it->first < e; ++it)
      if (it->second <= e) ++n;
    holding += n >= kMinTokenCalls;
  }
  return holding * 2 >= outer.size();
}

}  // namespace inferscope::analyze::detail

#include "analyze/support/order_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace inferscope::analyze {

double median_in_place(std::vector<double>& v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + long(mid), v.end());
  double hi = v[mid];
  if (v.size() % 2) return hi;
  double lo = *std::max_element(v.begin(), v.begin() + long(mid));
  return (lo + hi) / 2;
}

double percentile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t k = size_t(std::ceil(q * double(sorted.size())));
  return sorted[std::min(sorted.size() - 1, k ? k - 1 : 0)];
}

}  // namespace inferscope::analyze

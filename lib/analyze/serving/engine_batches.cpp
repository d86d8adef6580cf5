// Stage "engine batches" (engine_batches.hpp): step time by batch size, and streamed requests' TTFT and TPOT.
#include "analyze/serving/engine_batches.hpp"

#include "analyze/support/order_stats.hpp"

#include <algorithm>
#include <bit>
#include <map>

namespace inferscope::analyze::detail {
namespace {

// A batch size's row: exact up to 2, then powers of two ("3-4", "5-8", ...), so that an engine whose batch drifts
// over 64 sizes still fits a short table, and each row has steps enough for its mean.
std::pair<uint64_t, std::string> batch_bin(uint64_t n) {
  if (n <= 2) return {n, std::to_string(n)};
  const uint64_t hi = std::bit_ceil(n), lo = hi / 2 + 1;
  return {hi, std::to_string(lo) + "-" + std::to_string(hi)};
}

// Least squares y = a + b x over the points; r^2 the share of y's variance the line explains (0 when y is flat).
void fit_line(const std::vector<std::pair<double, double>>& xy, EngineBatches& e) {
  const double n = double(xy.size());
  double sx = 0, sy = 0;
  for (const auto& [x, y] : xy) {
    sx += x;
    sy += y;
  }
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (const auto& [x, y] : xy) {
    sxx += (x - mx) * (x - mx);
    sxy += (x - mx) * (y - my);
    syy += (y - my) * (y - my);
  }
  if (sxx <= 0) return;
  e.per_request_ms = sxy / sxx;
  e.fixed_ms = my - e.per_request_ms * mx;
  e.fit_r2 = syy > 0 ? std::clamp(sxy * sxy / (sxx * syy), 0.0, 1.0) : 0;
}

}  // namespace

long serving_step(std::span<const Span> steps, int64_t g0, int64_t g1) {
  auto it = std::upper_bound(steps.begin(), steps.end(), g1, [](int64_t v, const Span& s) { return v < s.end; });
  if (it == steps.begin()) return -1;
  --it;
  return it->end > g0 ? long(it - steps.begin()) : -1;
}

EngineBatches engine_batches(const CoroutineActivity& act, std::span<const CoroutineLife* const> requests,
                             std::span<const Span> steps) {
  EngineBatches e;
  if (steps.empty() || requests.empty()) return e;
  std::vector<uint32_t> batch(steps.size(), 0);
  std::vector<double> ttft, tpot, served_counts;
  for (const CoroutineLife* l : requests) {
    long first = -1, last = -1;
    size_t served = 0;
    for (size_t k = 0; k + 1 < l->runs.size(); ++k) {
      const long sv = serving_step(steps, act.runs[l->runs[k]].end, act.runs[l->runs[k + 1]].start);
      if (sv < 0 || sv == last) continue;  // a step resumes a request once
      ++batch[size_t(sv)];
      ++served;
      if (first < 0) first = sv;
      last = sv;
    }
    if (served < 2) continue;
    served_counts.push_back(double(served));
    ttft.push_back(double(steps[size_t(first)].end - l->start) / 1e6);
    tpot.push_back(double(steps[size_t(last)].end - steps[size_t(first)].end) / 1e6 / double(served - 1));
  }

  // Step time by batch: rows of kMinStepsPerBatchRow steps or more, shown when two sizes or more have one.
  std::map<uint64_t, std::pair<std::string, std::vector<std::pair<double, double>>>> rows;  // bin -> (label, (n, ms))
  std::vector<std::pair<double, double>> points;
  for (size_t k = 0; k < steps.size(); ++k) {
    if (!batch[k]) continue;
    const double ms = double(steps[k].end - steps[k].start) / 1e6;
    auto [bin, label] = batch_bin(batch[k]);
    rows[bin].first = label;
    rows[bin].second.push_back({double(batch[k]), ms});
    points.push_back({double(batch[k]), ms});
  }
  for (auto& [bin, row] : rows) {
    if (row.second.size() < kMinStepsPerBatchRow) continue;
    BatchSizeRow r{row.first, row.second.size(), 0, 0, 0};
    std::vector<double> ms;
    for (const auto& [n, t] : row.second) {
      r.mean_batch += n;
      r.mean_ms += t;
      ms.push_back(t);
    }
    r.mean_batch /= double(r.steps);
    r.mean_ms /= double(r.steps);
    r.p50_ms = median_in_place(ms);
    e.by_batch.push_back(std::move(r));
  }
  if (e.by_batch.size() < 2) e.by_batch.clear();  // one size: nothing to set against
  else fit_line(points, e);

  e.streamed_requests = ttft.size();
  e.streamed = !ttft.empty() && double(ttft.size()) >= kStreamedShare * double(requests.size());
  if (e.streamed) {
    double sum = 0;
    for (double v : served_counts) sum += v;
    e.steps_per_request = sum / double(served_counts.size());
    std::sort(ttft.begin(), ttft.end());
    std::sort(tpot.begin(), tpot.end());
    e.ttft_p50_ms = percentile_sorted(ttft, 0.5);
    e.ttft_p90_ms = percentile_sorted(ttft, 0.9);
    e.tpot_p50_ms = percentile_sorted(tpot, 0.5);
    e.tpot_p90_ms = percentile_sorted(tpot, 0.9);
  }
  return e;
}

}  // namespace inferscope::analyze::detail

#include "report/common.hpp"

#include "report/escape.hpp"

#include <cmath>

namespace inferscope::report {

std::vector<BreakdownRow> breakdown_rows(const analyze::Breakdown& b) {
  std::vector<BreakdownRow> rows = {
      {"CPU preprocessing", "cpu_preprocessing", b.cpu_preprocessing_ms},
      {"H2D copies", "h2d", b.h2d_ms},
      {"GPU compute", "gpu_compute", b.gpu_compute_ms},
      {"D2H copies", "d2h", b.d2h_ms},
      {"Sync wait", "sync_wait", b.sync_wait_ms},
      {"Framework overhead", "framework_overhead", b.framework_overhead_ms},
      {"Idle", "idle", b.idle_ms},
  };
  double sum = 0;
  for (const auto& r : rows) sum += r.ms;
  const double rest = b.step_ms - sum;
  if (std::isfinite(rest) && std::fabs(rest) > 1e-3) rows.push_back({"Unattributed", "unattributed", rest});
  return rows;
}

double pct_of(double ms, double step_ms) { return step_ms > 0 ? ms / step_ms * 100.0 : 0.0; }

std::string fmt_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? std::to_string(bytes) + " B" : fmt(v, 1) + " " + units[u];
}

std::string fmt_peak(const analyze::CopyRow& r) {
  if (r.peak_bandwidth_gbps <= 0) return "unknown";
  return fmt(r.peak_bandwidth_gbps, 1) + (r.peak_assumed ? " (assumed)" : "");
}

}  // namespace inferscope::report

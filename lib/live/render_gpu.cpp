#include "live/render_gpu.hpp"

#include "live/render.hpp"
#include "live/render_util.hpp"

namespace inferscope::live {

namespace {

struct WindowTotals {
  StepSplit ticks{};
  uint64_t step_ticks = 0;
};

WindowTotals totals_of(const std::vector<SettledStep>& window) {
  WindowTotals t;
  for (const SettledStep& x : window) {
    for (size_t c = 0; c < kCategories; ++c) t.ticks[c] += x.ticks[c];
    t.step_ticks += x.step.end - x.step.start;
  }
  return t;
}

double share(uint64_t part, uint64_t whole) { return whole ? double(part) / double(whole) : 0.0; }

// The category with the most time over the window. No dominance threshold: the share is shown beside it, so a
// 30 % "winner" reads as the mixed step it is, where a cutoff would hide it.
size_t largest(const StepSplit& ticks) {
  size_t best = 0;
  for (size_t c = 1; c < kCategories; ++c)
    if (ticks[c] > ticks[best]) best = c;
  return best;
}

}  // namespace

std::vector<SettledStep> gpu_window(const Snapshot& s) {
  std::vector<SettledStep> out;
  const size_t from = s.settled.size() > kWindowSteps ? s.settled.size() - kWindowSteps : 0;
  for (size_t i = from; i < s.settled.size(); ++i)
    if (s.settled[i].complete && s.settled[i].step.end > s.settled[i].step.start) out.push_back(s.settled[i]);
  return out;
}

std::string gpu_json(const Snapshot& s) {
  if (!s.gpu_seen) return "null";
  const auto window = gpu_window(s);
  const WindowTotals t = totals_of(window);
  std::vector<double> shares;
  for (const SettledStep& x : window) shares.push_back(share(x.ticks[0], x.step.end - x.step.start));
  std::string out = "{\"records\":" + std::to_string(s.gpu_records) +
                    ",\"steps_settled\":" + std::to_string(s.steps_settled) +
                    ",\"steps_pending\":" + std::to_string(s.steps_pending) +
                    ",\"steps_incomplete\":" + std::to_string(s.steps_incomplete) +
                    ",\"window_steps\":" + std::to_string(window.size());
  if (window.empty()) return out + ",\"busy_p50\":null,\"busy_ratio\":null,\"categories\":[],\"bottleneck\":null}";
  out += ",\"busy_p50\":" + num(quantile(shares, 0.5)) + ",\"busy_ratio\":" + num(share(t.ticks[0], t.step_ticks));
  out += ",\"categories\":[";
  for (size_t c = 0; c < kCategories; ++c)
    out += std::string(c ? "," : "") + "{\"name\":\"" + category_name(Category(c)) +
           "\",\"share\":" + num(share(t.ticks[c], t.step_ticks)) +
           ",\"ms_per_step\":" + num(ms(s, t.ticks[c]) / double(window.size())) + "}";
  const size_t top = largest(t.ticks);
  return out + "],\"bottleneck\":{\"category\":\"" + category_name(Category(top)) +
         "\",\"share\":" + num(share(t.ticks[top], t.step_ticks)) + "}}";
}

std::string gpu_timeline_json(const Snapshot& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.gpu_spans.size(); ++i) {
    const GpuSpan& g = s.gpu_spans[i];
    out += std::string(i ? "," : "") + "{\"device\":" + std::to_string(g.device) +
           ",\"stream\":" + std::to_string(g.stream) + ",\"kind\":\"" + gpu_kind_name(g.kind) +
           "\",\"start_ms\":" + num(at_ms(s, g.start)) + ",\"dur_ms\":" + num(ms(s, g.end - g.start)) + "}";
  }
  return out + "]";
}

std::string gpu_metrics(const Snapshot& s) {
  if (!s.gpu_seen) return "";
  std::string o;
  o += "# HELP inferscope_gpu_records_total GPU activity records (kernels, copies, memsets) received.\n";
  o += "# TYPE inferscope_gpu_records_total counter\n";
  o += "inferscope_gpu_records_total " + std::to_string(s.gpu_records) + "\n";
  o += "# HELP inferscope_gpu_busy_seconds_total Time inside settled steps during which a GPU ran a kernel, copy or "
       "memset (live estimate).\n";
  o += "# TYPE inferscope_gpu_busy_seconds_total counter\n";
  o += "inferscope_gpu_busy_seconds_total " + num(s.category_seconds[0]) + "\n";
  const auto window = gpu_window(s);
  if (!window.empty()) {
    const WindowTotals t = totals_of(window);
    o += "# HELP inferscope_gpu_busy_ratio GPU busy time over step time, newest settled steps (live estimate).\n";
    o += "# TYPE inferscope_gpu_busy_ratio gauge\n";
    o += "inferscope_gpu_busy_ratio " + num(share(t.ticks[0], t.step_ticks)) + "\n";
  }
  o += "# HELP inferscope_step_time_seconds_total Settled steps' time by what bounded it (live estimate; "
       "iscope-analyze on the dump gives the verdict).\n";
  o += "# TYPE inferscope_step_time_seconds_total counter\n";
  for (size_t c = 0; c < kCategories; ++c)
    o += std::string("inferscope_step_time_seconds_total{category=\"") + category_name(Category(c)) + "\"} " +
         num(s.category_seconds[c]) + "\n";
  return o;
}

}  // namespace inferscope::live

// pipeline_bubble: one process drives several GPUs (pipeline stages on cuda:0 and cuda:1) and they take turns:
// while one works the others wait for its output. If the stages ran on different micro-batches at once, the
// step would take about as long as the busiest GPU's work: the impact is the GPUs' busy time (their union) less
// the busiest one's, the time perfect pipelining could hide (docs/multi-gpu.md).
#include "analyze/rules/rule.hpp"

#include <algorithm>
#include <map>

namespace inferscope::analyze::rules {

std::optional<Finding> pipeline_bubble(const RuleInput& in) {
  const detail::TypicalStep& t = in.t;
  if (t.devices < 1.5 || t.dur <= 0) return std::nullopt;  // one GPU in most steps
  const double busy = t.compute + t.comm + t.h2d + t.d2h;  // the union over the GPUs
  const double bubble = std::max(0.0, busy - t.device_busy_max);
  if (bubble / t.dur * 100 < in.th.min_impact_pct) return std::nullopt;
  std::map<int, int> busiest;
  for (const auto& s : in.steps) ++busiest[s.busiest_device];
  int device = 0, most = -1;
  for (const auto& [d, n] : busiest)
    if (n > most) most = n, device = d;
  const double together = busy > 0 ? t.device_busy_sum / busy : 0;
  Finding f = make_finding(in, Category::kPipelineBubble,
                           fmt("%.0f", t.devices) + " GPUs take turns: the busiest (cuda:" + std::to_string(device) +
                               ") works " + fms(t.device_busy_max / 1e6) + " of the step, and the GPUs are busy " +
                               fms(busy / 1e6) + " one after another",
                           bubble / 1e6, 0.8);
  f.evidence.push_back("GPU work of the step on " + fmt("%.0f", t.devices) + " GPUs: " + fms(t.device_busy_sum / 1e6) +
                       " in all, spread over " + fms(busy / 1e6) + " of the step: on average " + fmt("%.2f", together) +
                       " GPUs at work at once (1: strictly in turns)");
  f.evidence.push_back("The busiest GPU, cuda:" + std::to_string(device) + ", works " + fms(t.device_busy_max / 1e6) +
                       "; with the stages overlapped the step would take about that");
  if (t.h2d_bytes > 0 && t.d2h_bytes > 0)
    f.evidence.push_back("Data crosses the host each step: " + fmt("%.1f MB", t.d2h_bytes / 1e6) + " device-to-host and " +
                         fmt("%.1f MB", t.h2d_bytes / 1e6) + " host-to-device");
  f.metrics["bubble_ms"] = bubble / 1e6;
  f.metrics["gpus_at_once"] = together;
  f.metrics["busiest_gpu_ms"] = t.device_busy_max / 1e6;
  Suggestion s;
  s.action = "Pipeline the stages across the GPUs: split each batch into micro-batches and let cuda:0 start micro-batch "
             "k+1 while the next GPU runs micro-batch k (no synchronize between stages, each stage on its own stream)";
  s.priority = bubble / t.dur * 100 >= in.th.min_impact_pct ? "high" : "medium";
  s.estimated = true;
  s.impact_ms = bubble / 1e6;
  s.model = "devices: the stages overlapped, the busiest GPU sets the pace";
  f.suggestions.push_back(s);
  if (t.h2d_bytes > 0 && t.d2h_bytes > 0)
    suggest(f, "medium", "Copy activations between the GPUs directly: tensor.to(\"cuda:1\", non_blocking=True) is a "
                         "peer copy (NVLink or PCIe) where .cpu() then .to() crosses host memory twice");
  suggest(f, "low", "Let the GPUs run ahead of each other: no torch.cuda.synchronize() or .item() between the stages, "
                    "only at the step's end");
  suggest(f, "low", "Balance the stages: move layers from cuda:" + std::to_string(device) +
                        " to the other GPUs until their busy times are alike");
  return f;
}

}  // namespace inferscope::analyze::rules

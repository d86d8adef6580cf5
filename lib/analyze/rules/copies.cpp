// h2d_bound / d2h_bound / pcie_saturation: copies of one direction are all the GPU does for a share of the
// step. Below saturated_share of the link's practical peak the way the copies are made is the problem
// (pageable memory, no overlap): h2d/d2h_bound; at or above it the link itself is: pcie_saturation.
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

namespace inferscope::analyze::rules {
namespace {

/// From this share of a direction's bytes in GPU-to-GPU copies through host memory, that is what the copies are:
/// half or more, so the advice for the rest (pinning) is not the first thing to do.
constexpr double kBouncedShare = 0.5;
/// A copy seen this many times per step, or at most 1/this: once per step (a step or two of warm-up either way).
constexpr double kOncePerStep = 0.9;
/// A copy that carries this share of the step's host-to-device bytes is the step's copy: its removal is the removal
/// of them all, as the replay models it.
constexpr double kMostBytes = 0.9;

struct CopyTotals {
  uint64_t bytes = 0, pageable = 0;
  double busy_ms = 0;
  double gbps() const { return busy_ms > 0 ? double(bytes) / (busy_ms * 1e6) : 0; }
};

CopyTotals totals(const std::vector<CopyRow>& copies, bool h2d) {
  CopyTotals c;
  for (const auto& r : copies)
    if (r.direction == (h2d ? "h2d" : "d2h")) {
      c.bytes += r.bytes;
      c.busy_ms += r.total_ms;
      if ((h2d ? r.src_memory : r.dst_memory) == "pageable") c.pageable += r.bytes;
    }
  return c;
}

std::string largest_copy(const RuleInput& in, bool h2d) {
  for (const auto& [d, who] : in.launchers.top_copies)
    if (d.rfind(h2d ? "H2D" : "D2H", 0) == 0) return d + " from " + who;
  return "";
}

void saturated_suggestions(Finding& f, const std::string& what) {
  suggest(f, "high", "Copy fewer bytes: " + what + " — send compact dtypes (uint8 images, fp16/bf16 instead of fp32), "
                     "crop/resize or tokenize on the other side");
  suggest(f, "high", "Keep data resident on the GPU across steps (cache weights/embeddings/KV on the device) instead of re-copying");
  suggest(f, "medium", "Overlap the copies with compute on a separate CUDA stream (non_blocking=True from pinned memory) so "
                       "the link runs while kernels do");
  suggest(f, "low", "Check the slot: nvidia-smi -q shows the negotiated PCIe generation and width");
}

// Most of the direction's bytes go from one GPU to another through host memory: copy GPU to GPU instead.
bool bounced(const RuleInput& in, bool h2d) { return in.bounces.pairs > 0 && in.bounces.share(h2d) >= kBouncedShare; }

void bounce_evidence(Finding& f, const RuleInput& in, bool h2d) {
  const detail::HostBounces& b = in.bounces;
  f.evidence.push_back(fpct(b.share(h2d) * 100) + " of the " + (h2d ? "host-to-device" : "device-to-host") +
                       " bytes are one half of a copy from cuda:" + std::to_string(b.from_device) + " to cuda:" +
                       std::to_string(b.to_device) + " through host memory (" + std::to_string(b.pairs) +
                       " device-to-host copies each followed by a host-to-device copy of the same bytes to the other GPU)");
  f.metrics["bounced_share"] = b.share(h2d);
}

// How many times per step a copy of the same size from the same code is made, when it is a whole number k >= 1 (the
// count over the trace within a tenth of k per step: a step or two of warm-up either way); 0 otherwise.
int times_per_step(uint64_t count, uint64_t steps) {
  if (steps == 0 || count < steps * kOncePerStep) return 0;
  const double per = double(count) / double(steps);
  const double k = std::round(per);
  return k >= 1 && std::fabs(per - k) <= (1 - kOncePerStep) * k ? int(k) : 0;
}

// The largest host-to-device copy repeated a fixed number of times per step, the same size from the same code: a
// tensor that may not change between steps (a table, a mask, weights copied again). nullopt: none.
std::optional<size_t> repeated_h2d(const RuleInput& in) {
  const auto& l = in.launchers;
  for (size_t i = 0; i < l.top_copies.size() && i < l.top_copy_counts.size(); ++i) {
    if (l.top_copies[i].first.rfind("H2D", 0) != 0) continue;
    if (times_per_step(l.top_copy_counts[i], in.stats.total)) return i;
  }
  return std::nullopt;
}

// "Keep it on the GPU": the copy repeated every step, if its data do not change, is made once before the loop.
void suggest_resident(Finding& f, const RuleInput& in) {
  const std::optional<size_t> i = repeated_h2d(in);
  if (!i) return;
  const auto& [desc, who] = in.launchers.top_copies[*i];
  const uint64_t n = in.launchers.top_copy_counts[*i];
  const int k = times_per_step(n, in.stats.total);
  const double each = double(in.launchers.top_copy_bytes[*i]) / double(n);
  const double per_step = each * k;
  f.evidence.push_back("the same " + fmb(each) + " copy (" + desc + ") from " + who + ", " +
                       (k == 1 ? std::string("once") : std::to_string(k) + " times") + " per step: " + std::to_string(n) +
                       " copies over " + std::to_string(in.stats.total) + " steps");
  replay::Change resident;
  resident.remove_h2d = true;
  // The replay removes every host-to-device copy of the step: that is this copy only where it carries nearly all
  // of the step's bytes; otherwise the saving would count other copies too, and is not estimated.
  const bool alone = in.t.h2d_bytes > 0 && per_step >= kMostBytes * in.t.h2d_bytes;
  const std::string action = "If the tensor " + who + " copies every step does not change between steps (a table, a "
                             "mask, weights), copy it to the GPU once before the loop and reuse it: " + fmb(per_step) +
                             " less to move per step" + (python_program(in) ? " (keep the .to('cuda') result)" : "");
  if (alone)
    suggest_replayed(f, in, "high", action, resident, "the step's host-to-device copies gone (the data stays on the GPU)");
  else
    suggest(f, "high", action);
}

void unsaturated_suggestions(Finding& f, const RuleInput& in, bool h2d, const CopyTotals& c, const std::string& what,
                             double copies_per_step) {
  if (bounced(in, h2d)) {
    // Pinning speeds up both halves but keeps both, and the synchronous .cpu() between them.
    suggest(f, "high", "Copy GPU to GPU directly: x.to(\"cuda:" + std::to_string(in.bounces.to_device) +
                       "\", non_blocking=True) on a tensor on cuda:" + std::to_string(in.bounces.from_device) +
                       " is one peer copy (NVLink or PCIe), where .cpu() then .to() crosses host memory twice and waits "
                       "for the first copy on the host");
  } else {
    if (h2d) suggest_resident(f, in);
    if (c.pageable) {
      replay::Change pin;
      pin.pin_copies = true;
      pin.pinned_gbps = in.link.pinned_gbps;
      const std::string how = python_program(in)
          ? (in.facts.has(detail::kFactDataLoader) ? "DataLoader(pin_memory=True), or tensor.pin_memory() for tensors made "
                                                     "outside it, and .to('cuda', non_blocking=True)"
                                                   : "tensor.pin_memory() once (a pinned staging buffer reused each step) "
                                                     "and .to('cuda', non_blocking=True)")
          : "cudaHostAlloc / cudaHostRegister the host buffers once, and cudaMemcpyAsync from them";
      suggest_replayed(f, in, "high", "Pin the host buffers: " + what + " comes from pageable memory; use " + how, pin,
                       "pageable copies at the link's practical peak");
    }
  }
  suggest(f, "high", std::string("Overlap the ") + (h2d ? "input" : "output") + " copies with compute: issue them on a side "
                     "CUDA stream with non_blocking=True and prefetch step N+1's data during step N");
  suggest(f, "medium", std::string("Move fewer bytes: ") + (h2d ? "preprocess on the GPU from compact inputs (uint8, fp16)"
                                                               : "reduce on the GPU (argmax/top-k) and copy back only the result"));
  if (copies_per_step >= 4)
    suggest(f, "medium", fmt("Batch the %.0f copies per step into fewer, larger ones (small copies pay a fixed cost each)", copies_per_step));
  if ((!c.pageable || copies_per_step < 4) && !(h2d && repeated_h2d(in)))
    suggest(f, "low", "Keep reused data resident on the GPU instead of copying it every step");
}

std::optional<Finding> copy_rule(const RuleInput& in, bool h2d) {
  const double t = (h2d ? in.t.h2d : in.t.d2h) / 1e6;
  if (!reported(in, t)) return std::nullopt;
  const CopyTotals c = totals(in.tables.copies, h2d);
  const double share = in.link.peak_h2d_gbps > 0 ? c.gbps() / in.link.peak_h2d_gbps : 0, pct = t / in.step_ms() * 100;
  const double per_step = h2d ? in.t.h2d_bytes : in.t.d2h_bytes;
  const double copies_per_step = h2d ? in.t.copies_h2d : in.t.copies_d2h;
  const char* dir = h2d ? "host-to-device" : "device-to-host";
  const bool saturated = share >= in.th.saturated_share;
  Finding f = saturated
      ? make_finding(in, Category::kPcieSaturation, std::string("The PCIe link is saturated by ") + dir + " copies", t,
                     0.5 + 0.4 * std::min(1.0, (share - in.th.saturated_share) / 0.3) - (in.link.peak_assumed ? 0.1 : 0))
      : make_finding(in, h2d ? Category::kH2dBound : Category::kD2hBound, std::string(dir) + " copies take " + fms(t) + " per step",
                     t, 0.5 + 0.3 * std::min(1.0, pct / 40) + (c.pageable * 2 > c.bytes ? 0.15 : 0));
  f.evidence.push_back(fmb(per_step) + fmt(" per step in %.0f copies", copies_per_step) + "; the GPU did nothing else for " +
                       fms(t) + " per step (" + fpct(pct) + " of the step)");
  f.evidence.push_back(fmt("achieved %.1f GB/s", c.gbps()) + " against " + in.link.peak_note + fmt(" (%.0f %% of peak)", share * 100));
  if (c.pageable) f.evidence.push_back(fmb(double(c.pageable)) + " of the " + fmb(double(c.bytes)) +
                                       " were copied from pageable memory (staged through a driver buffer, slower and synchronous)");
  if (bounced(in, h2d)) bounce_evidence(f, in, h2d);
  const std::string largest = largest_copy(in, h2d);
  if (!largest.empty()) f.evidence.push_back("largest: " + largest);
  f.metrics["bytes_per_step"] = per_step;
  f.metrics["pageable_bytes_per_step"] = h2d ? in.t.h2d_pageable_bytes : in.t.d2h_pageable_bytes;
  f.metrics["bandwidth_gbps"] = c.gbps();
  f.metrics["peak_bandwidth_gbps"] = in.link.peak_h2d_gbps;
  f.metrics["copy_ms"] = t;
  const std::string what = largest.empty() ? std::string(h2d ? "the input copies" : "the output copies") : largest;
  if (saturated) saturated_suggestions(f, what);
  else unsaturated_suggestions(f, in, h2d, c, what, copies_per_step);
  return f;
}

}  // namespace

std::optional<Finding> h2d_bound(const RuleInput& in) { return copy_rule(in, true); }
std::optional<Finding> d2h_bound(const RuleInput& in) { return copy_rule(in, false); }

}  // namespace inferscope::analyze::rules

// Pieces every rule uses: formatting, building a finding, suggestions with or without a replayed saving,
// example spans and caller evidence.
#include "analyze/rules/rule.hpp"
#include "analyze/aggregate.hpp"
#include "analyze/what_if.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace inferscope::analyze::rules {

std::string fmt(const char* f, double v) {
  char b[256];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}
std::string fms(double v) { return fmt(v >= 10 ? "%.1f ms" : v >= 0.1 ? "%.2f ms" : "%.3f ms", v); }
std::string fpct(double v) { return fmt("%.0f %%", v); }
std::string fmb(double bytes) { return bytes >= 1e9 ? fmt("%.2f GB", bytes / 1e9) : fmt("%.1f MB", bytes / 1e6); }

bool reported(const RuleInput& in, double impact_ms) {
  return in.step_ms() > 0 && impact_ms / in.step_ms() * 100 >= in.th.min_impact_pct;
}

bool gpu_seen(const RuleInput& in) { return in.gpu_work; }

namespace {
// A positive finite number from the process info, or 0 (absent, malformed). from_chars: no locale.
double positive_process_value(const detail::ProcessInfo& process, const char* key) {
  auto it = process.find(key);
  if (it == process.end()) return 0;
  double v = 0;
  const char* end = it->second.data() + it->second.size();
  const auto [at, ec] = std::from_chars(it->second.data(), end, v);
  return ec == std::errc{} && at == end && std::isfinite(v) && v > 0 ? v : 0;
}
}  // namespace

double cpu_quota_cpus(const detail::ProcessInfo& process) { return positive_process_value(process, "cpu_quota"); }

double cpu_quota_period_ns(const detail::ProcessInfo& process) {
  const double us = positive_process_value(process, "cpu_quota_period_us");
  return (us > 0 ? us : 100'000) * 1e3;
}

std::string fcpus(double cpus) { return fmt(cpus >= 0.01 ? "%.2f" : "%.4f", cpus); }

std::string while_idle(const RuleInput& in, const char* gpu_wording) { return gpu_seen(in) ? gpu_wording : "in the step"; }

Finding make_finding(const RuleInput& in, Category c, std::string title, double impact_ms, double confidence) {
  Finding f;
  f.category = category_name(c);
  f.title = std::move(title);
  f.impact_ms = impact_ms;
  f.impact_pct = in.step_ms() > 0 ? impact_ms / in.step_ms() * 100 : 0;
  f.confidence = std::clamp(confidence, 0.0, 1.0);
  f.uncertain = f.confidence < in.th.uncertain_below;
  return f;
}

// What to capture in a CUDA graph. A generation loop is captured a token at a time, and only with shapes that stay
// fixed from token to token: a static KV cache, not one grown by concatenation (its device copies every token),
// nor a sequence re-run whole without a cache. Its blocking calls per token stay between the graphs.
std::string graph_advice(const RuleInput& in, const std::string& step_tail) {
  const GenerationLoop& g = in.generation;
  if (!g.detected)
    return "Capture the step in a CUDA graph (torch.cuda.graphs / torch.compile(mode=\"reduce-overhead\")) " + step_tail;
  std::string s = "Capture each token's forward (" + g.token_function + ") in a CUDA graph, so its " +
                  fmt("%.0f launches", g.decode.kernels) + " per token become one: keep the KV cache static (HF generate: "
                  "model.generation_config.cache_implementation = \"static\"; a hand-written loop: StaticCache) and "
                  "compile the forward with torch.compile(mode=\"reduce-overhead\")";
  if (g.decode.d2d_copies >= 1)
    s += fmt("; the cache now grows by concatenation (%.0f device copies per token), which changes shapes every "
             "token and prevents capture", g.decode.d2d_copies);
  if (g.decode.syncs >= 1) s += fmt("; the %.0f blocking calls per token stay between the graphs", g.decode.syncs);
  return s;
}

void suggest_replayed(Finding& f, const RuleInput& in, const char* priority, std::string action,
                      const replay::Change& change, const char* model) {
  // Steps that are not alike are described by their mean (the headline's basis), and so is what a fix saves.
  const detail::SavingEstimate s = detail::estimate_saving(in.graphs, change, !in.stats.alike);
  Suggestion g{std::move(action), priority, s.ms, s.estimated, s.estimated ? std::string("replay: ") + model : ""};
  if (s.estimated) {
    // A suggestion is high or medium only for a saving worth doing: at least kWorthwhileShare of the step.
    if (s.ms < kWorthwhileShare * in.step_ms() && g.priority != "low") g.priority = "low";
    // A saving above the finding's impact is possible (the change also removes time that other findings count,
    // or lets work overlap), but must say so.
    if (f.impact_ms > 0 && s.ms > 1.05 * f.impact_ms)
      g.model += " (more than this finding's " + fms(f.impact_ms) + ": the change also removes time the other findings "
                 "count, or lets work that waited behind it overlap)";
  }
  f.suggestions.push_back(std::move(g));
}

void suggest(Finding& f, const char* priority, std::string action) {
  f.suggestions.push_back({std::move(action), priority, 0, false, ""});
}

void add_examples(Finding& f, const RuleInput& in, detail::Span detail::StepMetrics::*which, const std::string& what) {
  std::vector<const detail::StepMetrics*> v;  // from the typical steps: the ones the impact describes
  for (size_t i : detail::typical_indexes(in.selection)) {
    const auto& s = in.steps[i];
    if ((s.*which).end > (s.*which).start) v.push_back(&s);
  }
  auto len = [&](const detail::StepMetrics* x) { return (x->*which).end - (x->*which).start; };
  std::stable_sort(v.begin(), v.end(), [&](auto* x, auto* y) { return len(x) > len(y); });
  for (size_t i = 0; i < v.size() && i < 3; ++i) {
    const auto& sp = v[i]->*which;
    TimeSpan t;
    t.start_ms = (double(sp.start) - in.trace_t0_ns) / 1e6;
    t.end_ms = (double(sp.end) - in.trace_t0_ns) / 1e6;
    t.what = "step " + std::to_string(sp.step) + ": " + what + " for " + fms(double(sp.end - sp.start) / 1e6);
    f.examples.push_back(std::move(t));
  }
}

namespace {
template <class Rows>
std::string callers_of(const Rows& rows) {
  std::vector<CallerRow> all;
  for (auto& r : rows) all.insert(all.end(), r.callers.begin(), r.callers.end());
  std::stable_sort(all.begin(), all.end(), [](auto& x, auto& y) { return x.total_ms > y.total_ms; });
  std::string s;
  for (size_t i = 0; i < all.size() && i < 3; ++i)
    s += (i ? "; " : "") + all[i].api + " from " + all[i].called_from + " \u00d7" + std::to_string(all[i].count) + ", " +
         fms(all[i].total_ms);
  return s.empty() ? s : "calls by caller over the trace: " + s;
}
}  // namespace

std::string callers_evidence(const std::vector<SyncRow>& rows) { return callers_of(rows); }
std::string callers_evidence(const std::vector<AllocRow>& rows) { return callers_of(rows); }

}  // namespace inferscope::analyze::rules

// Pieces every rule uses: formatting, building a finding, suggestions with or without a replayed saving,
// example spans and caller evidence.
#include "analyze/rules/rule.hpp"
#include "analyze/aggregate.hpp"
#include "analyze/program_facts.hpp"
#include "analyze/what_if/what_if.hpp"

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

// What to capture in a CUDA graph. A generation loop is captured a token at a time (the forward), and only with
// shapes that stay fixed from token to token: a static KV cache. A loop whose decode tokens take as much GPU time as
// the prompt pass re-runs the whole sequence every token (no cache: a cached token processes one position, the
// prompt pass all of them), so the cache comes first. Its blocking calls per token stay between the graphs.
std::string graph_advice(const RuleInput& in, const std::string& step_tail) {
  const GenerationLoop& g = in.generation;
  if (!python_program(in))
    return "Capture the step in a CUDA graph (cudaStreamBeginCapture on its stream, cudaGraphInstantiate once, then one "
           "cudaGraphLaunch per step; its buffers allocated once, outside the capture) " + step_tail;
  if (!g.detected && !in.facts.has(detail::kFactStaticShapes)) {
    // A graph replays fixed shapes: a step whose work changes shape needs one graph per padded size.
    uint64_t fewest = 0, most = 0;
    for (size_t i : detail::typical_indexes(in.selection))
      if (i < in.steps.size()) {
        fewest = fewest ? std::min(fewest, in.steps[i].kernels) : in.steps[i].kernels;
        most = std::max(most, in.steps[i].kernels);
      }
    return "Capture the step in CUDA graphs (torch.cuda.graphs / torch.compile(mode=\"reduce-overhead\")) " + step_tail +
           ". A graph replays fixed shapes, and this step's work changes shape from step to step (it launched between " +
           fmt("%.0f", double(fewest)) + " and " + fmt("%.0f", double(most)) + " kernels): pad its batch to a few fixed "
           "sizes and capture one graph per size, as serving engines do";
  }
  if (!g.detected)
    return "Capture the step in a CUDA graph (torch.cuda.graphs / torch.compile(mode=\"reduce-overhead\")) " + step_tail;
  std::string s;
  if (g.prefill.gpu_ms > 0 && g.decode.gpu_ms >= g.prefill.gpu_ms)
    s = "Turn the KV cache on first (use_cache=True, passing past_key_values back): every decode token takes as much "
        "GPU time as the prompt pass (" + fms(g.decode.gpu_ms) + " against " + fms(g.prefill.gpu_ms) +
        "), so the loop re-runs the whole sequence each token. Then capture";
  else
    s = "Capture";
  s += " each token's forward (" + g.token_function + ") in a CUDA graph, so its " + fmt("%.0f launches", g.decode.call_kernels) +
       " per token become one. A graph needs the same shapes every token: a static KV cache (HF generate: "
       "model.generation_config.cache_implementation = \"static\", or generate(..., cache_implementation=\"static\"); "
       "a hand-written loop: StaticCache) and fixed input shapes, then the forward compiled with "
       "torch.compile(mode=\"reduce-overhead\")";
  if (g.decode.d2d_copies >= 1)
    s += fmt("; in this trace the loop makes %.0f device-to-device copies per token: a cache grown by concatenation "
             "(the default DynamicCache), whose shapes change every token and block capture until the cache is static",
             g.decode.d2d_copies);
  if (g.decode.syncs >= 1) s += fmt("; the %.0f blocking calls per token stay between the graphs", g.decode.syncs);
  return s;
}

// The replay collapses the whole step into one graph launch. A graph per token keeps the other tokens' graph
// launches and the launches the loop makes outside the forward (picking the token, the stop check): their host
// time is taken back from the saving, and the model says so.
void per_token_graphs(Suggestion& sg, const RuleInput& in) {
  const GenerationLoop& g = in.generation;
  if (!g.detected || !sg.estimated) return;
  const double per_launch_ms = g.decode.kernels > 0 ? g.decode.launch_ms / g.decode.kernels : 0;
  const double outside = std::max(0.0, g.decode.kernels - g.decode.call_kernels);
  const double kept_ms = std::max(0.0, g.tokens_per_step - 1) * in.th.graph_launch_ns / 1e6 +
                         g.tokens_per_step * outside * per_launch_ms;
  sg.impact_ms = std::max(0.0, sg.impact_ms - kept_ms);
  sg.model += "; one graph per token: the " + fmt("%.0f further graph launches", std::max(0.0, g.tokens_per_step - 1)) +
              " and " + fmt("%.0f launches per token outside the forward stay (", outside) + fms(kept_ms) + " per step)";
  if (sg.impact_ms < kWorthwhileShare * in.step_ms() && sg.priority != "low") sg.priority = "low";
}

void suggest_graph(Finding& f, const RuleInput& in, const std::string& action) {
  replay::Change graph;
  graph.collapse_launches = true;
  graph.graph_launch_ns = in.th.graph_launch_ns;
  suggest_replayed(f, in, "high", action, graph, "launches and the host code between them replaced by one graph launch");
  per_token_graphs(f.suggestions.back(), in);
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

bool fits(const RuleInput& in, Needs needs) {
  for (const char* n : needs)
    if (!in.facts.has(n)) return false;
  return true;
}

bool python_program(const RuleInput& in) { return in.facts.has(detail::kFactPython); }

void suggest(Finding& f, const RuleInput& in, const char* priority, std::string action, Needs needs) {
  if (!fits(in, needs)) return;
  suggest(f, priority, std::move(action));
  f.suggestions.back().needs.assign(needs.begin(), needs.end());
}

void suggest_replayed(Finding& f, const RuleInput& in, const char* priority, std::string action,
                      const replay::Change& change, const char* model, Needs needs) {
  if (!fits(in, needs)) return;
  suggest_replayed(f, in, priority, std::move(action), change, model);
  f.suggestions.back().needs.assign(needs.begin(), needs.end());
}

void keep_fitting_advice(Finding& f, const RuleInput& in) {
  std::erase_if(f.suggestions, [&](const Suggestion& s) {
    for (const std::string& n : s.needs)
      if (!in.facts.has(n)) return true;
    return false;
  });
  // A finding that costs the typical step nothing is evidence, not a cause: advice on it would save nothing.
  if (!f.informational && f.impact_estimated && f.impact_ms <= 0) f.suggestions.clear();
  // What a saving is per: the step, or a request (a finding about an asyncio service's requests).
  const bool request = f.per == "request";
  // A finding per request may say which latency it is a share of (request_ms: a client's, handler and wait).
  const auto own_base = f.metrics.find("request_ms");
  const double whole = request ? (own_base != f.metrics.end() ? own_base->second : in.requests.mean_ms) : in.step_ms();
  for (Suggestion& s : f.suggestions)
    if (s.estimated && whole > 0 && s.impact_ms > whole) {
      s.impact_ms = whole;
      s.model += request ? " (capped at the mean request: no change saves more than the whole request)"
                         : " (capped at the step: no change saves more than the whole step)";
    }
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

#include "report/labels.hpp"

#include "report/common.hpp"
#include "report/escape.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace inferscope::report {
namespace {

/// Words a metric key's tokens stand for; tokens not listed are words already.
const std::map<std::string_view, std::string_view>& token_words() {
  static const std::map<std::string_view, std::string_view> words = {
      {"gpu", "GPU"},         {"gpus", "GPUs"},         {"cpu", "CPU"},           {"api", "API"},
      {"gil", "GIL"},         {"rss", "RSS"},           {"h2d", "host-to-device"}, {"d2h", "device-to-host"},
      {"nccl", "NCCL"},       {"lm", "LM"},             {"runqueue", "run-queue"}, {"util", "utilization"},
      {"alloc", "allocation"}, {"allocs", "allocations"}, {"syncs", "synchronizations"},
      {"sync", "synchronization"}, {"lmheadmodel", "LM-head model"}, {"io", "I/O"}};
  return words;
}

std::vector<std::string_view> tokens(std::string_view key) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i <= key.size();) {
    const size_t j = std::min(key.find('_', i), key.size());
    if (j > i) out.push_back(key.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool has_token(std::string_view key, std::string_view token) {
  for (auto t : tokens(key))
    if (t == token) return true;
  return false;
}

/// A fraction in [0, 1] by its key: a share, a utilization.
bool is_share(std::string_view key) {
  return has_token(key, "share") || has_token(key, "utilization") || has_token(key, "util");
}

/// A category in words, in the order of analyze::kCategories (and kRunCategories below): the keys are checked
/// against those lists when this file compiles, so a category added, removed or renamed there fails here
/// until its words follow.
struct CategoryWords {
  std::string_view key, words;
};
constexpr std::string_view kCommunicationWords = "Multi-GPU communication (NCCL)";  // a category of both lists
constexpr CategoryWords kCategoryWords[] = {
    {"cpu_bound", "Host work (CPU-bound)"},
    {"launch_bound", "Kernel launch overhead"},
    {"sync_bound", "Waiting at synchronizations"},
    {"h2d_bound", "Host-to-device copies"},
    {"d2h_bound", "Device-to-host copies"},
    {"gpu_bound", "GPU compute"},
    {"memory_alloc", "Memory allocation and frees"},
    {"cpu_contention", "CPU contention (run queue, CPU quota or GIL)"},
    {"pcie_saturation", "PCIe bandwidth saturated"},
    {"wait", "Waiting by its own choice (sleep, I/O, a queue)"},
    {"communication", kCommunicationWords},
    {"pipeline_bubble", "Pipeline bubbles between GPUs"},
    {"gemm_fallback", "Matrix multiplies off the fast path"},
    {"warmup", "Warm-up steps"},
    {"slow_steps", "Slow steps"},
    {"loop_blocked", "Event loop held by a callback"},
};
constexpr CategoryWords kRunCategoryWords[] = {
    {"collective_wait", "Ranks waiting for a slower rank in collectives"},
    {"communication", kCommunicationWords},
};

template <size_t N, size_t M>
constexpr bool same_keys(const CategoryWords (&words)[N], const char* const (&keys)[M]) {
  if (N != M) return false;
  for (size_t i = 0; i < N; ++i)
    if (words[i].key != std::string_view(keys[i])) return false;
  return true;
}
static_assert(same_keys(kCategoryWords, analyze::kCategories), "one entry per analyze::kCategories, in its order");
static_assert(same_keys(kRunCategoryWords, analyze::kRunCategories), "one entry per analyze::kRunCategories");

}  // namespace

std::string category_name(std::string_view c) {
  for (const CategoryWords& w : kCategoryWords)
    if (w.key == c) return std::string(w.words);
  for (const CategoryWords& w : kRunCategoryWords)
    if (w.key == c) return std::string(w.words);
  if (c == "unattributed") return "Unattributed";  // the breakdown's gap, not a category (cause_rows)
  if (c.starts_with("custom:")) return "Custom rule " + std::string(c.substr(7));
  return std::string(c);
}

std::string metric_label(std::string_view key) {
  std::string label, unit;
  for (auto t : tokens(key)) {
    if (t == "ms" || t == "us" || t == "ns") {  // a unit: said once, at the end
      unit = " (" + std::string(t) + ")";
      continue;
    }
    if (t == "gbps") {
      unit = " (GB/s)";
      continue;
    }
    if (t == "pct") {
      unit = " (%)";
      continue;
    }
    const auto w = token_words().find(t);
    label += (label.empty() ? "" : " ") + std::string(w != token_words().end() ? w->second : t);
  }
  if (is_share(key)) unit = " (%)";
  if (!label.empty() && label[0] >= 'a' && label[0] <= 'z') label[0] = static_cast<char>(label[0] - 'a' + 'A');
  return label + unit;
}

std::string metric_value(std::string_view key, double v) {
  if (is_share(key) && std::isfinite(v) && v >= 0 && v <= 1) return fmt(v * 100.0, 1);
  if (has_token(key, "bytes") && std::isfinite(v) && v >= 0 && v < 1.8e19) return fmt_bytes(static_cast<uint64_t>(v));
  return fmt_value(v);
}

bool is_step_detection_note(std::string_view w) {
  // The openings of steps.cpp's notes (detect_steps, take_sync_iterations, whole_trace_step); test_labels.cpp checks
  // them against the analysis of real unannotated programs, so a change of wording there fails here.
  for (std::string_view opening : {"no repeated top-level range: the steps are the ",
                                   "no range and no Python functions: the steps are the loop iterations ",
                                   "no repeated top-level range or scope was found: the whole trace "})
    if (w.starts_with(opening)) return true;
  return false;
}

std::string note_label(std::string_view w) {
  if (is_step_detection_note(w)) return "How the steps were found";
  if (w.starts_with("the representative step's timeline was cut to ")) return "The timeline";
  return {};
}

std::string quality_problem(const analyze::Analysis& a) {
  if (a.partial) return "the input is corrupt; only the data before the damage were read";
  const auto warned = static_cast<size_t>(std::count_if(a.warnings.begin(), a.warnings.end(),
                                                        [](const std::string& w) { return note_label(w).empty(); }));
  if (warned > 0) return warned == 1 ? "the analyzer gave a warning" : std::to_string(warned) + " warnings";
  const auto& al = a.alignment;
  if (a.gpu_work_recorded && al.kernels_checked > 0 && !al.ok) return "CPU and GPU clocks look misaligned";
  if (!a.drops.empty()) return "records were dropped while recording";
  if (!a.complete) return "the dump did not end cleanly, so dropped records are not known";
  return {};
}

const analyze::Suggestion* first_suggestion(const analyze::Finding& f) {
  const analyze::Suggestion* best = nullptr;
  for (const auto& s : f.suggestions)
    if (s.estimated && s.impact_ms >= 0.0005 && (!best || s.impact_ms > best->impact_ms)) best = &s;
  if (best) return best;
  return f.suggestions.empty() ? nullptr : &f.suggestions.front();
}

std::string saving_text(const analyze::Suggestion& s, const std::string& per) {
  if (s.measured) {
    const analyze::TryMeasurement& m = *s.measured;
    const std::string range = fmt(m.low_pct, 1) + " to " + fmt(m.high_pct, 1) + " % over " + std::to_string(m.pairs) + " pairs";
    std::string t = m.measurable ? "measured on this program with --try " + m.knobs + ": saves " + fmt(m.saving_pct, 1) +
                                       " % of the " + per + " (" + range + ")"
                                 : "measured on this program with --try " + m.knobs + ": no measurable change (" + range + ")";
    if (s.estimated && s.impact_ms >= 0.0005) t += "; the replay predicted about " + fmt_ms(s.impact_ms) + " ms per " + per;
    return t;
  }
  if (!s.estimated) return "saving not estimated";
  if (s.impact_ms < 0.0005) return "no saving estimated for this trace";
  return "saves about " + fmt_ms(s.impact_ms) + " ms per " + per;
}

std::string impact_text(const analyze::Finding& f) {
  const bool request = f.per == "request";
  return fmt_ms(f.impact_ms) + " ms per " + f.per + " (" + fmt(f.impact_pct, 1) + (request ? " % of a request)" : " % of the step)");
}

DoFirst do_first(const analyze::Analysis& a, const analyze::Finding& primary) {
  DoFirst best{first_suggestion(primary), &primary};
  auto saving = [](const analyze::Suggestion* s) { return s && s->estimated ? s->impact_ms : -1.0; };
  // The run's findings (several ranks) stand alone: their suggestions are not compared with one process's.
  const std::vector<analyze::Finding>& pool = !a.run.findings.empty() ? a.run.findings : a.findings;
  for (const analyze::Finding& f : pool) {
    if (f.informational || f.per != primary.per) continue;
    const analyze::Suggestion* s = first_suggestion(f);
    if (saving(s) > saving(best.suggestion) + 0.0005) best = {s, &f};
  }
  return best;
}

const analyze::Finding* headline_finding(const analyze::Analysis& a) {
  if (!a.run.findings.empty()) return &a.run.findings.front();
  if (!a.launcher && !a.findings.empty()) return &a.findings.front();
  return nullptr;
}

}  // namespace inferscope::report

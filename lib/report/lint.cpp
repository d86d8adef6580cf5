// The report linter (lint.hpp).
#include "report/lint.hpp"

#include <algorithm>
#include <cctype>

namespace inferscope::report {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}
bool has(const std::string& s, const char* w) { return s.find(w) != std::string::npos; }

// Words a suggestion may only use where a fact holds: (word, fact). Lower case.
struct Gated {
  const char* word;
  const char* fact;
};
constexpr Gated kGated[] = {
    {"dataloader", "dataloader"}, {"num_workers", "dataloader"}, {"prefetch_factor", "dataloader"},
    {"autocast", "fp32_matmul"},  {"lower precision", "fp32_matmul"}, {"allow_tf32", "fp32_matmul"},
    {"py-spy", "python"},         {"torch.", "python"},             {".item()", "python"},
    {"cprofile", "python"},       {"numpy", "python"},
    {"cudastreambegincapture", "cpp"}, {"perf record", "cpp"},      {"cudahostalloc", "cpp"},
};

}  // namespace

std::vector<LintProblem> lint_report(const analyze::Analysis& a, const std::string& markdown, const std::string& html,
                                     const std::string& json) {
  std::vector<LintProblem> out;
  auto problem = [&](const char* rule, std::string what) { out.push_back({rule, std::move(what)}); };
  for (const analyze::Finding& f : a.findings) {
    // What the finding is per: the step, or a request (its own base when it names one: request_ms).
    double step = a.end_to_end_ms;
    if (f.per == "request") {
      const auto own = f.metrics.find("request_ms");
      step = own != f.metrics.end() ? own->second : a.requests.mean_ms;
    }
    const double slack = 1e-6 + step * 1e-9;
    if (step > 0 && f.impact_ms > step + slack)
      problem("saving_within_step", f.category + " costs " + std::to_string(f.impact_ms) + " ms of a " + std::to_string(step) +
                                        " ms " + f.per);
    if (!f.informational && f.impact_estimated && f.impact_ms <= 0 && !f.suggestions.empty())
      problem("no_advice_at_zero", f.category + " costs 0 ms and has " + std::to_string(f.suggestions.size()) + " suggestion(s)");
    for (const analyze::Suggestion& s : f.suggestions) {
      if (s.estimated && step > 0 && s.impact_ms > step + slack)
        problem("saving_within_step", f.category + ": '" + s.action + "' saves " + std::to_string(s.impact_ms) + " ms of a " +
                                          std::to_string(step) + " ms step");
      for (const std::string& n : s.needs)
        if (!a.program.has(n)) problem("needs_hold", f.category + ": '" + s.action + "' needs " + n + ", which does not hold");
      const std::string text = lower(s.action);
      for (const Gated& g : kGated)
        if (has(text, g.word) && !a.program.has(g.fact))
          problem(std::string(g.fact) == "python" || std::string(g.fact) == "cpp" ? "advice_fits_language" : "advice_fits_facts",
                  f.category + ": '" + s.action + "' says '" + g.word + "' but the trace does not show " + g.fact);
    }
  }
  const analyze::StepStats& s = a.steps;
  if (s.count > 0) {
    if (s.total != s.warmup + s.count)
      problem("counts_add_up", std::to_string(s.total) + " steps found, but " + std::to_string(s.warmup) + " warm-up + " +
                                   std::to_string(s.count) + " steady");
    // Steps alike: the outliers are left out of the typical steps; not alike: every steady step is typical (the
    // breakdown describes the mean, outliers included).
    const uint64_t expected = s.alike ? s.count - std::min<uint64_t>(s.count, s.outliers.size()) : s.count;
    if (s.typical != expected && s.outliers.size() < 20)
      problem("counts_add_up", std::to_string(s.count) + " steady steps, " + std::to_string(s.typical) + " typical and " +
                                   std::to_string(s.outliers.size()) + " outliers, the steps " +
                                   (s.alike ? "alike" : "not alike"));
  }
  for (const std::string* text : {&markdown, &html, &json}) {
    if (s.count > 0 && has(*text, "after 0 steps"))
      problem("no_zero_count_claim", "the report says \"after 0 steps\" beside " + std::to_string(s.count) + " steps analysed");
    const bool binary = has(*text, "MiB") || has(*text, "GiB");
    const bool decimal = has(*text, " MB") || has(*text, " GB");
    if (binary && decimal) problem("one_unit", "the report uses both MiB/GiB and MB/GB");
  }
  return out;
}

}  // namespace inferscope::report

// The --try protocol (try_run.hpp).
#include "try_run.hpp"

#include "analyze/support/order_stats.hpp"
#include "text/escape.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace iscope_run {

namespace {

double median(std::vector<double> v) { return inferscope::analyze::median_in_place(v); }

std::string fmt(double v, const char* f = "%.2f") {
  char b[48];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string json_text(const std::string& s) { return inferscope::text::json_quote(s); }

// Fills the medians, the pairs' savings and the interval from the processes run.
void summarize(TryOutcome& o) {
  std::vector<double> base, tried, savings;
  for (const TryProcess& p : o.processes) (p.tried ? tried : base).push_back(p.m.step_ms);
  for (int r = 0;; ++r) {
    const TryProcess *b = nullptr, *t = nullptr;
    for (const TryProcess& p : o.processes)
      if (p.round == r) (p.tried ? t : b) = &p;
    if (!b && !t) break;
    if (b && t && b->m.step_ms > 0) savings.push_back(100.0 * (1.0 - t->m.step_ms / b->m.step_ms));
  }
  o.pairs = savings.size();
  o.base_ms = median(base);
  o.tried_ms = median(tried);
  o.saving_pct = median(savings);
  if (!savings.empty()) {
    o.low_pct = *std::min_element(savings.begin(), savings.end());
    o.high_pct = *std::max_element(savings.begin(), savings.end());
  }
  if (!base.empty() && o.base_ms > 0)
    o.noise_pct = 100.0 * (*std::max_element(base.begin(), base.end()) - *std::min_element(base.begin(), base.end())) / o.base_ms;
  o.measurable = o.pairs >= 2 && (o.low_pct > 0 || o.high_pct < 0);
}

}  // namespace

TryOutcome run_try(const std::vector<TriedKnob>& knobs, int rounds, const RunProcess& run, const MeasureDump& measure,
                   const std::function<std::string(bool tried, int round)>& dump_of) {
  TryOutcome o;
  const auto env = tried_environment(knobs);
  const std::string first_knob = knobs.empty() ? "" : knobs.front().knob.name;
  bool python_knob = false;
  for (const TriedKnob& k : knobs) python_knob |= k.knob.way == KnobWay::kPython;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < 2; ++i) {
      const bool tried = (r % 2 == 0) == (i == 1);
      TryProcess p{tried, r, 0, dump_of(tried, r), {}};
      p.status = run(tried ? env : decltype(env){}, p.dump);
      if (p.status != 0) {
        o.refused = std::string(tried ? "the tried" : "the baseline") + " run (round " + std::to_string(r + 1) +
                    ") exited with status " + std::to_string(p.status) + "; its dump: " + p.dump;
        o.processes.push_back(std::move(p));
        return o;
      }
      p.m = measure(p.dump, first_knob);
      if (!p.m.ok) {
        o.refused = "no steps could be measured in " + p.dump + ": " + p.m.error;
        o.processes.push_back(std::move(p));
        return o;
      }
      if (o.step.empty()) o.step = p.m.step;
      // Each process's step is found as iscope-analyze finds it (imposing the first one's name could measure
      // something else: a Python function's calls rather than the loop iterations around them). Different steps
      // are no pair.
      if (p.m.step != o.step) {
        o.refused = "the processes' steps differ: '" + o.step + "' in the first, '" + p.m.step + "' in " + p.dump +
                    "; mark the step (ISCOPE_RANGE(\"step\") or inferscope_py.scope(\"step\")) so both are measured alike";
        o.processes.push_back(std::move(p));
        return o;
      }
      if (!tried && r == 0) {
        o.predicted_ms = p.m.predicted_ms;
        o.predicted_by = p.m.predicted_by;
        for (const TriedKnob& k : knobs)
          if (std::string why = refusal(k, p.m.facts); !why.empty()) {
            o.refused = why;
            o.processes.push_back(std::move(p));
            return o;
          }
      }
      if (tried && r == 0 && python_knob && !p.m.try_applied) {
        o.refused = "the tried settings never took effect in " + p.dump +
                    " (no \"inferscope.try\" mark: the program built no DataLoader, or never imported torch, after "
                    "it started)";
        o.processes.push_back(std::move(p));
        return o;
      }
      o.processes.push_back(std::move(p));
    }
  }
  summarize(o);
  return o;
}

std::string describe_outcome(const std::vector<TriedKnob>& knobs, const TryOutcome& o) {
  std::string s = "iscope-run --try " + describe(knobs) + ": ";
  if (!o.refused.empty()) return s + "refused: " + o.refused + "\n";
  s += std::to_string(o.pairs) + " pairs of processes, steps of '" + o.step + "'\n";
  s += "  baseline: median step " + fmt(o.base_ms, "%.3f") + " ms; tried: " + fmt(o.tried_ms, "%.3f") + " ms\n";
  if (o.measurable)
    s += "  measured saving: " + fmt(o.saving_pct, "%.1f") + " % of the step (every pair between " + fmt(o.low_pct, "%.1f") +
         " and " + fmt(o.high_pct, "%.1f") + " %)\n";
  else
    s += "  no measurable change: the pairs' savings run from " + fmt(o.low_pct, "%.1f") + " to " + fmt(o.high_pct, "%.1f") +
         " %, either side of zero\n";
  s += "  host noise: the baseline processes' median steps spread " + fmt(o.noise_pct, "%.1f") + " %\n";
  if (o.predicted_ms > 0 && o.base_ms > 0)
    s += "  the report predicted: saves about " + fmt(o.predicted_ms, "%.2f") + " ms per step (" +
         fmt(100.0 * o.predicted_ms / o.base_ms, "%.1f") + " %): " + o.predicted_by + "\n";
  for (const TriedKnob& k : knobs)
    if (k.knob.changes_results)
      s += "  note: " + k.knob.name + " can change the program's results: " + k.knob.changes + "\n";
  return s;
}

std::string outcome_json(const std::vector<TriedKnob>& knobs, const TryOutcome& o, const std::string& command) {
  std::string j = "{\"command\":" + json_text(command) + ",\"knobs\":[";
  for (size_t i = 0; i < knobs.size(); ++i)
    j += std::string(i ? "," : "") + "{\"name\":" + json_text(knobs[i].knob.name) + ",\"value\":" +
         json_text(knobs[i].value) + ",\"changes_results\":" + (knobs[i].knob.changes_results ? "true" : "false") +
         (knobs[i].knob.declared ? ",\"declared_in\":" + json_text(knobs[i].knob.declared->where) : std::string()) + "}";
  j += "],\"refused\":" + (o.refused.empty() ? std::string("null") : json_text(o.refused));
  j += ",\"step\":" + json_text(o.step) + ",\"pairs\":" + std::to_string(o.pairs) + ",\"base_ms\":" + fmt(o.base_ms, "%.6g") +
       ",\"tried_ms\":" + fmt(o.tried_ms, "%.6g") + ",\"saving_pct\":" + fmt(o.saving_pct, "%.6g") +
       ",\"saving_low_pct\":" + fmt(o.low_pct, "%.6g") + ",\"saving_high_pct\":" + fmt(o.high_pct, "%.6g") +
       ",\"measurable\":" + (o.measurable ? "true" : "false") + ",\"noise_pct\":" + fmt(o.noise_pct, "%.6g") +
       ",\"predicted_ms\":" + fmt(o.predicted_ms, "%.6g") + ",\"predicted_by\":" + json_text(o.predicted_by) + ",\"processes\":[";
  for (size_t i = 0; i < o.processes.size(); ++i) {
    const TryProcess& p = o.processes[i];
    j += std::string(i ? "," : "") + "{\"tried\":" + (p.tried ? "true" : "false") + ",\"round\":" + std::to_string(p.round) +
         ",\"status\":" + std::to_string(p.status) + ",\"dump\":" + json_text(p.dump) + ",\"step_ms\":" +
         fmt(p.m.step_ms, "%.6g") + ",\"steps\":" + std::to_string(p.m.steps) + "}";
  }
  return j + "]}\n";
}

}  // namespace iscope_run

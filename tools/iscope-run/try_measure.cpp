// try_measure.hpp: the analyzer on one --try process's dump.
#include "try_measure.hpp"

#include "analyze/analyzer.hpp"
#include "dump/reader.hpp"
#include "dump/visit.hpp"

#include <exception>

namespace iscope_run {

namespace {

// Whether the dump holds a mark named "inferscope.try" (inferscope_py/_try.py writes one per knob applied).
bool has_try_mark(const std::string& path) {
  using namespace inferscope;
  const dump::DumpReader r(path);
  struct Marks {
    const dump::DumpReader& r;
    bool found = false;
    void on(const MarkRecord& m, const dump::RecordContext&) { found = found || r.string_at(m.name) == "inferscope.try"; }
  } v{r};
  for (const auto& c : r.event_chunks()) {
    try {
      dump::visit_records(r, c, v);
    } catch (const dump::DumpError&) {  // a damaged chunk: the marks before it count
    }
    if (v.found) return true;
  }
  return false;
}

}  // namespace

Measured measure_dump(const std::string& dump, const std::string& knob) {
  using namespace inferscope;
  Measured m;
  try {
    const analyze::AnalyzeOptions o;
    const analyze::Analysis a = analyze::analyze_file(dump, o);
    if (a.steps.count == 0 || a.steps.p50_ms <= 0) {
      m.error = "the analysis found no steady steps (mark the step with ISCOPE_RANGE(\"step\") or "
                "inferscope_py.scope(\"step\"))";
      return m;
    }
    m.ok = true;
    m.step = a.steps.name;
    m.step_ms = a.steps.p50_ms;
    m.steps = a.steps.count;
    for (const auto& [fact, why] : a.program.holds) m.facts.insert(fact);
    for (const auto& f : a.findings)
      for (const auto& s : f.suggestions)
        if (s.estimated && !knob.empty() && s.try_knob.rfind(knob + "=", 0) == 0 && s.impact_ms > m.predicted_ms) {
          m.predicted_ms = s.impact_ms;
          m.predicted_by = s.action;
        }
    m.try_applied = has_try_mark(dump);
  } catch (const std::exception& e) {
    m.ok = false;
    m.error = e.what();
  }
  return m;
}

}  // namespace iscope_run

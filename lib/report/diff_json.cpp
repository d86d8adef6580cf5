// The comparison as JSON (diff.hpp; docs/report-schema.md, "The comparison report"). Keys go out in the order
// this file inserts them, so the same comparison always gives the same bytes.
#include "report/diff.hpp"
#include "report/escape.hpp"
#include "report/json_text.hpp"

#include <boost/json.hpp>

#include <cmath>

namespace inferscope::report {
namespace {

namespace json = boost::json;

json::value str(const std::string& s) { return json::string(valid_utf8(s)); }
/// JSON has no NaN or infinity (a percentage of a zero): such a number goes out as null.
json::value num(double v) { return std::isfinite(v) ? json::value(v) : json::value(nullptr); }

json::object side_json(const StepSide& s) {
  json::object o;
  o["step"] = str(s.name);
  o["count"] = s.count;
  o["mean_ms"] = num(s.mean_ms);
  o["p50_ms"] = num(s.p50_ms);
  o["p90_ms"] = num(s.p90_ms);
  return o;
}

json::object interval_json(const MedianInterval& i, const std::string& statistic) {
  json::object iv;
  iv["available"] = i.available;
  iv["method"] = statistic == "mean" ? "bootstrap_difference_of_means"
                 : statistic == "p90" ? "bootstrap_difference_of_p90s"
                                      : "bootstrap_difference_of_medians";
  iv["level"] = num(i.level);
  iv["resamples"] = i.resamples;
  iv["seed"] = i.seed;
  iv["low_ms"] = i.available ? num(i.low_ms) : json::value(nullptr);
  iv["high_ms"] = i.available ? num(i.high_ms) : json::value(nullptr);
  iv["note"] = str(i.note);
  return iv;
}

json::object statistic_json(const StatisticChange& c) {
  json::object s;
  s["statistic"] = str(c.statistic);
  s["before_ms"] = num(c.before_ms);
  s["after_ms"] = num(c.after_ms);
  s["delta_ms"] = num(c.delta_ms);
  s["delta_pct"] = num(c.delta_pct);
  s["verdict"] = str(c.verdict);
  s["interval"] = interval_json(c.interval, c.statistic);
  return s;
}

json::object latency_json(const LatencyChange& l) {
  json::object iv = interval_json(l.interval, "p50");
  json::object o;
  o["before"] = side_json(l.before);
  o["after"] = side_json(l.after);
  o["delta_p50_ms"] = num(l.delta_p50_ms);
  o["delta_p50_pct"] = num(l.delta_p50_pct);
  o["verdict"] = str(l.verdict);
  o["basis"] = str(l.paced ? "gpu_pace" : "step_ranges");  // gpu_pace: a side's host ran ahead of its GPU
  o["interval"] = std::move(iv);
  // Appended (schema version 1 only ever grows): the headline's statistic, as the analysis report's basis, and the
  // p50, mean and p90 side by side.
  o["headline_statistic"] = str(l.headline);
  o["headline_reason"] = str(l.headline_reason);
  o["headline_verdict"] = str(l.headline_change().verdict);
  json::array stats;
  for (const auto& c : l.statistics) stats.push_back(statistic_json(c));
  o["statistics"] = std::move(stats);
  return o;
}

json::array breakdown_json(const std::vector<BreakdownChange>& rows) {
  json::array a;
  for (const auto& r : rows) {
    json::object o;
    o["key"] = str(r.key);
    o["label"] = str(r.label);
    o["before_ms"] = num(r.before_ms);
    o["after_ms"] = num(r.after_ms);
    o["delta_ms"] = num(r.delta_ms);
    o["delta_pct"] = num(r.delta_pct);
    a.push_back(std::move(o));
  }
  return a;
}

json::array findings_json(const std::vector<FindingChange>& fs) {
  json::array a;
  for (const auto& f : fs) {
    json::object o;
    o["category"] = str(f.category);
    o["change"] = str(f.change);
    o["title_before"] = str(f.title_before);
    o["title_after"] = str(f.title_after);
    o["impact_before_ms"] = num(f.impact_before_ms);
    o["impact_after_ms"] = num(f.impact_after_ms);
    o["delta_ms"] = num(f.delta_ms);
    o["primary_before"] = f.primary_before;
    o["primary_after"] = f.primary_after;
    a.push_back(std::move(o));
  }
  return a;
}

json::array names_json(const std::vector<NameChange>& rows, bool kernels) {
  json::array a;
  for (const auto& r : rows) {
    json::object o;
    o["name"] = str(r.name);
    if (kernels) o["short_name"] = str(r.display);
    o["count_before"] = r.count_before;
    o["count_after"] = r.count_after;
    o["delta_count"] = r.delta_count();
    o["total_before_ms"] = num(r.total_before_ms);
    o["total_after_ms"] = num(r.total_after_ms);
    o["delta_ms"] = num(r.delta_ms());
    a.push_back(std::move(o));
  }
  return a;
}

json::object run_json(const std::string& source, const std::string& subject) {
  json::object o;
  o["source"] = str(source);
  o["subject"] = str(subject);
  return o;
}

}  // namespace

void write_diff_json(const Comparison& c, std::ostream& out) {
  json::object root;
  root["schema_version"] = kDiffSchemaVersion;
  root["before"] = run_json(c.before_source, c.before_subject);
  root["after"] = run_json(c.after_source, c.after_subject);
  root["related"] = c.related;
  root["unrelated_reason"] = str(c.unrelated_reason);
  root["latency"] = latency_json(c.latency);
  root["breakdown"] = breakdown_json(c.breakdown);
  root["findings"] = findings_json(c.findings);
  json::object kernels, python;
  kernels["by_time"] = names_json(c.kernels_by_time, true);
  kernels["by_count"] = names_json(c.kernels_by_count, true);
  python["by_time"] = names_json(c.python_by_time, false);
  python["by_count"] = names_json(c.python_by_count, false);
  root["kernels"] = std::move(kernels);
  root["python"] = std::move(python);
  json::array notes;
  for (const auto& n : c.notes) notes.push_back(str(n));
  root["notes"] = std::move(notes);
  out << pretty_json(root);
}

}  // namespace inferscope::report

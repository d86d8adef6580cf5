// compare(): the comparison of two analyses (diff.hpp). Only arithmetic over what the analyzer computed; the
// step-to-step spread comes from StepStats::steady_durations_ms.
#include "report/diff.hpp"

#include "analyze/support/order_stats.hpp"
#include "report/common.hpp"
#include "report/names.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>

namespace inferscope::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string ms_text(double ms) {
  char b[48];
  std::snprintf(b, sizeof b, "%.3f ms", ms);
  return b;
}

double pct_change(double before, double after) { return before != 0 ? (after - before) / before * 100.0 : kNaN; }

// A statistic of the step durations in `v` (which it may reorder): "p50" (the median), "mean" or "p90".
double statistic_of(const std::string& statistic, std::vector<double>& v) {
  if (v.empty()) return 0;
  if (statistic == "mean") return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  if (statistic == "p90") {
    std::sort(v.begin(), v.end());
    return analyze::percentile_sorted(v, 0.9);
  }
  return analyze::median_in_place(v);
}

// The statistic of a resample (with replacement) of `from`, drawn into `scratch`. `rng() % n` rather than
// std::uniform_int_distribution, whose output differs between standard libraries: the interval must be
// the same bytes everywhere.
double resampled(const std::string& statistic, const std::vector<double>& from, std::mt19937_64& rng,
                 std::vector<double>& scratch) {
  scratch.resize(from.size());
  for (auto& x : scratch) x = from[size_t(rng() % from.size())];
  return statistic_of(statistic, scratch);
}

// Words for a statistic in a note: "medians", "means", "p90s".
std::string plural(const std::string& statistic) {
  return statistic == "p50" ? "medians" : statistic == "mean" ? "means" : statistic + "s";
}

StepSide side_of(const analyze::StepStats& s) { return {s.name, s.count, s.mean_ms, s.p50_ms, s.p90_ms}; }

// The same side measured by the GPU's pace: when the host ran ahead on either side, its step ranges measure the
// host, and the two runs are compared by how often the GPU completed a step.
StepSide paced_side_of(const analyze::StepStats& s) {
  std::vector<double> v = s.completion_periods_ms;
  std::sort(v.begin(), v.end());
  const double p90 = analyze::percentile_sorted(v, 0.9);  // before the median, which reorders
  const double p50 = analyze::median_in_place(v);
  return {s.name, s.count, s.gpu_paced_ms, p50, p90};
}

std::string verdict_of(const MedianInterval& i) {
  if (!i.available) return "unknown";
  if (i.high_ms < 0) return "faster";
  if (i.low_ms > 0) return "slower";
  return "no clear change";
}

// The finding of each category (the larger impact where a category repeats).
std::map<std::string, const analyze::Finding*> by_category(const std::vector<analyze::Finding>& fs) {
  std::map<std::string, const analyze::Finding*> m;
  for (const auto& f : fs) {
    auto& slot = m[f.category];
    if (!slot || f.impact_ms > slot->impact_ms) slot = &f;
  }
  return m;
}

// A change under 0.01 ms, or under 5 % of the larger side, is noise between two recordings.
std::string impact_change(const analyze::Finding* b, const analyze::Finding* a) {
  if (!b) return "appeared";
  if (!a) return "disappeared";
  const double d = a->impact_ms - b->impact_ms;
  if (std::fabs(d) <= std::max(0.01, 0.05 * std::max(std::fabs(a->impact_ms), std::fabs(b->impact_ms))))
    return "unchanged";
  return d > 0 ? "grew" : "shrank";
}

struct Totals {
  uint64_t count = 0;
  double total_ms = 0;
};

// Rows of one table by name (rows that share a name add up: two Python functions of one qualname in
// different files are one name to a reader of both reports).
template <class Rows, class Key>
std::map<std::string, Totals> totals_by_name(const Rows& rows, Key key) {
  std::map<std::string, Totals> m;
  for (const auto& r : rows) {
    auto& t = m[key(r)];
    t.count += r.count;
    t.total_ms += r.total_ms;
  }
  return m;
}

std::vector<NameChange> match_names(const std::map<std::string, Totals>& before,
                                    const std::map<std::string, Totals>& after) {
  std::vector<NameChange> out;
  std::set<std::string> names;
  for (const auto& [n, t] : before) names.insert(n);
  for (const auto& [n, t] : after) names.insert(n);
  for (const auto& n : names) {
    NameChange c;
    c.name = c.display = n;
    if (auto it = before.find(n); it != before.end()) c.count_before = it->second.count, c.total_before_ms = it->second.total_ms;
    if (auto it = after.find(n); it != after.end()) c.count_after = it->second.count, c.total_after_ms = it->second.total_ms;
    out.push_back(std::move(c));
  }
  return out;
}

// The at most kTopChanges rows whose `by` changed most, unchanged rows left out; ties by name.
template <class By>
std::vector<NameChange> top_changes(std::vector<NameChange> rows, By by) {
  std::erase_if(rows, [&](const NameChange& c) { return std::fabs(by(c)) < 1e-9; });
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const NameChange& x, const NameChange& y) { return std::fabs(by(x)) > std::fabs(by(y)); });
  if (rows.size() > kTopChanges) rows.resize(kTopChanges);
  return rows;
}

bool share_a_key(const std::map<std::string, Totals>& x, const std::map<std::string, Totals>& y) {
  for (const auto& [n, t] : x)
    if (y.count(n)) return true;
  return false;
}

std::string kernel_name(const analyze::KernelRow& r) { return r.name; }
std::string python_name(const analyze::PythonRow& r) { return r.qualname; }

void fill_name_changes(Comparison& c, const analyze::Analysis& before, const analyze::Analysis& after) {
  auto kb = totals_by_name(before.kernels, kernel_name), ka = totals_by_name(after.kernels, kernel_name);
  auto pb = totals_by_name(before.python, python_name), pa = totals_by_name(after.python, python_name);
  const bool same_step = !before.steps.name.empty() && before.steps.name == after.steps.name;
  if (!same_step && !share_a_key(kb, ka) && !share_a_key(pb, pa)) {
    c.related = false;
    c.unrelated_reason = "the two runs look unrelated: they share no step name, no kernel and no Python function (" +
                         c.before_source + " vs " + c.after_source + "); compare two runs of the same program";
  }
  auto kernels = match_names(kb, ka);
  std::vector<std::string> full;
  for (const auto& k : kernels) full.push_back(k.name);
  const KernelNames names(full);
  for (auto& k : kernels) k.display = names.short_of(k.name);
  const auto python = match_names(pb, pa);
  const auto by_time = [](const NameChange& x) { return x.delta_ms(); };
  const auto by_count = [](const NameChange& x) { return double(x.delta_count()); };
  c.kernels_by_time = top_changes(kernels, by_time);
  c.kernels_by_count = top_changes(kernels, by_count);
  c.python_by_time = top_changes(python, by_time);
  c.python_by_count = top_changes(python, by_count);
}

bool compares_run(const analyze::Analysis& a) { return a.launcher && !a.run.step_durations_ms.empty(); }

/// The steps whose latency is compared: a run's launcher's report heads with the run's step (the slowest rank's
/// mean matched step), so its comparison is of that rank's matched steps; any other dump's, its own steady steps.
analyze::StepStats latency_steps(const analyze::Analysis& a) {
  if (!compares_run(a)) return a.steps;
  analyze::StepStats s;
  s.name = "the run's step";
  s.steady_durations_ms = a.run.step_durations_ms;
  std::vector<double> v = s.steady_durations_ms;
  std::sort(v.begin(), v.end());
  s.count = v.size();
  s.mean_ms = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  s.p50_ms = analyze::percentile_sorted(v, 0.5);
  s.p90_ms = analyze::percentile_sorted(v, 0.9);
  s.p99_ms = analyze::percentile_sorted(v, 0.99);
  s.min_ms = v.front();
  s.max_ms = v.back();
  return s;
}

/// `steps_before`, `steps_after`: the steps whose latency was compared (latency_steps).
void add_notes(Comparison& c, const analyze::Analysis& before, const analyze::Analysis& after,
               const analyze::StepStats& steps_before, const analyze::StepStats& steps_after) {
  if (steps_before.name != steps_after.name)
    c.notes.push_back("the steps differ: '" + steps_before.name + "' before, '" + steps_after.name + "' after");
  for (const auto* a : {&before, &after}) {
    const std::string which = a == &before ? "BEFORE" : "AFTER";
    const analyze::StepStats& compared = a == &before ? steps_before : steps_after;
    if (a->partial) c.notes.push_back(which + " (" + a->source + ") is corrupt: only the data before the damage were read");
    else if (!a->complete)
      c.notes.push_back(which + " (" + a->source + ") is incomplete: the dump was cut short (no END chunk: its process did "
                        "not stop cleanly, or the file was copied or cut before its end); only what it holds was compared");
    if (compared.count == 0)
      c.notes.push_back(which + " (" + a->source + ") has no steady steps: latency not compared");
    if (a->steps.host_ahead)
      c.notes.push_back(which + "'s host ran ahead of the GPU (its step ranges end long before their GPU work): both "
                        "runs' latencies are the GPU's pace, the time between completions of consecutive steps' work");
    if (compares_run(*a))
      c.notes.push_back(which + " (" + a->source + ") is the launcher of a run of " + std::to_string(a->run.ranks.size()) +
                        " ranks: the latency compared is the run's step, as its report's headline (" +
                        ms_text(a->run.step_ms) + ", their mean): the " +
                        std::to_string(a->run.step_durations_ms.size()) + " matched steps of rank " +
                        std::to_string(a->run.step_rank) + ", the slowest");
    else if (a->launcher)
      c.notes.push_back(which + " (" + a->source + ") is the launcher of a run of " + std::to_string(a->run.ranks.size()) +
                        " ranks whose steps could not be matched: the latency compared is its own loop's");
    if (a->kernels.size() >= 50 || a->python.size() >= 50)
      c.notes.push_back(which + "'s kernel or Python table holds only its 50 busiest rows: a name missing on one side "
                        "may be below that cut rather than gone");
  }
}

}  // namespace

MedianInterval median_difference_interval(const std::vector<double>& before, const std::vector<double>& after,
                                          uint32_t resamples, uint64_t seed, double level) {
  return difference_interval("p50", before, after, resamples, seed, level);
}

MedianInterval difference_interval(const std::string& statistic, const std::vector<double>& before,
                                   const std::vector<double>& after, uint32_t resamples, uint64_t seed, double level) {
  MedianInterval iv;
  iv.level = level;
  iv.seed = seed;
  if (before.size() < kMinStepsForInterval || after.size() < kMinStepsForInterval || resamples == 0) {
    iv.note = "not available: fewer than " + std::to_string(kMinStepsForInterval) + " steady steps (" +
              std::to_string(before.size()) + " before, " + std::to_string(after.size()) + " after)";
    return iv;
  }
  std::mt19937_64 rng(seed);
  std::vector<double> diffs, scratch;
  diffs.reserve(resamples);
  for (uint32_t r = 0; r < resamples; ++r) {
    const double mb = resampled(statistic, before, rng, scratch);
    diffs.push_back(resampled(statistic, after, rng, scratch) - mb);
  }
  std::sort(diffs.begin(), diffs.end());
  iv.available = true;
  iv.resamples = resamples;
  iv.low_ms = analyze::percentile_sorted(diffs, (1 - level) / 2);
  iv.high_ms = analyze::percentile_sorted(diffs, 1 - (1 - level) / 2);
  iv.note = "bootstrap of the difference of " + plural(statistic) + ": " + std::to_string(resamples) +
            " resamples of the steady steps, percentile interval, seed " + std::to_string(seed);
  return iv;
}

LatencyChange compare_latency(const analyze::StepStats& before, const analyze::StepStats& after) {
  LatencyChange l;
  l.paced = before.host_ahead || after.host_ahead;
  l.before = l.paced ? paced_side_of(before) : side_of(before);
  l.after = l.paced ? paced_side_of(after) : side_of(after);
  l.delta_p50_ms = l.after.p50_ms - l.before.p50_ms;
  l.delta_p50_pct = pct_change(l.before.p50_ms, l.after.p50_ms);
  const auto& sb = l.paced ? before.completion_periods_ms : before.steady_durations_ms;
  const auto& sa = l.paced ? after.completion_periods_ms : after.steady_durations_ms;
  l.interval = median_difference_interval(sb, sa);
  l.verdict = verdict_of(l.interval);
  for (const char* stat : {"p50", "mean", "p90"}) {
    StatisticChange c;
    c.statistic = stat;
    c.before_ms = stat[0] == 'm' ? l.before.mean_ms : stat[1] == '5' ? l.before.p50_ms : l.before.p90_ms;
    c.after_ms = stat[0] == 'm' ? l.after.mean_ms : stat[1] == '5' ? l.after.p50_ms : l.after.p90_ms;
    c.delta_ms = c.after_ms - c.before_ms;
    c.delta_pct = pct_change(c.before_ms, c.after_ms);
    c.interval = c.statistic == "p50" ? l.interval : difference_interval(c.statistic, sb, sa);
    c.verdict = verdict_of(c.interval);
    l.statistics.push_back(std::move(c));
  }
  // The analysis report's basis: the mean where a side's steps are not alike (its headline is then their mean).
  if (!before.alike || !after.alike) {
    l.headline = "mean";
    l.headline_reason = !before.alike && !after.alike ? "the steps of both runs are not alike"
                        : !before.alike               ? "the steps of BEFORE are not alike"
                                                      : "the steps of AFTER are not alike";
  }
  return l;
}

const StatisticChange& LatencyChange::headline_change() const {
  static const StatisticChange none;
  for (const auto& c : statistics)
    if (c.statistic == headline) return c;
  return statistics.empty() ? none : statistics.front();
}

std::vector<BreakdownChange> compare_breakdown(const analyze::Breakdown& before, const analyze::Breakdown& after) {
  std::vector<BreakdownChange> out;
  auto add = [&](std::string label, std::string key, double b, double a) {
    out.push_back({std::move(label), std::move(key), b, a, a - b, pct_change(b, a)});
  };
  add("Step (mean)", "step", before.step_ms, after.step_ms);
  // Both sides' parts, the "Unattributed" rest included when either side has one.
  const auto rb = breakdown_rows(before), ra = breakdown_rows(after);
  auto find = [](const std::vector<BreakdownRow>& rows, const std::string& key) {
    for (const auto& r : rows)
      if (r.key == key) return r.ms;
    return 0.0;
  };
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto* rows : {&rb, &ra})
    for (const auto& r : *rows)
      if (std::none_of(keys.begin(), keys.end(), [&](auto& k) { return k.second == r.key; }))
        keys.emplace_back(r.label, r.key);
  for (const auto& [label, key] : keys) add(label, key, find(rb, key), find(ra, key));
  add("GPU utilization (%)", "gpu_utilization_pct", before.gpu_utilization * 100, after.gpu_utilization * 100);
  add("GPU idle: waiting on host", "gpu_idle_waiting_on_host", before.gpu_idle_waiting_on_host_ms,
      after.gpu_idle_waiting_on_host_ms);
  add("GPU idle: gaps between kernels", "gpu_idle_gaps_between_kernels", before.gpu_idle_gaps_between_kernels_ms,
      after.gpu_idle_gaps_between_kernels_ms);
  add("GPU idle: waiting on sync", "gpu_idle_waiting_on_sync", before.gpu_idle_waiting_on_sync_ms,
      after.gpu_idle_waiting_on_sync_ms);
  add("GPU idle: in memory calls", "gpu_idle_in_memory", before.gpu_idle_in_memory_ms, after.gpu_idle_in_memory_ms);
  return out;
}

std::vector<FindingChange> compare_findings(const std::vector<analyze::Finding>& before,
                                            const std::vector<analyze::Finding>& after) {
  const auto mb = by_category(before), ma = by_category(after);
  std::set<std::string> cats;
  for (const auto& [k, f] : mb) cats.insert(k);
  for (const auto& [k, f] : ma) cats.insert(k);
  std::vector<FindingChange> out;
  for (const auto& cat : cats) {
    const auto* b = mb.count(cat) ? mb.at(cat) : nullptr;
    const auto* a = ma.count(cat) ? ma.at(cat) : nullptr;
    FindingChange f;
    f.category = cat;
    f.change = impact_change(b, a);
    if (b) f.title_before = b->title, f.impact_before_ms = b->impact_ms, f.primary_before = b->primary;
    if (a) f.title_after = a->title, f.impact_after_ms = a->impact_ms, f.primary_after = a->primary;
    f.delta_ms = f.impact_after_ms - f.impact_before_ms;
    out.push_back(std::move(f));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& x, const auto& y) { return std::fabs(x.delta_ms) > std::fabs(y.delta_ms); });
  return out;
}

Comparison compare(const analyze::Analysis& before, const analyze::Analysis& after) {
  Comparison c;
  c.before_source = before.source;
  c.after_source = after.source;
  c.before_subject = report_subject(before);
  c.after_subject = report_subject(after);
  fill_name_changes(c, before, after);
  const analyze::StepStats steps_before = latency_steps(before), steps_after = latency_steps(after);
  c.latency = compare_latency(steps_before, steps_after);
  if (compares_run(before) || compares_run(after)) {  // the run's step is a mean: the headline compares means
    c.latency.headline = "mean";
    c.latency.headline_reason = compares_run(before) && compares_run(after)
                                    ? "both are launchers, whose reports head with the run's mean step"
                                : compares_run(before) ? "BEFORE is a launcher, whose report heads with the run's mean step"
                                                       : "AFTER is a launcher, whose report heads with the run's mean step";
  }
  c.breakdown = compare_breakdown(before.breakdown, after.breakdown);
  c.findings = compare_findings(before.findings, after.findings);
  add_notes(c, before, after, steps_before, steps_after);
  return c;
}

}  // namespace inferscope::report

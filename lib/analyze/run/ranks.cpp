#include "analyze/run/ranks.hpp"

#include "analyze/run/host_clocks.hpp"
#include "analyze/run/collective_runs.hpp"
#include "analyze/run/gather_select.hpp"
#include "analyze/run/rank_work.hpp"
#include "analyze/run/run_findings.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

namespace inferscope::analyze {
namespace {

using run_text::fmt;
using run_text::ms2;

// Collectives whose ranks arrived within this of each other: nobody waited (a kernel's start jitters by a few us
// on an idle GPU; 20 us is several times that and under any collective's transfer time on NVLink).
constexpr int64_t kSameArrivalNs = 20'000;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The per-step sums of one rank over the matched steps.
struct RankSums {
  double step = 0, compute = 0, comm = 0, overlap = 0, wait = 0, transfer = 0, late = 0;
};

struct OpSums {
  uint64_t count = 0;
  double wait = 0;                  // summed over ranks
  std::vector<double> transfers;    // per collective, the median rank's
  std::map<int, uint64_t> last;     // rank -> times it arrived last (of the collectives that waited)
  uint64_t waited = 0;              // collectives whose ranks did not arrive together
};

// The dumps in rank order (one not saying its rank after those that do, in the given order), each process once.
struct RankInputs {
  std::vector<const RankTrace*> traces;
  std::vector<const Analysis*> analyses;
};
RankInputs distinct_ranks(const std::vector<RankTrace>& traces, const std::vector<const Analysis*>& analyses,
                          std::vector<std::string>& warnings) {
  std::vector<size_t> order(traces.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](size_t i) { return traces[i].rank < 0 ? 1 << 30 : traces[i].rank; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  RankInputs in;
  std::set<std::pair<std::string, uint64_t>> processes;  // (host, pid): one process named twice counts once
  for (size_t i : order) {
    const RankTrace& t = traces[i];
    if (t.pid && !processes.insert({t.hostname, t.pid}).second) {
      warnings.push_back(t.path + " is the same process (host " + t.hostname + ", pid " + std::to_string(t.pid) +
                         ") as another dump: left out");
      continue;
    }
    in.traces.push_back(&t);
    in.analyses.push_back(analyses[i]);
  }
  return in;
}

// A row per rank, before any matching: its number (the one it said, else the smallest no dump claims), process,
// GPUs and its own primary.
std::vector<RankRow> rank_rows(const RankInputs& in) {
  std::set<int> said, taken;
  for (const RankTrace* t : in.traces)
    if (t->rank >= 0) said.insert(t->rank);
  int next_free = 0;
  std::vector<RankRow> rows;
  for (size_t i = 0; i < in.traces.size(); ++i) {
    const RankTrace& t = *in.traces[i];
    RankRow row;
    if (t.rank >= 0 && !taken.count(t.rank)) {
      row.rank = t.rank;
    } else {
      while (said.count(next_free) || taken.count(next_free)) ++next_free;
      row.rank = next_free;
    }
    taken.insert(row.rank);
    row.pid = t.pid;
    row.path = t.path;
    row.hostname = t.hostname;
    for (uint32_t d : t.devices) row.devices += (row.devices.empty() ? "" : ",") + std::to_string(d);
    for (const Finding& f : in.analyses[i]->findings)
      if (f.primary) row.primary = f.category;
    rows.push_back(std::move(row));
  }
  return rows;
}

// Whether the ranks can be matched at all (two or more, one step name); says why not.
bool matchable(const std::vector<const RankTrace*>& traces, std::vector<std::string>& warnings) {
  int world = 0;
  for (const RankTrace* t : traces) world = std::max(world, t->world_size);
  if (world > int(traces.size()))
    warnings.push_back("only " + std::to_string(traces.size()) + " of the run's " + std::to_string(world) +
                       " ranks were analysed: the rank the others wait for may be one not read");
  if (traces.size() < 2) return false;
  for (const RankTrace* t : traces)
    if (t->step_name != traces.front()->step_name) {
      warnings.push_back("the ranks' steps differ (" + traces.front()->step_name + " on " + traces.front()->path + ", " +
                         t->step_name + " on " + t->path + "): not one run's ranks, or mark the step (--step): their "
                         "steps are not matched");
      return false;
    }
  return true;
}

// Ranks on several hosts: each host's clock against the reference host's (host_clocks.hpp), and the ranks' traces
// moved onto it (`aligned` holds them; `in.traces` then points there). False, saying why, when a host's offset could
// not be estimated: its ranks are not matched rather than put on a guessed clock.
bool on_one_clock(RankInputs& in, RunAnalysis& run, std::vector<RankTrace>& aligned) {
  if (run.hosts < 2) return true;
  run.host_clocks = host_clocks(in.traces, run.ranks);
  const HostClock& ref = run.host_clocks.front();
  bool ok = true;
  for (const HostClock& c : run.host_clocks) {
    if (c.reference) continue;
    if (!c.estimated) {
      run.warnings.push_back("the clock of host " + c.hostname + " (ranks " + c.ranks + ") could not be put on host " +
                             ref.hostname + "'s: " + std::to_string(c.collectives_used) + " collectives were matched between "
                             "them, " + std::to_string(kMinClockCollectives) + " are needed to estimate the offset; the "
                             "ranks' steps and collectives are not matched across the hosts");
      ok = false;
    } else if (c.precision_us * 1e3 > double(kSameArrivalNs)) {
      run.warnings.push_back("the clock of host " + c.hostname + " is known to " + fmt("%.1f", c.precision_us) +
                             " us only (its offset against " + ref.hostname + "'s, from " +
                             std::to_string(c.collectives_used) + " collectives), more than the " +
                             std::to_string(kSameArrivalNs / 1000) + " us within which ranks count as arriving together: "
                             "waits between its ranks and the others' under that are not told apart from the clocks'");
    }
  }
  if (!ok) return false;
  aligned.reserve(in.traces.size());
  for (const RankTrace* t : in.traces) aligned.push_back(on_reference_clock(*t, offset_ns_of(run.host_clocks, t->hostname)));
  for (size_t i = 0; i < aligned.size(); ++i) in.traces[i] = &aligned[i];
  return true;
}

// The steps every rank has under one index, each rank's, when they overlap in time: steps of one index that do
// not are not the same step of one run (dumps of different runs, or a rank that skipped a step).
std::vector<std::vector<const RankStep*>> matched_steps(const std::vector<const RankTrace*>& traces,
                                                        std::vector<std::string>& warnings) {
  std::vector<std::map<uint64_t, const RankStep*>> by_index(traces.size());
  for (size_t r = 0; r < traces.size(); ++r)
    for (const auto& s : traces[r]->steps) by_index[r][s.index] = &s;
  std::vector<std::vector<const RankStep*>> matched;
  uint64_t apart = 0;
  for (const auto& [index, s] : by_index[0]) {
    std::vector<const RankStep*> step{s};
    bool together = true;
    for (size_t r = 1; r < traces.size() && step.size() == r; ++r) {
      auto it = by_index[r].find(index);
      if (it == by_index[r].end()) break;
      step.push_back(it->second);
      together = together && it->second->start_ns < s->end_ns && s->start_ns < it->second->end_ns;
    }
    if (step.size() < traces.size()) continue;
    if (together) matched.push_back(std::move(step));
    else ++apart;
  }
  if (apart > 0)
    warnings.push_back(std::to_string(apart) + " steps of one index did not overlap in time on every rank: left "
                       "unmatched");
  if (matched.empty())
    warnings.push_back("no step is steady on every rank at the same time: the ranks' steps are not matched");
  return matched;
}

// The matched steps summed per rank and per kind of collective.
struct RunSums {
  std::vector<RankSums> ranks;
  std::map<std::string, OpSums> ops;
  bool counts_differ = false, f32 = false;
  double collectives = 0;
};

// One collective matched across the ranks (the i-th of step `st` on each): who waited, how long it moved data,
// and which rank arrived last and delayed it.
void add_collective(const std::vector<const RankStep*>& st, size_t i, const std::vector<RankRow>& rows, RunSums& sums) {
  const size_t n = st.size();
  int64_t last = INT64_MIN, second = INT64_MIN;
  size_t last_r = 0;
  for (size_t r = 0; r < n; ++r) {
    const int64_t s = st[r]->collectives[i].start_ns;
    if (s > last) {
      second = last;
      last = s;
      last_r = r;
    } else if (s > second) {
      second = s;
    }
  }
  const CollectiveKernel& c0 = st[0]->collectives[i];
  OpSums& op = sums.ops[c0.op];
  ++op.count;
  if (c0.fp32) sums.f32 = true;
  std::vector<double> transfer(n);
  for (size_t r = 0; r < n; ++r) {
    const CollectiveKernel& c = st[r]->collectives[i];
    const double wait = double(waited_ns(c, last));
    sums.ranks[r].wait += wait;
    transfer[r] = std::max(0.0, double(c.end_ns - c.start_ns) - wait);
    sums.ranks[r].transfer += transfer[r];
    op.wait += wait / double(n);
  }
  op.transfers.push_back(median(transfer));
  if (last - second <= kSameArrivalNs) return;
  // a collective cannot have waited longer than the waiting ranks' kernels lasted
  double longest_wait = 0;
  for (size_t r = 0; r < n; ++r)
    if (r != last_r)
      longest_wait = std::max(longest_wait, double(st[r]->collectives[i].end_ns - st[r]->collectives[i].start_ns));
  sums.ranks[last_r].late += std::min(double(last - second), longest_wait);
  ++op.last[rows[last_r].rank];
  ++op.waited;
}

RunSums sum_matched(const std::vector<std::vector<const RankStep*>>& matched, const std::vector<RankRow>& rows) {
  const size_t n = rows.size();
  RunSums sums;
  sums.ranks.resize(n);
  for (const auto& st : matched) {
    const size_t k = common_collectives(st);
    for (size_t r = 0; r < n; ++r) {
      sums.counts_differ |= st[r]->collectives.size() != st[0]->collectives.size();
      sums.ranks[r].step += double(st[r]->end_ns - st[r]->start_ns);
      sums.ranks[r].compute += st[r]->compute_ns;
      sums.ranks[r].comm += st[r]->comm_ns;
      sums.ranks[r].overlap += st[r]->overlap_ns;
    }
    sums.collectives += double(k);
    for (size_t i = 0; i < k; ++i) add_collective(st, i, rows, sums);
  }
  return sums;
}

// The per-step means of the sums into the run's rows and tables.
void fill_means(const RunSums& sums, double m, RunAnalysis& run) {
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    RankRow& row = run.ranks[r];
    const RankSums& x = sums.ranks[r];
    row.step_ms = x.step / m / 1e6;
    row.compute_ms = x.compute / m / 1e6;
    row.comm_ms = x.comm / m / 1e6;
    row.overlap_ms = x.overlap / m / 1e6;
    row.wait_ms = x.wait / m / 1e6;
    row.transfer_ms = x.transfer / m / 1e6;
    row.late_ms = x.late / m / 1e6;
    run.step_ms = std::max(run.step_ms, row.step_ms);
  }
  for (const auto& [name, op] : sums.ops) {
    CollectiveRow c;
    c.op = name;
    c.per_step = double(op.count) / m;
    double transfer = 0;
    for (double t : op.transfers) transfer += t;
    c.transfer_ms = transfer / m / 1e6;
    c.wait_ms = op.wait / m / 1e6;
    uint64_t most = 0;
    for (const auto& [rank, times] : op.last)
      if (times > most) most = times, c.last_rank = rank;
    c.last_share = op.waited ? double(most) / double(op.waited) : 0;
    c.waited_share = op.count ? double(op.waited) / double(op.count) : 0;
    run.collectives.push_back(c);
  }
  std::sort(run.collectives.begin(), run.collectives.end(), [](const CollectiveRow& a, const CollectiveRow& b) {
    return a.transfer_ms + a.wait_ms > b.transfer_ms + b.wait_ms;
  });
  double compute_sum = 0, compute_max = 0;
  for (const auto& r : run.ranks) compute_sum += r.compute_ms, compute_max = std::max(compute_max, r.compute_ms);
  const double compute_mean = compute_sum / double(run.ranks.size());
  run.imbalance_pct = compute_mean > 0 ? (compute_max - compute_mean) / compute_mean * 100 : 0;
}

// The straggler: the rank whose late arrivals delayed the run's collectives most, when that is a cause worth
// reporting (the floor of any cause) and the delay is mostly its (two thirds or more: one rank is the story).
// Where the straggler's own analysis says most launches of kernel `name` came from (its kernel table's launcher:
// the Python function, range or layer), so that the report names code and not only a kernel; "" when unknown.
std::string kernel_launcher(const std::string& name, const Analysis* a) {
  if (a)
    for (const KernelRow& k : a->kernels)
      if (k.name == name && k.launched_by != "-") return k.launched_by;
  return "";
}

void add_straggler(const std::vector<std::vector<const RankStep*>>& matched, const std::vector<const Analysis*>& analyses,
                   RunAnalysis& run) {
  double late_total = 0;
  size_t straggler = 0;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    late_total += run.ranks[r].late_ms;
    if (run.ranks[r].late_ms > run.ranks[straggler].late_ms) straggler = r;
  }
  const RankRow& s = run.ranks[straggler];
  // One rank is the story when its delay is at least twice all the others' together: ranks that are late by
  // turns (a per-collective jitter, 50 % each on two ranks) have no straggler to fix; their waits are the cost of
  // many collectives (collective_runs.hpp), counted in the communication finding.
  if (late_total <= 0 || s.late_ms < kMinImpactShare * run.step_ms || s.late_ms / late_total < 2.0 / 3.0) return;
  run.straggler = s.rank;
  // Late because its GPU had more to do: its compute per step beyond every other rank's covers half its lateness
  // or more (then the GPU work explains most of it; less, and the host's work before its collectives does).
  double others_compute = 0;
  for (size_t r = 0; r < run.ranks.size(); ++r)
    if (r != straggler) others_compute = std::max(others_compute, run.ranks[r].compute_ms);
  const Lateness late = s.compute_ms - others_compute >= 0.5 * s.late_ms ? Lateness::kGpuWork : Lateness::kHostWork;
  Excess did = straggler_excess(matched, straggler, late);  // inside the matched steps only
  if (did.kind == "kernel") did.launched_by = kernel_launcher(did.name, straggler < analyses.size() ? analyses[straggler] : nullptr);
  if (did.ms > 0) run.straggler_did = did.what() + ", " + ms2(did.ms) + " ms per step more than on any other rank";
  run.findings.push_back(collective_wait(run, s, s.late_ms / late_total, did, s.primary));
}

// Communication nobody overlapped: on the median rank by exposed transfer, the collective time beside no compute,
// less the wait (that is collective_wait's).
void add_communication(const std::vector<const RankTrace*>& traces, const std::vector<std::vector<const RankStep*>>& matched,
                       const RunSums& sums, double m, RunAnalysis& run) {
  const size_t n = run.ranks.size();
  std::vector<std::pair<double, size_t>> exposed;
  for (size_t r = 0; r < n; ++r) {
    const RankRow& row = run.ranks[r];
    exposed.emplace_back(std::max(0.0, row.comm_ms - row.overlap_ms - row.wait_ms), r);
  }
  std::sort(exposed.begin(), exposed.end());
  const auto [exposed_ms, typical] = exposed[(n - 1) / 2];
  CollectiveRuns runs = collective_runs(matched, typical, run.straggler >= 0);
  if (!worth_coalescing(runs)) runs.saving_ms = 0;  // bandwidth-bound: the bytes are the cost
  const GatherSelect select = gather_then_select(matched, typical);
  if (std::max({exposed_ms, runs.saving_ms, select.saving_ms}) < kMinImpactShare * run.step_ms) return;
  // NCCL's share of the SMs: its kernels' median grid over the GPU's SMs
  std::vector<double> blocks;
  for (const RankStep& st : traces[typical]->steps)
    for (const CollectiveKernel& k : st.collectives) blocks.push_back(k.blocks);
  const uint32_t sms = traces[typical]->sm_count;
  const double share = sms > 0 && !blocks.empty() ? median(blocks) / sms : -1;
  run.findings.push_back(communication(run, run.ranks[typical], exposed_ms, sums.f32, sums.collectives / m, share, runs, select));
}

// The run's step, step by step: the durations of the rank whose mean matched step is the run's (fill_means; the
// first of equals), and which rank that is.
void keep_slowest_rank_steps(const std::vector<std::vector<const RankStep*>>& matched, RunAnalysis& run) {
  size_t slowest = 0;
  for (size_t r = 1; r < run.ranks.size(); ++r)
    if (run.ranks[r].step_ms > run.ranks[slowest].step_ms) slowest = r;
  run.step_rank = run.ranks[slowest].rank;
  run.step_durations_ms.reserve(matched.size());
  for (const auto& st : matched) run.step_durations_ms.push_back(double(st[slowest]->end_ns - st[slowest]->start_ns) / 1e6);
}

}  // namespace

size_t common_collectives(const std::vector<const RankStep*>& step) {
  size_t k = step.empty() ? 0 : SIZE_MAX;
  for (const RankStep* s : step) k = std::min(k, s->collectives.size());
  return k;
}

int64_t last_arrival(const std::vector<const RankStep*>& step, size_t i) {
  int64_t last = INT64_MIN;
  for (const RankStep* s : step) last = std::max(last, s->collectives[i].start_ns);
  return last;
}

RunAnalysis analyze_ranks(const std::vector<RankTrace>& traces, const std::vector<const Analysis*>& analyses) {
  RunAnalysis run;
  RankInputs in = distinct_ranks(traces, analyses, run.warnings);
  run.ranks = rank_rows(in);
  std::set<std::string> hosts;
  for (const RankRow& r : run.ranks) hosts.insert(r.hostname);
  run.hosts = std::max<size_t>(1, hosts.size());
  std::vector<RankTrace> aligned;  // the ranks of other hosts, on the reference host's clock
  if (!matchable(in.traces, run.warnings) || !on_one_clock(in, run, aligned)) return run;
  const auto matched = matched_steps(in.traces, run.warnings);
  run.steps_matched = matched.size();
  if (matched.empty()) return run;

  const RunSums sums = sum_matched(matched, run.ranks);
  if (sums.counts_differ)
    run.warnings.push_back("the ranks ran different numbers of collectives in some steps: only the first ones of "
                           "each step, as many as every rank ran, are matched (in their order)");
  const double m = double(matched.size());
  fill_means(sums, m, run);
  keep_slowest_rank_steps(matched, run);
  add_straggler(matched, in.analyses, run);
  add_communication(in.traces, matched, sums, m, run);
  run.timeline = run_timeline(matched, run.ranks);
  std::stable_sort(run.findings.begin(), run.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.impact_ms > b.impact_ms; });
  if (!run.findings.empty()) run.findings.front().primary = true;
  return run;
}

void mark_launcher(Analysis& a) {
  if (a.run.ranks.empty() || a.gpu_work_recorded) return;
  a.launcher = true;
  a.findings.clear();
  // its own steps are its idle loop: the headline is the run's, and no advice on marking the launcher's steps
  if (a.run.step_ms > 0) a.end_to_end_ms = a.run.step_ms;
  std::erase_if(a.warnings, [](const std::string& w) { return w.find("no repeated top-level range") != std::string::npos; });
}

}  // namespace inferscope::analyze

// The merge: two streaming passes over the memory-mapped dump, then one linear sweep per step.
//
// Pass 1 visits every record once. Ranges, Python calls, marks and counters are aggregated on the fly; CUDA
// API calls and GPU activities are kept in compact arrays (model.hpp). Attribution needs no sort: a thread's
// records arrive in the order they END, so the first range (or Python frame) to arrive that contains a
// pending API call's start is the innermost one around it; each thread keeps a stack of API calls still
// waiting for their innermost Python frame, range and layer.
//
// Pass 2 visits only application threads again (cheap: the file is mapped) to measure host work inside the
// chosen steps and to cut out the representative step's timeline, both of which need the steps from pass 1.
//
// Every stage runs on W worker threads over runs of consecutive chunks (or steps) and joins their results in
// file order, so the analysis is the same for any W (docs/analysis.md section 9; test_analyze_threads).
#include "analyze/analyzer.hpp"

#include "analyze/aggregate.hpp"
#include "analyze/host_state.hpp"
#include "analyze/idle_attribution.hpp"
#include "analyze/model.hpp"
#include "analyze/rules/rule.hpp"
#include "analyze/stages.hpp"
#include "analyze/step_policy.hpp"
#include "analyze/what_if.hpp"
#include "analyze/summary.hpp"
#include "dump/clock_model.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <system_error>
#include <sstream>
#include <unordered_map>

namespace inferscope::analyze {


using detail::ApiOp;
using detail::IdleCauses;
using detail::attribute_idle_gap;
using detail::GpuOp;
using detail::Model;
using detail::Span;
using detail::StepMetrics;

bool looks_like_module_path(std::string_view name) {
  if (name.empty() || name.find('.') == std::string_view::npos) return false;
  if (name.front() == '.' || name.back() == '.') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  if (std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return name.find("..") == std::string_view::npos;
}

using namespace detail;  // the stages' helpers and state (stages.hpp)


Context::Context(const dump::DumpReader& reader, const AnalyzeOptions& options)
    : r(reader), opt(options), clock(reader.calibration()), nstr(reader.string_count() + 1), chunks(reader.event_chunks()) {
  sname.resize(nstr);
  for (uint32_t i = 1; i < nstr; ++i) sname[i] = r.string_at(i);
  // Step names asked for.
  step_name.assign(nstr, 0);
  if (!opt.step.empty()) {
    for (uint32_t i = 1; i < nstr; ++i)
      if (r.has_string(i) && name_of(i) == opt.step) step_name[i] = 1;
    for (auto& [id, c] : r.code_table())
      if (c.qualname == opt.step || (c.qualname.size() > opt.step.size() &&
                                     c.qualname.compare(c.qualname.size() - opt.step.size(), opt.step.size(), opt.step) == 0 &&
                                     c.qualname[c.qualname.size() - opt.step.size() - 1] == '.'))
        step_codes.insert(id);
  }
  W = dump::worker_threads(opt.threads);
  chunk_channel.resize(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) chunk_channel[i] = is_channel(chunks[i].thread_id);
  prog.on = opt.progress;
  // Python code ids index per-worker tables: one past the largest id the dump's code table holds bounds them,
  // and at least 65,536 ids (3 MiB a table) stay themselves when the table was cut off; a larger id is counted
  // as code 0, so a damaged record cannot size a table per worker (a fuzzed dump sized 784 MB each).
  for (auto& [id, c] : r.code_table())
    if (id < (1u << 24) && id >= code_limit) code_limit = id + 1;
}

std::string Context::code_name(uint32_t code) const {
  auto it = r.code_table().find(code);
  return it == r.code_table().end() ? "<code " + std::to_string(code) + ">" : it->second.qualname;
}

std::string Context::code_where(uint32_t code) const {
  auto it = r.code_table().find(code);
  if (it == r.code_table().end()) return code_name(code);
  const auto& c = it->second;
  if (c.file.empty()) return c.qualname;
  const size_t slash = c.file.find_last_of('/');
  return c.qualname + " (" + c.file.substr(slash == std::string::npos ? 0 : slash + 1) +
         (c.line ? ":" + std::to_string(c.line) : std::string()) + ")";
}

Analysis analyze_dump(const dump::DumpReader& r, const AnalyzeOptions& opt) {
  Analysis a;
  Model m;
  a.source = r.path();
  a.source_format = "dump";
  for (auto& [k, v] : r.process_info()) a.process[k] = v;  // later values win
  if (r.damage()) {
    a.warnings.push_back((r.damage()->truncated ? "the dump was cut short: " : "the dump is corrupt: ") +
                         r.damage()->message + "; the analysis covers the data before that point");
    if (!r.damage()->truncated) a.partial = true;
  } else if (!r.complete()) {
    a.warnings.push_back(r.path() + ": no end chunk (the process did not stop cleanly); the analysis covers what was written");
  }
  for (auto& d : r.drops()) a.drops[d.reason] += d.records;
  if (uint64_t dropped = r.total_dropped_records())
    a.warnings.push_back(std::to_string(dropped) + " records were dropped while recording (see drops); totals are lower bounds");
  dump::report_file_accounting(r, a.warnings, a.drops);  // END chunk's counts vs the file; ids beyond its tables

  Context cx(r, opt);
  const auto& clock = cx.clock;
  const size_t nstr = cx.nstr;
  auto name_of = [&](uint32_t id) -> const std::string& { return cx.name_of(id); };
  auto code_name = [&](uint32_t code) { return cx.code_name(code); };
  auto code_where = [&](uint32_t code) { return cx.code_where(code); };

  const auto& step_name = cx.step_name;
  const auto& step_codes = cx.step_codes;
  const unsigned W = cx.W;
  const auto& chunks = cx.chunks;
  const auto& chunk_channel = cx.chunk_channel;
  auto thread_slot = [](uint32_t t) { return Context::thread_slot(t); };

  auto& prog = cx.prog;
  auto& phase = cx.phase;
  const bool timing = cx.phase.on;

  Ingested in = ingest(cx, a);
  auto& ts = in.ts;
  auto& range_agg = in.range_agg;
  auto& py_agg = in.py_agg;
  auto& kernel_count = in.kernel_count;
  auto& kernel_ns = in.kernel_ns;
  auto& apis = in.apis;
  auto& gpu = in.gpu;
  auto& top = in.top;
  auto& asked = in.asked;
  auto& copies = in.copies;
  auto& allocs = in.allocs;
  auto& counters = in.counters;
  auto& layer_count = in.layer_count;
  auto& layer_cpu = in.layer_cpu;
  auto& marks = in.marks;
  const int64_t t_first = in.t_first, t_last = in.t_last;
  const uint64_t clock_checks = in.clock_checks, clock_bad = in.clock_bad;
  const double clock_worst_ns = in.clock_worst_ns;
  const int64_t gpu_max_dur = in.gpu_max_dur;
  const uint32_t cmin = in.cmin, cmax = in.cmax;
  auto rel = [&](int64_t ns) { return ms(double(ns - t_first)); };

  phase("pass 1");
  // ---------------------------------------------------------------- steps
  StepSet ss = find_steps(cx, in, a, m);
  const auto& steps = ss.steps;
  const uint32_t step_thread = ss.step_thread;
  const bool whole = ss.whole;
  const int64_t rep_s = ss.rep_s, rep_e = ss.rep_e;
  auto step_of = [&](int64_t s, int64_t e, size_t& step_hint) { return ss.step_of(s, e, step_hint); };


  phase("steps");
  // ---------------------------------------------------------------- GPU order and launch index
  order_gpu(gpu, W);
  const LaunchIndex li = index_launches(apis, cmin, cmax, W);
  auto launch_of = [&](uint32_t corr) { return li.launch_of(corr); };
  Launchers who(cx, a.steps.name);
  auto launcher_id = [&](const ApiOp* api) { return who.id(api); };
  auto launcher = [&](const ApiOp* api) -> const std::string& { return who.label(api); };
  const auto& labels = who.labels;

  phase("sort + index");
  // ---------------------------------------------------------------- attribution and alignment
  // Attribution and alignment read only the arrays built above; they run beside pass 2, which reads the dump.
  Attribution at;
  double attributor_s = 0;
  std::thread attributor([&] {
    const auto attributor_t0 = std::chrono::steady_clock::now();
    at = attribute(cx, in, li, who);
    attributor_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - attributor_t0).count();
  });

  // ---------------------------------------------------------------- pass 2: host work in steps, timeline
  const HostWork hw = measure_host(cx, ss, py_agg.size(), a.steps.count, m);
  const auto& cov = hw.cov;
  const auto& rep_cpu = hw.rep_cpu;
  const auto& other_py_busy = hw.other_py_busy;
  const int64_t steps_s = ss.steps_s, steps_e = ss.steps_e;
  if (prog.on) std::fprintf(stderr, "iscope-analyze: measuring %zu steps\n", steps.size());

  phase("pass 2");
  // ---------------------------------------------------------------- per-step sweep
  const std::vector<const ApiOp*> sapi = step_calls(apis, step_thread, W);
  if (!sapi.empty()) {
    m.first_api_name = name_of(sapi.front()->name);
    m.first_api_ms = ms(sapi.front()->dur);
    size_t hint = 0;
    m.first_api_in_steps = step_of(sapi.front()->start, sapi.front()->end(), hint) >= 0 || whole;
  }
  std::vector<Sweep> sweeps = sweep_steps(ss, sapi, cov, gpu, gpu_max_dur, m.host_frames, W);
  // The attribution ran beside pass 2 and the sweep; the by-API tables below need its launcher labels.
  attributor.join();
  if (timing) std::fprintf(stderr, "iscope-analyze: (attribution beside pass 2 and the sweep: %.3f s)\n", attributor_s);
  a.alignment = at.alignment;
  if (!at.warning.empty()) a.warnings.push_back(at.warning);
  auto& kernel_by_launcher = at.kernel_by_launcher;
  auto& kernels_by_launcher = at.kernels_by_launcher;
  auto& layer_gpu = at.layer_gpu;
  auto& layer_kernels = at.layer_kernels;
  auto& copy_launchers = at.copy_launchers;
  const int64_t max_gpu_dur = at.max_gpu_dur;
  join_sweeps(cx, sweeps, who, at, m);

  phase("per-step sweep");
  // ---------------------------------------------------------------- counters: CPU time, switches, memory
  pcie_peak(a, m);
  read_counters(cx, in, ss, hw, a.steps.count, m);

  // ---------------------------------------------------------------- the typical step
  m.typical = detail::typical_step(m.steps, detail::typical_indexes(m.selection));
  a.breakdown = detail::breakdown_of(m.typical);
  m.kernels_per_step = m.typical.kernels;
  {  // What-if: graphs of up to 64 typical steps (a median over 64 is stable to a sixth of the step-to-step spread).
    detail::GraphSource src{&sapi, gpu.empty() ? nullptr : &gpu[0], gpu.size(), gpu_max_dur, launch_of};
    m.graphs = detail::build_step_graphs(src, m.steps, detail::typical_indexes(m.selection), 64);
  }

  phase("counters");
  // ---------------------------------------------------------------- tables
  build_tables(cx, in, at, who, m, a);


  phase("tables");
  // ---------------------------------------------------------------- representative timeline
  build_timeline(cx, in, ss, hw, max_gpu_dur, a);


  phase("timeline");
  a.findings = rules::run_all(a, m);
  if (prog.on) std::fprintf(stderr, "iscope-analyze: done: %llu records\n", (unsigned long long)a.events);
  (void)marks;
  return a;
}

std::string findings_digest(const Analysis& a) {
  std::ostringstream o;
  char b[256];
  std::snprintf(b, sizeof(b), "steps name=%s count=%llu\n", a.steps.name.c_str(), (unsigned long long)a.steps.count);
  o << b;
  for (auto& f : a.findings) {
    std::snprintf(b, sizeof(b), "%s primary=%d impact_ms=%.2f impact_pct=%.0f confidence=%.1f suggestions=%zu uncertain=%d\n",
                  f.category.c_str(), f.primary ? 1 : 0, f.impact_ms, f.impact_pct, f.confidence, f.suggestions.size(),
                  f.uncertain ? 1 : 0);
    o << b;
  }
  return o.str();
}

void print_findings_text(const Analysis& a, std::ostream& o) {
  char b[512];
  const Breakdown& d = a.breakdown;
  std::snprintf(b, sizeof(b), "End-to-end latency: %.3f ms per step '%s' (%llu steps; p50 %.3f, p90 %.3f, p99 %.3f, max %.3f ms)\n",
                a.end_to_end_ms, a.steps.name.c_str(), (unsigned long long)a.steps.count, a.steps.p50_ms, a.steps.p90_ms,
                a.steps.p99_ms, a.steps.max_ms);
  o << b;
  std::snprintf(b, sizeof(b), "Breakdown (ms): cpu %.3f | h2d %.3f | gpu %.3f | d2h %.3f | sync %.3f | framework %.3f | idle %.3f "
                "= %.3f; GPU utilization %.0f %%; GPU idle: host %.3f, gaps %.3f, sync %.3f\n",
                d.cpu_preprocessing_ms, d.h2d_ms, d.gpu_compute_ms, d.d2h_ms, d.sync_wait_ms, d.framework_overhead_ms,
                d.idle_ms, d.step_ms, d.gpu_utilization * 100, d.gpu_idle_waiting_on_host_ms,
                d.gpu_idle_gaps_between_kernels_ms, d.gpu_idle_waiting_on_sync_ms);
  o << b;
  for (auto& w : a.warnings) o << "warning: " << w << "\n";
  for (auto& f : a.findings) {
    std::snprintf(b, sizeof(b), "\n[%s]%s%s %s\n  impact %.3f ms (%.0f %% of the step), confidence %.2f\n", f.category.c_str(),
                  f.primary ? " PRIMARY" : "", f.uncertain ? " (uncertain)" : "", f.title.c_str(), f.impact_ms, f.impact_pct,
                  f.confidence);
    o << b;
    for (auto& e : f.evidence) o << "  - " << e << "\n";
    for (auto& x : f.examples) {
      std::snprintf(b, sizeof(b), "  - example %.3f-%.3f ms: %s\n", x.start_ms, x.end_ms, x.what.c_str());
      o << b;
    }
    for (auto& s : f.suggestions) o << "  * [" << s.priority << "] " << s.action << "\n";
  }
  if (!a.kernels.empty()) o << "\nTop kernels:\n";
  for (size_t i = 0; i < a.kernels.size() && i < 10; ++i) {
    std::snprintf(b, sizeof(b), "  %-40s x%llu %.3f ms (%.0f %%) from %s\n", a.kernels[i].name.c_str(),
                  (unsigned long long)a.kernels[i].count, a.kernels[i].total_ms, a.kernels[i].share * 100,
                  a.kernels[i].launched_by.c_str());
    o << b;
  }
  std::snprintf(b, sizeof(b), "\nAlignment: %s (max %.3f us, %.2f %% over 1 us) %s\n", a.alignment.ok ? "ok" : "NOT OK",
                a.alignment.max_violation_us, a.alignment.violation_pct, a.alignment.note.c_str());
  o << b;
}

}  // namespace inferscope::analyze

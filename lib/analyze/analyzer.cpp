// The merge: two streaming passes over the memory-mapped dump, then one linear sweep per step. analyze_dump
// runs the stages (stages.hpp; docs/analysis.md, "Analyzer stages"):
//
//   ingest.cpp    pass 1: every record once; aggregates, the calls and GPU activities in compact arrays,
//                 each call's innermost Python frame, range and layer
//   steps.cpp     the steps, the step policy, the representative step
//   launch.cpp    GPU order, the launch index and launcher labels; the attribution and clock alignment, on a
//                 thread of its own beside pass 2 and the sweep
//   pass2.cpp     pass 2: only application threads again (cheap: the file is mapped), to measure host work
//                 inside the chosen steps and to cut out the representative step's spans
//   sweep.cpp     the per-step sweep: every step's breakdown and GPU-idle causes
//   counters.cpp  the PCIe peak, the system counters, the host-state split
//   tables.cpp, timeline.cpp   the tables and the representative step's timeline; then the rules
//
// Every stage runs on W worker threads over runs of consecutive chunks (or steps) and joins their results in
// file order, so the analysis is the same for any W (docs/analysis.md section 9; test_analyze_threads).
#include "analyze/analyzer.hpp"
#include "analyze/beside_task.hpp"

#include "analyze/aggregate.hpp"
#include "analyze/kernel_traits.hpp"
#include "analyze/rules/rule.hpp"
#include "analyze/rules/rule_settings.hpp"
#include "analyze/serving/requests.hpp"
#include "analyze/stages.hpp"
#include "analyze/tried.hpp"
#include "analyze/what_if/what_if.hpp"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <thread>

namespace inferscope::analyze {

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
  for (auto& [id, c] : r.code_table()) {
    if (id < (1u << 24) && id >= code_limit) code_limit = id + 1;
    if (const WaitPoint* w = wait_point_of_code(c.qualname, c.file)) wait_points.emplace(id, w);
  }
}

std::string out_of_memory_message(const std::string& path) {
  struct stat st{};
  const std::string size = ::stat(path.c_str(), &st) == 0 ? " (" + std::to_string(st.st_size) + " bytes)" : "";
  // Not "N bytes per CUDA call": what ran out may be any table, and every one is bounded by the records the
  // file holds, so the file's content is what to look at.
  return path + size + ": out of memory while analysing it; the analyzer's memory grows with the records the file "
         "holds (docs/reliability.md, \"Memory bounds\"); use a machine with more memory, or record a shorter run";
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

namespace {

// What the dump says about itself: its process info, damage, drops and accounting.
void read_dump_state(const dump::DumpReader& r, Analysis& a) {
  a.source = r.path();
  a.source_format = "dump";
  for (auto& [k, v] : r.process_info()) a.process[k] = v;  // later values win
  a.complete = r.complete();
  if (r.damage()) {
    a.warnings.push_back((r.damage()->truncated ? "the dump was cut short: " : "the dump is corrupt: ") +
                         r.damage()->message + "; the analysis covers the data before that point");
    if (!r.damage()->truncated) a.partial = true;
  } else if (!r.complete()) {
    a.warnings.push_back(r.path() + ": no end chunk (the process did not stop cleanly, or the disk was full when it "
                         "stopped); the analysis covers what was written, and records lost after the last drop table "
                         "in the file are counted nowhere: drop totals are lower bounds");
  }
  for (const std::string& skipped : r.skipped_chunks()) {
    a.warnings.push_back("the dump is corrupt: " + skipped + "; the analysis covers every other chunk");
    a.partial = true;
  }
  uint64_t dropped = 0;
  for (auto& d : r.drops()) {
    a.drops[d.reason] += d.records;
    // A sampled run's ring drops its oldest windows by design: the sampling section says so, not a warning.
    if (d.reason.rfind("sample_window_dropped", 0) != 0) dropped += d.records;
  }
  if (dropped)
    a.warnings.push_back(std::to_string(dropped) + " records were dropped while recording (see drops); totals are lower bounds");
  dump::report_file_accounting(r, a.warnings, a.drops);  // END chunk's counts vs the file; ids beyond its tables
}

// The tables stage's result into the Analysis, the long ones cut to kTableRows.
void take_tables(Analysis& a, Tables&& tables) {
  a.kernels = std::move(tables.kernels);
  a.python = std::move(tables.python);
  a.ranges = std::move(tables.ranges);
  a.copies = std::move(tables.copies);
  a.syncs = std::move(tables.syncs);
  a.allocations = std::move(tables.allocations);
  a.graph_launches = std::move(tables.graph_launches);
  a.layers = std::move(tables.layers);
  a.threads = std::move(tables.threads);
  if (a.kernels.size() > kTableRows) a.kernels.resize(kTableRows);
  if (a.python.size() > kTableRows) a.python.resize(kTableRows);
  if (a.ranges.size() > kTableRows) a.ranges.resize(kTableRows);
}

}  // namespace

// The stages in order (docs/analysis.md, "Analyzer stages"); each takes the typed results of the ones before it
// and returns its own (stage_results.hpp). Only this function writes the Analysis, from those results.
Analysis analyze_dump(const dump::DumpReader& r, const AnalyzeOptions& options) {
  Analysis a;
  read_dump_state(r, a);
  const AnalyzeOptions opt = sampled_options(r, options);  // a sampled dump's step is the one it counted
  Context cx(r, opt);
  auto& phase = cx.phase;

  Ingested in = ingest(cx);  // the stages below read it const; order_gpu only reorders the GPU activities
  phase("pass 1");
  const CoroutineActivity coroutines = collect_coroutines(cx, in);
  std::vector<int64_t> first_queued;  // a batched server's: by step, when its first request began waiting for it
  StepSet found = find_steps(cx, in, coroutines);
  const Requests requests = [&] {
    std::vector<Span> steps;
    if (!found.whole)
      for (const Cand& c : found.steps) steps.push_back({c.start, c.end, 0});
    Requests r = measure_requests(coroutines, steps, [&](uint32_t code) { return cx.code_name(code); }, &first_queued);
    if (r.detected) {
      auto it = r.detected ? cx.r.threads().find(coroutines.loop_thread) : cx.r.threads().end();
      r.loop_thread = it != cx.r.threads().end() && !it->second.name.empty() ? it->second.name
                                                                           : std::to_string(coroutines.loop_thread);
    }
    return r;
  }();
  // A batcher's step is its cycle, the batching window included (serving/loop_steps.hpp); the requests' split
  // above keeps the batch callbacks, which is where each request's batch ran.
  const StepSet ss = requests.batched && found.step_code ? batch_cycles(cx, in, found, first_queued) : std::move(found);
  const Sampling sampling = describe_sampling(cx, in, ss);
  phase("steps");
  order_gpu(in.gpu, cx.W);
  const HostBounces bounces = find_host_bounces({in.gpu.begin(), in.gpu.size()});
  const LaunchIndex li = index_launches(in.apis, in.cmin, in.cmax, cx.W);
  Launchers who(cx, ss.found.stats.name);
  phase("sort + index");

  // Attribution and alignment read only the arrays built above; they run beside pass 2, which reads the dump.
  Attribution at;
  double attributor_s = 0;
  detail::BesideTask attributor([&] {
    const auto attributor_t0 = std::chrono::steady_clock::now();
    at = attribute(cx, in, li, who);
    attributor_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - attributor_t0).count();
  });

  const uint64_t steady = ss.found.stats.count;
  const HostWork hw = measure_host(cx, ss, in.py_agg.size(), steady);
  if (cx.prog.on) std::fprintf(stderr, "iscope-analyze: measuring %zu steps\n", ss.steps.size());
  phase("pass 2");

  const std::vector<const ApiOp*> sapi = step_calls(in.apis, ss.step_thread, cx.W);
  const FirstCall first = first_call(cx, ss, sapi);
  std::vector<Sweep> sweeps = sweep_steps(ss, sapi, hw.cov, in.gpu, in.gpu_max_dur, hw.frames.visible, cx.W);
  // The attribution ran beside pass 2 and the sweep; the by-API tables below need its launcher labels.
  attributor.join();
  if (phase.on) std::fprintf(stderr, "iscope-analyze: (attribution beside pass 2 and the sweep: %.3f s)\n", attributor_s);
  SweptSteps swept = join_sweeps(cx, sweeps, who, at);
  phase("per-step sweep");

  const LinkPeak link = pcie_peak(a.process);
  const CounterEvidence counters = read_counters(cx, in, ss, hw, steady);
  HostSplitSteps split = split_host_state(cx, in, ss, hw, std::move(swept.steps));
  const WaitAttribution waits = find_waits(cx, in, ss, sapi, ss.selection, a.process.count("pid") ? a.process.at("pid") : "");
  const MeasuredSteps measured = split_waits(std::move(split), waits);
  phase("waits");
  const TypicalStep typical = detail::typical_step(measured.steps, detail::typical_indexes(ss.selection));
  const KernelChains chains = [&] {
    std::vector<Span> windows;
    for (size_t i : detail::typical_indexes(ss.selection))
      if (i < measured.steps.size()) windows.push_back({measured.steps[i].start, measured.steps[i].start + measured.steps[i].dur, 0});
    return find_kernel_chains({in.gpu.begin(), in.gpu.size()}, windows,
                              [&](uint32_t id) -> const std::string& { return cx.name_of(id); });
  }();
  const GenerationLoop generation = find_generation(cx, in, ss, measured.steps, sapi, li);
  phase("generation");
  std::vector<replay::StepGraph> graphs;
  {  // What-if: graphs of up to 64 typical steps (a median over 64 is stable to a sixth of the step-to-step spread).
    detail::GraphSource src{&sapi, in.gpu.empty() ? nullptr : &in.gpu[0], in.gpu.size(), in.gpu_max_dur,
                            [&li](uint32_t corr) { return li.launch_of(corr); }};
    graphs = detail::build_step_graphs(src, measured.steps, detail::typical_indexes(ss.selection), 64);
  }
  phase("counters");

  Tables tables = build_tables(cx, in, at, who, link);
  phase("tables");
  Timeline timeline = build_timeline(cx, in, ss, hw, at.max_gpu_dur, generation.token_function);
  phase("timeline");

  const ProgramFacts facts = find_program_facts(cx, in, ss, measured.steps, sapi, tables, generation, a.process);
  const Breakdown breakdown = detail::breakdown_of(typical);
  const bool gpu_work = in.gpu.size() > 0;
  const rules::RuleInput rule_input{.process = a.process,
                                    .stats = ss.found.stats,
                                    .selection = ss.selection,
                                    .step_thread_name = ss.step_thread_name,
                                    .sampling = sampling,
                                    .gpu_work = gpu_work,
                                    .host = hw.frames,
                                    .first_call = first,
                                    .launchers = swept.launchers,
                                    .link = link,
                                    .counters = counters,
                                    .waits = waits,
                                    .steps = measured.steps,
                                    .t = typical,
                                    .breakdown = breakdown,
                                    .graphs = graphs,
                                    .tables = tables,
                                    .bounces = bounces,
                                    .chains = chains,
                                    .generation = generation,
                                    .requests = requests,
                                    .facts = facts,
                                    .trace_t0_ns = rules::trace_origin_ns(measured.steps, ss.found.representative),
                                    .with_its_run = opt.with_its_run};
  rules::RulesResult ranked = rules::run_rules(rule_input, opt.rules ? *opt.rules : rules::RuleSettings{});

  // The Analysis, from the stages' results.
  a.events = in.facts.events;
  a.trace_ms = in.facts.trace_ms;
  a.partial |= in.facts.partial;
  a.gpu_work_recorded = gpu_work;
  a.warnings.insert(a.warnings.end(), in.facts.warnings.begin(), in.facts.warnings.end());
  a.warnings.insert(a.warnings.end(), ss.found.warnings.begin(), ss.found.warnings.end());
  a.steps = ss.found.stats;
  a.end_to_end_ms = ss.found.end_to_end_ms;
  a.representative.step = ss.found.representative;
  a.sampling = sampling;
  a.alignment = at.alignment;
  if (!at.warning.empty()) a.warnings.push_back(at.warning);
  a.breakdown = breakdown;
  a.waits = describe_waits(waits, typical);
  a.kernel_families = kernel_families(tables.kernels);
  for (const KernelFamilyRow& fam : a.kernel_families) a.tensor_core_share += fam.share * fam.tensor_core_share;
  a.generation = generation;
  a.requests = requests;
  a.program = facts;
  take_tables(a, std::move(tables));
  a.representative.lanes = std::move(timeline.lanes);
  a.warnings.insert(a.warnings.end(), timeline.warnings.begin(), timeline.warnings.end());
  a.findings = std::move(ranked.findings);
  a.warnings.insert(a.warnings.end(), ranked.warnings.begin(), ranked.warnings.end());
  // What iscope-run --try measured on this program, beside the suggestions it measured (tried.hpp).
  attach_try_results(a.findings, read_try_results(cx.r.path(), a.warnings));
  if (cx.prog.on) std::fprintf(stderr, "iscope-analyze: done: %llu records\n", (unsigned long long)a.events);
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

}  // namespace inferscope::analyze

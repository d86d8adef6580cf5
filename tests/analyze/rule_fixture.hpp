// A rule's input built by hand: every stage result a rule may read (stage_results.hpp), owned here with neutral
// defaults, so a rule test sets only what its case is about and passes input() to one rule.
#pragma once

#include "analyze/rules/rule.hpp"
#include "analyze/waits/waits.hpp"

#include <string>
#include <vector>

namespace inferscope::analyze::testing {

struct RuleFixture {
  detail::ProcessInfo process;
  StepStats stats;
  StepSelection selection;
  std::string step_thread_name = "MainThread";
  Sampling sampling;
  bool gpu_work = true;
  detail::HostFrames host;
  detail::FirstCall first_call;
  detail::LaunchSummary launchers;
  detail::LinkPeak link;
  detail::CounterEvidence counters;
  detail::WaitAttribution waits;
  std::vector<detail::StepMetrics> steps;
  detail::TypicalStep typical;
  Breakdown breakdown;
  std::vector<replay::StepGraph> graphs;
  detail::Tables tables;
  detail::HostBounces bounces;
  detail::KernelChains chains;
  GenerationLoop generation;
  Requests requests;
  /// A Python inference program whose host work can be done ahead, unless a test says otherwise.
  ProgramFacts facts{{{"python", "test"}, {"prefetchable", "test"}, {"inference", "test"}, {"static_shapes", "test"}}};
  rules::Thresholds th;
  StepInstance representative;
  bool with_its_run = false;

  RuleFixture() { stats.name = "step"; }

  rules::RuleInput input() const {
    return {.process = process,
            .stats = stats,
            .selection = selection,
            .step_thread_name = step_thread_name,
            .sampling = sampling,
            .gpu_work = gpu_work,
            .host = host,
            .first_call = first_call,
            .launchers = launchers,
            .link = link,
            .counters = counters,
            .waits = waits,
            .steps = steps,
            .t = typical,
            .breakdown = breakdown,
            .graphs = graphs,
            .tables = tables,
            .bounces = bounces,
            .chains = chains,
            .generation = generation,
            .requests = requests,
            .facts = facts,
            .trace_t0_ns = rules::trace_origin_ns(steps, representative),
            .with_its_run = with_its_run,
            .th = th};
  }
};

}  // namespace inferscope::analyze::testing

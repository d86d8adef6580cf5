// wait: the step thread was blocked (off a CPU, not waiting for one) while the GPU had nothing to do, and not for
// the GIL (that is cpu_contention). The wait attribution (waits.hpp) says on whom: another thread or a pool of
// them, child processes such as a DataLoader's workers, a lock's holder, or the step thread's own sleep or I/O;
// the title names the party that took most of the wait, and the suggestions are those that fit it. Without the
// system counters there is no wait finding.
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {
namespace {

using Kind = detail::WaitParty::Kind;

// The party the title names: the one with most of the wait, when someone (not "nobody seen") took at least
// kNamedShare of it.
constexpr double kNamedShare = 0.5;

std::string title(const RuleInput& in, const PartyShare* lead, double impact) {
  const std::string thread = "Thread '" + in.step_thread_name + "'";
  const std::string idle = gpu_seen(in) ? " while the GPU has nothing to do" : "";
  if (!lead) return thread + " waits " + fms(impact) + " per step (sleep, I/O, a queue or a lock)" + idle;
  const detail::WaitParty& p = *lead->party;
  const std::string hot = p.hot.empty() ? std::string() : " (" + p.hot.front().first + ")";
  switch (p.kind) {
    case Kind::kOwnSleep:
      return thread + " sleeps " + fms(impact) + " per step in " + (p.site.empty() ? "the step" : p.site) + idle;
    case Kind::kOwnIo:
      return thread + " waits " + fms(impact) + " per step for I/O in " + (p.site.empty() ? "the step" : p.site) + idle;
    default:
      return "The step waits " + fms(impact) + " per step on " + describe_party(p) + hot + idle;
  }
}

// Up to three suggestions in all, from those that fit the party whatever its numbers (none of them priced).
void add_fitting_extras(Finding& f, const RuleInput& in, const detail::WaitParty& p) {
  const bool py = python_program(in);
  std::vector<std::string> extra;
  if (p.kind == Kind::kOwnSleep || p.kind == Kind::kOwnIo) {
    extra.push_back(py ? "Wrap the blocking call in inferscope_py.scope() to see each wait on the timeline"
                       : "Wrap the blocking call in an ISCOPE_RANGE to see each wait on the timeline");
    extra.push_back(p.kind == Kind::kOwnSleep
                        ? (py ? "If the sleep paces incoming work, block on the work's queue (queue.get with a timeout) instead"
                              : "If the sleep paces incoming work, block on the work's queue (a condition variable) instead")
                        : "Batch small reads, and read from memory (mmap, a cache) what is read again and again");
  } else {
    const bool many = p.members.size() > 1;
    const std::string how = py ? (p.kind == Kind::kProcesses ? " (py-spy dump --pid, or record them with iscope-run --follow-children)"
                                                              : " (py-spy dump --pid, or scopes in their loop)")
                               : (p.kind == Kind::kProcesses ? " (perf record -p, or record them with iscope-run --follow-children)"
                                                              : " (ISCOPE_RANGEs in their loop, or perf record -t)");
    extra.push_back("Profile " + describe_party(p) + (many ? " themselves" : " itself") + how + " to see what " +
                    (many ? "they do" : "it does") + " while the step waits");
    extra.push_back(in.facts.has(detail::kFactDataLoader)
                        ? "Keep more items in flight (the DataLoader's prefetch_factor) so that one slow item does not stall the step"
                        : "Keep more items in flight (a deeper queue) so that one slow item does not stall the step");
  }
  for (const std::string& e : extra)
    if (f.suggestions.size() < 3) suggest(f, "low", e);
}

}  // namespace

std::optional<Finding> host_wait(const RuleInput& in) {
  if (!in.t.host_state_measured) return std::nullopt;
  const double impact = in.t.host_wait / 1e6;
  if (!reported(in, impact)) return std::nullopt;
  const double pct = impact / in.step_ms() * 100;
  const std::vector<PartyShare> parties = parties_of(in, false);
  const PartyShare* lead = nullptr;
  if (!parties.empty() && parties.front().party->kind != Kind::kUnknown && parties.front().share >= kNamedShare)
    lead = &parties.front();
  // A wait nobody was seen causing (most of it unattributed) is reported, uncertain: it may be a lock held by an
  // idle thread, a page fault, or sampling too coarse for it.
  // Only where the recording could have named someone: threads read between rounds (older dumps' 10 ms rounds
  // smear a holder's bursts over the step).
  const bool unexplained = in.waits.measured && in.waits.thread_sample_ms > 0 && !lead && !parties.empty() &&
                           parties.front().party->kind == Kind::kUnknown;
  Finding f = make_finding(in, Category::kWait, title(in, lead, impact), impact,
                           unexplained ? 0.45 : 0.55 + 0.35 * std::min(1.0, pct / 30) + (lead ? 0.05 : 0));
  f.evidence.push_back("the thread was off a CPU and not runnable " + fms(impact) + " per step (" + fpct(pct) +
                       " of the step) " + while_idle(in, "while the GPU was idle") + ", and not for the GIL (system counters)");
  if (!in.waits.measured)
    f.evidence.push_back("whom it waited on is not known: the per-thread CPU counters did not cover the steps");
  for (size_t i = 0; i < parties.size() && i < 3; ++i) {
    const PartyShare& ps = parties[i];
    if (i > 0 && ps.share < 0.1) break;
    if (ps.party->kind == Kind::kUnknown) {
      f.evidence.push_back(fpct(ps.share * 100) + " of the wait has no one to blame: no other thread or child process "
                           "was seen working meanwhile" + (ps.party->site.empty() ? std::string() : " (the step thread sat in " +
                           ps.party->site + ")"));
      continue;
    }
    add_party_evidence(f, in, ps, impact * ps.share);
  }
  if (in.counters.step_thread_runqueue_share <= 0.01)
    f.evidence.push_back("no measurable run-queue delay: other threads did not take its CPU");
  f.metrics["wait_ms"] = impact;
  f.metrics["runqueue_wait_share"] = in.counters.step_thread_runqueue_share;
  add_examples(f, in, &detail::StepMetrics::worst_host_gap,
               gpu_seen(in) ? "GPU idle while the host thread waited" : "the host thread waiting");
  if (lead) {
    suggest_for_party(f, in, *lead, impact * lead->share);
    if (parties.size() > 1 && parties[1].party->kind != Kind::kUnknown && parties[1].share >= 0.2)
      suggest_for_party(f, in, parties[1], impact * parties[1].share);
  } else {
    replay::Change gone;
    gone.host_gap_scale = in.t.idle_host > 0 ? std::max(0.0, 1.0 - in.t.host_wait / in.t.idle_host) : 1.0;
    suggest_replayed(f, in, "high", "Remove the wait from the step: no sleep or polling interval inside it (wait on an "
                     "event or condition that fires when the data is there)", gone, "the waiting share of the host time removed");
    // Only where nothing feeds the step already: a producer thread or workers that exist would be a party here.
    const bool feeders = std::any_of(in.waits.parties.begin(), in.waits.parties.end(), [](const detail::WaitParty& p) {
      return p.kind == Kind::kThreads || p.kind == Kind::kProcesses;
    });
    if (!feeders)
      suggest_replayed(f, in, "high", std::string("Fetch ahead: ") +
                       (in.facts.has(detail::kFactDataLoader) ? "more DataLoader workers" : "a producer thread") +
                       " keep a queue of ready inputs so the step never waits for I/O", gone,
                       "the waiting share of the host time removed", {detail::kFactPrefetchable});
  }
  if (!lead) {
    suggest(f, "medium", "If the wait is I/O, read asynchronously or from memory (mmap, a cache), and batch small reads");
    suggest(f, "low", "If the wait is a lock, shorten what is done while holding it or give the step thread its own copy");
  } else {
    add_fitting_extras(f, in, *lead->party);
  }
  return f;
}

}  // namespace inferscope::analyze::rules

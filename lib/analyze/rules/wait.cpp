// wait: the step thread blocked by its own choice while the GPU had nothing to do: a sleep, I/O, a queue or a
// lock, with no other Python thread running meanwhile (that would be the GIL: cpu_contention). Told apart
// from running by the system counters; without them there is no wait finding.
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {

std::optional<Finding> host_wait(const RuleInput& in) {
  if (!in.t.host_state_measured) return std::nullopt;
  const double impact = in.t.host_wait / 1e6;
  if (!reported(in, impact)) return std::nullopt;
  const detail::Model& m = in.m;
  const double pct = impact / in.step_ms * 100;
  Finding f = make_finding(in, Category::kWait,
                           "Thread '" + m.step_thread_name + "' waits " + fms(impact) +
                               " per step (sleep, I/O, a queue or a lock)" +
                               (gpu_seen(in) ? " while the GPU has nothing to do" : ""),
                           impact, 0.55 + 0.35 * std::min(1.0, pct / 30));
  f.evidence.push_back("the thread was off a CPU and not runnable " + fms(impact) + " per step (" + fpct(pct) +
                       " of the step) " + while_idle(in, "while the GPU was idle") + " and no other Python thread was "
                       "on a CPU to hold the GIL: it blocked by its own choice (system counters)");
  if (m.step_thread_runqueue_share <= 0.01)
    f.evidence.push_back("no measurable run-queue delay: other threads did not take its CPU");
  if (!m.hot_host.empty())
    f.evidence.push_back("the innermost named host work in the steps: " + m.hot_host.front().first + " " +
                         fms(m.hot_host.front().second / 1e6) + " per step (a wait inside it counts as its time)");
  f.metrics["wait_ms"] = impact;
  f.metrics["runqueue_wait_share"] = m.step_thread_runqueue_share;
  add_examples(f, in, &detail::StepMetrics::worst_host_gap,
               gpu_seen(in) ? "GPU idle while the host thread waited" : "the host thread waiting");
  replay::Change gone;
  gone.host_gap_scale = in.t.idle_host > 0 ? std::max(0.0, 1.0 - in.t.host_wait / in.t.idle_host) : 1.0;
  suggest_replayed(f, in, "high", "Remove the wait from the step: no sleep or polling interval inside it (wait on an "
                   "event or condition that fires when the data is there)", gone, "the waiting share of the host time removed");
  suggest_replayed(f, in, "high", "Fetch ahead: a producer thread or DataLoader workers keep a queue of ready inputs so the "
                   "step never waits for I/O", gone, "the waiting share of the host time removed");
  suggest(f, "medium", "If the wait is I/O, read asynchronously or from memory (mmap, a cache), and batch small reads");
  suggest(f, "low", "If the wait is a lock, shorten what is done while holding it or give the step thread its own copy");
  return f;
}

}  // namespace inferscope::analyze::rules

// cpu_contention: the step thread wanted to run and could not: it waited in the run queue for a CPU, or for
// the GIL while another Python thread ran. Only with evidence (counters, or busy Python threads); a thread
// that blocks by its own choice is a wait (wait.cpp), never contention.
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {
namespace {

struct Evidence {
  double impact_ms = 0, confidence = 0;
  bool gil = false;  ///< the GIL, rather than the run queue, is most of it
};

Evidence measure(const RuleInput& in) {
  const detail::Model& m = in.m;
  Evidence e;
  if (in.t.host_state_measured) {
    e.impact_ms = in.t.host_contention / 1e6;
    e.gil = in.t.host_gil * 2 > in.t.host_contention;
    const double share = in.t.host_out_api > 0 ? in.t.host_contention / in.t.host_out_api : 0;
    e.confidence = 0.55 + 0.25 * std::min(1.0, share / 0.5) +
                   (m.involuntary_per_step > 1 || m.other_busy_python_threads ? 0.1 : 0);
  } else if (m.other_busy_python_threads > 0) {  // no counters: indirect, through the GIL
    e.impact_ms = in.t.idle_host / 1e6 * std::min(0.5, m.other_python_busy_share);
    e.gil = true;
    e.confidence = 0.35;
  }
  return e;
}

void add_evidence(Finding& f, const RuleInput& in, const Evidence& e) {
  const detail::Model& m = in.m;
  if (in.t.host_state_measured) {
    f.evidence.push_back(while_idle(in, "while the GPU waited on it") + ", thread '" + m.step_thread_name + "' was runnable but off a CPU " +
                         fms((in.t.host_contention - in.t.host_gil) / 1e6) + " per step and blocked while another "
                         "Python thread ran (the GIL) " + fms(in.t.host_gil / 1e6) + " per step (system counters)");
  } else {
    f.evidence.push_back("no per-thread CPU counters in this trace; evidence is indirect (GIL)");
  }
  if (m.other_busy_python_threads > 0)
    f.evidence.push_back(std::to_string(m.other_busy_python_threads) + " other Python thread(s) ran Python code during the "
                         "steps (the busiest " + fpct(m.other_python_busy_share * 100) + " of the steps' span): they compete for the GIL");
  if (m.step_thread_runqueue_share > 0.01)
    f.evidence.push_back("the step thread waited in the run queue for a CPU " + fpct(m.step_thread_runqueue_share * 100) +
                         " of the time (schedstat)");
  if (m.involuntary_per_step > 0)
    f.evidence.push_back(fmt("%.1f involuntary context switches of the step thread per step", m.involuntary_per_step));
  f.metrics["contention_ms"] = e.impact_ms;
  f.metrics["gil_wait_ms"] = in.t.host_gil / 1e6;
  f.metrics["runqueue_wait_ms"] = (in.t.host_contention - in.t.host_gil) / 1e6;
  f.metrics["other_busy_python_threads"] = m.other_busy_python_threads;
  f.metrics["involuntary_switches_per_step"] = m.involuntary_per_step;
  f.metrics["runqueue_wait_share"] = m.step_thread_runqueue_share;
}

}  // namespace

std::optional<Finding> cpu_contention(const RuleInput& in) {
  const Evidence e = measure(in);
  if (!reported(in, e.impact_ms)) return std::nullopt;
  Finding f = make_finding(in, Category::kCpuContention,
                           "Thread '" + in.m.step_thread_name + "' is delayed by " +
                               (e.gil ? std::string("other Python threads holding the GIL") : std::string("other threads taking its CPU")),
                           e.impact_ms, e.confidence);
  add_evidence(f, in, e);
  add_examples(f, in, &detail::StepMetrics::worst_host_gap,
               gpu_seen(in) ? "GPU idle while the host thread was delayed" : "the host thread delayed");
  replay::Change gone;  // the contended share of every host gap disappears
  gone.host_gap_scale = in.t.idle_host > 0 ? std::max(0.0, 1.0 - e.impact_ms * 1e6 / in.t.idle_host) : 1.0;
  const char* model = "the contended share of the host time removed";
  const std::string step = in.a.steps.name;
  if (e.gil) {
    suggest_replayed(f, in, "high", "Stop or throttle the busy background Python threads while '" + step + "' runs, or move "
                     "their work to a separate process (multiprocessing), so the inference thread keeps the GIL", gone, model);
    suggest(f, "medium", "Release the GIL in background work: do heavy work in NumPy/torch ops or C extensions that drop "
                         "the GIL, not in pure-Python loops; or raise sys.setswitchinterval only if latency allows");
    suggest(f, "low", "Pin the inference thread to a dedicated core (os.sched_setaffinity / taskset)");
  } else {
    suggest_replayed(f, in, "high", "Give the inference thread a CPU of its own: pin it (os.sched_setaffinity / taskset) "
                     "and keep other work off that core; check the machine's load from other processes", gone, model);
    suggest(f, "medium", "Reduce intra-op thread pools (torch.set_num_threads, OMP_NUM_THREADS) that oversubscribe the cores");
    suggest(f, "low", "Stop or throttle background threads and processes that compete for the same cores");
  }
  return f;
}

}  // namespace inferscope::analyze::rules

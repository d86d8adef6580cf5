// cpu_contention: the step thread wanted to run and could not: it waited in the run queue for a CPU (taken by
// other threads, or held back because its cgroup had used up its CPU quota), or for the GIL while another Python
// thread ran. Only with evidence (counters, or busy Python threads); a thread that blocks by its own choice is a
// wait (wait.cpp), never contention.
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>

namespace inferscope::analyze::rules {
namespace {

struct Evidence {
  double impact_ms = 0, confidence = 0;
  bool gil = false;    ///< the GIL, rather than the run queue, is most of it
  bool quota = false;  ///< the run queue, and the cgroup's CPU quota throttled the process through most of it
  double quota_cpus = 0;
};

/// The share of the steady steps' span the cgroup held its threads back. cpu.stat's throttled time is summed over
/// the CPUs the group was throttled on, and a throttle lasts at most the rest of its period: the wall time is at
/// most throttled periods × period.
double throttled_wall_share(const RuleInput& in) {
  if (in.counters.steps_span_ns <= 0) return 0;
  return std::min(in.counters.cgroup_throttled_ns, in.counters.cgroup_throttled_periods * cpu_quota_period_ns(in.process)) / in.counters.steps_span_ns;
}

/// The run-queue wait is the CPU quota's doing when the cgroup was throttled during the steps and held its threads
/// back for at least `quota_share_of_runqueue` of the step thread's run-queue wait over the same span: a throttled
/// group's threads wait in the run queue until the next period, whatever else the machine runs.
bool quota_throttled(const RuleInput& in, double quota_cpus) {
  return quota_cpus > 0 && in.counters.cgroup_throttled_periods > 0 && in.counters.step_thread_runqueue_share > 0 &&
         throttled_wall_share(in) >= in.th.quota_share_of_runqueue * in.counters.step_thread_runqueue_share;
}

Evidence measure(const RuleInput& in) {
  Evidence e;
  if (in.t.host_state_measured) {
    e.impact_ms = in.t.host_contention / 1e6;
    e.gil = in.t.host_gil * 2 > in.t.host_contention;
    const double share = in.t.host_out_api > 0 ? in.t.host_contention / in.t.host_out_api : 0;
    e.confidence = 0.55 + 0.25 * std::min(1.0, share / 0.5) +
                   (in.counters.involuntary_per_step > 1 || in.counters.other_busy_python_threads ? 0.1 : 0);
    e.quota_cpus = cpu_quota_cpus(in.process);
    e.quota = !e.gil && quota_throttled(in, e.quota_cpus);
  } else if (in.counters.other_busy_python_threads > 0) {  // no counters: indirect, through the GIL
    e.impact_ms = in.t.idle_host / 1e6 * std::min(0.5, in.counters.other_python_busy_share);
    e.gil = true;
    e.confidence = 0.35;
  }
  return e;
}

void add_evidence(Finding& f, const RuleInput& in, const Evidence& e) {
  if (in.t.host_state_measured) {
    f.evidence.push_back(while_idle(in, "while the GPU waited on it") + ", thread '" + in.step_thread_name + "' was runnable but off a CPU " +
                         fms((in.t.host_contention - in.t.host_gil) / 1e6) + " per step and blocked while another "
                         "Python thread ran (the GIL) " + fms(in.t.host_gil / 1e6) + " per step (system counters)");
  } else {
    f.evidence.push_back("no per-thread CPU counters in this trace; evidence is indirect (GIL)");
  }
  if (e.gil) {  // who held the GIL while the step thread waited for it (wait attribution, to the millisecond)
    const std::vector<PartyShare> holders = parties_of(in, true);
    for (size_t i = 0; i < holders.size() && i < 2; ++i)
      if (holders[i].party->kind == detail::WaitParty::Kind::kGil && (i == 0 || holders[i].share >= 0.2))
        add_party_evidence(f, in, holders[i], in.t.host_gil / 1e6 * holders[i].share);
  }
  if (in.counters.other_busy_python_threads > 0)
    f.evidence.push_back(std::to_string(in.counters.other_busy_python_threads) + " other Python thread(s) ran Python code during the "
                         "steps (the busiest " + fpct(in.counters.other_python_busy_share * 100) + " of the steps' span): they compete for the GIL");
  if (in.counters.step_thread_runqueue_share > 0.01)
    f.evidence.push_back("the step thread waited in the run queue for a CPU " + fpct(in.counters.step_thread_runqueue_share * 100) +
                         " of the time (schedstat)");
  if (in.counters.involuntary_per_step > 0)
    f.evidence.push_back(fmt("%.1f involuntary context switches of the step thread per step", in.counters.involuntary_per_step));
  if (in.counters.cgroup_throttled_periods > 0)
    f.evidence.push_back("the process's cgroup ran out of its CPU quota (" +
                         (e.quota_cpus > 0 ? fcpus(e.quota_cpus) + " CPUs" : std::string("quota not recorded")) +
                         ") in " + fmt("%.0f", in.counters.cgroup_throttled_periods) + " of " + fmt("%.0f", in.counters.cgroup_periods) +
                         " scheduling periods during the steps; its threads were held back " +
                         fms(in.counters.cgroup_throttled_ns / 1e6) + " in all (cgroup cpu.stat, summed over CPUs)");
  f.metrics["contention_ms"] = e.impact_ms;
  f.metrics["gil_wait_ms"] = in.t.host_gil / 1e6;
  f.metrics["runqueue_wait_ms"] = (in.t.host_contention - in.t.host_gil) / 1e6;
  f.metrics["other_busy_python_threads"] = in.counters.other_busy_python_threads;
  f.metrics["involuntary_switches_per_step"] = in.counters.involuntary_per_step;
  f.metrics["runqueue_wait_share"] = in.counters.step_thread_runqueue_share;
  f.metrics["cpu_quota_cpus"] = e.quota_cpus;
  f.metrics["cgroup_throttled_periods"] = in.counters.cgroup_throttled_periods;
  f.metrics["cgroup_throttled_ms"] = in.counters.cgroup_throttled_ns / 1e6;
}

std::string title(const RuleInput& in, const Evidence& e) {
  const std::string who = "Thread '" + in.step_thread_name + "' is ";
  if (e.gil) {
    const std::vector<PartyShare> holders = parties_of(in, true);
    if (!holders.empty() && holders.front().share >= 0.5) {
      const detail::WaitParty& p = *holders.front().party;
      return who + "delayed by " + describe_party(p) + " holding the GIL" +
             (p.hot.empty() ? std::string() : " (" + p.hot.front().first + ")");
    }
    return who + "delayed by other Python threads holding the GIL";
  }
  if (e.quota) return who + "held back by its cgroup's CPU quota (" + fcpus(e.quota_cpus) + " CPUs)";
  return who + "delayed by other threads taking its CPU";
}

void add_suggestions(Finding& f, const RuleInput& in, const Evidence& e) {
  replay::Change gone;  // the contended share of every host gap disappears
  gone.host_gap_scale = in.t.idle_host > 0 ? std::max(0.0, 1.0 - e.impact_ms * 1e6 / in.t.idle_host) : 1.0;
  const char* model = "the contended share of the host time removed";
  const std::string step = in.stats.name;
  const std::vector<PartyShare> holders = e.gil ? parties_of(in, true) : std::vector<PartyShare>{};
  if (e.gil && !holders.empty() && holders.front().share >= 0.5) {
    suggest_for_party(f, in, holders.front(), in.t.host_gil / 1e6 * holders.front().share);
    suggest(f, "low", "Pin the inference thread to a dedicated core (os.sched_setaffinity / taskset)");
  } else if (e.gil) {  // the GIL: a Python program by construction
    suggest_replayed(f, in, "high", "Stop or throttle the busy background Python threads while '" + step + "' runs, or move "
                     "their work to a separate process (multiprocessing), so the inference thread keeps the GIL", gone, model);
    suggest(f, "medium", "Release the GIL in background work: do heavy work in NumPy/torch ops or C extensions that drop "
                         "the GIL, not in pure-Python loops; or raise sys.setswitchinterval only if latency allows");
    suggest(f, "low", "Pin the inference thread to a dedicated core (os.sched_setaffinity / taskset)");
  } else if (e.quota) {
    const std::string n = std::to_string(std::max(1, int(std::min(e.quota_cpus, 1e6))));
    suggest_replayed(f, in, "high", "Raise the CPU limit of the container or cgroup (now " + fcpus(e.quota_cpus) +
                     " CPUs: Kubernetes resources.limits.cpu, docker --cpus, systemd CPUQuota): once the process has "
                     "used its quota, every thread waits for the next period", gone, model);
    suggest(f, "medium", "Size the thread pools to the quota, not the machine: " +
                         (python_program(in) ? "torch.set_num_threads(" + n + "), " : std::string()) + "OMP_NUM_THREADS=" +
                         n + (in.facts.has(detail::kFactDataLoader) ? ", fewer DataLoader workers" : "") +
                         "; pools sized by the host's core count burn the quota in parallel, then all wait");
    suggest(f, "low", "Move CPU work that is not on the step's path (logging, metrics, preprocessing for later "
                      "requests) out of this container, or out of the step's time");
  } else {
    suggest_replayed(f, in, "high", std::string("Give the inference thread a CPU of its own: pin it (") +
                     (python_program(in) ? "os.sched_setaffinity / taskset" : "pthread_setaffinity_np / taskset") +
                     ") and keep other work off that core; check the machine's load from other processes", gone, model);
    suggest(f, "medium", python_program(in) ? "Reduce intra-op thread pools (torch.set_num_threads, OMP_NUM_THREADS) that "
                                              "oversubscribe the cores"
                                            : "Reduce the thread pools (OMP_NUM_THREADS, your own pools) that oversubscribe the cores");
    suggest(f, "low", "Stop or throttle background threads and processes that compete for the same cores");
  }
}

}  // namespace

std::optional<Finding> cpu_contention(const RuleInput& in) {
  const Evidence e = measure(in);
  if (!reported(in, e.impact_ms)) return std::nullopt;
  Finding f = make_finding(in, Category::kCpuContention, title(in, e), e.impact_ms, e.confidence);
  add_evidence(f, in, e);
  add_examples(f, in, &detail::StepMetrics::worst_host_gap,
               gpu_seen(in) ? "GPU idle while the host thread was delayed" : "the host thread delayed");
  add_suggestions(f, in, e);
  return f;
}

}  // namespace inferscope::analyze::rules

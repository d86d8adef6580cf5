// Whom the step waited on, as findings say it: the parties of the wait attribution (waits.hpp) named the way a
// user knows them (a thread, a pool of threads, a DataLoader's worker processes, the GIL's holder), the evidence
// for each, and the suggestions that fit what each party is and does. Shared by the wait and cpu_contention rules;
// it reads only the attribution and the typical step, never another rule's finding.
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"

#include <algorithm>
#include <cmath>

namespace inferscope::analyze::rules {
namespace {

using Kind = detail::WaitParty::Kind;

bool is_dataloader(const detail::WaitParty& p) {
  return p.name == "pt_data_worker" || (p.site_is_wait_point && p.site_kind == WaitKind::kDataLoader);
}

std::string members_count(const detail::WaitParty& p) { return std::to_string(p.members.size()); }

// "bpe_merge_word (62 %), tokenize_batch (13 %)": what the party ran during the waits, by its self time there.
std::string hot_list(const detail::WaitParty& p, size_t most = 3) {
  double all = 0;
  for (auto& [name, ns] : p.hot) all += ns;
  std::string s;
  for (size_t i = 0; i < p.hot.size() && i < most; ++i) {
    if (all <= 0 || p.hot[i].second < 0.03 * all) break;
    s += (s.empty() ? "" : ", ") + p.hot[i].first + " (" + fpct(p.hot[i].second / all * 100) + ")";
  }
  return s;
}

// A pool of Python threads that used this many CPUs at once ran code that releases the GIL (one CPU at most
// otherwise, less what the step thread itself took); 1.3 leaves room for sampling error around one CPU.
constexpr double kParallelCpus = 1.3;

// How many workers deliver one step's input within `target_ms`, when the work costs `cpu_ms` of CPU per step: at
// least one more than now, at most `most`.
int workers_needed(double cpu_ms, double target_ms, int now, int most) {
  const double n = std::ceil(cpu_ms / std::max(0.05, target_ms));
  return std::clamp(int(std::min(n, 1e6)), now + 1, std::max(now + 1, most));
}

// The CPUs more workers may use: the process's usable CPUs less the one the step thread keeps (unknown: 16).
int worker_cpus(const RuleInput& in) {
  const int cpus = usable_cpus(in);
  return cpus > 0 ? std::max(1, cpus - 1) : 16;
}

// The change that removes this party's share of the wait, with the step no faster than `floor_ms` (0: none).
replay::Change without_party(const RuleInput& in, double party_ms, double floor_ms) {
  replay::Change c;
  c.host_gap_scale = in.t.idle_host > 0 ? std::clamp(1.0 - party_ms * 1e6 / in.t.idle_host, 0.0, 1.0) : 1.0;
  c.min_step_ns = int64_t(std::max(0.0, floor_ms) * 1e6);
  return c;
}

// A pool or a producer that is busy: more of it (processes when it runs Python), priced at the pace more of them
// would deliver.
void suggest_more_hands(Finding& f, const RuleInput& in, const detail::WaitParty& p, double party_ms) {
  const double cpu_ms = p.cpu_per_step_ns / 1e6;
  const double target = std::max(0.05, in.step_ms() - party_ms);
  const int now = int(p.members.size());
  const int most = worker_cpus(in);
  const std::string who = describe_party(p);
  const std::string hot = p.hot.empty() ? std::string("its work") : p.hot.front().first;
  if (now >= most) {
    suggest(f, "high", "Make " + hot + " cheaper: " + who + " already use" + (now == 1 ? "s" : "") + " every CPU this process "
            "may use beside the step thread, so more workers cannot help");
    return;
  }
  const bool gil_bound = p.kind != Kind::kProcesses && p.python && p.busy_share() * double(now) < kParallelCpus;
  const int n = workers_needed(cpu_ms, target, gil_bound ? 0 : now, most);
  const std::string ns = std::to_string(n);
  const replay::Change change = without_party(in, party_ms, cpu_ms / n);
  const std::string pace = "the " + fms(cpu_ms) + " of CPU per step that " + who + " spend" + (now == 1 ? "s" : "") +
                           " done by " + ns + " in parallel, the step no faster than they deliver";
  if (p.kind == Kind::kProcesses && is_dataloader(p)) {
    const size_t before = f.suggestions.size();
    suggest_replayed(f, in, "high", "Raise the DataLoader's num_workers from " + members_count(p) + " to " + ns +
                     " (persistent_workers=True): its workers need " + fms(cpu_ms) + " of CPU per batch, so " + ns +
                     " of them deliver a batch every " + fms(cpu_ms / n) + " (the rest of the step takes " +
                     fms(target) + ")", change, pace.c_str());
    if (f.suggestions.size() > before) f.suggestions.back().try_knob = "num_workers=" + ns;  // iscope-run --try
  } else if (p.kind == Kind::kProcesses) {
    suggest_replayed(f, in, "high", "Start more producer processes: " + ns + " instead of " + members_count(p) +
                     " (multiprocessing.Process or Pool(processes=" + ns + ")): " + who + (now == 1 ? " is" : " are") +
                     " busy through the wait and need" + (now == 1 ? "s " : " ") + fms(cpu_ms) + " of CPU per step",
                     change, pace.c_str());
  } else if (p.python && now > 1 && p.busy_share() * double(now) >= kParallelCpus) {
    // Python threads that ran on more than one CPU at once: their work releases the GIL (NumPy, torch on the
    // CPU), so more threads do help.
    suggest_replayed(f, in, "high", "Give the pool more threads: max_workers=" + ns + " instead of " + members_count(p) +
                     " (" + who + " run " + hot + " on " + fmt("%.1f", p.busy_share() * double(now)) + " CPUs at once: "
                     "its work releases the GIL)", change, pace.c_str());
  } else if (p.python) {
    suggest_replayed(f, in, "high", "Run the work of " + who + " (" + hot + ") in " + ns + " worker processes "
                     "(concurrent.futures.ProcessPoolExecutor(max_workers=" + ns + ") or multiprocessing.Pool, several "
                     "items in flight) instead of threads: Python threads share one GIL, so more threads would not run "
                     "it faster", change, pace.c_str());
  } else {
    suggest_replayed(f, in, "high", "Add worker threads: " + ns + " instead of " + members_count(p) + " (" + who +
                     (now == 1 ? " is busy through the wait and needs " : " are busy through the wait and need ") +
                     fms(cpu_ms) + " of CPU per step)", change, pace.c_str());
  }
}

// A party that was off a CPU while the step waited on it: it sleeps, reads or holds a lock itself.
void suggest_for_idle_party(Finding& f, const RuleInput& in, const detail::WaitParty& p, double party_ms) {
  const std::string who = describe_party(p);
  const std::string hot = p.hot.empty() ? std::string("its loop") : p.hot.front().first;
  const replay::Change gone = without_party(in, party_ms, 0);
  const char* model = "the step's wait for it removed";
  if (p.site_is_wait_point && (p.site_kind == WaitKind::kLogging || p.site_kind == WaitKind::kLock)) {
    if (p.site_kind == WaitKind::kLogging)
      suggest_replayed(f, in, "high", "Log through a logging.handlers.QueueHandler and let a QueueListener thread run the "
                       "slow handler: " + who + " holds the handler's lock while " + hot + " runs, and the step thread "
                       "queues behind it for every record", gone, model);
    else
      suggest_replayed(f, in, "high", "Shorten what " + who + " does while it holds the lock the step needs (" + hot +
                       "): copy what it needs under the lock and work outside it", gone, model);
    return;
  }
  if (p.off_cpu_in == BlockedIn::kSleep) {
    suggest_replayed(f, in, "high", "Stop polling: " + who + " sleeps in " + hot + " between checks while the step "
                     "waits; have it wait on a threading.Condition or Event that is notified when a request arrives "
                     "(or block on queue.get) instead of time.sleep", gone, model);
    return;
  }
  if (p.off_cpu_in == BlockedIn::kRead || p.off_cpu_in == BlockedIn::kPoll) {
    suggest_replayed(f, in, "high", "Keep more items in flight: " + who + " is waiting for I/O in " + hot + " while the "
                     "step waits; read ahead with more reader threads or a deeper queue, or cache the inputs", gone, model);
    return;
  }
  suggest(f, "medium", "Find out what " + who + " waits for in " + hot + " while the step waits on it (" +
                       (python_program(in) ? "py-spy dump, or scopes around its blocking calls"
                                           : "ISCOPE_RANGEs around its blocking calls, or perf record -t") + ")");
}

}  // namespace

std::string describe_party(const detail::WaitParty& p) {
  const std::string n = members_count(p);
  switch (p.kind) {
    case Kind::kProcesses:
      if (p.name == "pt_data_worker") return "the DataLoader's " + n + " worker process" + (p.members.size() == 1 ? "" : "es") + " (pt_data_worker)";
      return n + " child process" + (p.members.size() == 1 ? "" : "es") + " '" + p.name + "'";
    case Kind::kThreads:
    case Kind::kGil:
    case Kind::kLock:
      return p.members.size() > 1 ? "the " + n + " threads '" + p.name + "'" : "thread '" + p.name + "'";
    case Kind::kOwnSleep: return "its own sleep";
    case Kind::kOwnIo: return "its own I/O";
    case Kind::kUnknown: break;
  }
  return "nobody seen working";
}

int usable_cpus(const RuleInput& in) {
  int cpus = 0;
  if (auto it = in.process.find("cpus_allowed"); it != in.process.end()) cpus = std::max(0, std::atoi(it->second.c_str()));
  if (const double quota = cpu_quota_cpus(in.process); quota > 0) {
    const int whole = std::max(1, int(std::min(quota, 1e6)));
    cpus = cpus ? std::min(cpus, whole) : whole;
  }
  return cpus;
}

std::vector<PartyShare> parties_of(const RuleInput& in, bool gil) {
  std::vector<PartyShare> out;
  double total = 0;
  for (const auto& p : in.waits.parties)
    if ((p.kind == Kind::kGil) == gil) total += p.blocked_ns;
  if (total <= 0) return out;
  for (const auto& p : in.waits.parties)
    if ((p.kind == Kind::kGil) == gil) out.push_back({&p, p.blocked_ns / total});
  return out;  // by blocked time, as the attribution sorts them
}

void add_party_evidence(Finding& f, const RuleInput& in, const PartyShare& ps, double party_ms) {
  const detail::WaitParty& p = *ps.party;
  const std::string who = describe_party(p);
  f.evidence.push_back(who + " took " + fpct(ps.share * 100) + " of it (" + fms(party_ms) + " per step)" +
                       (p.site.empty() ? std::string() : "; meanwhile the step thread sat in " + p.site));
  if (p.wakeups > 0)
    f.evidence.push_back(who + " ended " + std::to_string(p.wakeups) + " of the step thread's waits (a Queue.put, "
                         "notify or Event.set of its own returned just before the step thread's wait did)");
  const double busy = p.busy_share();
  if (p.kind == Kind::kThreads || p.kind == Kind::kGil || p.kind == Kind::kProcesses || p.kind == Kind::kLock) {
    const double cpus = busy * double(p.members.size());
    std::string line = "during these waits " + who + " " + (p.members.size() > 1 ? "were" : "was") + " on a CPU " +
                       fpct(std::min(1.0, busy) * 100) + " of the time" +
                       (p.members.size() > 1 ? " each (" + fmt("%.2f", cpus) + " CPUs in all)" : std::string());
    if (p.members.size() > 1 && p.python && p.kind != Kind::kProcesses && cpus < kParallelCpus)
      line += ": Python threads run one at a time under the GIL";
    if (busy < 0.5 && p.off_cpu_in != BlockedIn::kUnknown && p.off_cpu_in != BlockedIn::kRunning)
      line += std::string("; off a CPU it was mostly blocked in ") + blocked_in_name(p.off_cpu_in);
    f.evidence.push_back(line + " (per-thread CPU counters" +
                         (in.waits.thread_sample_ms > 0 ? ", read every " + fmt("%g", in.waits.thread_sample_ms) + " ms" : std::string()) + ")");
  }
  if (std::string hot = hot_list(p); !hot.empty())
    f.evidence.push_back((p.kind == Kind::kProcesses ? "their recorded Python code ran " : "it ran ") + hot +
                         " (self time during the waits)");
  else if (p.kind == Kind::kProcesses)
    f.evidence.push_back("the processes were not recorded themselves: their CPU time comes from this process's counters "
                         "(run with iscope-run --follow-children to see the functions they run)");
  if (p.cpu_per_step_ns > 0 && (p.kind == Kind::kProcesses || p.kind == Kind::kThreads || p.kind == Kind::kLock))
    f.evidence.push_back(who + " used " + fms(p.cpu_per_step_ns / 1e6) + " of CPU per step over the steady steps");
  f.metrics["party_ms"] = party_ms;
  f.metrics["party_share"] = ps.share;
  f.metrics["party_busy_share"] = busy;
  f.metrics["party_members"] = double(p.members.size());
  f.metrics["party_wakeups"] = double(p.wakeups);
  f.metrics["party_cpu_ms_per_step"] = p.cpu_per_step_ns / 1e6;
}

void suggest_for_party(Finding& f, const RuleInput& in, const PartyShare& ps, double party_ms) {
  const detail::WaitParty& p = *ps.party;
  const std::string who = describe_party(p);
  const std::string hot = p.hot.empty() ? std::string("its work") : p.hot.front().first;
  const char* model = "the step's wait for it removed";
  switch (p.kind) {
    case Kind::kGil:
      if (p.members.size() > 1)  // a pool of Python threads: as many processes as its work needs
        suggest_more_hands(f, in, p, party_ms);
      else
        suggest_replayed(f, in, "high", "Move " + hot + " out of this process's GIL: run the work of " + who + " in a "
                         "separate process (multiprocessing, or loop.run_in_executor with a ProcessPoolExecutor), or "
                         "throttle it while the step runs", without_party(in, party_ms, 0), model);
      suggest(f, "medium", "Make " + hot + " release the GIL: do its heavy work in NumPy/torch ops or a C extension "
                           "instead of a pure-Python loop");
      // A threading.Lock held by a running Python thread looks the same from outside (no GIL event exists).
      suggest(f, "medium", "If " + who + " and the step share a lock (a threading.Lock around a model or a buffer), "
                           "hold it only around what must be shared and run " + hot + " after releasing it");
      return;
    case Kind::kThreads:
    case Kind::kProcesses:
      if (p.busy_share() >= 0.5 || (p.python && p.busy_share() * double(p.members.size()) >= 0.5))
        suggest_more_hands(f, in, p, party_ms);
      else
        suggest_for_idle_party(f, in, p, party_ms);
      if (p.kind == Kind::kProcesses && is_dataloader(p))
        suggest(f, "medium", "Make the workers' __getitem__ cheaper: decode, augment and normalise on the GPU after the "
                             "copy, or cache preprocessed samples");
      else if (!p.hot.empty())
        suggest(f, "medium", "Make " + (hot.rfind("range ", 0) == 0 ? "the work in " + hot : hot) +
                             " cheaper: it is what the step waits for");
      return;
    case Kind::kLock:
      suggest_replayed(f, in, "high", "Hold the lock the step shares with " + who + " only around what must be shared: " +
                       who + " keeps it while it runs " + hot + "; release it before that work (copy what it needs "
                       "under the lock), so the step no longer waits for it", without_party(in, party_ms, 0), model);
      suggest(f, "medium", "Give each thread its own copy of what the lock guards (a model replica per thread, or a "
                           "queue that one owner thread serves) if the shared part is large");
      return;
    case Kind::kOwnSleep:
      suggest_replayed(f, in, "high", "Remove the sleep from " + (p.site.empty() ? std::string("the step") : p.site) +
                       ": wait on an event or condition that fires when the data is there, not a polling interval",
                       without_party(in, party_ms, 0), "the sleep removed");
      return;
    case Kind::kOwnIo:
      suggest_replayed(f, in, "high", "Take the I/O in " + (p.site.empty() ? std::string("the step") : p.site) +
                       " off the step's thread: read ahead in a background thread" +
                       (in.facts.has(detail::kFactDataLoader) ? std::string(" or more DataLoader workers") : std::string()) +
                       ", or from memory (mmap, a cache)", without_party(in, party_ms, 0), "the I/O wait removed",
                       {detail::kFactPrefetchable});
      return;
    case Kind::kUnknown:
      return;
  }
}

}  // namespace inferscope::analyze::rules

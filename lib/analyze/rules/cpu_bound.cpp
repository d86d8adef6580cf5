// cpu_bound: the GPU waits while the step thread runs host code outside CUDA calls.
#include "analyze/program_facts.hpp"
#include "analyze/rules/rule.hpp"
#include "analyze/what_if/what_if.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

namespace inferscope::analyze::rules {
namespace {

/// The step's host frames by the time the step thread ran in them: a frame's self time less the time it sat
/// blocked there (the wait attribution's sites, per typical step). A function that waits for a lock or a queue
/// (`detect` around `with model_lock:`, 15 of its 17.5 ms blocked) is not host work to move or vectorise.
detail::HostFrames running_frames(const RuleInput& in) {
  detail::HostFrames out = in.host;
  const double steps = std::max(1.0, double(in.t.steps));
  for (auto& h : out.hot)
    for (const auto& [site, ns] : in.waits.sites)
      if (site == h.label) h.ns = std::max(0.0, h.ns - ns / steps);
  std::erase_if(out.hot, [](const detail::HotFrame& h) { return h.ns <= 0; });
  std::stable_sort(out.hot.begin(), out.hot.end(), [](const auto& a, const auto& b) { return a.ns > b.ns; });
  return out;
}

std::string hot_list(const detail::HostFrames& host) {
  std::string s;
  for (size_t i = 0; i < host.hot.size() && i < 3; ++i)
    s += (i ? ", " : "") + host.hot[i].label + " " + fms(host.hot[i].ns / 1e6);
  return s;
}

/// The hottest frame that is the program's own code (HotFrame::user), when it holds at least a fifth of the named
/// host work: only such code can be moved to workers or vectorised by the user; a model's forward or a library's
/// function cannot (a CUDA graph or torch.compile is their fix). nullptr: none.
const detail::HotFrame* movable_work(const detail::HostFrames& host) {
  double all = 0;
  for (const auto& h : host.hot) all += h.ns;
  for (const auto& h : host.hot)
    if (h.user && h.ns >= 0.2 * all) return &h;
  return nullptr;
}

/// The CPUs the recording process may run on (`cpus_allowed` in the process info, its affinity); 0: unknown.
int affinity_cpus(const RuleInput& in) {
  auto it = in.process.find("cpus_allowed");
  if (it == in.process.end()) return 0;
  int cpus = 0;
  const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), cpus);
  return ec == std::errc{} && cpus >= 1 ? cpus : 0;
}

/// How many worker processes the suggestion names: the threshold, but never more than the recording process's
/// usable CPUs minus the one its step thread keeps (dumps without either key: the threshold). 0 when the process
/// may use one CPU only: workers would take turns with the step thread on it.
int suggested_workers(const RuleInput& in) {
  const int most = std::max(1, in.th.max_suggested_workers);
  const int cpus = usable_cpus(in);
  return cpus ? std::min(cpus - 1, most) : most;
}

/// What limits the process to one CPU: its affinity, its cgroup's quota (under 2 CPUs of CPU time), or both.
std::string one_cpu_limit(const RuleInput& in) {
  const double quota = cpu_quota_cpus(in.process);
  const bool by_quota = quota > 0 && quota < 2, by_affinity = affinity_cpus(in) == 1;
  std::string s = "This process";
  if (by_affinity || !by_quota) s += " may run on one CPU only (its CPU affinity)";
  if (by_affinity && by_quota) s += " and";
  if (by_quota) s += " may use at most " + fcpus(quota) + " CPUs of CPU time (its cgroup's CPU quota)";
  return s;
}

/// Most of the host work runs between the step's own launches: it is the code that issues them (a model's Python
/// forward), which a replayed CUDA graph no longer runs; a worker cannot take it over.
void suggest_graph_capture(Finding& f, const RuleInput& in, const std::string& what) {
  suggest_graph(f, in, "Most of this host work (" + what + ") runs between the step's own kernel launches: it is the code "
                "that issues them. " + graph_advice(in, "so a replay skips it"));
}

/// The worker model: the running share of the step thread's host gaps (its waits and contention are the wait and
/// cpu_contention findings' to remove; without counters it is all running) is done ahead by `workers`, one step's
/// worth every (work / workers). The code that issues the step's launches stays: no worker can run it.
replay::Change moved_to_workers(const RuleInput& in, int workers) {
  replay::Change c;
  c.host_gap_scale = in.t.idle_host > 0 ? std::clamp(1.0 - in.t.host_running / in.t.idle_host, 0.0, 1.0) : 0.0;
  c.min_scaled_gap_ns = in.th.dispatch_gap_ns;
  c.moved_work_workers = workers;
  c.keep_launching_code = true;
  return c;
}

/// Who can prepare the next step's input ahead, in the program's own terms: its DataLoader's workers, else worker
/// processes (Python) or a thread pool (native code).
std::string workers_phrase(const RuleInput& in, const std::string& n) {
  if (in.facts.has(detail::kFactDataLoader))
    return n + " DataLoader workers (num_workers=" + n + ", pin_memory=True, persistent_workers=True)";
  return python_program(in) ? n + " worker processes (a multiprocessing.Pool or a producer process feeding a queue)"
                            : n + " producer threads feeding a bounded queue";
}

/// "Move the work to N workers", priced by moved_to_workers; with one CPU there is nobody to move it to. Only for
/// work that does not need the step's own results (kFactPrefetchable): the next batch can be ready before it is due.
void suggest_workers(Finding& f, const RuleInput& in, bool gpu, const std::string& what) {
  const int workers = suggested_workers(in);
  if (workers == 0) {
    suggest(f, in, "high", one_cpu_limit(in) + ": workers that prepared " + what + " ahead would take turns with the "
                           "step thread for it. Give the process more CPUs (taskset, the container's cpuset or CPU limit), "
                           "then prepare it ahead in worker processes", {detail::kFactPrefetchable});
    return;
  }
  const std::string n = std::to_string(workers);
  const std::string model = "host work of 100 us or more between CUDA calls, except the code between the step's "
                            "launches, done by " + n + " workers ahead of time, the step no faster than they deliver";
  const size_t before = f.suggestions.size();
  if (gpu)
    suggest_replayed(f, in, "high", "Move " + what + " off the step's critical path: prepare the next batch in " +
                     workers_phrase(in, n) + " while the GPU runs the current one", moved_to_workers(in, workers),
                     model.c_str(), {detail::kFactPrefetchable});
  else
    suggest_replayed(f, in, "high", "Move " + what + " out of the step: precompute it, cache its results, or run it in " +
                     workers_phrase(in, n) + " ahead of the step", moved_to_workers(in, workers), model.c_str(),
                     {detail::kFactPrefetchable});
  if (f.suggestions.size() > before && in.facts.has(detail::kFactDataLoader))
    f.suggestions.back().try_knob = "num_workers=" + n;  // a DataLoader argument: measurable with iscope-run --try
}

/// A function whose name says it picks tokens from logits (a sampler, top-p/top-k, a softmax): in a generation loop
/// the fix is to sample on the GPU. Other work after the read (a stop check that rescans the text) has other fixes.
bool names_sampling(const std::string& what) {
  std::string w;
  for (char c : what) w += char(std::tolower(static_cast<unsigned char>(c)));
  for (const char* k : {"sampl", "top_p", "top_k", "topk", "nucleus", "softmax", "multinomial", "logit", "temperature"})
    if (w.find(k) != std::string::npos) return true;
  return false;
}

/// Host work that reads this step's results back and feeds its next launches (kFactDependentHost): nobody can do it
/// ahead; the GPU can do it in place. In a generation loop that picks the next token on the host, it is sampling.
void suggest_on_gpu(Finding& f, const RuleInput& in, const std::string& what) {
  replay::Change on_gpu;
  on_gpu.host_gap_scale = 0;
  on_gpu.min_scaled_gap_ns = in.th.dispatch_gap_ns;
  on_gpu.only_after_read = true;
  const char* model = "host work of 100 us or more after a read of the step's results and before its next launch "
                      "removed (done by a few kernels instead; the read itself stays)";
  if (in.generation.detected && names_sampling(what))
    suggest_replayed(f, in, "high", "Sample the next token on the GPU: " + what + " runs on the host after each token's "
                     "logits are read back, and the next token's launches wait for it. Keep the logits on the GPU and "
                     "pick the token there (torch.softmax, torch.topk or sort + cumsum for top-p, torch.multinomial), "
                     "reading back only the token id, or none", on_gpu, model, {detail::kFactDependentHost, detail::kFactPython});
  else if (in.generation.detected)
    suggest_replayed(f, in, "high", "Cut " + what + " out of each token: it runs on the host after every token is read "
                     "back, and the next token's launches wait for it. Do only the new token's share of it each time "
                     "(an incremental check over what the last token changed, not a rescan of everything generated), "
                     "or do it on the GPU over the tokens already there", on_gpu, model, {detail::kFactDependentHost});
  else
    suggest_replayed(f, in, "high", "Do " + what + " on the GPU: it runs on the host after the step reads GPU results back, "
                     "and the step's next launches wait for it, so no worker can do it ahead. " +
                     std::string(python_program(in) ? "Express it as torch operations on the tensors still on the GPU"
                                                    : "Write it as a kernel over the results still on the GPU") +
                     " and read back only what the host needs", on_gpu, model, {detail::kFactDependentHost});
}

void add_suggestions(Finding& f, const RuleInput& in, const detail::HostFrames& host, bool gpu) {
  const std::string step_work = "the host work in '" + in.stats.name + "'";
  const std::string hottest = host.hot.empty() ? step_work : host.hot.front().label;
  const bool py = python_program(in);
  const bool graph_first =
      gpu && detail::share_of_host_work_between_launches(in.graphs, in.th.dispatch_gap_ns) >= in.th.between_launches_share;
  if (graph_first) suggest_graph_capture(f, in, hottest);
  const detail::HotFrame* own = movable_work(host);
  if (own || host.hot.empty()) {
    const std::string what = own ? own->label : step_work;
    if (gpu) suggest_on_gpu(f, in, what);
    suggest_workers(f, in, gpu, what);
    if (gpu && py)
      suggest(f, in, "high", "Vectorise or port " + what + " to torch/NumPy ops (or run it on the GPU) instead of per-item "
                             "Python", {detail::kFactPython});
    else if (py)
      suggest(f, in, "high", "Vectorise " + what + " (NumPy, or a compiled extension) instead of per-item Python",
              {detail::kFactPython});
    else
      suggest(f, in, "high", "Vectorise " + what + " (SIMD, a library call over whole arrays) or move it into a kernel",
              {detail::kFactCpp});
  } else if (py) {
    // The host time is a model's forward or a library's code: no worker can run it for the step, and the user does
    // not vectorise torch. What cuts it is fewer Python dispatches per step.
    if (!graph_first && gpu) suggest_graph_capture(f, in, hottest);
    suggest(f, in, "high", "Compile the model (torch.compile) so " + hottest + " runs as fused kernels with less Python "
                           "dispatch per step; or batch more work per step so the same host cost covers more",
            {detail::kFactPython});
  } else if (!graph_first && gpu) {
    suggest_graph_capture(f, in, hottest);
  }
  if (gpu)
    suggest(f, in, "medium", "Overlap: launch the GPU work first and prepare step N+1 on the host while step N's kernels "
                             "run (" + std::string(py ? "non_blocking copies" : "cudaMemcpyAsync from pinned buffers") +
                             ", no synchronization in between)", {detail::kFactPrefetchable});
  else
    suggest(f, in, "medium", py ? "Spread independent items over worker processes (multiprocessing / concurrent.futures)"
                                : "Spread independent items over a thread pool", {});
  const std::string who = own ? own->label : hottest;
  if (py) suggest(f, in, "low", "Profile " + who + " itself (py-spy / cProfile) to find its hot lines", {detail::kFactPython});
  else suggest(f, in, "low", "Profile " + who + " itself (perf record -g, or ISCOPE_RANGEs around its parts) to find its "
                             "hot lines", {detail::kFactCpp});
}

}  // namespace

std::optional<Finding> cpu_bound(const RuleInput& in) {
  const double impact = in.t.host_running / 1e6;
  if (!reported(in, impact)) return std::nullopt;
  const Breakdown& b = in.breakdown;
  const bool gpu = gpu_seen(in) && (b.gpu_utilization > 0 || in.t.kernels > 0);
  const double pct = impact / in.step_ms() * 100;
  Finding f = make_finding(in, Category::kCpuBound,
                           gpu ? "The GPU waits " + fms(impact) + " per step for host work outside CUDA calls"
                                    : "Host work fills the step: " + fms(impact) + " per step, and no GPU work was recorded",
                           impact, 0.45 + 0.4 * std::min(1.0, pct / 50) + (in.host.visible ? 0.1 : 0));
  if (gpu)
    f.evidence.push_back("the GPU was idle " + fms(impact) + " per step (" + fpct(pct) + " of the " + fms(in.step_ms()) +
                         " step) while thread '" + in.step_thread_name + "' ran host code and had not launched the next work");
  else
    f.evidence.push_back("thread '" + in.step_thread_name + "' ran host code " + fms(impact) + " per step (" + fpct(pct) + ")");
  if (b.host_state_measured)
    f.evidence.push_back("the thread was on a CPU for this time (system counters; waits and contention are counted apart: " +
                         fms(b.host_waiting_ms) + " waiting, " + fms(b.host_contention_ms) + " contended)");
  const detail::HostFrames host = running_frames(in);
  if (std::string hot = hot_list(host); !hot.empty())
    f.evidence.push_back("host self time per step inside the step, less the time blocked there: " + hot);
  else f.evidence.push_back("no Python frames or nested ranges inside the step: the host work is not named; run with Python tracing or add ISCOPE_RANGEs");
  f.metrics["host_running_ms"] = impact;
  f.metrics["cpu_preprocessing_ms"] = b.cpu_preprocessing_ms;
  if (gpu) f.metrics["gpu_utilization"] = b.gpu_utilization;
  add_examples(f, in, &detail::StepMetrics::worst_host_gap, gpu ? "GPU idle waiting on host work" : "host work");
  add_suggestions(f, in, host, gpu);
  return f;
}

}  // namespace inferscope::analyze::rules

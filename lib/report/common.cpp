#include "report/common.hpp"

#include "report/escape.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace inferscope::report {

std::vector<BreakdownRow> breakdown_rows(const analyze::Breakdown& b, bool gpu_work) {
  std::vector<BreakdownRow> rows = {{"CPU preprocessing", "cpu_preprocessing", b.cpu_preprocessing_ms}};
  if (gpu_work)  // without GPU work these would be zeros that suggest a GPU was there
    rows.insert(rows.end(), {{"H2D copies", "h2d", b.h2d_ms},
                             {"GPU compute", "gpu_compute", b.gpu_compute_ms},
                             {"D2H copies", "d2h", b.d2h_ms},
                             {"Sync wait", "sync_wait", b.sync_wait_ms}});
  if (gpu_work && b.gpu_comm_ms > 0)  // NCCL collectives with no compute beside them: a rank of a multi-GPU run
    rows.insert(rows.begin() + 3, {"Collectives (NCCL)", "gpu_comm", b.gpu_comm_ms});
  rows.insert(rows.end(), {{"Framework overhead", "framework_overhead", b.framework_overhead_ms},
                           {"Idle", "idle", b.idle_ms}});
  double sum = 0;
  for (const auto& r : rows) sum += r.ms;
  const double rest = b.step_ms - sum;
  if (std::isfinite(rest) && std::fabs(rest) > 1e-3) rows.push_back({"Unattributed", "unattributed", rest});
  return rows;
}

std::vector<BreakdownRow> cause_rows(const analyze::Breakdown& b, bool gpu_work) {
  std::vector<BreakdownRow> rows;
  if (gpu_work)
    rows.insert(rows.end(), {{"GPU compute", "gpu_bound", b.gpu_compute_ms},
                             {"host-to-device copies", "h2d_bound", b.h2d_ms},
                             {"device-to-host copies", "d2h_bound", b.d2h_ms}});
  if (gpu_work && b.gpu_comm_ms > 0)  // a rank: the run across ranks splits it (waiting vs moving data)
    rows.push_back({"NCCL collectives", "communication", b.gpu_comm_ms});
  rows.insert(rows.end(), {{"host work outside CUDA calls", "cpu_bound", b.host_running_ms},
                           {"held off a CPU, or by the GIL", "cpu_contention", b.host_contention_ms},
                           {"blocked by its own wait", "wait", b.host_waiting_ms}});
  if (gpu_work)
    rows.insert(rows.end(), {{"launching kernels", "launch_bound", b.gpu_idle_gaps_between_kernels_ms},
                             {"at synchronizations", "sync_bound", b.gpu_idle_waiting_on_sync_ms},
                             {"in allocations and frees", "memory_alloc", b.gpu_idle_in_memory_ms}});
  double sum = 0;
  for (const auto& r : rows) sum += r.ms;
  const double rest = b.step_ms - sum;
  if (std::isfinite(rest) && std::fabs(rest) > 1e-3) rows.push_back({"unattributed", "unattributed", rest});
  return rows;
}

double pct_of(double ms, double step_ms) { return step_ms > 0 ? ms / step_ms * 100.0 : 0.0; }

// Decimal units, as the analyzer's own sentences ("12.6 MB", "1.20 GB") and the bandwidths (GB/s) are written: a
// report says one quantity in one unit (docs/reports.md, "Units and precision").
std::string fmt_bytes(uint64_t bytes) {
  const double v = static_cast<double>(bytes);
  if (bytes < 1000) return std::to_string(bytes) + " B";
  if (v < 1e6) return fmt(v / 1e3, 1) + " kB";
  if (v < 1e9) return fmt(v / 1e6, 1) + " MB";
  if (v < 1e12) return fmt(v / 1e9, 2) + " GB";
  return fmt(v / 1e12, 2) + " TB";
}

std::string fmt_peak(const analyze::CopyRow& r) {
  if (r.peak_bandwidth_gbps <= 0) return "unknown";
  return fmt(r.peak_bandwidth_gbps, 1) + (r.peak_assumed ? " (assumed)" : "");
}

std::string fmt_thread_cpu(const analyze::ThreadRow& r) {
  if (r.cpu_source.empty() && r.cpu_ms == 0) return "n/a";
  // Words, not "<": Markdown would need it escaped, and a backslash shows outside GitHub.
  if (r.cpu_source == "ticks" && r.cpu_ms < analyze::kCpuTickMs) return "under " + fmt(analyze::kCpuTickMs, 0);
  return fmt(r.cpu_ms, 3);
}

std::string thread_cpu_note(const std::vector<analyze::ThreadRow>& rows) {
  for (const auto& r : rows)
    if (r.cpu_source == "ticks")
      return "CPU (ms) without schedstat (a kernel without CONFIG_SCHED_INFO) is user + system time in clock ticks of " +
             fmt(analyze::kCpuTickMs, 0) + " ms: \"under " + fmt(analyze::kCpuTickMs, 0) +
             "\" is below that resolution, not no CPU time.";
  return {};
}

KernelNames kernel_names(const analyze::Analysis& a) { return text::report_kernel_names(a); }

namespace {

std::string_view base_name(std::string_view path) {
  const size_t slash = path.find_last_of("/\\");
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// The program of a command line: the executable, or for a Python interpreter the script or `-m` module.
std::string program_of(std::string_view cmdline) {
  std::vector<std::string_view> words;
  for (size_t i = 0; i < cmdline.size();) {
    const size_t j = std::min(cmdline.find(' ', i), cmdline.size());
    if (j > i) words.push_back(cmdline.substr(i, j - i));
    i = j + 1;
  }
  if (words.empty() || words[0][0] == '(') return {};  // "(not recorded by torch.profiler)"
  const std::string_view exe = base_name(words[0]);
  if (exe.rfind("python", 0) != 0) return std::string(exe);
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i] == "-m" && i + 1 < words.size()) return std::string(words[i + 1]);
    if (words[i] == "-c") return std::string(exe) + " -c";
    if (words[i][0] != '-') return std::string(base_name(words[i]));
  }
  return std::string(exe);
}

}  // namespace

std::string cmdline_of(const analyze::Analysis& a) {
  const auto it = a.process.find("cmdline");
  return it == a.process.end() ? std::string() : it->second;
}


std::string report_subject(const analyze::Analysis& a) {
  const auto it = a.process.find("cmdline");
  const std::string program = it == a.process.end() ? std::string() : program_of(it->second);
  const std::string file(base_name(a.source));
  if (program.empty()) return file;
  if (file.empty()) return program;
  return program + " (" + file + ")";
}

std::vector<std::pair<std::string, std::string>> headline_process(const analyze::Analysis& a) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* k : {"cmdline", "pid", "hostname", "gpu.0.name"}) {
    auto it = a.process.find(k);
    if (it != a.process.end() && !it->second.empty()) out.emplace_back(k, it->second);
  }
  return out;
}

}  // namespace inferscope::report

namespace inferscope::report {

bool recorded_whole(const analyze::Sampling& s) {
  for (const auto& w : s.windows)
    if (w.reason == "baseline" && w.open) return true;
  return false;
}

std::string step_runner_ups(const analyze::StepStats& s) {
  std::string out;
  for (size_t i = 0; i < s.candidates.size() && i < 3; ++i) {
    const analyze::StepCandidate& c = s.candidates[i];
    out += (i ? ", '" : "'") + c.name + "' (" + c.kind + ", " + std::to_string(c.count) + " " +
           (c.kind == "function" ? "calls" : "instances") + ", " + fmt(c.total_ms, 1) + " ms)";
  }
  return out.empty() ? out : out + "; pick one with --step NAME";
}

namespace {

// "15 of 200 steps of 'step' (7.5 %) and 40.0 of 900.0 ms (4.4 %)": how much of the run has full detail.
std::string coverage_of(const analyze::Sampling& s) {
  std::string out;
  if (s.by_steps)
    out += std::to_string(s.steps_in_windows) + " of " + std::to_string(s.steps_seen) + " steps of '" + s.step_name +
           "' (" + fmt(s.step_coverage_pct, 1) + " %) and ";
  out += fmt(s.window_ms, 1) + " of " + fmt(s.run_ms, 1) + " ms (" + fmt(s.time_coverage_pct, 1) + " %)";
  if (!s.by_steps) out += ", in timed windows (no step range was seen)";
  return out;
}

}  // namespace

std::string sampling_headline(const analyze::Sampling& s) {
  if (recorded_whole(s)) return sampling_sentence(s);
  return "full detail for " + coverage_of(s) + "; the step statistics, breakdown and findings describe those only.";
}

std::string spread_text(const analyze::StepStats& s) {
  // The analyzer's sentence for steps that are not alike without two modes opens with these words; after a
  // "Steps not alike" label they would say it twice.
  constexpr std::string_view kOpening = "the steps are not alike: ";
  return s.spread.starts_with(kOpening) ? s.spread.substr(kOpening.size()) : s.spread;
}

std::string step_counts_sentence(const analyze::StepStats& s) {
  const uint64_t left_out = s.count > s.typical ? s.count - s.typical : 0;
  return std::to_string(s.total) + " steps = " + std::to_string(s.warmup) + " warm-up + " + std::to_string(s.count) +
         " steady (the statistics); the " + std::to_string(s.count) + " steady = " + std::to_string(s.typical) +
         " typical (the breakdown and the impacts) + " + std::to_string(left_out) +
         " slow outlier(s) left out. Warm-up: " + s.warmup_reason + ".";
}

std::string outliers_sentence(const analyze::StepStats& s) {
  const uint64_t left_out = s.count > s.typical ? s.count - s.typical : 0;
  const size_t above = std::max(s.outlier_indexes.size(), s.outliers.size());
  const std::string bound = fmt_ms(s.outlier_bound_ms) + " ms (median + max(3 scaled MADs, 25 %))";
  if (left_out > 0)
    return std::to_string(left_out) + " steady step(s) slower than " + bound +
           " are left out of the breakdown; see the slow_steps finding.";
  if (above > 0)
    return std::to_string(above) + " steady step(s) are slower than " + bound + "; as the steps are not alike, they " +
           "stay in the breakdown, whose step is the mean of all " + std::to_string(s.count) +
           " steady steps (see the slow_steps finding).";
  return {};
}

ZeroSplit split_zero_rows(std::vector<BreakdownRow> rows) {
  ZeroSplit z;
  for (auto& r : rows) {
    if (std::fabs(r.ms) < 0.0005) z.zero.push_back(r);  // prints as 0.000 ms
    else z.shown.push_back(r);
  }
  return z;
}

std::string zero_rows_note(const std::vector<std::string>& names, const std::string& noun) {
  if (names.empty()) return {};
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) list += (i ? ", " : "") + names[i];
  return std::to_string(names.size()) + " " + noun + (names.size() == 1 ? "" : "s") + " at 0 ms not shown (" + list + ").";
}

std::vector<std::string> labels_of(const std::vector<BreakdownRow>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.label);
  return out;
}

// The runtime counts a window's steps by the range it takes as a step (Sampling::step_name, "step" unless set):
// a program without that range (most Python programs, whose step the analysis finds as a function) has windows
// of 0 steps. A count of 0 is then not known, never "after 0 steps" beside the N steps the analysis describes.
std::string sampling_sentence(const analyze::Sampling& s) {
  std::string out = "full detail for ";
  const auto counted = [&s](const analyze::SampledWindow& w) {
    return s.by_steps && w.steps > 0 ? std::to_string(w.steps) + " steps of '" + s.step_name + "'" : std::string();
  };
  for (const auto& w : s.windows)
    if (w.reason == "baseline" && w.open)  // the run ended within the baseline: a full capture
      return "full detail for the whole run: it ended within the baseline" +
             (counted(w).empty() ? std::string() : ", after " + counted(w)) + ", so nothing was sampled out.";
    else if (w.reason == "baseline")
      out = "full detail from the start for " +
            (counted(w).empty() ? "its first " + fmt(w.end_ms - w.start_ms, 1) + " ms" : counted(w)) +
            ", then in windows; in all, for ";
  out += coverage_of(s);
  out += "; " + std::to_string(s.windows_opened) + " window(s) opened, " + std::to_string(s.windows_kept) +
         " kept in the ring";
  if (s.windows_dropped)
    out += ", " + std::to_string(s.windows_dropped) + " dropped (oldest first; " + std::to_string(s.records_dropped) +
           " records)";
  out += ". The step statistics, breakdown and findings describe the steps of the kept full windows only.";
  if (s.slow_steps_seen) {
    size_t full = 0;
    for (auto& x : s.slow_steps) full += x.detail == "full";
    out += " " + std::to_string(s.slow_steps_seen) + " slow step(s) caught, " + std::to_string(full) +
           " of them kept in full detail.";
  }
  return out;
}

std::string drops_text(const analyze::Analysis& a, const std::function<std::string(const std::string&)>& code) {
  uint64_t total = 0;
  std::string by;
  for (const auto& [reason, n] : a.drops) {
    total += n;
    by += (by.empty() ? "" : ", ") + code(reason) + " " + std::to_string(n);
  }
  if (a.complete) return a.drops.empty() ? "none." : std::to_string(total) + " (" + by + "); the numbers may be slightly low.";
  const std::string why = "the dump has no END chunk (its process did not stop cleanly: a crash, a kill, or a disk "
                          "still full when it stopped), so records lost after the last drop table in the file are "
                          "counted nowhere";
  if (a.drops.empty()) return "not known: " + why + "; none were counted before the file ends.";
  return "at least " + std::to_string(total) + " (" + by + "): " + why + ".";
}

}  // namespace inferscope::report

#include "analyze/children.hpp"

#include "analyze/run/ranks.hpp"
#include "dump/path.hpp"
#include "dump/reader.hpp"
#include "import/import.hpp"

#include <algorithm>
#include <cctype>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>

namespace inferscope::analyze {
namespace {

namespace fs = std::filesystem;

// How a child of the process that wrote the dump at `parent_path` names its own: the runtime puts the child's pid
// before the extension of the family's output (dump::insert_suffix: run.iscope -> run.4711.iscope, run.dump ->
// run.4711.dump, run -> run.4711), whatever that output is called.
struct ChildNaming {
  std::string stem, ext;  ///< the parent's file name without, and its extension ("" when none)
};

ChildNaming naming_of(const std::string& parent_path) {
  const dump::PathParts p = dump::split_extension(fs::path(parent_path).filename().string());
  return {p.stem, p.ext};
}

// "run.4711.iscope" for the parent "run.iscope": the pid, else 0.
uint64_t child_pid_of(const std::string& file, const ChildNaming& n) {
  const size_t head = n.stem.size() + 1;
  if (file.size() <= head + n.ext.size() || file.compare(0, n.stem.size(), n.stem) != 0 || file[n.stem.size()] != '.' ||
      file.compare(file.size() - n.ext.size(), n.ext.size(), n.ext) != 0)
    return 0;
  const std::string digits = file.substr(head, file.size() - head - n.ext.size());
  if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return 0;
  return std::stoull(digits);
}

uint64_t realtime_of(const std::string& value) { return process_number(value, UINT64_MAX).value_or(0); }

// A process info key "child.<pid>.<what>" (the system collector's look at the process's children in /proc): that
// child is one the parent recorded.
void note_sampled_child(ParentFacts& f, const std::string& key) {
  if (!key.starts_with("child.")) return;
  const size_t dot = key.find('.', 6);
  if (dot == std::string::npos) return;
  if (const auto pid = process_number(std::string_view(key).substr(6, dot - 6), UINT32_MAX)) f.sampled_children.insert(*pid);
}

// Whether the dump `r`, named with the pid `name_pid`, is a child the parent recorded: the process that wrote it
// names the parent's pid as its ppid, is the process its name says (a dump copied or renamed to a child's name
// is not), ran on the parent's host, and started its session after the parent's began (a dump left by an
// earlier run whose parent had the same pid started before). Each fact a dump lacks is not compared.
bool is_child_of(const dump::DumpReader& r, uint64_t name_pid, const ParentFacts& parent) {
  if (parent.pid.empty() || r.process_value("ppid") != parent.pid) return false;
  if (r.process_value("pid") != std::to_string(name_pid)) return false;
  const std::string host = r.process_value("hostname");
  if (!host.empty() && !parent.hostname.empty() && host != parent.hostname) return false;
  const uint64_t started = realtime_of(r.process_value("start_realtime_ns"));
  return !started || !parent.start_realtime_ns || started >= parent.start_realtime_ns;
}

// The ranks among the dumps summarised: each one's trace and analysis, for analyze_ranks.
struct RankCollector {
  std::vector<RankTrace> traces;
  std::vector<Analysis> analyses;

  RunAnalysis run() const {
    std::vector<const Analysis*> a;
    for (const Analysis& x : analyses) a.push_back(&x);
    return traces.empty() ? RunAnalysis{} : analyze_ranks(traces, a);  // one rank: listed, nothing to match
  }
};

// A rank of a multi-process job: its launcher said so (process info `rank`), or it did GPU work (a parent that
// spawns its GPU workers itself sets no rank variable).
bool is_rank(const dump::DumpReader& r, const Analysis& a) { return !r.process_value("rank").empty() || a.gpu_work_recorded; }

// The input at `path` analysed and summarised: a dump (a child's), or with `any_format` (a rank named on the command
// line) also a trace, imported into records (lib/import).
ChildProcess summarise(const std::string& path, uint64_t pid, const AnalyzeOptions& options, RankCollector* ranks,
                       bool any_format = false) {
  ChildProcess c;
  c.path = path;
  c.pid = pid;
  try {
    const std::unique_ptr<dump::DumpReader> opened =
        any_format ? import::open_input(path).reader : std::make_unique<dump::DumpReader>(path);
    const dump::DumpReader& r = *opened;
    c.cmdline = r.process_value("cmdline");
    c.complete = r.complete();
    if (!c.pid) c.pid = process_number(r.process_value("pid"), UINT64_MAX).value_or(0);
    Analysis a = [&] {
      try {
        return analyze_dump(r, options);
      } catch (const UnknownStep&) {
        // --step names the parent's step; a child (a DataLoader worker, a pool) has its own, detected as usual.
        AnalyzeOptions own = options;
        own.step.clear();
        return analyze_dump(r, own);
      }
    }();
    a.source = c.path;
    c.events = a.events;
    c.steps = a.steps.count;
    c.step_ms = a.end_to_end_ms;
    for (const Finding& f : a.findings)
      if (f.primary) c.primary = f.category;
    c.step_stats = a.steps;
    c.representative_step = a.representative.step.index;
    if (ranks && is_rank(r, a)) {
      ranks->traces.push_back(read_rank_trace(r, a));
      ranks->analyses.push_back(std::move(a));
    }
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

}  // namespace

ParentFacts parent_facts(const dump::DumpReader& r) {
  ParentFacts f{r.process_value("pid"), r.process_value("hostname"), realtime_of(r.process_value("start_realtime_ns")), {}};
  for (const auto& [key, value] : r.process_info()) note_sampled_child(f, key);
  return f;
}

ParentFacts parent_facts(const Analysis& a) {
  auto value = [&](const char* key) {
    auto it = a.process.find(key);
    return it == a.process.end() ? std::string() : it->second;
  };
  ParentFacts f{value("pid"), value("hostname"), realtime_of(value("start_realtime_ns")), {}};
  for (const auto& [key, v] : a.process) note_sampled_child(f, key);
  return f;
}

std::vector<std::string> child_dump_candidates(const std::string& parent_path) {
  const ChildNaming naming = naming_of(parent_path);
  const fs::path p(parent_path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  std::vector<std::pair<uint64_t, std::string>> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    if (uint64_t pid = child_pid_of(e.path().filename().string(), naming)) found.emplace_back(pid, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [pid, path] : found) out.push_back(std::move(path));
  return out;
}

std::vector<std::pair<uint64_t, std::string>> child_dump_paths(const std::string& parent_path, const ParentFacts& parent) {
  std::vector<std::pair<uint64_t, std::string>> out;
  if (parent.pid.empty()) return out;
  const ChildNaming naming = naming_of(parent_path);
  for (const std::string& path : child_dump_candidates(parent_path)) {
    const uint64_t pid = child_pid_of(fs::path(path).filename().string(), naming);
    try {
      if (is_child_of(dump::DumpReader(path), pid, parent)) out.emplace_back(pid, path);
    } catch (const std::exception&) {  // unreadable: not read as a child here
    }
  }
  return out;
}

std::vector<ChildProcess> find_children(const std::string& parent_path, const Analysis& parent,
                                        const AnalyzeOptions& options, RunAnalysis* run) {
  RankCollector ranks;
  std::vector<ChildProcess> out;
  const ParentFacts facts = parent_facts(parent);
  if (facts.pid.empty()) return out;
  const ChildNaming naming = naming_of(parent_path);
  for (const std::string& path : child_dump_candidates(parent_path)) {
    const uint64_t pid = child_pid_of(fs::path(path).filename().string(), naming);
    try {  // a cheap look at the process info first: only the parent's own children are analysed
      if (!is_child_of(dump::DumpReader(path), pid, facts)) continue;
    } catch (const std::exception&) {
      // Unreadable, so it cannot say whose it is: listed with its error below only when the parent's own dump
      // names that pid among its children (the system collector saw it); any other file is a stranger's.
      if (!facts.sampled_children.count(pid)) continue;
    }
    out.push_back(summarise(path, pid, options, run ? &ranks : nullptr));
  }
  if (run) *run = ranks.run();
  return out;
}

std::vector<ChildProcess> analyze_rank_dumps(const std::vector<std::string>& paths, const AnalyzeOptions& options,
                                             RunAnalysis& run) {
  RankCollector ranks;
  std::vector<ChildProcess> out;
  for (const std::string& path : paths) {
    // A torch.profiler trace per rank (Kineto's JSON) is read as the records it imports to; a file that cannot be
    // read is listed with its error, as a damaged dump is.
    out.push_back(summarise(path, 0, options, &ranks, /*any_format=*/true));
  }
  run = ranks.run();
  return out;
}

}  // namespace inferscope::analyze

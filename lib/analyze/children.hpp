// The processes a recorded program forked or spawned, recorded with follow_children (iscope-run
// --follow-children): each wrote `<stem>.<pid>.iscope` beside the parent's dump, naming its parent's pid as
// `ppid` in its process info. The analyzer opens a parent with them: each child is analysed on its own and
// summarised in the parent's report (docs/reliability.md, "fork()").
//
//   Analysis a = analyze_file("run.iscope", o);
//   a.children = find_children("run.iscope", a, o);   // run.4711.iscope, run.4712.iscope, ...
#pragma once

#include "analyze/analysis.hpp"
#include "analyze/analyzer.hpp"

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace inferscope::dump {
class DumpReader;
}

namespace inferscope::analyze {

/// What a parent's dump says about the process that wrote it, against which a child's dump is checked: its pid,
/// host, when its session started (process info `start_realtime_ns`), and the children the system collector saw
/// it run (`child.<pid>.*`). Empty or 0 where the dump does not say.
struct ParentFacts {
  std::string pid, hostname;
  uint64_t start_realtime_ns = 0;
  std::set<uint64_t> sampled_children;
};
ParentFacts parent_facts(const dump::DumpReader& parent);
ParentFacts parent_facts(const Analysis& parent);

/// The files find_children() opens for the dump at `parent_path`: named as the runtime names a child's dump
/// (dump::insert_suffix: the pid before the parent's extension, `run.iscope` -> `run.<digits>.iscope`, `run.dump`
/// -> `run.<digits>.dump`, `run` -> `run.<digits>`), beside it, regular files, in pid order. Each is read (at least
/// its process info), so each is an input of the analysis: a tool must not write an output over any of them.
std::vector<std::string> child_dump_candidates(const std::string& parent_path);

/// The child dumps of the dump at `parent_path` whose analysis is `parent`, in pid order, each analysed with
/// `options`: the candidates above whose own process info says they are the parent's children (their `ppid` is
/// the parent's `pid`, their `pid` the one in their name, their `hostname` the parent's, their session started
/// after the parent's). A candidate that cannot be read is listed with its error, never fatal, when the parent's
/// dump names its pid among its children (`child.<pid>.*`); otherwise it is a stranger's file and left out. With
/// `run`, the children that are ranks of a multi-process job (a `rank` in their process info, or GPU work) are
/// analysed together into it (ranks.hpp); fewer than two leave it empty.
std::vector<ChildProcess> find_children(const std::string& parent_path, const Analysis& parent,
                                        const AnalyzeOptions& options, RunAnalysis* run = nullptr);

/// The dumps of one run's ranks named together (iscope-analyze r0.iscope r1.iscope): each analysed and summarised
/// (as a child is), and the run across those that are ranks into `run`.
std::vector<ChildProcess> analyze_rank_dumps(const std::vector<std::string>& paths, const AnalyzeOptions& options,
                                             RunAnalysis& run);

/// The dumps beside `parent_path` named like its children's whose process info says they are the children of
/// `parent` (as find_children() takes them): (pid, path), in pid order. Unreadable ones are left out.
std::vector<std::pair<uint64_t, std::string>> child_dump_paths(const std::string& parent_path, const ParentFacts& parent);

}  // namespace inferscope::analyze

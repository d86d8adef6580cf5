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

#include <string>
#include <utility>
#include <vector>

namespace inferscope::analyze {

/// The files find_children() opens for the dump at `parent_path`: named as the runtime names a child's dump
/// (dump::insert_suffix: the pid before the parent's extension, `run.iscope` -> `run.<digits>.iscope`, `run.dump`
/// -> `run.<digits>.dump`, `run` -> `run.<digits>`), beside it, regular files, in pid order. Each is read (at least
/// its process info, to compare its `ppid`), so each is an input of the analysis: a tool must not write an output
/// over any of them.
std::vector<std::string> child_dump_candidates(const std::string& parent_path);

/// The child dumps of the dump at `parent_path` whose analysis is `parent`: the candidates above whose `ppid` is
/// the parent's `pid`, in pid order, each
/// analysed with `options`. A child that cannot be read is listed with its error, never fatal. With `run`, the
/// children that are ranks of a multi-process job (a `rank` in their process info, or GPU work) are analysed
/// together into it (ranks.hpp); fewer than two leave it empty.
std::vector<ChildProcess> find_children(const std::string& parent_path, const Analysis& parent,
                                        const AnalyzeOptions& options, RunAnalysis* run = nullptr);

/// The dumps of one run's ranks named together (iscope-analyze r0.iscope r1.iscope): each analysed and summarised
/// (as a child is), and the run across those that are ranks into `run`.
std::vector<ChildProcess> analyze_rank_dumps(const std::vector<std::string>& paths, const AnalyzeOptions& options,
                                             RunAnalysis& run);

/// The dumps beside `parent_path` named like its children's (child_dump_candidates) whose process info names
/// `parent_pid` as their `ppid`: (pid, path), in pid order. Unreadable ones are left out.
std::vector<std::pair<uint64_t, std::string>> child_dump_paths(const std::string& parent_path,
                                                               const std::string& parent_pid);

}  // namespace inferscope::analyze

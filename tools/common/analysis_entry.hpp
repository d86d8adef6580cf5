// The one analysis every analysing tool runs on what it was given (iscope-analyze, iscope-diff): the first input in
// full, then its child processes' dumps beside it, or the other ranks named with it, the launcher marked, and the
// rule file the analysis used. A tool only writes what comes back, so two tools given the same dump describe it
// alike (the same headline, the same findings).
//
//   AnalysisInputs in{{"run.iscope"}, /*children=*/true, options};
//   Analysis a = analyze_inputs(in);   // throws as analyze_file() does
#pragma once

#include "analyze/analyzer.hpp"
#include "dump/reader.hpp"

#include <string>
#include <vector>

namespace inferscope::tools {

struct AnalysisInputs {
  std::vector<std::string> paths;  ///< one dump or trace; several: the ranks of one run, the first analysed in full
  bool children = true;            ///< one dump: also its child processes' dumps beside it (follow_children)
  analyze::AnalyzeOptions options;
  /// The first path, already open (a tool that also exports the dump keeps it); null: opened here.
  const dump::DumpReader* reader = nullptr;
};

/// The analysis of `in`: Analysis::children (the ranks named, or the child dumps), the run across ranks, the
/// launcher marked (analyze::mark_launcher) and Analysis::rule_file. An input with no events comes back as it is
/// (nothing_to_analyse() says so), its children unread. Throws what analyze_file() throws.
analyze::Analysis analyze_inputs(const AnalysisInputs& in);

/// The rule file an analysis used, in one line for the reports and stderr ("" when none).
std::string rule_file_line(const analyze::rules::RuleSettings* s);

}  // namespace inferscope::tools

// The analyzer: merges a dump's threads and GPU channels on one clock, finds the steps, links every GPU
// activity to the call that launched it (and from there to the Python function, ISCOPE range and model layer
// active at launch), breaks each step down, and runs the bottleneck rules. docs/analysis.md defines every
// number and rule.
//
//   analyze::AnalyzeOptions o; o.step = "step";
//   analyze::Analysis a = analyze::analyze_file("run.iscope", o);   // dump or the seeds' JSON trace
//   report::write_markdown(a, std::cout);
#pragma once

#include "analyze/analysis.hpp"
#include "dump/reader.hpp"
#include "import/import.hpp"

#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>

namespace inferscope::analyze {

namespace rules {
struct RuleSettings;  // rules/rule_settings.hpp
}

struct AnalyzeOptions {
  std::string step;              ///< step range/scope (or Python function) name; empty = detect
  bool progress = false;         ///< progress lines on stderr
  size_t max_timeline_spans = 5000;
  double launch_bound_max_kernel_us = 20.0;  ///< kernels shorter than this are "short" (Config key of that name)
  int skip_steps = -1;  ///< leading steps left out as warm-up; -1: detect (Config key skip_steps, "auto")
  /// Worker threads; 0: INFERSCOPE_ANALYZE_THREADS, else the hardware threads (capped at 32). The analysis is
  /// the same whatever the number.
  unsigned threads = 0;
  /// A rule file's settings (lib/rulefile, docs/rules.md): built-in rules disabled or re-thresholded, and its own
  /// rules ranked with them. Null: the built-in rules as they are.
  std::shared_ptr<const rules::RuleSettings> rules;
  /// The other ranks of this dump's run are analysed with it (several dumps named together, or a rank's children):
  /// a finding that would ask for the run across ranks points to the report's section on it instead.
  bool with_its_run = false;
};

/// A bad input that yields no analysis at all (lib/import's): the message names the file and the offset/line/field.
using import::InputError;

/// `--step NAME` named nothing the trace holds: no range, scope or Python function of that name. The message names
/// the file and lists the best candidates, each as --step takes it; the tools exit 2 (bad usage). Analysing the
/// whole trace as one step instead would answer a question nobody asked.
class UnknownStep : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Analyses an open dump. A damaged dump (cut short, corrupt chunk) is analysed up to the damage and says so
/// in `warnings`; `partial` (below) tells callers whether data were lost to corruption.
Analysis analyze_dump(const dump::DumpReader& reader, const AnalyzeOptions& options);

/// What a tool says when the analysis of `path` ran out of memory: the file and its size, that the analyzer's
/// memory grows with the records it holds, and where the bounds are documented (docs/reliability.md).
std::string out_of_memory_message(const std::string& path);

/// A file's format by content (import/import.hpp): a dump, or a JSON trace the importers turn into records.
using import::input_format;
using import::InputFormat;

/// Opens `path` (import::open_input: a dump from its file, a JSON trace imported into records in memory) and
/// analyses its records; an imported trace's warnings come first, naming `path`. Throws InputError (or
/// dump::DumpError) when nothing can be read.
Analysis analyze_file(const std::string& path, const AnalyzeOptions& options);

/// One line per finding, canonical and stable for golden tests:
/// "category primary=0|1 impact_ms=X.XX impact_pct=X confidence=X.X suggestions=N uncertain=0|1".
std::string findings_digest(const Analysis& a);

/// True when a range name is treated as a model layer (see docs/analysis.md, "Layers"): it carries the
/// attribute layer=1, or it has no attributes and looks like a dotted module path ("transformer.h.3.attn").
bool looks_like_module_path(std::string_view name);

}  // namespace inferscope::analyze

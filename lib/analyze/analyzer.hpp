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
};

/// A bad input that yields no analysis at all: the message names the file and the offset/line/field.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Analyses an open dump. A damaged dump (cut short, corrupt chunk) is analysed up to the damage and says so
/// in `warnings`; `partial` (below) tells callers whether data were lost to corruption.
Analysis analyze_dump(const dump::DumpReader& reader, const AnalyzeOptions& options);

/// What a tool says when the analysis of `path` ran out of memory: the file and its size, that the analyzer's
/// memory grows with the records it holds, and where the bounds are documented (docs/reliability.md).
std::string out_of_memory_message(const std::string& path);

enum class InputFormat { kDump, kJsonTrace };

/// The format of `path` by content: INFSCOPE magic is a dump; '{' or '[' (after a BOM and blanks), or the gzip
/// magic 1f 8b, a JSON trace (the seeds' events, or a Chrome trace: torch.profiler or InferScope's Perfetto
/// export). Throws InputError naming the file when it cannot be read, is empty, or is neither.
InputFormat input_format(const std::string& path);

/// Opens `path`, detects its format by content (INFSCOPE magic: dump; '{', '[' or gzip: a JSON trace, see
/// json_trace_to_dump) and analyses it. Throws InputError (or dump::DumpError) when nothing can be read.
Analysis analyze_file(const std::string& path, const AnalyzeOptions& options);

/// Converts the seeds' JSON event trace (`{"events": [...]}` or a bare array), or a Chrome trace
/// (analyze/kineto_input.hpp), gzipped or not, into a dump at `dump_path`. Unknown event types are skipped and
/// counted in `warnings`. Throws InputError naming the event index and
/// field, or the line and column of a syntax error.
void json_trace_to_dump(const std::string& json_path, const std::string& dump_path,
                        std::vector<std::string>& warnings);

/// A JSON trace converted into a dump in a temporary file (in $TMPDIR, else /tmp), removed when this goes. Throws
/// as json_trace_to_dump does, or InputError when no temporary file can be made.
class ConvertedTrace {
 public:
  explicit ConvertedTrace(const std::string& json_path);
  ~ConvertedTrace();
  ConvertedTrace(const ConvertedTrace&) = delete;
  ConvertedTrace& operator=(const ConvertedTrace&) = delete;
  const std::string& dump_path() const { return dump_path_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::string dump_path_;
  std::vector<std::string> warnings_;
};

/// One line per finding, canonical and stable for golden tests:
/// "category primary=0|1 impact_ms=X.XX impact_pct=X confidence=X.X suggestions=N uncertain=0|1".
std::string findings_digest(const Analysis& a);

/// True when a range name is treated as a model layer (see docs/analysis.md, "Layers"): it carries the
/// attribute layer=1, or it has no attributes and looks like a dotted module path ("transformer.h.3.attn").
bool looks_like_module_path(std::string_view name);

}  // namespace inferscope::analyze

// What the Markdown and HTML reports say about a generation loop (analyze::GenerationLoop): one summary sentence,
// the per-phase table (prefill, decode; a table of detail_tables.hpp) and the notes, as plain text that each writer
// escapes and lays out.
#pragma once

#include "analyze/analysis.hpp"
#include "report/detail_tables.hpp"

#include <string>
#include <vector>

namespace inferscope::report {

struct GenerationText {
  /// The summary: lead + the per-token call's name (a code span in the reports) + rest: tokens per step, TTFT,
  /// TPOT, tokens/s.
  std::string lead, token_function, rest;
  DetailTable phases;  ///< prefill, decode
  std::vector<std::string> notes;
};

/// The text of a detected loop (callers check g.detected).
GenerationText generation_text(const analyze::GenerationLoop& g);

/// The first screen's line: "32 tokens per step: time to first token 3.656 ms, per output token 4.116 ms (p90
/// 4.437), 244.5 tokens/s per sequence" (callers check g.detected).
std::string generation_headline(const analyze::GenerationLoop& g);

}  // namespace inferscope::report

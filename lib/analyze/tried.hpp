// Stage "tried": what `iscope-run --try` measured on this program (docs/try.md), read from its result file beside
// the dump, and attached to the suggestions its knobs apply: a suggestion's predicted saving then stands beside
// the saving measured on the program itself.
//
//   std::vector<TryResult> tried = read_try_results(dump_path, warnings);
//   attach_try_results(findings, tried);
//
// The result file of a dump `run.iscope` is `run.try.json`; a dump --try itself wrote (`run.try/base.1.iscope`)
// has the same one. A result that refused, or a file that does not parse, attaches nothing (the latter says so).
#pragma once

#include "analyze/analysis.hpp"

#include <string>
#include <utility>
#include <vector>

namespace inferscope::analyze::detail {

struct TryResult {
  std::vector<std::pair<std::string, std::string>> knobs;  ///< (name, value) as tried
  TryMeasurement measured;
};

/// The --try results that belong to the dump at `dump_path` (none when there is no result file, or it refused);
/// a result file that cannot be read adds a warning naming it and the field.
std::vector<TryResult> read_try_results(const std::string& dump_path, std::vector<std::string>& warnings);

/// Each suggestion whose try_knob names a knob a result tried gets that result's measurement.
void attach_try_results(std::vector<Finding>& findings, const std::vector<TryResult>& tried);

}  // namespace inferscope::analyze::detail

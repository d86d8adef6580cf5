// What `iscope-run --try` reads of each process's dump (try_run.hpp's MeasureDump): its steady steps, as
// iscope-analyze finds them, the program facts that say whether a knob applies, the "inferscope.try" marks that say
// a Python knob took effect, and the report's predicted saving for the knob tried.
#pragma once

#include "try_run.hpp"

#include <string>

namespace iscope_run {

/// The step found as iscope-analyze finds it; `knob`: the tried knob's name, whose suggestion's predicted saving is
/// taken (Suggestion::try_knob "num_workers=4").
Measured measure_dump(const std::string& dump, const std::string& knob);

}  // namespace iscope_run

// Chrome trace-event documents as the dump's records: torch.profiler (Kineto) exports and InferScope's own
// --perfetto output (docs/analysis.md, "Inputs: torch.profiler traces"; chrome_trace.cpp maps each category).
#pragma once

#include "import/warnings.hpp"

#include <string>
#include <vector>

namespace boost::json {
class object;
class value;
}  // namespace boost::json

namespace inferscope::dump {
class DumpBuilder;
}  // namespace inferscope::dump

namespace inferscope::import {

/// True for a Chrome trace-event document: an object with "traceEvents", or with the members torch.profiler
/// writes beside them ("schemaVersion", "deviceProperties", "baseTimeNanoseconds").
bool is_chrome_trace(const boost::json::value& root);

/// Adds a torch.profiler (Kineto) Chrome trace, or an InferScope Perfetto export, read from `path`, to `b`; process
/// info "source_format" says which ("kineto" or "perfetto"). What the trace does not record and what was skipped
/// are appended to `warnings`. Throws InputError naming the file, the event index and the field.
void chrome_trace_to_records(const std::string& path, const boost::json::object& root, dump::DumpBuilder& b,
                             std::vector<ImportWarning>& warnings);

}  // namespace inferscope::import

// Chrome-trace inputs: torch.profiler (Kineto) exports and InferScope's own --perfetto output, converted into
// a dump so that one analyzer serves every input (docs/analysis.md, "Inputs: torch.profiler traces").
//
//   analyze::TraceText t = analyze::read_trace_text("trace.json.gz");   // gunzipped when it starts 1f 8b
//   json::value root = json::parse(t.text);
//   if (analyze::is_chrome_trace(root)) analyze::chrome_trace_to_dump(path, root.as_object(), tmp, warnings);
#pragma once

#include <string>
#include <vector>

namespace boost::json {
class object;
class value;
}  // namespace boost::json

namespace inferscope::analyze {

/// The bytes of a trace file, gunzipped when the file starts with the gzip magic (1f 8b), whatever its name.
struct TraceText {
  std::string text;
  bool gzipped = false;
};

/// Reads `path` whole. Throws InputError naming the file (and the compressed byte offset) when it cannot be
/// read, or when it starts like gzip but is not a whole, valid gzip stream.
TraceText read_trace_text(const std::string& path);

/// True for a Chrome trace-event document: an object with "traceEvents", or with the members torch.profiler
/// writes beside them ("schemaVersion", "deviceProperties", "baseTimeNanoseconds").
bool is_chrome_trace(const boost::json::value& root);

/// Converts a torch.profiler (Kineto) Chrome trace, or an InferScope Perfetto export, into a dump at
/// `dump_path`; process info "source_format" says which ("kineto" or "perfetto"). What the trace does not
/// record and what was skipped are appended to `warnings`. Throws InputError naming the file, the event index
/// and the field.
void chrome_trace_to_dump(const std::string& path, const boost::json::object& root, const std::string& dump_path,
                          std::vector<std::string>& warnings);

}  // namespace inferscope::analyze

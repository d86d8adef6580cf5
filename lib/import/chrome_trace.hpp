// Chrome trace-event documents as the dump's records: torch.profiler (Kineto) exports and InferScope's own
// --perfetto output (docs/analysis.md, "Inputs: torch.profiler traces"; chrome_trace.cpp maps each category).
#pragma once

#include "import/warnings.hpp"

#include <cstdint>
#include <memory>
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

/// True for the top-level members of a Chrome trace-event document: "traceEvents", or the members torch.profiler
/// writes beside them ("schemaVersion", "deviceProperties", "baseTimeNanoseconds").
bool is_chrome_trace(const boost::json::object& members);

/// A torch.profiler (Kineto) Chrome trace, or an InferScope Perfetto export, read event by event as it streams
/// (json_stream.hpp), then added to a dump builder; process info "source_format" says which ("kineto" or
/// "perfetto"). What it keeps per event is what the records need (docs/reliability.md, "Memory bounds").
class ChromeTraceReader {
 public:
  /// `members`: the document's top-level members read before its traceEvents (InferScope's export puts otherData,
  /// which names it, first).
  ChromeTraceReader(const std::string& path, const boost::json::object& members);
  ~ChromeTraceReader();
  /// One element of traceEvents. Throws InputError naming the file, the event index and the field.
  void event(const boost::json::value& e, uint64_t index);
  /// The records, once every event was read; `members`: all of the document's top-level members. What the trace
  /// does not record and what was skipped are appended to `warnings`.
  void finish(const boost::json::object& members, dump::DumpBuilder& b, std::vector<ImportWarning>& warnings);

 private:
  class Converter;
  std::unique_ptr<Converter> c_;
  uint64_t events_ = 0;
};

}  // namespace inferscope::import

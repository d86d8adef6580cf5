// The importers: a trace recorded by another tool turned into the dump's records, in memory, so that the
// analyzer and the exporters read records whatever their origin. Two inputs besides InferScope's own dumps:
// the seeds' JSON event list (json_events.hpp) and Chrome trace-event documents, torch.profiler's (Kineto) and
// InferScope's own --perfetto export (chrome_trace.hpp), each gzipped or not (trace_text.hpp). What an importer
// could not carry over is a typed warning (warnings.hpp).
//
//   import::Input in = import::open_input("trace.json.gz");    // a dump is read from its file, a trace imported
//   analyze::Analysis a = analyze::analyze_dump(*in.reader, options);
//   for (auto& w : in.warnings) std::cerr << import::message(w, "trace.json.gz") << "\n";
#pragma once

#include "dump/reader.hpp"
#include "import/warnings.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace inferscope::import {

/// A bad input that yields no analysis at all: the message names the file and the offset/line/field.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class InputFormat { kDump, kJsonTrace };

/// The format of `path` by content: INFSCOPE magic is a dump; '{' or '[' (after a BOM and blanks), or the gzip
/// magic 1f 8b, a JSON trace (the seeds' events, or a Chrome trace: torch.profiler or InferScope's Perfetto
/// export). Throws InputError naming the file when it cannot be read, is empty, or is neither.
InputFormat input_format(const std::string& path);

/// A JSON trace imported: the bytes of the dump it became (as dump::DumpBuilder writes a file) and what the
/// importer could not carry over.
struct ImportedTrace {
  std::string dump;
  std::vector<ImportWarning> warnings;
};

/// Reads the JSON trace at `path` (gzipped or not) and imports it. Throws InputError naming the file and the
/// event index and field, or the line and column of a syntax error.
ImportedTrace import_json_trace(const std::string& path);

/// An input opened for reading records: a dump read from its file, or a JSON trace imported into a dump held in
/// memory (its reader is named `path`, so every message names the file the user gave).
struct Input {
  std::unique_ptr<dump::DumpReader> reader;
  InputFormat format = InputFormat::kDump;
  std::vector<ImportWarning> warnings;  ///< the importer's; empty for a dump
};

/// Opens `path` by its content. Throws InputError, or dump::DumpError for a dump that cannot be read at all.
Input open_input(const std::string& path);

}  // namespace inferscope::import

#include "import/import.hpp"

#include "dump/builder.hpp"
#include "dump/files.hpp"
#include "import/chrome_trace.hpp"
#include "import/json_events.hpp"
#include "import/json_stream.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

namespace inferscope::import {
namespace json = boost::json;

namespace {

// The importer the document's event array calls for: a Chrome trace under "traceEvents", the seeds' events under
// "events" or as a bare array.
class Importers : public EventSink {
 public:
  explicit Importers(const std::string& path) : path_(path) {}
  void begin_events(const std::string& key, const json::object& members) override {
    if (key == "traceEvents") chrome_.emplace(path_, members);
    else events_.emplace(path_);
  }
  // An event the importer refuses is said once the whole text is parsed, so that a syntax error anywhere is what a
  // broken file is reported for, as when the document was parsed whole before anything was converted.
  void event(const json::value& e, uint64_t index) override {
    if (refused_) return;
    try {
      if (chrome_) chrome_->event(e, index);
      else events_->event(e, index);
    } catch (const InputError& err) {
      refused_ = err.what();
    }
  }
  std::optional<ChromeTraceReader> chrome_;
  std::optional<JsonEventsReader> events_;
  std::optional<std::string> refused_;

 private:
  const std::string& path_;
};

// InferScope's own JSON report or comparison (iscope-analyze --json, iscope-diff --json): its "events" is a count.
bool is_inferscope_report(const json::object& members) {
  return members.contains("schema_version") &&
         (members.contains("findings") || members.contains("breakdown") || members.contains("before"));
}

// Why a document with no event array cannot be analysed, by what it holds instead.
[[noreturn]] void no_event_array(const std::string& path, const StreamedDocument& doc) {
  const json::object& m = doc.members;
  if (is_inferscope_report(m))
    throw InputError(path + ": an InferScope JSON report (written by iscope-analyze or iscope-diff), not a trace: analyse "
                     "the dump or the trace it was made from" +
                     (m.contains("source") && m.at("source").is_string()
                          ? " (its \"source\": " + std::string(m.at("source").as_string()) + ")"
                          : std::string()));
  if (m.contains("traceEvents")) throw InputError(path + ": field 'traceEvents' is not an array");
  if (is_chrome_trace(m))
    throw InputError(path + ": a Chrome trace (torch.profiler export) without a \"traceEvents\" array: nothing to analyse");
  if (m.contains("events")) throw InputError(path + ": \"events\" is not an array");
  throw InputError(path + ": a JSON object without an \"events\" array (expected {\"events\": [...]} or a bare array)");
}

}  // namespace

ImportedTrace import_json_trace(const std::string& path) {
  ImportedTrace t;
  Importers importers(path);
  const StreamedDocument doc = stream_json_trace(path, importers);
  if (!doc.has_events) no_event_array(path, doc);
  if (importers.refused_) throw InputError(*importers.refused_);
  dump::DumpBuilder b{dump::DumpBuilder::InMemory{}};
  if (importers.chrome_) importers.chrome_->finish(doc.members, b, t.warnings);
  else importers.events_->finish(b, t.warnings);
  b.finish();
  t.dump = b.take_bytes();
  return t;
}

InputFormat input_format(const std::string& path) {
  // stat() first: a directory would read as an empty file, and opening a FIFO would wait for a writer.
  if (auto why = dump::not_a_regular_file(path)) throw InputError(*why);
  char head[64] = {};
  size_t got = 0;
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw InputError(path + ": cannot open: " + std::strerror(errno));
    f.read(head, sizeof(head));
    got = size_t(f.gcount());
  }
  if (got == 0) throw InputError(path + ": empty file (0 bytes): neither an InferScope dump nor a JSON trace");
  if (got >= 8 && std::memcmp(head, dump::kMagic, 8) == 0) return InputFormat::kDump;
  if (got >= 2 && (unsigned char)head[0] == 0x1f && (unsigned char)head[1] == 0x8b) return InputFormat::kJsonTrace;  // gzip
  size_t i = 0;
  if (got >= 3 && (unsigned char)head[0] == 0xef && (unsigned char)head[1] == 0xbb && (unsigned char)head[2] == 0xbf) i = 3;
  while (i < got && std::isspace(static_cast<unsigned char>(head[i]))) ++i;
  if (i < got && (head[i] == '{' || head[i] == '[')) return InputFormat::kJsonTrace;
  std::string shown;
  for (size_t k = 0; k < std::min<size_t>(got, 8); ++k)
    shown += std::isprint(static_cast<unsigned char>(head[k])) ? head[k] : '.';
  throw InputError(path + ": offset 0: not an InferScope dump (no INFSCOPE magic) and not a JSON trace (no '{' or '[', no gzip magic); "
                   "the file starts with \"" + shown + "\"");
}

Input open_input(const std::string& path) {
  Input in;
  in.format = input_format(path);
  if (in.format == InputFormat::kDump) {
    in.reader = std::make_unique<dump::DumpReader>(path);
    return in;
  }
  ImportedTrace t = import_json_trace(path);
  in.warnings = std::move(t.warnings);
  in.reader = std::make_unique<dump::DumpReader>(dump::DumpReader::InMemory{path, std::move(t.dump)});
  return in;
}

}  // namespace inferscope::import

#include "import/import.hpp"

#include "dump/builder.hpp"
#include "dump/files.hpp"
#include "import/chrome_trace.hpp"
#include "import/json_events.hpp"
#include "import/trace_text.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace inferscope::import {
namespace json = boost::json;

namespace {

std::string where(const std::string& text, size_t off) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < off && i < text.size(); ++i) {
    if (text[i] == '\n') { ++line; col = 1; }
    else ++col;
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col) + " (offset " + std::to_string(off) + ")";
}

json::value parse(const std::string& path, const TraceText& in) {
  const std::string& text = in.text;
  json::stream_parser p;
  json::error_code ec;
  size_t n = p.write(text.data(), text.size(), ec);
  if (!ec) p.finish(ec);
  if (ec)
    throw InputError(path + ": JSON syntax error at " + where(text, std::min(n, text.size())) +
                     (in.gzipped ? " of the gunzipped text" : "") + ": " + ec.message() +
                     (n >= text.size() ? " (the text ends there: is the file cut short?)" : ""));
  return p.release();
}

}  // namespace

ImportedTrace import_json_trace(const std::string& path) {
  ImportedTrace t;
  const json::value root = parse(path, read_trace_text(path));
  dump::DumpBuilder b{dump::DumpBuilder::InMemory{}};
  if (is_chrome_trace(root)) {
    chrome_trace_to_records(path, root.as_object(), b, t.warnings);
  } else {
    b.process("source", path);
    b.process("source_format", "json");
    json_events_to_records(path, root, b, t.warnings);
  }
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

// Chrome-trace inputs: torch.profiler (Kineto) exports and InferScope's own --perfetto output, converted into
// a dump so that one analyzer serves every input (docs/analysis.md, "Inputs: torch.profiler traces").
//
//   analyze::TraceText t = analyze::read_trace_text("trace.json.gz");   // gunzipped when it starts 1f 8b
//   json::value root = json::parse(t.text);
//   if (analyze::is_chrome_trace(root)) analyze::chrome_trace_to_dump(path, root.as_object(), tmp, warnings);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace boost::json {
class object;
class value;
}  // namespace boost::json

namespace inferscope::analyze {

/// The most a gzip input may expand to: kGunzipMaxRatio times its compressed size, or kGunzipFloorBytes when that
/// is larger. gzip reaches about 1000:1 on repetitive data, so a 1 MB file could ask for 1 GB of text (and the
/// JSON parsed from it several times that); real torch.profiler traces compress 10-20:1, and any trace up to
/// 256 MiB uncompressed is read whatever its ratio. Beyond, the file is refused with the limit named: gunzip it
/// and analyse the JSON, whose memory is then bounded by its own size (docs/reliability.md).
inline constexpr uint64_t kGunzipMaxRatio = 64;
inline constexpr uint64_t kGunzipFloorBytes = uint64_t(256) << 20;
inline constexpr uint64_t gunzip_limit(uint64_t compressed_bytes) {
  return compressed_bytes > kGunzipFloorBytes / kGunzipMaxRatio ? compressed_bytes * kGunzipMaxRatio : kGunzipFloorBytes;
}

/// The bytes of a trace file, gunzipped when the file starts with the gzip magic (1f 8b), whatever its name.
struct TraceText {
  std::string text;
  bool gzipped = false;
};

/// Reads `path` whole. Throws InputError naming the file (and the compressed byte offset) when it cannot be
/// read, when it starts like gzip but is not a whole, valid gzip stream, or when it expands beyond
/// gunzip_limit() of its size.
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

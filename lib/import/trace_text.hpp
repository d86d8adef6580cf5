// The bytes of a trace file as text: gunzipped when the file starts with the gzip magic (1f 8b), whatever its
// name, within a bound on how far it may expand; a UTF-8 byte-order mark dropped.
//
//   import::TraceText t = import::read_trace_text("trace.json.gz");
#pragma once

#include <cstdint>
#include <string>

namespace inferscope::import {

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

}  // namespace inferscope::import

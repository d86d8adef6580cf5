// The bytes of a trace file as text, read in pieces: gunzipped on the fly when the file starts with the gzip magic
// (1f 8b), whatever its name, within a bound on how far it may expand; a UTF-8 byte-order mark dropped. The text is
// never held whole: the JSON reader (json_stream.hpp) parses each piece as it comes.
//
//   import::TraceTextSource src("trace.json.gz");
//   std::string_view piece;
//   while (src.next(piece)) parse(piece);
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace inferscope::import {

/// The most a gzip input may expand to: kGunzipMaxRatio times its compressed size, or kGunzipFloorBytes when that
/// is larger. gzip reaches about 1000:1 on repetitive data; real torch.profiler traces compress 10-20:1, and any
/// trace up to 256 MiB uncompressed is read whatever its ratio. Beyond, the file is refused with the limit named.
/// Memory does not depend on it (the text is parsed as it is inflated): it bounds the time spent on a hostile file.
inline constexpr uint64_t kGunzipMaxRatio = 64;
inline constexpr uint64_t kGunzipFloorBytes = uint64_t(256) << 20;
inline constexpr uint64_t gunzip_limit(uint64_t compressed_bytes) {
  return compressed_bytes > kGunzipFloorBytes / kGunzipMaxRatio ? compressed_bytes * kGunzipMaxRatio : kGunzipFloorBytes;
}

/// Reads a trace file's text piece by piece (at most kPieceBytes each; the file's own buffer and zlib's beside it).
class TraceTextSource {
 public:
  static constexpr size_t kPieceBytes = size_t(1) << 20;

  /// Opens `path`; throws InputError naming it when it cannot be opened.
  explicit TraceTextSource(const std::string& path);
  ~TraceTextSource();
  TraceTextSource(const TraceTextSource&) = delete;
  TraceTextSource& operator=(const TraceTextSource&) = delete;

  /// The next piece of text, valid until the next call; false at the end. Throws InputError naming the file (and
  /// the compressed byte offset) when it cannot be read, when it starts like gzip but is not a whole, valid gzip
  /// stream, when it expands beyond gunzip_limit() of its size, or when it is a gzip-compressed InferScope dump.
  bool next(std::string_view& piece);
  bool gzipped() const { return gzipped_; }

 private:
  bool read_raw();                      // the next bytes of the file into raw_; false at its end
  bool next_plain(std::string_view& piece);
  bool next_gunzipped(std::string_view& piece);
  void check_first_text(std::string_view piece);

  std::string path_;
  std::ifstream file_;
  uint64_t file_size_ = 0, file_read_ = 0;
  std::vector<char> raw_;   // bytes of the file not yet used
  size_t raw_at_ = 0, raw_end_ = 0;
  std::vector<char> text_;  // inflated text of the current piece
  struct Inflate;
  std::unique_ptr<Inflate> z_;
  bool gzipped_ = false, started_ = false, finished_ = false;
  uint64_t produced_ = 0;  // text bytes handed out so far
};

}  // namespace inferscope::import

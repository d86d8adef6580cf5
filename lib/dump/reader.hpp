// The one dump reader every tool uses. Opening a dump walks the chunk headers once (checking both CRCs),
// loads the metadata (strings, threads, calibration, drops, code table, process info) and indexes the
// event chunks; records are then visited straight from the memory-mapped file, so memory stays bounded
// whatever the dump's size.
//
//   dump::DumpReader r("run.iscope");
//   r.for_each_record([&](uint32_t thread, const RecordHeader& h, const uint8_t* rec) { ... });
//   if (r.damage()) std::cerr << r.damage()->message;   // cut short or corrupt: data up to there is valid
#pragma once

#include <inferscope/records.hpp>

#include "dump/format.hpp"

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace inferscope::dump {

struct ThreadInfo {
  uint32_t id = 0;
  uint32_t os_tid = 0;
  uint32_t pid = 0;
  std::string name;
  uint64_t first_ts = 0;
  uint64_t end_ts = 0;
  uint32_t flags = 0;
  bool is_channel() const { return flags & kThreadChannel; }
};

struct DropInfo {
  uint32_t thread_id = kNoThread;
  std::string reason;
  uint64_t records = 0;
  uint64_t bytes = 0;
};

struct CodeInfo {
  std::string qualname;
  std::string file;
  uint32_t line = 0;
};

struct EventsChunkRef {
  uint64_t offset = 0;  ///< file offset of the first record
  uint64_t length = 0;  ///< bytes of records
  uint32_t count = 0;   ///< records (pads not counted)
  uint32_t thread_id = 0;
};

/// Why reading stopped before the end of the file.
struct Damage {
  uint64_t offset = 0;      ///< where the first bad or incomplete chunk starts
  uint64_t bytes_lost = 0;  ///< bytes from there to the end of the file
  std::string message;      ///< names the file, the offset and what was wrong
  bool truncated = false;   ///< the file simply ends early (a crash); false: the bytes are corrupt
};

struct Attr {
  std::string key;
  AttrType type = AttrType::kNone;
  int64_t i = 0;
  double d = 0;
  std::string s;
};

/// How many threads reading a dump may use: `asked` when non-zero, else the environment variable
/// INFERSCOPE_ANALYZE_THREADS when set to a positive number, else the machine's hardware threads capped at 32.
/// The analysis result never depends on it (docs/analysis.md, "Speed and memory").
unsigned worker_threads(unsigned asked = 0);

/// Copies a packed record out of the mapped file.
template <class T>
inline T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

class DumpReader {
 public:
  /// Throws DumpError for a file that cannot be read at all: missing, empty, not a dump, unknown version.
  explicit DumpReader(const std::string& path);
  ~DumpReader();
  DumpReader(const DumpReader&) = delete;
  DumpReader& operator=(const DumpReader&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  uint16_t version_major() const { return major_; }
  uint16_t version_minor() const { return minor_; }
  bool is_ring_snapshot() const { return file_flags_ & 1u; }

  const std::vector<std::pair<std::string, std::string>>& process_info() const { return process_; }
  std::string process_value(const std::string& key) const;
  const std::vector<std::pair<std::string, std::string>>& collector_status() const { return status_; }

  /// The string with this id; "<string N>" when the dump does not hold it (a damaged dump).
  std::string string_at(uint32_t id) const;
  bool has_string(uint32_t id) const { return id < strings_.size() && has_string_[id]; }
  size_t string_count() const { return strings_.size(); }

  const std::map<uint32_t, ThreadInfo>& threads() const { return threads_; }
  const std::vector<CalibrationPoint>& calibration() const { return calibration_; }
  /// The latest cumulative count per (thread, reason).
  std::vector<DropInfo> drops() const;
  uint64_t total_dropped_records() const;
  const std::unordered_map<uint32_t, CodeInfo>& code_table() const { return code_; }
  const std::vector<EventsChunkRef>& event_chunks() const { return events_; }
  uint64_t record_count() const { return record_count_; }

  /// True when the END chunk was read: the session stopped cleanly and nothing is missing.
  bool complete() const { return end_.has_value(); }
  const std::optional<EndEntry>& end() const { return end_; }
  const std::optional<Damage>& damage() const { return damage_; }

  /// Visits every record in file order: f(thread_id, header, record_bytes). Pads and kinds this reader
  /// does not know are skipped; a malformed record throws DumpError naming its offset.
  template <class F>
  void for_each_record(F&& f) const {
    for (const auto& c : events_) for_each_record_in(c, f);
  }

  template <class F>
  void for_each_record_in(const EventsChunkRef& c, F&& f) const {
    const uint8_t* p = base_ + c.offset;
    const uint8_t* end = p + c.length;
    while (p < end) {
      if (end - p < static_cast<ptrdiff_t>(sizeof(RecordHeader))) bad_record(p, "a record header runs past its chunk");
      RecordHeader h = load<RecordHeader>(p);
      if (h.size < sizeof(RecordHeader) || h.size > end - p) bad_record(p, "record size out of bounds");
      uint16_t fixed = fixed_record_size(h.kind);
      if (fixed != 0 && h.size < fixed) bad_record(p, "record shorter than its kind");
      if (fixed != 0 && h.kind != RecordKind::kPad) f(c.thread_id, h, p);
      p += h.size;
    }
  }

  /// The attributes trailing a Range, Mark or AsyncRange record (empty when it has none).
  std::vector<Attr> attributes(const uint8_t* record) const;

 private:
  [[noreturn]] void bad_record(const uint8_t* p, const char* what) const;
  void parse_chunk(const ChunkHeader& h, const uint8_t* payload, uint64_t payload_offset);

  std::string path_;
  int fd_ = -1;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint16_t major_ = 0, minor_ = 0;
  uint32_t file_flags_ = 0;
  std::vector<std::pair<std::string, std::string>> process_;
  std::vector<std::pair<std::string, std::string>> status_;
  std::vector<std::string> strings_;
  std::vector<bool> has_string_;
  std::map<uint32_t, ThreadInfo> threads_;
  std::vector<CalibrationPoint> calibration_;
  std::map<std::pair<uint32_t, uint32_t>, DropEntry> drops_;
  std::unordered_map<uint32_t, CodeInfo> code_;
  std::vector<EventsChunkRef> events_;
  uint64_t record_count_ = 0;
  std::optional<EndEntry> end_;
  std::optional<Damage> damage_;
};

}  // namespace inferscope::dump

// The one dump reader every tool uses. Opening a dump walks the chunk headers once (checking both CRCs),
// loads the metadata (strings, threads, calibration, drops, code table, process info) and indexes the
// event chunks; records are then read through a window of about 1 MiB per visiting thread (pread), so memory
// stays bounded whatever the dump's size, and a file cut short or replaced while it is read gives a DumpError
// naming the offset, never a crash (no mapping: see RecordCursor in reader.cpp for why).
//
// Every id the reader hands out is bounded by what the file declares: string and code-table ids by the
// entries of their tables, thread ids by the threads the file names (renumbered 1..N when they run far
// beyond that), Python code ids in records by the code table (a record beyond it is malformed). So no table
// a caller sizes by an id can grow past what the file's bytes justify.
//
//   dump::DumpReader r("run.iscope");
//   dump::visit_records(r, visitor);   // typed records, one handler per kind (visit.hpp)
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

/// A sampled-mode dump's windows and coverage (SAMPLING, WINDOWS and SLOW_STEPS chunks).
struct SamplingData {
  SamplingSummary summary{};
  std::vector<WindowEntry> windows;       ///< oldest first
  std::vector<SlowStepEntry> slow_steps;  ///< in the order detected
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

/// Copies a packed record out of the bytes a visitor was handed.
template <class T>
inline T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

class DumpReader;

/// Reads one EVENTS chunk's records in order through a per-thread window; the engine of visit_records
/// (visit.hpp) and for_each_record_in.
class RecordCursor {
 public:
  /// `unknown`, when given, counts the records of kinds this reader does not know that next() skips.
  RecordCursor(const DumpReader& r, const EventsChunkRef& c, uint64_t* unknown = nullptr);
  ~RecordCursor();
  RecordCursor(const RecordCursor&) = delete;
  RecordCursor& operator=(const RecordCursor&) = delete;
  /// The next record of a known kind (its header in `h`), or nullptr at the end of the chunk. Pads and
  /// unknown kinds are skipped; a malformed record throws DumpError naming its file offset.
  const uint8_t* next(RecordHeader& h);
  /// File offset of a byte of the current window (for error messages).
  uint64_t offset_of(const uint8_t* p) const { return c_.offset + win_ + uint64_t(p - buf_); }
  bool holds(const uint8_t* p) const { return p >= buf_ && p < buf_ + have_; }

 private:
  void fill(size_t need);
  void check_ids(const RecordHeader& h, uint8_t* rec);
  [[noreturn]] void bad(uint64_t chunk_off, const std::string& what) const;

  const DumpReader& r_;
  const EventsChunkRef& c_;
  uint8_t* buf_ = nullptr;
  size_t have_ = 0;    ///< valid bytes in buf_
  uint64_t win_ = 0;   ///< chunk offset of buf_[0]
  uint64_t next_ = 0;  ///< chunk offset of the next record
  uint64_t* unknown_ = nullptr;
  RecordCursor* outer_ = nullptr;
};

class DumpReader {
 public:
  /// Throws DumpError for a file that cannot be read at all: missing, not a regular file (said without
  /// blocking on a FIFO), empty, not a dump, unknown version.
  explicit DumpReader(const std::string& path);
  /// A dump held in memory (an importer's, lib/import), named `name` in every message: the file it came from.
  struct InMemory {
    std::string name;
    std::string bytes;
  };
  /// Reads `in.bytes` as the file holding them would be read; throws DumpError as the file constructor does.
  explicit DumpReader(InMemory in);
  ~DumpReader();
  DumpReader(const DumpReader&) = delete;
  DumpReader& operator=(const DumpReader&) = delete;

  const std::string& path() const { return path_; }
  /// False for a dump read from memory: no file on disk is it, and none beside it belongs to it.
  bool is_file() const { return !in_memory_; }
  uint64_t file_size() const { return size_; }
  uint16_t version_major() const { return major_; }
  uint16_t version_minor() const { return minor_; }
  bool is_ring_snapshot() const { return file_flags_ & kFileRingSnapshot; }
  /// A sampled-mode dump (its SAMPLING/WINDOWS chunks were read): events only inside its windows.
  bool is_sampled() const { return sampling_.has_value(); }
  const std::optional<SamplingData>& sampling() const { return sampling_; }

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
  /// Chunks whose checksums hold but whose contents contradict their header (a 2-byte EVENTS chunk, a STRINGS
  /// count above its entries, a table that is not a whole number of entries), one message each naming the file
  /// and offset: each was skipped from the contradiction on, and every other chunk was read. The dump is corrupt
  /// (an analysis of it is partial), not unreadable.
  const std::vector<std::string>& skipped_chunks() const { return skipped_chunks_; }

  /// Visits every record in file order as bytes: f(thread_id, header, record_bytes). Pads and kinds this
  /// reader does not know are skipped; a malformed record throws DumpError naming its offset. Readers of
  /// record contents use visit_records (visit.hpp), which decodes them; this is for counting and copying.
  template <class F>
  void for_each_record(F&& f) const {
    for (const auto& c : events_) for_each_record_in(c, f);
  }

  /// The record pointer is valid during the call only.
  template <class F>
  void for_each_record_in(const EventsChunkRef& c, F&& f) const {
    RecordCursor cursor(*this, c);
    RecordHeader h;
    while (const uint8_t* p = cursor.next(h)) f(c.thread_id, h, p);
  }

  /// The attributes trailing a Range, Mark or AsyncRange record (empty when it has none); `record` is one a
  /// visitor was handed.
  std::vector<Attr> attributes(const uint8_t* record) const;

  /// Python code ids a record may use: 1..code_id_bound() (0: none).
  uint32_t code_id_bound() const { return code_bound_; }
  /// Renumbered thread id for one a record names (async ranges, thread counters); `id` itself when the dump's
  /// ids were not renumbered, kNoThread when the file does not name that thread.
  uint32_t thread_id_of(uint32_t id) const;
  /// What the reader left out or renumbered because an id ran beyond what the file declares (one line each).
  const std::vector<std::string>& id_warnings() const { return id_warnings_; }
  /// Reads `n` bytes at `offset`; throws DumpError naming the offset when the file now ends before them
  /// (it was cut short or replaced after it was opened).
  void read_at(uint64_t offset, void* out, size_t n) const;

 private:
  friend class RecordCursor;
  struct Walked {
    uint64_t off;
    ChunkHeader h;
  };
  struct Declared {  // entries the valid chunks' headers announce
    uint64_t strings = 0, code = 0, threads = 0;
  };
  void open_regular();
  void read_contents();  // header, chunks, tables: what both constructors do once the bytes can be read
  [[noreturn]] void fail(const std::string& msg, uint64_t off);
  void skip_chunk(uint64_t where, const std::string& what);
  void read_header();
  std::vector<Walked> walk_chunks();
  size_t first_bad_payload(const std::vector<Walked>& walked) const;
  void parse_valid(const std::vector<Walked>& walked, size_t first_bad);
  void parse_chunk(const ChunkHeader& h, const uint8_t* payload, uint64_t payload_offset);
  void parse_strings(const ChunkHeader& h, const uint8_t* p, uint64_t off);
  void parse_sampling(const ChunkHeader& h, const uint8_t* p, uint64_t off);
  void adopt_tables(const std::vector<CodeEntry>& code, const std::vector<ThreadEntry>& threads);
  void renumber_threads_if_needed();
  void damaged(uint64_t where, const std::string& what, bool truncated);
  [[noreturn]] void bad_record(const uint8_t* p, const char* what) const;

  std::string path_;
  int fd_ = -1;
  std::string memory_;  ///< the dump's bytes, when read from memory
  bool in_memory_ = false;
  uint64_t size_ = 0;
  Declared declared_;
  uint32_t code_bound_ = 0;
  uint64_t strings_skipped_ = 0;
  std::vector<uint32_t> thread_ids_;  ///< original ids, sorted, when renumbered (new id = index + 1)
  std::vector<std::string> id_warnings_;
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
  std::vector<std::string> skipped_chunks_;  // contents that contradict their header (skip_chunk)
  std::optional<SamplingData> sampling_;
};

}  // namespace inferscope::dump

namespace inferscope::dump {

/// What the file says about itself against what was found in it, for an analysis: the id warnings, and the
/// END chunk's records written and dropped compared with the records the file holds and the drops it lists.
/// Each difference becomes a warning naming the numbers; records missing from the file are added to `drops`
/// as "lost_in_file", drops the END counts beyond the listed ones as "dropped_unlisted".
void report_file_accounting(const DumpReader& r, std::vector<std::string>& warnings,
                            std::map<std::string, uint64_t>& drops);

/// The process info that opens the dump at `path` (the writer puts it first, in every mode), read without
/// walking the rest of the file: what iscope-run needs to tell its own program's dump from another process's.
/// Empty when the file is not a regular file that starts with a dump header and a whole process-info chunk.
std::optional<std::vector<std::pair<std::string, std::string>>> leading_process_info(const std::string& path);

/// Whether the dump at `path` ends with a whole END chunk (its session stopped and wrote everything before it),
/// read from the file's last bytes alone: what iscope-run checks before it says "dump written". False for anything
/// else (cut short, a torn last chunk, not a dump, not a regular file).
bool ends_with_end_chunk(const std::string& path);

}  // namespace inferscope::dump

// The InferScope dump file: a 16-byte file header, then self-describing chunks. docs/dump-format.md is the
// byte-by-byte description; this header is the one definition the writer and the reader share.
//
// File   := FileHeader Chunk*
// Chunk  := ChunkHeader payload[length]     (payload checksummed with CRC-32C; header checksummed too)
//
// A dump cut short by a crash is readable up to its last whole chunk. Chunk types and the entry layouts
// inside them are append-only, like record kinds (include/inferscope/records.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferscope::dump {

inline constexpr char kMagic[8] = {'I', 'N', 'F', 'S', 'C', 'O', 'P', 'E'};
inline constexpr uint16_t kVersionMajor = 1;  ///< a reader refuses a major version it does not know
inline constexpr uint16_t kVersionMinor = 1;  ///< minor versions only append; older readers skip the new
                                              ///< (1.1: sampled mode's chunks 10-12 and file flag bit 1)

enum class ChunkType : uint32_t {
  kProcessInfo = 1,      ///< key/value list: pid, hostname, cmdline, clock, start_realtime_ns, ...
  kStrings = 2,          ///< StringEntry*: interned names (ids are process-wide; a chunk adds new ones)
  kThreads = 3,          ///< ThreadEntry*: later entries for the same id update earlier ones
  kCalibration = 4,      ///< CalibrationPoint*
  kEvents = 5,           ///< EventsHeader then records (include/inferscope/records.hpp) of one thread/channel
  kDrops = 6,            ///< DropEntry*: cumulative counts; the latest entry per (thread, reason) holds
  kCodeTable = 7,        ///< CodeEntry*: Python code objects
  kCollectorStatus = 8,  ///< key/value list: collector name -> one line on what it did or could not do
  kEnd = 9,              ///< EndEntry: the session stopped and everything before is complete
  kSampling = 10,        ///< SamplingSummary: a sampled-mode dump's coverage of the run (the latest holds)
  kWindows = 11,         ///< WindowEntry*: the windows a sampled-mode dump holds, oldest first
  kSlowSteps = 12,       ///< SlowStepEntry*: slow steps the runtime detected while sampling
};

/// FileHeader::flags bits.
enum FileFlags : uint32_t {
  kFileRingSnapshot = 1u << 0,  ///< a ring-mode (or sampled-mode) snapshot: written whole, not streamed
  kFileSampled = 1u << 1,       ///< sampled mode: events only inside the windows of the WINDOWS chunk
};

#pragma pack(push, 1)

struct FileHeader {
  char magic[8];
  uint16_t version_major;
  uint16_t version_minor;
  uint32_t flags;  ///< FileFlags
};
static_assert(sizeof(FileHeader) == 16);

struct ChunkHeader {
  uint32_t type;         ///< ChunkType
  uint32_t count;        ///< number of entries / records in the payload
  uint64_t length;       ///< payload bytes
  uint32_t payload_crc;  ///< CRC-32C of the payload
  uint32_t header_crc;   ///< CRC-32C of the 20 bytes before this field
};
static_assert(sizeof(ChunkHeader) == 24);

struct StringEntryHeader {  ///< followed by `length` bytes of UTF-8, no terminator
  uint32_t id;
  uint32_t length;
};

enum ThreadFlags : uint32_t {
  kThreadChannel = 1u << 0,  ///< not an OS thread: a collector's channel (GPU activity, samples)
  kThreadExited = 1u << 1,
};

struct ThreadEntry {
  uint32_t thread_id;  ///< dump thread id, referenced by EventsHeader and records
  uint32_t os_tid;
  uint32_t pid;
  uint32_t name;       ///< string id, 0 = unnamed
  uint64_t first_ts;   ///< ticks when the thread first recorded in this session
  uint64_t end_ts;     ///< ticks when it exited (0 = still alive at the time of this entry)
  uint32_t flags;      ///< ThreadFlags
  uint32_t reserved;
};
static_assert(sizeof(ThreadEntry) == 40);

/// One reading of the session clock and the system clocks, taken as close together as the machine allows.
struct CalibrationPoint {
  uint64_t ticks;
  uint64_t monotonic_ns;
  uint64_t realtime_ns;
  uint32_t uncertainty_ns;  ///< half the CLOCK_MONOTONIC window around the tick reading
  uint32_t reserved;
};
static_assert(sizeof(CalibrationPoint) == 32);

struct EventsHeader {
  uint32_t thread_id;
  uint32_t reserved;
};
static_assert(sizeof(EventsHeader) == 8);

struct DropEntry {
  uint32_t thread_id;  ///< 0xffffffff = not thread-specific
  uint32_t reason;     ///< string id: "buffer_full", "ring_overwritten", "cupti_dropped", ...
  uint64_t records;
  uint64_t bytes;
};
static_assert(sizeof(DropEntry) == 24);

struct CodeEntry {
  uint32_t code_id;
  uint32_t qualname;  ///< string id
  uint32_t file;      ///< string id
  uint32_t line;
};
static_assert(sizeof(CodeEntry) == 16);

struct EndEntry {
  uint64_t end_ticks;
  uint64_t records_written;
  uint64_t records_dropped;
};
static_assert(sizeof(EndEntry) == 24);

/// Sampled mode: how much of the run the dump's windows cover. Counts include windows the ring dropped.
struct SamplingSummary {
  uint64_t begin_ticks;       ///< the session started
  uint64_t end_ticks;         ///< this dump was written
  uint64_t steps_seen;        ///< step ranges that ended during the session
  uint64_t steps_in_windows;  ///< of them, counted by a full-detail window
  uint64_t window_ticks;      ///< time with full detail on (closed windows, and the open one up to end_ticks)
  uint32_t windows_opened;    ///< full-detail windows opened (periodic, timed and slow-step ones)
  uint32_t windows_dropped;   ///< windows (full or light) the ring dropped, oldest first (windows_kept, budget)
  uint32_t slow_steps_seen;   ///< slow steps detected
  uint32_t slow_steps_listed; ///< of them, in the SLOW_STEPS chunk (the newest 1024)
  uint32_t step_name;         ///< string id of the step range's name
  uint32_t flags;             ///< bit 0: a step range was seen, so windows counted steps (else they were timed)
  uint64_t records_outside;   ///< records outside every kept window, not written (sampled out)
};
static_assert(sizeof(SamplingSummary) == 72);

/// Why a window was recorded (WindowEntry::reason).
enum class WindowReason : uint8_t {
  kPeriodic = 0,   ///< every window_every_steps steps
  kTimed = 1,      ///< every window_every_ms, while no step range had been seen
  kSlowStep = 2,   ///< opened after a slow step outside a window
  kNeighbours = 3, ///< light: the always-on ranges of a slow step outside a window and its neighbours
  kBaseline = 4,   ///< adaptive mode's first part: full detail from the session's start for baseline_steps steps
};

enum WindowFlags : uint8_t {
  kWindowFull = 1u << 0,    ///< full detail (collectors on); else only the always-on ranges and marks
  kWindowOpen = 1u << 1,    ///< still open when the dump was written (end_ticks is then the write time)
  kWindowPinned = 1u << 2,  ///< holds a slow step: the ring drops it after every unpinned window
  kWindowKept = 1u << 3,    ///< never dropped (adaptive mode's baseline): the steps the analysis reads
};

struct WindowEntry {
  uint64_t begin_ticks;  ///< detail on (light: the first neighbour's start)
  uint64_t end_ticks;    ///< detail off (open: when the dump was written)
  uint64_t first_step;   ///< index of the first step it counted (steps since the session started, from 0)
  uint32_t index;        ///< window number since the session started, from 1
  uint32_t steps;        ///< steps it counted (wholly inside it)
  uint32_t slow_steps;   ///< slow steps among them
  uint8_t reason;        ///< WindowReason
  uint8_t flags;         ///< WindowFlags
  uint16_t reserved;
  uint64_t records;      ///< records it holds
};
static_assert(sizeof(WindowEntry) == 48);

struct SlowStepEntry {
  uint64_t start_ticks;
  uint64_t end_ticks;
  uint64_t step;        ///< index since the session started, from 0
  uint32_t thread_id;   ///< dump thread id of the step range
  uint32_t window;      ///< WindowEntry::index of the window holding its records; 0: none kept
  uint32_t bound_us;    ///< the threshold it exceeded (µs)
  uint32_t flags;       ///< bit 0: recorded in full detail (in a full window); else only its ranges
};
static_assert(sizeof(SlowStepEntry) == 40);

#pragma pack(pop)

inline constexpr uint32_t kNoThread = 0xffffffffu;

/// Anything wrong with a dump: the message names the file and the byte offset.
class DumpError : public std::runtime_error {
 public:
  DumpError(const std::string& what, uint64_t offset) : std::runtime_error(what), offset_(offset) {}
  uint64_t offset() const { return offset_; }

 private:
  uint64_t offset_;
};

/// CRC-32C (Castagnoli), hardware-accelerated where the CPU has SSE4.2.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

/// Serialization helpers shared by the runtime's writer and by tests that build dumps by hand.
class ChunkBuilder {
 public:
  explicit ChunkBuilder(ChunkType type) : type_(type) {}
  void append(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    payload_.insert(payload_.end(), b, b + n);
  }
  template <class T>
  void add(const T& entry) {
    append(&entry, sizeof(T));
    ++count_;
  }
  void add_string(uint32_t id, std::string_view s);
  void add_key_value(std::string_view key, std::string_view value);
  void add_count(uint32_t n) { count_ += n; }
  bool empty() const { return payload_.empty(); }
  uint32_t count() const { return count_; }
  /// Header + payload, ready to append to a file.
  std::vector<uint8_t> finish() const;
  /// Appends header + payload to `out`.
  void finish_into(std::vector<uint8_t>& out) const;

 private:
  ChunkType type_;
  uint32_t count_ = 0;
  std::vector<uint8_t> payload_;
};

ChunkHeader make_chunk_header(ChunkType type, uint32_t count, const void* payload, size_t length);
/// The same, for a payload written in pieces whose checksum was chained over them (crc32c's `crc` argument).
ChunkHeader make_chunk_header_with_crc(ChunkType type, uint32_t count, uint64_t length, uint32_t payload_crc);
FileHeader make_file_header(uint32_t flags = 0);

/// Key/value lists (process info, collector status): per pair u16 key length, u32 value length, key bytes,
/// value bytes; the chunk header's count is the number of pairs.
std::vector<std::pair<std::string, std::string>> parse_key_values(const uint8_t* p, size_t n, uint32_t count,
                                                                  uint64_t file_offset);

}  // namespace inferscope::dump

// Sampled mode's ring of windows (docs/sampled-mode.md, "The ring"): the records the writer drains are routed by
// their time into the window whose span holds it; what falls outside every window is sampled out, except the
// always-on kinds (ranges, marks), which wait a while in a pre-roll in case a slow step's neighbours need them.
// At most `max_windows` windows (kept ones aside) and `max_bytes` of records are kept: the oldest closed window goes first (one
// holding a slow step only after every other), and what it held is counted per thread, never silent.
//
//   WindowStore store({.max_windows = 16, .max_bytes = 100 << 20});
//   store.open(entry);                            // full detail is on from entry.begin_ticks
//   store.add_events(thread, records, n);         // one drained EVENTS payload (after its EventsHeader)
//   store.close(entry.index, end);
//   store.write_events(out);                      // every kept window's records as EVENTS chunks
#pragma once

#include <inferscope/records.hpp>

#include "dump/format.hpp"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace inferscope::runtime::sampling {

/// The time that places a record in a window: a range or call's end (it is written then), an instant's time,
/// a GPU activity's or API call's start. None for pads and kinds this runtime does not know.
std::optional<uint64_t> record_time(const RecordHeader& h, const uint8_t* record);
/// Kinds recorded outside windows too (the always-on record): CPU ranges, marks and thread events.
bool is_always_on(RecordKind kind);

struct StoreOptions {
  size_t max_windows = 16;
  uint64_t max_bytes = 100ull << 20;
  uint64_t max_preroll_bytes = 4ull << 20;  ///< the pre-roll's own cap (oldest forgotten first)
  /// A kept window's own cap (adaptive mode's baseline: half of max_bytes): past it its records are refused and
  /// kept_full() says so, so the windows after it always have the rest.
  uint64_t max_kept_bytes = UINT64_MAX;
};

/// Records and bytes, as the DROPS chunk counts them.
using Counts = std::pair<uint64_t, uint64_t>;

class WindowStore {
 public:
  explicit WindowStore(const StoreOptions& options);

  /// Opens a window from entry.begin_ticks (entry.index, reason, flags, first_step set by the caller).
  /// A light window (no kWindowFull) takes the pre-roll's records from its beginning at once.
  void open(const dump::WindowEntry& entry);
  /// Closes window `index` at `end` with its step counts.
  void close(uint32_t index, uint64_t end, uint32_t steps, uint32_t slow_steps);
  /// Marks the window holding time `t` as holding a slow step (dropped last); false when no window holds it.
  bool pin_at(uint64_t t);
  /// The index of the kept window whose span holds `t` (full windows first); 0 when none.
  uint32_t window_at(uint64_t t) const;
  bool is_full(uint32_t index) const;

  /// Routes the records of one EVENTS payload (after its EventsHeader) of dump thread `thread`.
  void add_events(uint32_t thread, const uint8_t* records, size_t n);
  /// Forgets pre-roll records older than `horizon` (they are then sampled out).
  void trim_preroll(uint64_t horizon);

  /// Every kept window's records as EVENTS chunks, oldest window first, each thread's in the order written.
  void write_events(std::vector<uint8_t>& out) const;
  /// The same bytes written to `fd` with write(2) alone: no allocation, no lock, so a crash handler may call it
  /// while nothing changes the store (docs/reliability.md, "Ring mode on abnormal exits"). False on a failed write.
  bool write_events_to(int fd) const;
  /// The kept windows' entries, oldest first; an open one ends at `now` and is flagged open.
  std::vector<dump::WindowEntry> entries(uint64_t now) const;

  uint32_t windows_dropped() const { return windows_dropped_; }
  /// Per thread: records of windows the ring dropped, and records refused because the budget was full.
  const std::map<uint32_t, Counts>& dropped() const { return dropped_; }
  const std::map<uint32_t, Counts>& refused() const { return refused_; }
  uint64_t records_kept() const { return records_kept_; }
  uint64_t records_outside() const { return records_outside_; }
  uint64_t bytes() const { return bytes_; }
  /// A kept window refused a record for its own cap (max_kept_bytes): it should close.
  bool kept_full() const { return kept_full_; }
  /// The bytes of records window `index` holds (0 when it is not kept).
  uint64_t bytes_of(uint32_t index) const;
  size_t size() const { return windows_.size(); }

 private:
  struct ThreadRecords {
    std::vector<uint8_t> bytes;
    uint32_t count = 0;
  };
  struct Stored {
    dump::WindowEntry e{};
    bool open = true;
    std::map<uint32_t, ThreadRecords> threads;
    uint64_t bytes = 0;
  };
  struct Held {  // a pre-roll record
    uint64_t t;
    uint32_t thread;
    std::vector<uint8_t> bytes;
  };

  Stored* find(uint32_t index) const;
  Stored* holding(uint64_t t, bool want_full) const;
  bool append(Stored& w, uint32_t thread, const uint8_t* rec, uint16_t size);
  void route(uint32_t thread, const RecordHeader& h, const uint8_t* rec);
  Stored* oldest_closed(bool pinned, const Stored* keep) const;
  bool evict_one(const Stored* keep);
  void take_preroll(Stored& w);
  void hold(uint32_t thread, uint64_t t, const uint8_t* rec, uint16_t size);

  StoreOptions o_;
  std::deque<std::unique_ptr<Stored>> windows_;  // in the order opened (pointers stay valid while others go)
  std::deque<Held> preroll_;    // oldest first
  uint64_t preroll_bytes_ = 0;
  uint64_t bytes_ = 0, records_kept_ = 0, records_outside_ = 0;
  uint32_t windows_dropped_ = 0;
  bool kept_full_ = false;
  size_t kept_windows_ = 0;  // not counted in max_windows: the ring cannot drop them
  std::map<uint32_t, Counts> dropped_, refused_;
};

}  // namespace inferscope::runtime::sampling

#include "runtime/sampling/window_store.hpp"

#include "dump/files.hpp"

#include <algorithm>
#include <cstring>

namespace inferscope::runtime::sampling {

using dump::WindowEntry;

std::optional<uint64_t> record_time(const RecordHeader& h, const uint8_t* record) {
  size_t at = 0;
  switch (h.kind) {
    case RecordKind::kRange:
    case RecordKind::kAsyncRange:
    case RecordKind::kPyCall:
    case RecordKind::kNvtxRange:
      at = 16;  // the end: a range is written when it ends
      break;
    case RecordKind::kMark:
    case RecordKind::kThreadName:
    case RecordKind::kThreadEnd:
    case RecordKind::kNvtxMark:
    case RecordKind::kPyCoroutine:
    case RecordKind::kPyElided:
    case RecordKind::kGpuKernel:
    case RecordKind::kGpuMemcpy:
    case RecordKind::kGpuMemset:
    case RecordKind::kGpuSync:
    case RecordKind::kGpuMemory:
    case RecordKind::kCudaApi:
    case RecordKind::kGpuGraphLaunch:
    case RecordKind::kCollectorOverhead:
    case RecordKind::kClockCheck:
    case RecordKind::kCounter:
      at = 8;  // the instant, or the start of an activity or call
      break;
    default:
      return std::nullopt;
  }
  if (h.size < at + sizeof(uint64_t)) return std::nullopt;
  uint64_t t;
  std::memcpy(&t, record + at, sizeof(t));
  return t;
}

bool is_always_on(RecordKind kind) {
  switch (kind) {
    case RecordKind::kRange:
    case RecordKind::kMark:
    case RecordKind::kThreadName:
    case RecordKind::kAsyncRange:
    case RecordKind::kThreadEnd:
    case RecordKind::kNvtxRange:
    case RecordKind::kNvtxMark:
      return true;
    default:
      return false;
  }
}

WindowStore::WindowStore(const StoreOptions& options) : o_(options) {
  o_.max_windows = std::max<size_t>(o_.max_windows, 1);
}

WindowStore::Stored* WindowStore::find(uint32_t index) const {
  for (auto& w : windows_)
    if (w->e.index == index) return w.get();
  return nullptr;
}

// Newest first: records mostly belong to the window open now.
WindowStore::Stored* WindowStore::holding(uint64_t t, bool want_full) const {
  for (auto it = windows_.rbegin(); it != windows_.rend(); ++it) {
    Stored& w = **it;
    const bool full = w.e.flags & dump::kWindowFull;
    if (full == want_full && t >= w.e.begin_ticks && (w.open || t <= w.e.end_ticks)) return &w;
  }
  return nullptr;
}

uint32_t WindowStore::window_at(uint64_t t) const {
  const Stored* w = holding(t, true);
  if (!w) w = holding(t, false);
  return w ? w->e.index : 0;
}

bool WindowStore::is_full(uint32_t index) const {
  const Stored* w = find(index);
  return w && (w->e.flags & dump::kWindowFull);
}

uint64_t WindowStore::bytes_of(uint32_t index) const {
  const Stored* w = find(index);
  return w ? w->bytes : 0;
}

bool WindowStore::pin_at(uint64_t t) {
  Stored* w = holding(t, true);
  if (!w) w = holding(t, false);
  if (!w) return false;
  w->e.flags |= dump::kWindowPinned;
  return true;
}

WindowStore::Stored* WindowStore::oldest_closed(bool pinned, const Stored* keep) const {
  for (auto& w : windows_)
    if (!w->open && w.get() != keep && !(w->e.flags & dump::kWindowKept) &&
        bool(w->e.flags & dump::kWindowPinned) == pinned)
      return w.get();
  return nullptr;
}

// Drops the oldest closed window, one holding a slow step only when no other is left; never an open one, a kept
// one (adaptive mode's baseline) nor `keep`, which a record is being added to. What it held is counted per thread.
bool WindowStore::evict_one(const Stored* keep) {
  Stored* victim = oldest_closed(false, keep);
  if (!victim) victim = oldest_closed(true, keep);
  if (!victim) return false;
  for (auto& [thread, r] : victim->threads) {
    Counts& c = dropped_[thread];
    c.first += r.count;
    c.second += r.bytes.size();
    records_kept_ -= r.count;
  }
  bytes_ -= victim->bytes;
  ++windows_dropped_;
  windows_.erase(std::find_if(windows_.begin(), windows_.end(), [&](auto& w) { return w.get() == victim; }));
  return true;
}

bool WindowStore::append(Stored& w, uint32_t thread, const uint8_t* rec, uint16_t size) {
  if ((w.e.flags & dump::kWindowKept) && w.bytes + size > o_.max_kept_bytes) {
    kept_full_ = true;
    Counts& c = refused_[thread];
    ++c.first;
    c.second += size;
    return false;
  }
  while (bytes_ + size > o_.max_bytes)
    if (!evict_one(&w)) {
      Counts& c = refused_[thread];
      ++c.first;
      c.second += size;
      return false;
    }
  ThreadRecords& r = w.threads[thread];
  r.bytes.insert(r.bytes.end(), rec, rec + size);
  ++r.count;
  w.bytes += size;
  bytes_ += size;
  ++records_kept_;
  return true;
}

void WindowStore::hold(uint32_t thread, uint64_t t, const uint8_t* rec, uint16_t size) {
  preroll_.push_back(Held{t, thread, std::vector<uint8_t>(rec, rec + size)});
  preroll_bytes_ += size;
  while (preroll_bytes_ > o_.max_preroll_bytes && !preroll_.empty()) {
    preroll_bytes_ -= preroll_.front().bytes.size();
    preroll_.pop_front();
    ++records_outside_;
  }
}

void WindowStore::take_preroll(Stored& w) {
  std::deque<Held> rest;
  for (Held& h : preroll_) {
    if (h.t >= w.e.begin_ticks) {
      preroll_bytes_ -= h.bytes.size();
      if (!append(w, h.thread, h.bytes.data(), static_cast<uint16_t>(h.bytes.size()))) continue;
    } else {
      rest.push_back(std::move(h));
    }
  }
  preroll_.swap(rest);
}

void WindowStore::open(const WindowEntry& entry) {
  while (windows_.size() - kept_windows_ >= o_.max_windows && evict_one(nullptr)) {
  }
  auto w = std::make_unique<Stored>();
  w->e = entry;
  w->e.end_ticks = 0;
  w->e.records = 0;
  Stored& added = *w;
  kept_windows_ += (entry.flags & dump::kWindowKept) ? 1 : 0;
  windows_.push_back(std::move(w));
  if (!(entry.flags & dump::kWindowFull)) take_preroll(added);
}

void WindowStore::close(uint32_t index, uint64_t end, uint32_t steps, uint32_t slow_steps) {
  Stored* w = find(index);
  if (!w) return;  // dropped while open (a ring of one window holding many light captures)
  w->open = false;
  w->e.end_ticks = end;
  w->e.steps = steps;
  w->e.slow_steps = slow_steps;
}

void WindowStore::route(uint32_t thread, const RecordHeader& h, const uint8_t* rec) {
  const auto t = record_time(h, rec);
  if (!t) {
    ++records_outside_;
    return;
  }
  const bool light = is_always_on(h.kind);
  Stored* w = holding(*t, true);
  if (!w && light) w = holding(*t, false);
  if (w) {
    append(*w, thread, rec, h.size);
  } else if (light) {
    hold(thread, *t, rec, h.size);
  } else {
    ++records_outside_;
  }
}

void WindowStore::add_events(uint32_t thread, const uint8_t* records, size_t n) {
  size_t o = 0;
  while (o + sizeof(RecordHeader) <= n) {
    RecordHeader h;
    std::memcpy(&h, records + o, sizeof(h));
    if (h.size < sizeof(RecordHeader) || o + h.size > n) break;  // the runtime's own rings: cannot happen
    if (h.kind != RecordKind::kPad) route(thread, h, records + o);
    o += h.size;
  }
}

void WindowStore::trim_preroll(uint64_t horizon) {
  while (!preroll_.empty() && preroll_.front().t < horizon) {
    preroll_bytes_ -= preroll_.front().bytes.size();
    preroll_.pop_front();
    ++records_outside_;
  }
}

namespace {

// One thread's records as EVENTS chunks of about 1 MiB (split at record boundaries), so readers can spread
// the work of a large window over threads. `emit(count, begin, end)` gets each chunk's records.
template <typename Emit>
bool split_thread(const std::vector<uint8_t>& bytes, Emit&& emit) {
  constexpr size_t kChunk = 1u << 20;
  size_t begin = 0;
  while (begin < bytes.size()) {
    size_t end = begin;
    uint32_t count = 0;
    while (end < bytes.size() && (end == begin || end - begin < kChunk)) {
      RecordHeader h;
      std::memcpy(&h, bytes.data() + end, sizeof(h));
      end += h.size;
      ++count;
    }
    if (!emit(count, begin, end)) return false;
    begin = end;
  }
  return true;
}

void write_thread(uint32_t thread, const std::vector<uint8_t>& bytes, std::vector<uint8_t>& out) {
  split_thread(bytes, [&](uint32_t count, size_t begin, size_t end) {
    dump::ChunkBuilder b(dump::ChunkType::kEvents);
    const dump::EventsHeader eh{thread, 0};
    b.append(&eh, sizeof(eh));
    b.append(bytes.data() + begin, end - begin);
    b.add_count(count);
    b.finish_into(out);
    return true;
  });
}

// The same chunks as write_thread, written with write(2) from the stack: the header's checksum runs over the
// EventsHeader and then the records where they lie.
bool write_thread_to(uint32_t thread, const std::vector<uint8_t>& bytes, int fd) {
  return split_thread(bytes, [&](uint32_t count, size_t begin, size_t end) {
    const dump::EventsHeader eh{thread, 0};
    const size_t n = end - begin;
    const dump::ChunkHeader h = dump::make_chunk_header_with_crc(
        dump::ChunkType::kEvents, count, sizeof(eh) + n, dump::crc32c(bytes.data() + begin, n, dump::crc32c(&eh, sizeof(eh))));
    return dump::write_whole(fd, &h, sizeof(h)) && dump::write_whole(fd, &eh, sizeof(eh)) &&
           dump::write_whole(fd, bytes.data() + begin, n);
  });
}

}  // namespace

void WindowStore::write_events(std::vector<uint8_t>& out) const {
  for (auto& w : windows_)
    for (auto& [thread, r] : w->threads) write_thread(thread, r.bytes, out);
}

bool WindowStore::write_events_to(int fd) const {
  for (auto& w : windows_)
    for (auto& [thread, r] : w->threads)
      if (!write_thread_to(thread, r.bytes, fd)) return false;
  return true;
}

std::vector<WindowEntry> WindowStore::entries(uint64_t now) const {
  std::vector<WindowEntry> out;
  for (auto& w : windows_) {
    WindowEntry e = w->e;
    e.records = 0;
    for (auto& [thread, r] : w->threads) e.records += r.count;
    if (w->open) {
      e.flags |= dump::kWindowOpen;
      e.end_ticks = now;
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace inferscope::runtime::sampling

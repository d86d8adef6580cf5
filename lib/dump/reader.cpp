#include "dump/reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dump/files.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <system_error>
#include <exception>
#include <thread>

namespace inferscope::dump {
namespace {

std::string at(const std::string& path, uint64_t offset) {
  return path + ": offset " + std::to_string(offset) + ": ";
}

}  // namespace

unsigned worker_threads(unsigned asked) {
  constexpr unsigned kMax = 256;  // a nonsense request must not start thousands of threads
  if (asked) return std::min(asked, kMax);
  if (const char* e = std::getenv("INFERSCOPE_ANALYZE_THREADS")) {
    long v = std::strtol(e, nullptr, 10);
    if (v > 0) return static_cast<unsigned>(std::min<long>(v, kMax));
  }
  // Beyond ~32 the serial parts (merges, sort) dominate and threads only cost memory.
  return std::clamp(std::thread::hardware_concurrency(), 1u, 32u);
}

// Why pread and not the mapping this reader used to read through: a mapped file that shrinks (another process
// truncates it, a disk-full writer replaces it, iscope-analyze's own output once pointed at it) turns every
// access past the new end into SIGBUS. A SIGBUS guard would have to siglongjmp out of the visitor, that is out
// of the analyzer's own frames, skipping their destructors (undefined behaviour, leaked locks and memory), and
// would install a process-wide handler inside programs that embed the reader (the Python binding). pread into
// a bounded window instead reports a short read as a DumpError at its offset, on any thread, and costs one
// copy of bytes the page cache holds anyway.
DumpReader::DumpReader(const std::string& path) : path_(path) {
  open_regular();
  read_contents();
}

// A dump in memory is read exactly as its file would be (read_at copies from the bytes instead of pread), so an
// importer's records reach the analyzer through the same checks as a recorded dump's.
DumpReader::DumpReader(InMemory in) : path_(std::move(in.name)), memory_(std::move(in.bytes)), in_memory_(true) {
  size_ = memory_.size();
  if (size_ == 0) fail(path_ + ": empty (0 bytes): not an InferScope dump", 0);
  read_contents();
}

void DumpReader::read_contents() {
  read_header();
  std::vector<Walked> walked = walk_chunks();
  const size_t first_bad = first_bad_payload(walked);
  if (first_bad < walked.size())
    damaged(walked[first_bad].off,
            "corrupt chunk payload (checksum mismatch, chunk type " + std::to_string(walked[first_bad].h.type) + ")", false);
  parse_valid(walked, first_bad);
  renumber_threads_if_needed();
}

DumpReader::~DumpReader() {
  if (fd_ >= 0) ::close(fd_);
}

void DumpReader::fail(const std::string& msg, uint64_t off) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  throw DumpError(msg, off);
}

// A FIFO opened for reading waits for a writer, so the kind is checked with stat() first, and the open itself
// is non-blocking in case the path is swapped for one in between.
void DumpReader::open_regular() {
  if (auto why = not_a_regular_file(path_)) throw DumpError(*why, 0);
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw DumpError(path_ + ": cannot open: " + std::strerror(errno), 0);
  struct stat st{};
  if (::fstat(fd_, &st) != 0) fail(path_ + ": cannot open: " + std::strerror(errno), 0);
  if (!S_ISREG(st.st_mode)) fail(path_ + ": is " + file_kind(st.st_mode) + ", not a regular file", 0);
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ == 0) fail(path_ + ": empty file (0 bytes): not an InferScope dump", 0);
}

void DumpReader::read_at(uint64_t offset, void* out, size_t n) const {
  auto* p = static_cast<uint8_t*>(out);
  if (in_memory_) {
    if (offset > size_ || n > size_ - offset)
      throw DumpError(at(path_, std::min(offset, size_)) + "the dump ends here (" + std::to_string(size_) + " bytes)",
                      std::min(offset, size_));
    std::memcpy(p, memory_.data() + offset, n);
    return;
  }
  size_t got = 0;
  while (got < n) {
    ssize_t k = ::pread(fd_, p + got, n - got, static_cast<off_t>(offset + got));
    if (k < 0 && errno == EINTR) continue;
    if (k < 0)
      throw DumpError(at(path_, offset + got) + "read error: " + std::strerror(errno), offset + got);
    if (k == 0) {
      struct stat st{};
      const std::string now = ::fstat(fd_, &st) == 0 ? std::to_string(st.st_size) : std::string("fewer");
      throw DumpError(at(path_, offset + got) + "the file ends here (now " + now + " bytes, " + std::to_string(size_) +
                          " when opened): it was cut short or replaced while being read",
                      offset + got);
    }
    got += static_cast<size_t>(k);
  }
}

void DumpReader::read_header() {
  if (size_ < sizeof(FileHeader)) fail(at(path_, 0) + "not an InferScope dump (" + std::to_string(size_) + " bytes)", 0);
  FileHeader fh{};
  try {
    read_at(0, &fh, sizeof(fh));
  } catch (const DumpError& e) {
    fail(e.what(), e.offset());
  }
  if (std::memcmp(fh.magic, kMagic, sizeof(kMagic)) != 0)
    fail(at(path_, 0) + "not an InferScope dump (no INFSCOPE magic; " + std::to_string(size_) + " bytes)", 0);
  major_ = fh.version_major;
  minor_ = fh.version_minor;
  file_flags_ = fh.flags;
  if (major_ != kVersionMajor)
    fail(at(path_, 8) + "dump format version " + std::to_string(major_) + "." + std::to_string(minor_) +
             " is not supported by this reader (it reads version " + std::to_string(kVersionMajor) +
             ".x); use the InferScope tools of a matching version",
         8);
}

// A chunk whose checksums hold but whose contents contradict its header: what it held up to the contradiction
// is kept (a STRINGS chunk's earlier entries), the rest of it is not read, and every other chunk still is.
void DumpReader::skip_chunk(uint64_t where, const std::string& what) {
  skipped_chunks_.push_back(at(path_, where) + what + "; the rest of that chunk was skipped");
}

void DumpReader::damaged(uint64_t where, const std::string& what, bool truncated) {
  damage_ = Damage{where, size_ - where,
                   at(path_, where) + what + "; " + std::to_string(size_ - where) + " bytes from there on were not read",
                   truncated};
}

// Walks the chunk headers up to the first one that is incomplete, corrupt or runs past the end.
std::vector<DumpReader::Walked> DumpReader::walk_chunks() {
  std::vector<Walked> walked;
  uint64_t off = sizeof(FileHeader);
  while (off < size_) {
    if (size_ - off < sizeof(ChunkHeader)) {
      damaged(off, "file ends inside a chunk header (dump cut short)", true);
      break;
    }
    ChunkHeader h{};
    try {
      read_at(off, &h, sizeof(h));
    } catch (const DumpError& e) {  // shrank since it was opened: the same as a dump cut short there
      damaged(off, e.what(), true);
      break;
    }
    if (crc32c(&h, offsetof(ChunkHeader, header_crc)) != h.header_crc) {
      damaged(off, "corrupt chunk header (checksum mismatch)", false);
      break;
    }
    if (h.length > size_ - off - sizeof(ChunkHeader)) {
      damaged(off, "chunk of " + std::to_string(h.length) + " bytes runs past the end of the file (dump cut short)", true);
      break;
    }
    walked.push_back({off, h});
    off += sizeof(ChunkHeader) + h.length;
  }
  return walked;
}

// The payloads' CRC-32C on several threads (the checksum is most of the cost of opening a large dump), each
// over a contiguous run of chunks of about equal bytes, read through its own 1 MiB buffer. Returns the index
// of the first chunk that fails (or can no longer be read), walked.size() when all pass.
size_t DumpReader::first_bad_payload(const std::vector<Walked>& walked) const {
  if (walked.empty()) return 0;
  const uint64_t bytes = walked.back().off + sizeof(ChunkHeader) + walked.back().h.length - sizeof(FileHeader);
  const unsigned n = bytes < (uint64_t(16) << 20) ? 1u : std::max(1u, std::min<unsigned>(worker_threads(), unsigned(walked.size())));
  std::vector<size_t> bad(n, walked.size());
  std::vector<size_t> cut{0};
  for (size_t i = 0, part = 1; i < walked.size() && part < n; ++i)
    if (walked[i].off + sizeof(ChunkHeader) + walked[i].h.length - sizeof(FileHeader) >= bytes / n * part) {
      cut.push_back(i + 1);
      ++part;
    }
  while (cut.size() <= n) cut.push_back(walked.size());
  auto crc_ok = [&](const Walked& w, std::vector<uint8_t>& buf) {
    uint32_t crc = 0;
    for (uint64_t done = 0; done < w.h.length;) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(buf.size(), w.h.length - done));
      read_at(w.off + sizeof(ChunkHeader) + done, buf.data(), k);
      crc = crc32c(buf.data(), k, crc);
      done += k;
    }
    return crc == w.h.payload_crc;
  };
  auto check = [&](unsigned part) {
    std::vector<uint8_t> buf(std::size_t(1) << 20);
    for (size_t i = cut[part]; i < cut[part + 1]; ++i) {
      bool ok = false;
      try {
        ok = crc_ok(walked[i], buf);
      } catch (const DumpError&) {  // shrank meanwhile: reported as damage at that chunk
      }
      if (!ok) {
        bad[part] = i;
        return;
      }
    }
  };
  // A failure on a worker (its buffer out of memory) is rethrown here once every worker ended: escaping a thread,
  // it would end the process (std::terminate) instead of reaching the tool's "out of memory" message.
  std::vector<std::exception_ptr> errors(n);
  auto guarded = [&](unsigned part) {
    try {
      check(part);
    } catch (...) {
      errors[part] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  unsigned started = 1;
  try {
    for (; started < n; ++started) pool.emplace_back(guarded, started);
  } catch (const std::system_error&) {  // no more threads (limits): the rest runs here
  }
  guarded(0);
  for (unsigned part = started; part < n; ++part) guarded(part);
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return *std::min_element(bad.begin(), bad.end());
}

// Parses the valid chunks in file order. The tables' declared entry counts are summed first: they bound the
// ids the entries and records may use.
void DumpReader::parse_valid(const std::vector<Walked>& walked, size_t first_bad) {
  for (size_t i = 0; i < first_bad; ++i) {
    const ChunkHeader& h = walked[i].h;
    switch (static_cast<ChunkType>(h.type)) {
      // A string entry takes at least its 8-byte header, whatever the count field claims.
      case ChunkType::kStrings: declared_.strings += std::min<uint64_t>(h.count, h.length / sizeof(StringEntryHeader)); break;
      case ChunkType::kCodeTable: declared_.code += std::min<uint64_t>(h.count, h.length / sizeof(CodeEntry)); break;
      case ChunkType::kThreads: declared_.threads += std::min<uint64_t>(h.count, h.length / sizeof(ThreadEntry)); break;
      default: break;
    }
  }
  code_bound_ = static_cast<uint32_t>(std::min<uint64_t>(declared_.code, UINT32_MAX - 1));
  std::vector<CodeEntry> raw_code;
  std::vector<ThreadEntry> raw_threads;
  std::vector<uint8_t> payload;
  for (size_t i = 0; i < first_bad; ++i) {
    const ChunkHeader& h = walked[i].h;
    const uint64_t coff = walked[i].off, payload_off = coff + sizeof(ChunkHeader);
    const auto type = static_cast<ChunkType>(h.type);
    if (type == ChunkType::kEvents) {  // records are read later, by visitors; only the thread is needed now
      if (h.length < sizeof(EventsHeader)) {
        skip_chunk(payload_off, "events chunk shorter than its header");
        continue;
      }
      EventsHeader eh{};
      try {
        read_at(payload_off, &eh, sizeof(eh));
      } catch (const DumpError& e) {
        fail(e.what(), e.offset());
      }
      events_.push_back(EventsChunkRef{payload_off + sizeof(EventsHeader), h.length - sizeof(EventsHeader), h.count, eh.thread_id});
      record_count_ += h.count;
      continue;
    }
    payload.resize(static_cast<size_t>(h.length));
    try {
      read_at(payload_off, payload.data(), payload.size());
    } catch (const DumpError& e) {
      fail(e.what(), e.offset());
    }
    const uint8_t* p = payload.data();
    if (type == ChunkType::kCodeTable) {
      if (h.length != uint64_t(h.count) * sizeof(CodeEntry)) {
        skip_chunk(coff, "bad code table size");
        continue;
      }
      for (uint32_t k = 0; k < h.count; ++k) raw_code.push_back(load<CodeEntry>(p + k * sizeof(CodeEntry)));
    } else if (type == ChunkType::kThreads) {
      if (h.length != uint64_t(h.count) * sizeof(ThreadEntry)) {
        skip_chunk(coff, "bad thread table size");
        continue;
      }
      for (uint32_t k = 0; k < h.count; ++k) raw_threads.push_back(load<ThreadEntry>(p + k * sizeof(ThreadEntry)));
    } else {
      try {
        parse_chunk(h, p, payload_off);
      } catch (const DumpError& e) {  // the payload is in memory: this is its contents, not the file, failing
        skip_chunk(e.offset(), e.what());
      }
    }
  }
  if (strings_skipped_)
    id_warnings_.push_back(path_ + ": " + std::to_string(strings_skipped_) + " string entries with ids beyond the " +
                           std::to_string(declared_.strings) + " strings the file declares were ignored");
  adopt_tables(raw_code, raw_threads);
}

// Code ids are numbered 1..N per process and every dump holds the whole table, so an id beyond the entries
// the file declares is corrupt: it is left out (names using it read "<code N>") rather than sizing anything.
void DumpReader::adopt_tables(const std::vector<CodeEntry>& code, const std::vector<ThreadEntry>& threads) {
  for (const auto& t : threads) {
    ThreadInfo& ti = threads_[t.thread_id];
    ti.id = t.thread_id;
    ti.os_tid = t.os_tid;
    ti.pid = t.pid;
    if (t.name) ti.name = string_at(t.name);
    if (t.first_ts && (!ti.first_ts || t.first_ts < ti.first_ts)) ti.first_ts = t.first_ts;
    if (t.end_ts) ti.end_ts = t.end_ts;
    ti.flags |= t.flags;
  }
  uint64_t skipped = 0;
  for (const auto& c : code) {
    if (c.code_id == 0 || c.code_id > code_bound_) {
      ++skipped;
      continue;
    }
    code_[c.code_id] = CodeInfo{string_at(c.qualname), string_at(c.file), c.line};
  }
  if (skipped)
    id_warnings_.push_back(path_ + ": " + std::to_string(skipped) + " code-table entries with ids beyond the " +
                           std::to_string(code_bound_) + " entries the file declares were ignored");
}

// Thread ids are numbered per process, not per session, so a dump's ids may start high; but a dump whose ids
// reach far beyond 2^16 and the threads it names would make every table indexed by thread that large (a 4.5 KB file
// asked for gigabytes). Then they are renumbered 1..N in their original order, everywhere the reader hands
// them out: thread table, EVENTS chunks, drops, and the thread fields of records (RecordCursor::check_ids).
void DumpReader::renumber_threads_if_needed() {
  std::vector<uint32_t> ids;
  for (const auto& [id, t] : threads_) ids.push_back(id);
  for (const auto& c : events_) ids.push_back(c.thread_id);
  for (const auto& [key, d] : drops_)
    if (key.first != kNoThread) ids.push_back(key.first);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  // Ids up to 2^16 stay as they are, whatever the gaps: a long-lived process's later sessions start high (the
  // runtime's ids are then the dump's, as tests and users compare them), and tables that size stay small.
  constexpr uint64_t kKept = uint64_t(1) << 16;
  if (ids.empty() || ids.back() < kKept || uint64_t(ids.back()) <= ids.size() + kKept) return;
  thread_ids_ = ids;
  std::map<uint32_t, ThreadInfo> threads;
  for (auto& [id, t] : threads_) {
    t.id = thread_id_of(id);
    threads.emplace(t.id, std::move(t));
  }
  threads_ = std::move(threads);
  for (auto& c : events_) c.thread_id = thread_id_of(c.thread_id);
  std::map<std::pair<uint32_t, uint32_t>, DropEntry> drops;
  for (auto [key, d] : drops_) {
    d.thread_id = d.thread_id == kNoThread ? kNoThread : thread_id_of(d.thread_id);
    drops[{d.thread_id, key.second}] = d;
  }
  drops_ = std::move(drops);
  if (sampling_)
    for (auto& st : sampling_->slow_steps) st.thread_id = thread_id_of(st.thread_id);
  id_warnings_.push_back(path_ + ": thread ids reach " + std::to_string(ids.back()) + " for " + std::to_string(ids.size()) +
                         " threads; they are numbered 1.." + std::to_string(ids.size()) + " here");
}

uint32_t DumpReader::thread_id_of(uint32_t id) const {
  if (thread_ids_.empty()) return id;
  auto it = std::lower_bound(thread_ids_.begin(), thread_ids_.end(), id);
  if (it == thread_ids_.end() || *it != id) return kNoThread;
  return static_cast<uint32_t>(it - thread_ids_.begin() + 1);
}

void DumpReader::parse_chunk(const ChunkHeader& h, const uint8_t* p, uint64_t off) {
  auto expect_entries = [&](size_t entry) {
    if (h.length != uint64_t(h.count) * entry)
      throw DumpError("chunk length " + std::to_string(h.length) + " does not match " + std::to_string(h.count) +
                          " entries of " + std::to_string(entry) + " bytes",
                      off);
  };
  switch (static_cast<ChunkType>(h.type)) {
    case ChunkType::kProcessInfo: {
      auto kv = parse_key_values(p, h.length, h.count, off);
      process_.insert(process_.end(), kv.begin(), kv.end());
      break;
    }
    case ChunkType::kCollectorStatus: {
      // The writer repeats the whole status list when a line changes: the latest line per collector holds.
      for (auto& kv : parse_key_values(p, h.length, h.count, off)) {
        auto it = std::find_if(status_.begin(), status_.end(), [&](const auto& e) { return e.first == kv.first; });
        if (it == status_.end()) status_.push_back(std::move(kv));
        else it->second = std::move(kv.second);
      }
      break;
    }
    case ChunkType::kStrings:
      parse_strings(h, p, off);
      break;
    case ChunkType::kCalibration:
      expect_entries(sizeof(CalibrationPoint));
      for (uint32_t i = 0; i < h.count; ++i)
        calibration_.push_back(load<CalibrationPoint>(p + i * sizeof(CalibrationPoint)));
      break;
    case ChunkType::kDrops:
      expect_entries(sizeof(DropEntry));
      for (uint32_t i = 0; i < h.count; ++i) {
        auto d = load<DropEntry>(p + i * sizeof(DropEntry));
        drops_[{d.thread_id, d.reason}] = d;
      }
      break;
    case ChunkType::kEnd:
      if (h.length < sizeof(EndEntry)) throw DumpError("end chunk too short", off);
      end_ = load<EndEntry>(p);
      break;
    case ChunkType::kSampling:
    case ChunkType::kWindows:
    case ChunkType::kSlowSteps:
      parse_sampling(h, p, off);
      break;
    default:
      break;  // a chunk type from a newer minor version: skipped
  }
}

namespace {

// Entries of a sampled-mode chunk: `count` of one size, at least T's (a later minor version may append fields).
template <class T>
std::vector<T> sized_entries(const ChunkHeader& h, const uint8_t* p, uint64_t off) {
  std::vector<T> out;
  if (h.count == 0) return out;
  const uint64_t size = h.length / h.count;
  if (h.length % h.count != 0 || size < sizeof(T))
    throw DumpError("chunk length " + std::to_string(h.length) + " is not " + std::to_string(h.count) +
                        " entries of at least " + std::to_string(sizeof(T)) + " bytes",
                    off);
  out.reserve(h.count);
  for (uint32_t i = 0; i < h.count; ++i) out.push_back(load<T>(p + i * size));
  return out;
}

}  // namespace

// Sampled mode's chunks: the latest summary holds; windows and slow steps accumulate in file order.
void DumpReader::parse_sampling(const ChunkHeader& h, const uint8_t* p, uint64_t off) {
  SamplingData& d = sampling_ ? *sampling_ : sampling_.emplace();
  switch (static_cast<ChunkType>(h.type)) {
    case ChunkType::kSampling:
      if (auto v = sized_entries<SamplingSummary>(h, p, off); !v.empty()) d.summary = v.back();
      break;
    case ChunkType::kWindows:
      for (auto& w : sized_entries<WindowEntry>(h, p, off)) d.windows.push_back(w);
      break;
    default:
      for (auto& s : sized_entries<SlowStepEntry>(h, p, off)) d.slow_steps.push_back(s);
      break;
  }
}

// Ids are dense (the runtime numbers strings from 1 and every dump holds all of them up to the largest it
// uses), so an id beyond the entries the file declares is corrupt: the entry is skipped and counted, and no
// table is sized by it (a small bad file once made the table allocate gigabytes; fuzz/fuzz_dump_reader.cpp).
void DumpReader::parse_strings(const ChunkHeader& h, const uint8_t* p, uint64_t off) {
  uint64_t o = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    if (o + sizeof(StringEntryHeader) > h.length) throw DumpError("string entry runs past its chunk", off + o);
    auto e = load<StringEntryHeader>(p + o);
    if (o + sizeof(e) + e.length > h.length) throw DumpError("string entry runs past its chunk", off + o);
    if (e.id > declared_.strings) {
      ++strings_skipped_;
      o += sizeof(e) + e.length;
      continue;
    }
    if (e.id >= strings_.size()) {
      strings_.resize(e.id + 1);
      has_string_.resize(e.id + 1, false);
    }
    strings_[e.id].assign(reinterpret_cast<const char*>(p + o + sizeof(e)), e.length);
    has_string_[e.id] = true;
    o += sizeof(e) + e.length;
  }
}

std::string DumpReader::process_value(const std::string& key) const {
  // Later entries win: collectors add facts after the session's first process-info chunk.
  for (auto it = process_.rbegin(); it != process_.rend(); ++it)
    if (it->first == key) return it->second;
  return {};
}

std::string DumpReader::string_at(uint32_t id) const {
  if (has_string(id)) return strings_[id];
  return "<string " + std::to_string(id) + ">";
}

std::vector<DropInfo> DumpReader::drops() const {
  std::vector<DropInfo> out;
  for (const auto& [key, d] : drops_) out.push_back(DropInfo{d.thread_id, string_at(d.reason), d.records, d.bytes});
  return out;
}

uint64_t DumpReader::total_dropped_records() const {
  uint64_t n = 0;
  for (const auto& [key, d] : drops_) n += d.records;
  return n;
}

// Records are visited from a window of the chunk read with pread: kWindow bytes plus room for one more record
// than fits (a record is at most 64 KiB), one buffer per nesting level per thread, reused across chunks.
namespace {
constexpr size_t kWindow = size_t(1) << 20;
constexpr size_t kBufferBytes = kWindow + (size_t(1) << 16);
thread_local std::vector<std::unique_ptr<uint8_t[]>> t_buffers;
thread_local RecordCursor* t_cursor = nullptr;  // the innermost cursor on this thread (attributes() errors)
thread_local size_t t_depth = 0;
}  // namespace

RecordCursor::RecordCursor(const DumpReader& r, const EventsChunkRef& c, uint64_t* unknown)
    : r_(r), c_(c), unknown_(unknown), outer_(t_cursor) {
  if (t_buffers.size() <= t_depth) t_buffers.push_back(std::make_unique<uint8_t[]>(kBufferBytes));
  buf_ = t_buffers[t_depth++].get();
  t_cursor = this;
}

RecordCursor::~RecordCursor() {
  --t_depth;
  t_cursor = outer_;
}

void RecordCursor::bad(uint64_t chunk_off, const std::string& what) const {
  const uint64_t off = c_.offset + chunk_off;
  throw DumpError(at(r_.path(), off) + what, off);
}

// Makes buf_ hold the chunk's bytes [next_, next_ + need): keeps what is left of the window and reads on.
void RecordCursor::fill(size_t need) {
  if (next_ + need <= win_ + have_) return;
  const size_t keep = static_cast<size_t>(win_ + have_ - next_);
  std::memmove(buf_, buf_ + (next_ - win_), keep);
  win_ = next_;
  have_ = keep;
  const size_t more = static_cast<size_t>(std::min<uint64_t>(kBufferBytes - have_, c_.length - (win_ + have_)));
  if (more == 0) return;
  r_.read_at(c_.offset + win_ + have_, buf_ + have_, more);
  have_ += more;
}

const uint8_t* RecordCursor::next(RecordHeader& h) {
  while (next_ < c_.length) {
    const uint64_t left = c_.length - next_;
    if (left < sizeof(RecordHeader)) bad(next_, "a record header runs past its chunk");
    fill(sizeof(RecordHeader));
    uint8_t* p = buf_ + (next_ - win_);
    h = load<RecordHeader>(p);
    if (h.size < sizeof(RecordHeader) || h.size > left) bad(next_, "record size out of bounds");
    const uint16_t fixed = fixed_record_size(h.kind);
    if (fixed != 0 && h.size < fixed) bad(next_, "record shorter than its kind");
    fill(h.size);
    p = buf_ + (next_ - win_);
    const bool known = fixed != 0 && h.kind != RecordKind::kPad;
    if (known) check_ids(h, p);  // before moving on: an error names this record
    next_ += h.size;
    if (known) return p;
    if (fixed == 0 && unknown_) ++*unknown_;  // a newer minor version's kind: its size says how far to skip
  }
  return nullptr;
}

// Ids in records that callers index by: a Python code id must be in the code table (DumpReader::adopt_tables),
// and thread ids follow the reader's renumbering (patched in the window, which is this cursor's own copy).
void RecordCursor::check_ids(const RecordHeader& h, uint8_t* rec) {
  if (h.kind == RecordKind::kPyCall || h.kind == RecordKind::kPyCoroutine || h.kind == RecordKind::kPyElided) {
    const uint32_t code = h.kind == RecordKind::kPyCall       ? load<PyCallRecord>(rec).code
                          : h.kind == RecordKind::kPyElided   ? load<PyElidedRecord>(rec).code
                                                              : load<PyCoroutineRecord>(rec).code;
    if (code > r_.code_id_bound())
      bad(next_, std::string(h.kind == RecordKind::kPyCall       ? "python_call"
                             : h.kind == RecordKind::kPyElided   ? "python_elided"
                                                                 : "python_coroutine") + " names code id " +
                     std::to_string(code) + " beyond the " + std::to_string(r_.code_id_bound()) +
                     " code-table entries the file declares");
  }
  if (r_.thread_ids_.empty()) return;
  if (h.kind == RecordKind::kAsyncRange) {
    auto r = load<AsyncRangeRecord>(rec);
    r.begin_thread = r_.thread_id_of(r.begin_thread);
    r.end_thread = r_.thread_id_of(r.end_thread);
    std::memcpy(rec, &r, sizeof(r));
  } else if (h.kind == RecordKind::kCounter) {
    auto r = load<CounterRecord>(rec);
    if (r.scope != CounterScope::kThread) return;
    r.target = r_.thread_id_of(r.target);
    std::memcpy(rec, &r, sizeof(r));
  }
}

void DumpReader::bad_record(const uint8_t* p, const char* what) const {
  const uint64_t off = t_cursor && t_cursor->holds(p) ? t_cursor->offset_of(p) : 0;
  throw DumpError(at(path_, off) + what, off);
}

std::vector<Attr> DumpReader::attributes(const uint8_t* rec) const {
  std::vector<Attr> out;
  RecordHeader h = load<RecordHeader>(rec);
  if (!record_has_attrs(h.kind)) return out;
  uint16_t fixed = fixed_record_size(h.kind);
  if (h.size < fixed + sizeof(AttrListHeader)) return out;
  auto lh = load<AttrListHeader>(rec + fixed);
  if (fixed + sizeof(AttrListHeader) + size_t(lh.count) * sizeof(AttrRecord) > h.size)
    bad_record(rec, "attribute list runs past its record");
  for (uint16_t i = 0; i < lh.count; ++i) {
    auto a = load<AttrRecord>(rec + fixed + sizeof(AttrListHeader) + i * sizeof(AttrRecord));
    Attr x;
    x.key = string_at(a.key);
    x.type = a.type;
    switch (a.type) {
      case AttrType::kInt: case AttrType::kBool: x.i = a.value.i; break;
      case AttrType::kDouble: x.d = a.value.d; break;
      case AttrType::kString: x.s = string_at(static_cast<uint32_t>(a.value.s)); break;
      default: break;
    }
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace inferscope::dump

namespace inferscope::dump {

void report_file_accounting(const DumpReader& r, std::vector<std::string>& warnings,
                            std::map<std::string, uint64_t>& drops) {
  warnings.insert(warnings.end(), r.id_warnings().begin(), r.id_warnings().end());
  if (!r.end()) return;  // no END chunk: nothing to compare with (the caller says the session did not stop)
  const EndEntry& e = *r.end();
  // Ring mode counts a record that was written to the in-memory window and later overwritten both as
  // written and as "ring_overwritten"; such records cannot be in the file.
  uint64_t listed = 0, overwritten = 0;
  for (const auto& d : r.drops()) {
    listed += d.records;
    if (d.reason == "ring_overwritten") overwritten += d.records;
  }
  const uint64_t expected = e.records_written > overwritten ? e.records_written - overwritten : 0;
  const uint64_t found = r.record_count();
  if (found < expected) {
    const uint64_t lost = expected - found;
    warnings.push_back(r.path() + ": the END chunk says " + std::to_string(e.records_written) + " records were written" +
                       (overwritten ? " (" + std::to_string(overwritten) + " of them overwritten in the ring)" : std::string()) +
                       " but the file holds " + std::to_string(found) + ": " + std::to_string(lost) +
                       " records are missing from the file (counted as dropped, lost_in_file); totals are lower bounds");
    drops["lost_in_file"] += lost;
  } else if (found > expected) {
    warnings.push_back(r.path() + ": the file holds " + std::to_string(found) + " records but its END chunk says " +
                       std::to_string(expected) + " were written; the END chunk's counts are not trusted");
  }
  if (e.records_dropped > listed) {
    const uint64_t unlisted = e.records_dropped - listed;
    warnings.push_back(r.path() + ": the END chunk says " + std::to_string(e.records_dropped) +
                       " records were dropped but the drop table lists " + std::to_string(listed) + ": " +
                       std::to_string(unlisted) + " more are counted as dropped (dropped_unlisted)");
    drops["dropped_unlisted"] += unlisted;
  } else if (e.records_dropped < listed) {
    warnings.push_back(r.path() + ": the drop table lists " + std::to_string(listed) + " dropped records but the END chunk says " +
                       std::to_string(e.records_dropped));
  }
}

namespace {

// The file header and the first chunk's header, checked; false when they are not a dump's with a process-info
// chunk of a sane size first.
bool read_leading_chunk_header(int fd, ChunkHeader& h) {
  FileHeader fh{};
  if (::pread(fd, &fh, sizeof(fh), 0) != static_cast<ssize_t>(sizeof(fh))) return false;
  if (std::memcmp(fh.magic, kMagic, sizeof(kMagic)) != 0 || fh.version_major != kVersionMajor) return false;
  if (::pread(fd, &h, sizeof(h), sizeof(fh)) != static_cast<ssize_t>(sizeof(h))) return false;
  constexpr uint64_t kMaxProcessInfo = uint64_t(1) << 20;
  return h.header_crc == crc32c(&h, offsetof(ChunkHeader, header_crc)) &&
         h.type == static_cast<uint32_t>(ChunkType::kProcessInfo) && h.length <= kMaxProcessInfo;
}

}  // namespace

bool ends_with_end_chunk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct {
    ChunkHeader h;
    EndEntry end;
  } tail{};
  static_assert(sizeof(tail) == sizeof(ChunkHeader) + sizeof(EndEntry));
  struct stat st{};
  const bool read = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                    st.st_size >= off_t(sizeof(FileHeader) + sizeof(tail)) &&
                    ::pread(fd, &tail, sizeof(tail), st.st_size - off_t(sizeof(tail))) == ssize_t(sizeof(tail));
  ::close(fd);
  return read && tail.h.type == static_cast<uint32_t>(ChunkType::kEnd) && tail.h.length == sizeof(EndEntry) &&
         tail.h.header_crc == crc32c(&tail.h, offsetof(ChunkHeader, header_crc)) &&
         tail.h.payload_crc == crc32c(&tail.end, sizeof(EndEntry));
}

std::optional<std::vector<std::pair<std::string, std::string>>> leading_process_info(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::vector<std::pair<std::string, std::string>>> info;
  struct stat st{};
  ChunkHeader h{};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read_leading_chunk_header(fd, h)) {
    std::vector<uint8_t> payload(h.length);
    const off_t at = sizeof(FileHeader) + sizeof(ChunkHeader);
    if (::pread(fd, payload.data(), payload.size(), at) == static_cast<ssize_t>(payload.size()) &&
        h.payload_crc == crc32c(payload.data(), payload.size())) {
      try {
        info = parse_key_values(payload.data(), payload.size(), h.count, at);
      } catch (const DumpError&) {
      }
    }
  }
  ::close(fd);
  return info;
}

}  // namespace inferscope::dump

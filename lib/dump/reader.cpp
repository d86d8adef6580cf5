#include "dump/reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
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

DumpReader::DumpReader(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw DumpError(path + ": cannot open: " + std::strerror(errno), 0);
  struct stat st{};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw DumpError(path + ": not a regular file", 0);
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ == 0) {
    ::close(fd_);
    throw DumpError(path + ": empty file (0 bytes): not an InferScope dump", 0);
  }
  void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (m == MAP_FAILED) {
    ::close(fd_);
    throw DumpError(path + ": cannot map file: " + std::strerror(errno), 0);
  }
  base_ = static_cast<const uint8_t*>(m);
  ::madvise(m, size_, MADV_SEQUENTIAL);

  auto fail = [&](const std::string& msg, uint64_t off) {
    ::munmap(const_cast<uint8_t*>(base_), size_);
    ::close(fd_);
    base_ = nullptr;
    fd_ = -1;
    throw DumpError(msg, off);
  };
  if (size_ < sizeof(FileHeader) || std::memcmp(base_, kMagic, sizeof(kMagic)) != 0)
    fail(at(path, 0) + "not an InferScope dump (no INFSCOPE magic; " + std::to_string(size_) + " bytes)", 0);
  FileHeader fh = load<FileHeader>(base_);
  major_ = fh.version_major;
  minor_ = fh.version_minor;
  file_flags_ = fh.flags;
  if (major_ != kVersionMajor)
    fail(at(path, 8) + "dump format version " + std::to_string(major_) + "." + std::to_string(minor_) +
             " is not supported by this reader (it reads version " + std::to_string(kVersionMajor) +
             ".x); use a matching iscope-analyze",
         8);

  // Walk the chunk headers, then check the payloads' CRC-32C on several threads (the checksum is most of the
  // cost of opening a large dump), then parse in file order up to the first bad chunk. A chunk that is
  // incomplete or fails its checksum ends the walk: everything before it is valid, and damage() says where and
  // how much was lost.
  struct Walked {
    uint64_t off;
    ChunkHeader h;
  };
  std::vector<Walked> walked;
  uint64_t off = sizeof(FileHeader);
  auto damaged = [&](uint64_t where, const std::string& what, bool truncated) {
    damage_ = Damage{where, size_ - where,
                     at(path, where) + what + "; " + std::to_string(size_ - where) + " bytes from there on were not read",
                     truncated};
  };
  while (off < size_) {
    if (size_ - off < sizeof(ChunkHeader)) {
      damaged(off, "file ends inside a chunk header (dump cut short)", true);
      break;
    }
    ChunkHeader h = load<ChunkHeader>(base_ + off);
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
  // Contiguous runs of chunks of about equal bytes, one per thread; each finds its first bad chunk.
  size_t first_bad = walked.size();
  {
    const uint64_t bytes = off - sizeof(FileHeader);
    const unsigned n = bytes < (uint64_t(16) << 20) ? 1u : std::max(1u, std::min<unsigned>(worker_threads(), unsigned(walked.size())));
    std::vector<size_t> bad(n, walked.size());
    std::vector<size_t> cut{0};
    for (size_t i = 0, part = 1; i < walked.size() && part < n; ++i)
      if (walked[i].off + sizeof(ChunkHeader) + walked[i].h.length - sizeof(FileHeader) >= bytes / n * part) {
        cut.push_back(i + 1);
        ++part;
      }
    while (cut.size() <= n) cut.push_back(walked.size());
    auto check = [&](unsigned part) {
      for (size_t i = cut[part]; i < cut[part + 1]; ++i)
        if (crc32c(base_ + walked[i].off + sizeof(ChunkHeader), walked[i].h.length) != walked[i].h.payload_crc) {
          bad[part] = i;
          return;
        }
    };
    std::vector<std::thread> pool;
    unsigned started = 1;
    try {
      for (; started < n; ++started) pool.emplace_back(check, started);
    } catch (const std::system_error&) {  // no more threads (limits): the rest runs here
    }
    check(0);
    for (unsigned part = started; part < n; ++part) check(part);
    for (auto& t : pool) t.join();
    for (size_t b : bad) first_bad = std::min(first_bad, b);
  }
  if (first_bad < walked.size())
    damaged(walked[first_bad].off,
            "corrupt chunk payload (checksum mismatch, chunk type " + std::to_string(walked[first_bad].h.type) + ")", false);

  std::vector<CodeEntry> raw_code;
  std::vector<ThreadEntry> raw_threads;
  for (size_t i = 0; i < first_bad; ++i) {
    const ChunkHeader& h = walked[i].h;
    const uint64_t payload_off = walked[i].off + sizeof(ChunkHeader);
    const uint8_t* payload = base_ + payload_off;
    const uint64_t coff = walked[i].off;
    switch (static_cast<ChunkType>(h.type)) {
      case ChunkType::kCodeTable:
        if (h.length != uint64_t(h.count) * sizeof(CodeEntry)) fail(at(path, coff) + "bad code table size", coff);
        for (uint32_t k = 0; k < h.count; ++k) raw_code.push_back(load<CodeEntry>(payload + k * sizeof(CodeEntry)));
        break;
      case ChunkType::kThreads:
        if (h.length != uint64_t(h.count) * sizeof(ThreadEntry)) fail(at(path, coff) + "bad thread table size", coff);
        for (uint32_t k = 0; k < h.count; ++k)
          raw_threads.push_back(load<ThreadEntry>(payload + k * sizeof(ThreadEntry)));
        break;
      default:
        try {
          parse_chunk(h, payload, payload_off);
        } catch (const DumpError& e) {
          fail(at(path, e.offset()) + e.what(), e.offset());
        }
    }
  }

  for (const auto& t : raw_threads) {
    ThreadInfo& ti = threads_[t.thread_id];
    ti.id = t.thread_id;
    ti.os_tid = t.os_tid;
    ti.pid = t.pid;
    if (t.name) ti.name = string_at(t.name);
    if (t.first_ts && (!ti.first_ts || t.first_ts < ti.first_ts)) ti.first_ts = t.first_ts;
    if (t.end_ts) ti.end_ts = t.end_ts;
    ti.flags |= t.flags;
  }
  for (const auto& c : raw_code) code_[c.code_id] = CodeInfo{string_at(c.qualname), string_at(c.file), c.line};
}

DumpReader::~DumpReader() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
  if (fd_ >= 0) ::close(fd_);
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
    case ChunkType::kStrings: {
      uint64_t o = 0;
      for (uint32_t i = 0; i < h.count; ++i) {
        if (o + sizeof(StringEntryHeader) > h.length) throw DumpError("string entry runs past its chunk", off + o);
        auto e = load<StringEntryHeader>(p + o);
        if (o + sizeof(e) + e.length > h.length) throw DumpError("string entry runs past its chunk", off + o);
        // Ids are dense (the runtime numbers strings from 1 and every dump holds all of them up to the largest
        // it uses), so an id beyond the number of entries the file could hold is corrupt. Refusing it keeps a
        // small bad file from making the table allocate gigabytes (found by fuzz/fuzz_dump_reader.cpp).
        if (e.id > (1u << 28) || e.id > size_ / sizeof(StringEntryHeader) + 1)
          throw DumpError("string id " + std::to_string(e.id) + " out of range for a file of " +
                              std::to_string(size_) + " bytes",
                          off + o);
        if (e.id >= strings_.size()) {
          strings_.resize(e.id + 1);
          has_string_.resize(e.id + 1, false);
        }
        strings_[e.id].assign(reinterpret_cast<const char*>(p + o + sizeof(e)), e.length);
        has_string_[e.id] = true;
        o += sizeof(e) + e.length;
      }
      break;
    }
    case ChunkType::kCalibration:
      expect_entries(sizeof(CalibrationPoint));
      for (uint32_t i = 0; i < h.count; ++i)
        calibration_.push_back(load<CalibrationPoint>(p + i * sizeof(CalibrationPoint)));
      break;
    case ChunkType::kEvents: {
      if (h.length < sizeof(EventsHeader)) throw DumpError("events chunk shorter than its header", off);
      auto eh = load<EventsHeader>(p);
      events_.push_back(EventsChunkRef{off + sizeof(EventsHeader), h.length - sizeof(EventsHeader), h.count,
                                       eh.thread_id});
      record_count_ += h.count;
      break;
    }
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
    default:
      break;  // a chunk type from a newer minor version: skipped
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

void DumpReader::bad_record(const uint8_t* p, const char* what) const {
  uint64_t off = static_cast<uint64_t>(p - base_);
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

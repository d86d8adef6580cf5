// libFuzzer target: the dump reader (every chunk parser, record iteration, attributes, clock model) and the
// Perfetto writer on top of it. Built and run by scripts/fuzz.sh.
//
// The input is a dump file whose chunk CRCs the harness recomputes before the reader sees it: without that,
// nearly every mutation would stop at the first checksum and the parsers behind it would never be reached.
// (The checksum paths themselves are simple and covered by the unit tests.)
#include "dump/clock_model.hpp"
#include "dump/reader.hpp"
#include "report/report.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

namespace {

using namespace inferscope;

/// Rewrites both CRCs of every chunk whose bounds fit the input.
void fix_checksums(std::vector<uint8_t>& d) {
  size_t off = sizeof(dump::FileHeader);
  while (off + sizeof(dump::ChunkHeader) <= d.size()) {
    dump::ChunkHeader h;
    std::memcpy(&h, d.data() + off, sizeof h);
    const size_t payload = off + sizeof h;
    if (h.length > d.size() - payload) break;
    h.payload_crc = dump::crc32c(d.data() + payload, h.length);
    h.header_crc = dump::crc32c(&h, offsetof(dump::ChunkHeader, header_crc));
    std::memcpy(d.data() + off, &h, sizeof h);
    off = payload + h.length;
  }
}

struct NullBuf : std::streambuf {
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  fix_checksums(bytes);
  // The reader maps a path; a memfd gives it one without touching the disk.
  static const int fd = ::memfd_create("fuzz-dump", 0);
  if (fd < 0) return 0;
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
    return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    dump::DumpReader r(path);
    dump::ClockModel clock(r.calibration());
    (void)r.drops();
    (void)r.process_value("pid");
    uint64_t sink = 0;
    r.for_each_record([&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
      sink += thread + h.size;
      if (record_has_attrs(h.kind)) sink += r.attributes(p).size();
      sink += static_cast<uint64_t>(clock.to_ns(dump::load<uint64_t>(p + 8)));
    });
    NullBuf nb;
    std::ostream out(&nb);
    report::write_perfetto(r, out);
    (void)sink;
  } catch (const dump::DumpError&) {
    // A clear error for bad input is the expected outcome; anything else (crash, other exception) is a bug.
  }
  return 0;
}

// Shared by the libFuzzer targets in fuzz/: how an input becomes a file the libraries can open.
#pragma once

#include "dump/format.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <streambuf>
#include <string>
#include <vector>

namespace inferscope::fuzz {

/// Rewrites both CRCs of every chunk whose bounds fit the input. Without it nearly every mutation would stop
/// at the first checksum and the parsers behind it would never be reached (the checksum paths themselves
/// are simple and covered by the unit tests).
inline void fix_checksums(std::vector<uint8_t>& d) {
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

/// Puts `bytes` in a memory file and returns a path that opens it (the readers take paths, not buffers).
/// Empty when the memory file cannot be made.
inline std::string as_file(const std::vector<uint8_t>& bytes) {
  static const int fd = ::memfd_create("fuzz-input", 0);
  if (fd < 0) return {};
  if (::ftruncate(fd, 0) != 0) return {};
  if (!bytes.empty() && ::pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) return {};
  return "/proc/self/fd/" + std::to_string(fd);
}

/// A fuzzer input as a dump file with every checksum made to fit: the path, or empty when no file could be
/// made.
inline std::string as_dump_file(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  fix_checksums(bytes);
  return as_file(bytes);
}

/// A stream buffer that discards everything: the writers run in full, nothing is kept.
struct NullBuf : std::streambuf {
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

}  // namespace inferscope::fuzz

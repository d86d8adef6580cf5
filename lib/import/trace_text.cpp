#include "import/trace_text.hpp"

#include "dump/format.hpp"
#include "import/import.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace inferscope::import {
namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

bool starts_with_gzip_magic(std::string_view b) {
  return b.size() >= 2 && static_cast<unsigned char>(b[0]) == 0x1f && static_cast<unsigned char>(b[1]) == 0x8b;
}

/// Inflates every gzip member of `in` (gzip -c a b > c writes several), to at most gunzip_limit(in.size()) bytes.
/// Errors name the compressed offset, or the limit.
std::string gunzip(const std::string& path, const std::string& in) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw InputError(path + ": cannot start zlib");
  std::string out;
  const uint64_t limit = gunzip_limit(in.size());
  std::vector<Bytef> buf(1 << 18);
  size_t fed = 0;  // input bytes handed to zlib so far
  auto consumed = [&] { return fed - z.avail_in; };
  for (;;) {
    if (z.avail_in == 0 && fed < in.size()) {
      const size_t n = std::min<size_t>(in.size() - fed, 1u << 30);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + fed));
      z.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    z.next_out = buf.data();
    z.avail_out = static_cast<uInt>(buf.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = buf.size() - z.avail_out;
    if (out.size() + produced > limit) {  // checked before the text grows past it
      inflateEnd(&z);
      throw InputError(path + ": decompresses to more than " + std::to_string(limit) + " bytes (the limit for a " +
                       std::to_string(in.size()) + "-byte gzip file: " + std::to_string(kGunzipMaxRatio) +
                       " times its size, at least " + std::to_string(kGunzipFloorBytes >> 20) +
                       " MiB); refusing to expand it further. If it is a real trace, gunzip it and analyse the JSON");
    }
    out.append(reinterpret_cast<const char*>(buf.data()), produced);
    if (rc == Z_STREAM_END) {
      const size_t at = consumed();
      if (at < in.size() && starts_with_gzip_magic(std::string_view(in).substr(at))) {
        inflateReset(&z);
        continue;
      }
      if (in.find_first_not_of('\0', at) != std::string::npos) {
        inflateEnd(&z);
        throw InputError(path + ": offset " + std::to_string(at) + ": data after the end of the gzip stream");
      }
      break;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && fed == in.size()) {
      const size_t at = consumed();
      inflateEnd(&z);
      throw InputError(path + ": the gzip stream is cut short at offset " + std::to_string(at) + " (" +
                       std::to_string(out.size()) + " bytes decompressed): the file is incomplete");
    }
    const std::string why = z.msg ? z.msg : "zlib error " + std::to_string(rc);
    const size_t at = consumed();
    inflateEnd(&z);
    throw InputError(path + ": offset " + std::to_string(at) + ": starts like gzip (1f 8b) but is not a valid gzip stream: " + why);
  }
  inflateEnd(&z);
  return out;
}

// Editors on Windows write a UTF-8 byte-order mark before JSON; JSON parsers refuse it.
void strip_bom(std::string& text) {
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
}

}  // namespace

TraceText read_trace_text(const std::string& path) {
  TraceText t;
  t.text = read_bytes(path);
  if (!starts_with_gzip_magic(t.text)) {
    strip_bom(t.text);
    return t;
  }
  t.text = gunzip(path, t.text);
  t.gzipped = true;
  if (t.text.empty()) throw InputError(path + ": the gzip stream holds no data");
  if (t.text.size() >= 8 && std::memcmp(t.text.data(), dump::kMagic, 8) == 0)
    throw InputError(path + ": a gzip-compressed InferScope dump: decompress it (gunzip) and analyse the dump");
  strip_bom(t.text);
  return t;
}


}  // namespace inferscope::import

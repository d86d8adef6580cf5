#include "import/trace_text.hpp"

#include "dump/format.hpp"
#include "import/import.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace inferscope::import {

namespace {

bool starts_with_gzip_magic(std::string_view b) {
  return b.size() >= 2 && static_cast<unsigned char>(b[0]) == 0x1f && static_cast<unsigned char>(b[1]) == 0x8b;
}

}  // namespace

// zlib's state, its compressed input being raw_ (members of one gzip file one after another: gzip -c a b > c).
struct TraceTextSource::Inflate {
  z_stream z{};
  bool open = false;
  ~Inflate() {
    if (open) inflateEnd(&z);
  }
};

TraceTextSource::TraceTextSource(const std::string& path) : path_(path), file_(path, std::ios::binary), raw_(kPieceBytes) {
  if (!file_) throw InputError(path + ": cannot open: " + std::strerror(errno));
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) file_size_ = uint64_t(st.st_size);
}

TraceTextSource::~TraceTextSource() = default;

bool TraceTextSource::read_raw() {
  file_.read(raw_.data(), std::streamsize(raw_.size()));
  raw_at_ = 0;
  raw_end_ = size_t(file_.gcount());
  file_read_ += raw_end_;
  if (file_.bad()) throw InputError(path_ + ": cannot read: " + std::strerror(errno));
  return raw_end_ > 0;
}

bool TraceTextSource::next(std::string_view& piece) {
  if (!started_) {
    started_ = true;
    if (!read_raw()) return false;
    gzipped_ = starts_with_gzip_magic(std::string_view(raw_.data(), raw_end_));
    if (gzipped_) {
      z_ = std::make_unique<Inflate>();
      if (inflateInit2(&z_->z, 15 + 16) != Z_OK) throw InputError(path_ + ": cannot start zlib");
      z_->open = true;
      text_.resize(kPieceBytes);
    }
    const bool more = gzipped_ ? next_gunzipped(piece) : next_plain(piece);
    if (gzipped_ && !more) throw InputError(path_ + ": the gzip stream holds no data");
    if (more) check_first_text(piece);
    // Editors on Windows write a UTF-8 byte-order mark before JSON; JSON parsers refuse it.
    if (more && piece.substr(0, 3) == "\xEF\xBB\xBF") piece.remove_prefix(3);
    return more;
  }
  return gzipped_ ? next_gunzipped(piece) : next_plain(piece);
}

void TraceTextSource::check_first_text(std::string_view piece) {
  if (gzipped_ && piece.size() >= 8 && std::memcmp(piece.data(), dump::kMagic, 8) == 0)
    throw InputError(path_ + ": a gzip-compressed InferScope dump: decompress it (gunzip) and analyse the dump");
}

bool TraceTextSource::next_plain(std::string_view& piece) {
  if (raw_at_ == raw_end_ && !read_raw()) return false;
  piece = std::string_view(raw_.data() + raw_at_, raw_end_ - raw_at_);
  raw_at_ = raw_end_;
  return true;
}

bool TraceTextSource::next_gunzipped(std::string_view& piece) {
  if (finished_) return false;
  z_stream& z = z_->z;
  const uint64_t limit = gunzip_limit(file_size_);
  // The compressed offset zlib reached: where the current buffer starts in the file, plus how far into it.
  auto consumed = [&] {
    return file_read_ - raw_end_ + uint64_t(reinterpret_cast<const char*>(z.next_in) - raw_.data());
  };
  for (;;) {
    if (z.avail_in == 0) {
      if (raw_at_ == raw_end_ && !read_raw()) {
        throw InputError(path_ + ": the gzip stream is cut short at offset " + std::to_string(file_read_) + " (" +
                         std::to_string(produced_) + " bytes decompressed): the file is incomplete");
      }
      z.next_in = reinterpret_cast<Bytef*>(raw_.data() + raw_at_);
      z.avail_in = static_cast<uInt>(raw_end_ - raw_at_);
      raw_at_ = raw_end_;
    }
    z.next_out = reinterpret_cast<Bytef*>(text_.data());
    z.avail_out = static_cast<uInt>(text_.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = text_.size() - z.avail_out;
    if (produced_ + produced > limit)  // checked before the text is handed on
      throw InputError(path_ + ": decompresses to more than " + std::to_string(limit) + " bytes (the limit for a " +
                       std::to_string(file_size_) + "-byte gzip file: " + std::to_string(kGunzipMaxRatio) +
                       " times its size, at least " + std::to_string(kGunzipFloorBytes >> 20) +
                       " MiB); refusing to expand it further. If it is a real trace, gunzip it and analyse the JSON");
    if (rc == Z_STREAM_END) {
      // Another member follows, or zeros (some writers pad), or nothing; anything else is not gzip's.
      std::string_view rest(reinterpret_cast<const char*>(z.next_in), z.avail_in);
      if (rest.empty() && raw_at_ == raw_end_ && read_raw()) {
        rest = std::string_view(raw_.data(), raw_end_);
        z.next_in = reinterpret_cast<Bytef*>(raw_.data());
        z.avail_in = static_cast<uInt>(raw_end_);
        raw_at_ = raw_end_;
      }
      if (starts_with_gzip_magic(rest)) {
        inflateReset(&z);
      } else if (rest.find_first_not_of('\0') != std::string_view::npos) {
        throw InputError(path_ + ": offset " + std::to_string(consumed()) + ": data after the end of the gzip stream");
      } else {
        finished_ = true;
      }
    } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && z.avail_in == 0)) {
      const std::string why = z.msg ? z.msg : "zlib error " + std::to_string(rc);
      throw InputError(path_ + ": offset " + std::to_string(consumed()) +
                       ": starts like gzip (1f 8b) but is not a valid gzip stream: " + why);
    }
    produced_ += produced;
    if (produced) {
      piece = std::string_view(text_.data(), produced);
      return true;
    }
    if (finished_) return false;
  }
}

}  // namespace inferscope::import

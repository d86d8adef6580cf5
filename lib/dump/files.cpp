#include "dump/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace inferscope::dump {

std::string file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::optional<std::string> not_a_regular_file(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return path + ": cannot open: " + std::strerror(errno);
  if (S_ISREG(st.st_mode)) return std::nullopt;
  if (S_ISDIR(st.st_mode)) return path + ": is a directory, not a file (name the dump or JSON trace inside it)";
  return path + ": is " + file_kind(st.st_mode) + ", not a regular file; iscope-analyze reads dumps and JSON traces "
         "from regular files only";
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa{}, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

AtomicOutput::AtomicOutput(const std::string& path) : path_(path) {
  // Through a symlink the file it points to is replaced, not the link.
  std::error_code ec;
  if (std::filesystem::is_symlink(path_, ec)) {
    auto target = std::filesystem::canonical(path_, ec);
    if (!ec) path_ = target.string();
  }
  struct stat st{};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    direct_ = true;
    out_.open(path_, std::ios::binary);
    if (!out_) error_ = "cannot write " + path + ": " + std::strerror(errno);
    return;
  }
  std::vector<char> name(path_.begin(), path_.end());
  const std::string suffix = ".tmpXXXXXX";
  name.insert(name.end(), suffix.begin(), suffix.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    error_ = "cannot write " + path + ": cannot create a temporary file beside it: " + std::strerror(errno);
    return;
  }
  temp_ = name.data();
  // mkstemp makes the file 0600; a report gets what a plain create would give it (0666 less the umask).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  ::close(fd);
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    error_ = "cannot write " + temp_ + ": " + std::strerror(errno);
    discard();
  }
}

AtomicOutput::~AtomicOutput() {
  if (!done_) discard();
}

void AtomicOutput::discard() {
  done_ = true;
  if (out_.is_open()) out_.close();
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

bool AtomicOutput::commit() {
  if (done_ || !ok()) return false;
  out_.flush();
  const bool written = static_cast<bool>(out_);
  out_.close();
  if (!written || out_.fail()) {
    error_ = "error while writing " + path_ + (errno ? std::string(": ") + std::strerror(errno) : std::string());
    discard();
    return false;
  }
  done_ = true;
  if (direct_) return true;
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    error_ = "cannot write " + path_ + ": " + std::strerror(errno);
    ::unlink(temp_.c_str());
    return false;
  }
  return true;
}

}  // namespace inferscope::dump

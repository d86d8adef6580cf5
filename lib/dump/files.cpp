#include "dump/files.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
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
  return path + ": is " + file_kind(st.st_mode) + ", not a regular file; dumps and JSON traces "
         "are read from regular files only";
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa{}, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

OutputTarget resolve_output(const std::string& path) {
  OutputTarget t;
  std::string p = path;
  // Followed by hand rather than with canonical(): a link to a file not yet there (a dangling link) must lead
  // to that file, not be renamed over itself. 40 links, as the kernel allows (ELOOP).
  for (int hops = 0;; ++hops) {
    struct stat st{};
    if (::lstat(p.c_str(), &st) != 0) break;  // nothing there: it is created
    if (!S_ISLNK(st.st_mode)) {
      t.mode = st.st_mode;
      t.direct = !S_ISREG(st.st_mode);
      break;
    }
    if (hops == 40) {
      t.error = path + ": too many levels of symbolic links";
      return t;
    }
    std::error_code ec;
    const std::filesystem::path to = std::filesystem::read_symlink(p, ec);
    if (ec) {
      t.error = path + ": cannot read the symbolic link " + p + ": " + ec.message();
      return t;
    }
    p = to.is_absolute() ? to.string() : (std::filesystem::path(p).parent_path() / to).string();
  }
  t.path = p;
  return t;
}

AtomicOutput::AtomicOutput(const std::string& path) : path_(path) {
  const OutputTarget target = resolve_output(path);
  if (!target.error.empty()) {
    error_ = "cannot write " + target.error;
    return;
  }
  path_ = target.path;
  if (target.direct) {
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
  // Something other than a regular file planted at the output while it was written is left alone.
  struct stat st{};
  if (::lstat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    error_ = "cannot write " + path_ + ": it became " + (S_ISLNK(st.st_mode) ? std::string("a symbolic link") : file_kind(st.st_mode)) +
             " while the output was written; left as it is";
    ::unlink(temp_.c_str());
    return false;
  }
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    error_ = "cannot write " + path_ + ": " + std::strerror(errno);
    ::unlink(temp_.c_str());
    return false;
  }
  return true;
}

std::string absolute_path(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  std::vector<char> cwd(PATH_MAX);
  if (!::getcwd(cwd.data(), cwd.size())) return path;
  const std::string dir = cwd.data();
  return dir + (dir == "/" ? "" : "/") + path;
}

std::optional<std::string> report_target_would_block(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if (S_ISSOCK(st.st_mode)) return std::string("is a socket");
  if (!S_ISFIFO(st.st_mode)) return std::nullopt;
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {  // a reader is there
    ::close(fd);
    return std::nullopt;
  }
  return std::string("is a FIFO (named pipe) that nothing reads");
}

namespace {

// The file systems that hold no data of a user's: what statfs(2) calls them (linux/magic.h), and their names.
const char* kernel_filesystem(long type) {
  switch (static_cast<unsigned long>(type)) {
    case 0x9fa0: return "/proc (procfs)";
    case 0x62656572: return "/sys (sysfs)";
    case 0x27e0eb: return "a cgroup file system";
    case 0x63677270: return "a cgroup2 file system";
    case 0x64626720: return "debugfs";
    case 0x74726163: return "tracefs";
    case 0x73636673: return "securityfs";
    case 0x62656570: return "configfs";
    case 0xcafe4a11: return "bpffs";
    case 0x6165676c: return "pstore";
    case 0xde5e81e4: return "efivarfs";
    case 0x1cd1: return "devpts";
    default: return nullptr;
  }
}

}  // namespace

std::optional<std::string> on_kernel_filesystem(const std::string& path) {
  struct statfs fs{};
  std::string at = path;
  if (::statfs(at.c_str(), &fs) != 0) {
    const size_t slash = path.rfind('/');
    at = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    if (::statfs(at.c_str(), &fs) != 0) return std::nullopt;
  }
  if (const char* name = kernel_filesystem(fs.f_type)) return "is on " + std::string(name) + ", which holds no data; name a file on a disk";
  return std::nullopt;
}

std::optional<std::string> unusable_output(const std::string& path) {
  if (auto why = on_kernel_filesystem(path)) return path + ": " + *why;
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;  // nothing there (or unreachable: open says why)
  if (S_ISREG(st.st_mode)) return std::nullopt;
  if (S_ISLNK(st.st_mode))
    return path + ": is a symbolic link; refusing to follow it (name the file it points to, or another path)";
  return path + ": is " + file_kind(st.st_mode) + "; a dump is written to a regular file only (choose another path)";
}

int create_temp_beside(const std::string& path, std::string& temp) {
  std::vector<char> name(path.begin(), path.end());
  const std::string suffix = ".tmpXXXXXX";
  name.insert(name.end(), suffix.begin(), suffix.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return -1;
  temp = name.data();
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0644 & ~mask);
  return fd;
}

std::vector<std::string> temporaries_beside(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".tmp";
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(p.has_parent_path() ? p.parent_path() : fs::path("."), ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() == prefix.size() + 6 && name.compare(0, prefix.size(), prefix) == 0 &&
        it->is_regular_file(ec) && !it->is_symlink(ec))
      found.push_back(it->path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

namespace {

sigset_t file_size_signal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGXFSZ);
  return set;
}

bool file_size_signal_pending() {
  sigset_t pending;
  return ::sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
}

}  // namespace

HoldFileSizeSignal::HoldFileSizeSignal() {
  const sigset_t xfsz = file_size_signal();
  ::pthread_sigmask(SIG_BLOCK, &xfsz, &old_mask_);
  was_pending_ = file_size_signal_pending();
}

HoldFileSizeSignal::~HoldFileSizeSignal() {
  const int saved_errno = errno;  // the caller reads the failed write's errno after this scope
  if (!was_pending_ && file_size_signal_pending()) {
    const sigset_t xfsz = file_size_signal();
    const timespec now{0, 0};
    while (::sigtimedwait(&xfsz, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  errno = saved_errno;
}

namespace {

pid_t read_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  return n > 0 ? static_cast<pid_t>(std::atol(buf)) : 0;
}

// Whether `fd` is still the file at `path` (a releasing holder unlinks it before it lets go of the lock).
bool still_linked(int fd, const std::string& path) {
  struct stat a{}, b{};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

OutputLock::OutputLock(const std::string& output) { acquire(output); }

bool OutputLock::acquire(const std::string& output) {
  release();
  error_.clear();
  path_ = output + ".lock";
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
      error_ = errno == ELOOP ? path_ + ": is a symbolic link; refusing to follow it"
                              : "cannot create " + path_ + ": " + std::strerror(errno);
      return false;
    }
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      error_ = path_ + ": is " + file_kind(st.st_mode) + ", not a lock file";
      ::close(fd);
      return false;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const pid_t holder = read_pid(fd);
      ::close(fd);
      error_ = output + " is being written by another session" +
               (holder ? " (pid " + std::to_string(holder) + ")" : std::string()) + "; choose another output";
      return false;
    }
    if (!still_linked(fd, path_)) {  // its holder removed it as we opened it: take the new one
      ::close(fd);
      continue;
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    const HoldFileSizeSignal hold;  // under ulimit -f 0 the pid is not written; the program runs on
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
      // The lock holds without the pid; only the message of a refused session is poorer.
    }
    fd_ = fd;
    return true;
  }
  error_ = "cannot lock " + path_ + ": it keeps being replaced";
  return false;
}

void OutputLock::release() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // before the lock goes: a waiter that opened it sees it unlinked and retries
  ::close(fd_);
  fd_ = -1;
}

void OutputLock::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

pid_t output_lock_holder(const std::string& output) {
  const std::string path = output + ".lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  pid_t holder = 0;
  struct stat st{};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    holder = read_pid(fd);
    if (holder == 0) holder = -1;  // held, pid not written yet
  }
  ::close(fd);
  return holder;
}

bool write_whole(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t r = ::write(fd, p, size);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    size -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace inferscope::dump

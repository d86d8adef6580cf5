#include "runtime/dump_file.hpp"

#include "runtime/runtime.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

namespace inferscope::runtime {
namespace {

std::atomic<WriteAtFn> g_write_at{nullptr};

ssize_t plain_pwrite(int fd, const void* data, size_t size, off_t offset) { return ::pwrite(fd, data, size, offset); }

// Writes all `size` bytes at `offset`: EINTR and EAGAIN are retried (EAGAIN after a short pause, a bounded
// number of times), a short write continues where it stopped. False (errno set) on any other failure, or a
// write that makes no progress.
// A file-size limit makes the write that reaches it fail with EFBIG here (its SIGXFSZ held back): a failed
// append like any other, never the end of the program.
bool write_whole_at(int fd, const uint8_t* p, size_t size, uint64_t offset) {
  const dump::HoldFileSizeSignal hold;
  const WriteAtFn write_at = dump_write_function();
  int again = 0;
  size_t done = 0;
  while (done < size) {
    const ssize_t r = write_at(fd, p + done, size - done, static_cast<off_t>(offset + done));
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN && ++again <= 100) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (r == 0) errno = ENOSPC;  // no progress: what a full disk looks like to a write that is not refused
    return false;
  }
  return true;
}

}  // namespace

WriteAtFn dump_write_function() {
  WriteAtFn f = g_write_at.load(std::memory_order_acquire);
  return f ? f : plain_pwrite;
}

void set_dump_write_for_testing(WriteAtFn write_at) { g_write_at.store(write_at, std::memory_order_release); }

DumpFile::~DumpFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool DumpFile::open(const std::string& output, bool in_place, std::string& error, bool lock) {
  output_ = output;
  if (lock && !lock_.acquire(output)) {
    error = lock_.error();
    return false;
  }
  if (auto why = dump::unusable_output(output)) {
    error = *why;
    lock_.release();
    return false;
  }
  if (in_place) {
    // O_EXCL: never a file someone else made (a planted symlink or FIFO appearing after the check included).
    fd_ = ::open(output.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) {
      error = "cannot create " + output + ": " + std::strerror(errno);
      lock_.release();
      return false;
    }
  }
  if (fd_ < 0) {  // a dump from an earlier run is there: it is replaced at commit(), by a whole new one
    fd_ = dump::create_temp_beside(output, temp_);
    if (fd_ < 0) {
      error = "cannot create a file beside " + output + ": " + std::strerror(errno);
      lock_.release();
      return false;
    }
  }
  created_ = true;
  return true;
}

bool DumpFile::append(const void* data, size_t size) {
  if (fd_ < 0 || broken_) {
    errno = fd_ < 0 ? EBADF : EIO;
    return false;
  }
  if (write_whole_at(fd_, static_cast<const uint8_t*>(data), size, size_)) {
    size_ += size;
    return true;
  }
  const int saved = errno;
  // Part of the buffer may be on disk: cut it off, so that what follows is appended after a whole chunk.
  if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) broken_ = true;
  errno = saved;
  return false;
}

bool DumpFile::rewrite(const void* data, size_t size) {
  if (fd_ < 0) return false;
  if (::ftruncate(fd_, 0) != 0) return false;
  size_ = 0;
  broken_ = false;
  return append(data, size);
}

void DumpFile::close_keeping_lock() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  closed_ = true;
}

bool DumpFile::commit(std::string& error, bool replace) {
  if (fd_ < 0 && !closed_) {
    error = "no file open for " + output_;
    return false;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  bool ok = true;
  if (!temp_.empty() && !replace) {
    error = "the dump is incomplete; it is left at " + temp_ + " and " + output_ + " is not replaced";
    ok = false;
  } else if (!temp_.empty()) {
    if (auto why = dump::unusable_output(output_)) {
      error = *why + "; the dump is left at " + temp_;
      ok = false;
    } else if (::rename(temp_.c_str(), output_.c_str()) != 0) {
      error = "cannot rename " + temp_ + " to " + output_ + ": " + std::strerror(errno) + "; the dump is left at " + temp_;
      ok = false;
    }
  }
  lock_.release();
  return ok;
}

void DumpFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (created_) ::unlink(written_path().c_str());
  created_ = false;
  lock_.release();
}

void DumpFile::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  lock_.abandon();
}

}  // namespace inferscope::runtime

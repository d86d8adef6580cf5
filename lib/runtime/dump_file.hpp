// The file a session writes its dump to (docs/reliability.md, "Files").
//
// - One live writer per output: an flock on <output>.lock (dump::OutputLock).
// - Never through a symlink, never over a FIFO, device or directory: refused at start, with a message.
// - Created exclusively: at the output itself when nothing is there (stream mode: a killed run's dump is
//   where it was asked to be), else in a temporary beside it (<output>.tmpXXXXXX, O_EXCL) renamed over the
//   output by commit(), so a finished dump from an earlier run is replaced only by a whole new one.
// - Appends are whole or nothing: a write that fails (ENOSPC, EIO, ...) after part of a buffer reached the
//   disk is truncated back to the end of the last whole append, so the file never holds a torn chunk in the
//   middle; EINTR, EAGAIN and short writes are retried.
//
//   DumpFile f;
//   if (!f.open("run.iscope", /*in_place=*/true, error)) ...;
//   if (!f.append(bytes.data(), bytes.size())) ...;   // nothing of `bytes` is in the file; errno says why
//   f.commit(error);                                    // renamed into place when written to a temporary
#pragma once

#include "dump/files.hpp"

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace inferscope::runtime {

/// The write the dump files use (pwrite(2) unless a test injects faults: runtime.hpp).
using WriteAtFn = ssize_t (*)(int fd, const void* data, size_t size, off_t offset);
WriteAtFn dump_write_function();

class DumpFile {
 public:
  DumpFile() = default;
  ~DumpFile();
  DumpFile(const DumpFile&) = delete;
  DumpFile& operator=(const DumpFile&) = delete;

  /// Locks `output` (unless `lock` is false: a ring snapshot beside a locked output), refuses a special file
  /// or a symlink there, and creates the file. `in_place`: write at the output itself when nothing is there.
  bool open(const std::string& output, bool in_place, std::string& error, bool lock = true);
  /// Appends `size` bytes after the last whole append; false (errno set) when they could not all be written:
  /// the file is then as it was before the call.
  bool append(const void* data, size_t size);
  /// Replaces everything written so far with `size` bytes (a ring snapshot).
  bool rewrite(const void* data, size_t size);
  /// Closes the file and, when it is a temporary, renames it over the output (refused if a special file or a
  /// symlink appeared there meanwhile; the temporary then stays, named in `error`). `replace` false: an
  /// incomplete dump never replaces an earlier one; it stays at the temporary (named in `error`).
  bool commit(std::string& error, bool replace = true);
  /// Closes the file, keeping the lock, so that a program that used every other descriptor still leaves one for
  /// the dump written at stop (adaptive mode's snapshot beside its streamed baseline); commit() then only renames.
  void close_keeping_lock();
  /// Closes and removes what this session created (its start failed).
  void discard();
  /// A forked child's copy: closed; the file, the temporary and the lock stay the parent's.
  void abandon();

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  /// Where the bytes go now: the output, or the temporary until commit().
  const std::string& written_path() const { return temp_.empty() ? output_ : temp_; }
  const std::string& output() const { return output_; }
  uint64_t size() const { return size_; }

 private:
  dump::OutputLock lock_;
  std::string output_, temp_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool broken_ = false;   // a truncation back to the last whole append failed: nothing more is appended
  bool created_ = false;  // written_path() is ours to remove
  bool closed_ = false;   // close_keeping_lock() closed it: what it holds is final
};

}  // namespace inferscope::runtime

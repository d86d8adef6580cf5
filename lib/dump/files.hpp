// Files a tool reads or writes next to dumps: is an input something it can read without blocking, is an
// output the input itself, and writing an output so that a failure never leaves it half-written.
//
//   if (auto why = dump::not_a_regular_file("run.iscope")) throw Error(*why);   // "run.iscope: is a directory"
//   if (dump::same_file("report.md", "run.iscope")) ...                          // refuse: would overwrite the input
//   dump::AtomicOutput out("report.md");   // writes "report.md.tmpXXXXXX" beside it
//   out.stream() << text;
//   out.commit();                          // renamed into place; without commit() the temporary is removed
//
// And for the runtime's dumps (docs/reliability.md, "Files"):
//
//   if (auto why = dump::unusable_output("run.iscope")) ...   // "run.iscope: is a symbolic link; ..."
//   dump::OutputLock lock("run.iscope");                      // flock on "run.iscope.lock": one session per output
//   if (!lock.ok()) ... lock.error() ...                      // "... is being written by another session (pid 4242)"
//   { dump::HoldFileSizeSignal hold; ::pwrite(...); }         // past ulimit -f: EFBIG, not death by SIGXFSZ
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <fstream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace inferscope::dump {

/// What kind of file `mode` (stat's st_mode) is, in words: "a directory", "a FIFO (named pipe)", ...
std::string file_kind(unsigned mode);

/// Why `path` cannot be read as an input file: "PATH: is a directory, not a file", "PATH: is a FIFO (named
/// pipe), not a regular file", or "PATH: cannot open: <errno text>". Empty when it is a regular file. Uses
/// stat(), so it never blocks (opening a FIFO for reading would wait for a writer).
std::optional<std::string> not_a_regular_file(const std::string& path);

/// True when both paths name one existing file (same device and inode), through symlinks, relative paths
/// and hard links alike. False when either does not exist.
bool same_file(const std::string& a, const std::string& b);

/// Where a tool's output named `path` goes, by the one rule every output of iscope-analyze and iscope-diff
/// follows: through a symbolic link (a chain of them) the file at its end, existing or not, so the link stays a
/// link; an existing file that is not a regular file (/dev/stdout, /dev/null, a FIFO, a directory) is `direct`:
/// written into, or refused, but never renamed over (a rename over /dev/null run as root replaces the device
/// node with a regular file).
struct OutputTarget {
  std::string path;     ///< the file to write: `path` itself, or the end of its symlink chain
  bool direct = false;  ///< it exists and is not a regular file
  unsigned mode = 0;    ///< its st_mode when it exists, else 0
  std::string error;    ///< why it cannot be resolved (a symlink loop); then nothing else is set
};
OutputTarget resolve_output(const std::string& path);

/// An output file written to a temporary beside it and renamed over it by commit(): readers of `path` see
/// the old file or the whole new one, never a truncated or half-written one. Where it goes follows
/// resolve_output(): a path that exists and is not a regular file (/dev/stdout, a FIFO) is written directly, as
/// it cannot be replaced by a rename; through a symlink the file it points to is replaced, not the link.
class AtomicOutput {
 public:
  /// Opens the temporary; `error()` says why when it could not be created.
  explicit AtomicOutput(const std::string& path);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::ostream& stream() { return out_; }
  /// Flushes, closes and renames into place; false (and error()) when any write failed: the target is then
  /// untouched and the temporary removed.
  bool commit();

 private:
  void discard();

  std::string path_, temp_;
  std::ofstream out_;
  std::string error_;
  bool direct_ = false, done_ = false;
};

/// `path` made absolute against the working directory now ("out/run.iscope" -> "/home/u/out/run.iscope"), so that
/// it names the same file after the process changes its directory; as given when it is empty or absolute, or the
/// working directory cannot be read.
std::string absolute_path(const std::string& path);

/// Why `path` (or, when nothing is there, its directory) is on a file system of the kernel's own rather than one that
/// stores data: /proc, /sys, cgroup, debugfs, ... ("is on /proc (procfs), which holds no data; name a file on a
/// disk"). `/proc/self/mem` is a "regular file" there. Empty otherwise, or when it cannot be told.
std::optional<std::string> on_kernel_filesystem(const std::string& path);

/// Why `path` cannot be a dump's output: it is a symbolic link ("refusing to follow it"), a directory, FIFO,
/// device or socket, or on a kernel file system (on_kernel_filesystem). Empty when nothing is there or it is a
/// regular file elsewhere. Uses lstat() and statfs(), never opens it.
std::optional<std::string> unusable_output(const std::string& path);

/// Why writing a report to `path` at a program's exit could hold that exit for ever: a FIFO (through links too)
/// that nobody has open for reading (probed with a non-blocking open, closed at once), or a socket, which cannot be
/// opened at all. Empty otherwise: a file, a device, nothing there, or a pipe with a reader (`/dev/stdout` into
/// `| tee`).
std::optional<std::string> report_target_would_block(const std::string& path);

/// Creates `<path>.tmpXXXXXX` beside `path` exclusively (O_CREAT|O_EXCL: a planted file or symlink at any
/// name is never opened) with mode 0644 less the umask, O_CLOEXEC; returns the descriptor and sets `temp`, or
/// -1 with errno.
int create_temp_beside(const std::string& path, std::string& temp);
/// The regular files beside `path` named as create_temp_beside names them (`<path>.tmp` and six more
/// characters), sorted; empty when there are none or the directory cannot be read.
std::vector<std::string> temporaries_beside(const std::string& path);

/// write(2) until every byte is written (EINTR retried); false on any other failure. Async-signal-safe: the
/// crash handlers write with it.
bool write_whole(int fd, const void* data, size_t size);

/// One live writer per output: an exclusive flock on `<output>.lock`, which holds the writer's pid. The kernel
/// drops the lock when the process dies however it dies (SIGKILL included), so a lock file left behind by a
/// dead process never blocks a later run. The destructor removes the file and releases the lock.
class OutputLock {
 public:
  explicit OutputLock(const std::string& output);
  OutputLock() = default;
  ~OutputLock() { release(); }
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  /// Takes the lock (releasing any held); false and error() when another live process holds it or the lock
  /// file cannot be made.
  bool acquire(const std::string& output);
  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  void release();
  /// A forked child's copy: closed without unlocking or removing (the lock stays the parent's).
  void abandon();

 private:
  std::string path_, error_;
  int fd_ = -1;
};

/// While alive, a SIGXFSZ raised by this thread's writes (a file-size limit: ulimit -f, RLIMIT_FSIZE) is held
/// back and then discarded, so such a write fails with EFBIG instead of ending the process by the signal's default
/// action. For the profiler's own writes into a program: the program's writes, on its threads and outside this
/// scope, still get SIGXFSZ as without us; one already pending when the scope began is left pending. Only
/// async-signal-safe calls (pthread_sigmask, sigpending, sigtimedwait): a crash handler may use it.
class HoldFileSizeSignal {
 public:
  HoldFileSizeSignal();
  ~HoldFileSizeSignal();
  HoldFileSizeSignal(const HoldFileSizeSignal&) = delete;
  HoldFileSizeSignal& operator=(const HoldFileSizeSignal&) = delete;

 private:
  sigset_t old_mask_;
  bool was_pending_ = false;
};

/// The pid of the live process that holds `output`'s lock, 0 when none does (-1: held, pid not yet written).
pid_t output_lock_holder(const std::string& output);

}  // namespace inferscope::dump

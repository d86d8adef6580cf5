// How a run of iscope-run ends: whether the file at the dump's path is the one this run's program wrote, the
// closing line on stderr and the exit status (docs/cli.md, docs/reliability.md "Files").
#pragma once

#include <sys/types.h>
#include <time.h>

#include <string>

namespace iscope_run {

inline constexpr int kNoDump = 125;       // the program ran, but this run wrote no dump
inline constexpr int kCannotStart = 127;  // the program (or libinferscope.so) could not be found or started

/// What identifies one version of a file: a dump counts as written by this run only when it is there after
/// the program and is not the file that was there before it.
struct FileVersion {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  timespec mtime{};
};
FileVersion version_of(const std::string& path);

/// The closing lines and the exit status: the program's when this run wrote the whole dump (its END chunk included),
/// 128+N when signal N ended the program (said on stderr, as a shell would), else kNoDump, saying what is missing.
/// `before`: the file at `dump` before the program started, `launched` (CLOCK_REALTIME_COARSE) when it started,
/// `status` how the program `program` ended (waitpid's).
int finish(const std::string& dump, const FileVersion& before, const timespec& launched, pid_t program, int status,
           bool quiet);

}  // namespace iscope_run

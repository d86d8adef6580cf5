#include "outcome.hpp"

#include "dump/files.hpp"
#include "dump/reader.hpp"

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

namespace iscope_run {
namespace {

bool written_since(const FileVersion& before, const FileVersion& after, const timespec& launched) {
  if (!after.exists) return false;
  // The kernel stamps files from its coarse clock, so `launched` is read from the same clock.
  if (after.mtime.tv_sec < launched.tv_sec ||
      (after.mtime.tv_sec == launched.tv_sec && after.mtime.tv_nsec < launched.tv_nsec))
    return false;
  return !before.exists || before.dev != after.dev || before.ino != after.ino || before.size != after.size ||
         before.mtime.tv_sec != after.mtime.tv_sec || before.mtime.tv_nsec != after.mtime.tv_nsec;
}

// The pid the dump at `path` opens with (its process info); "" when it does not start as a dump.
std::optional<std::string> opening_pid(const std::string& path) {
  const auto info = inferscope::dump::leading_process_info(path);
  if (!info) return std::nullopt;
  const auto pid = std::find_if(info->begin(), info->end(), [](const auto& kv) { return kv.first == "pid"; });
  return pid == info->end() ? std::string() : pid->second;
}

// Where this run's dump is when it is not at `dump`: in a temporary beside it (<dump>.tmpXXXXXX, new since the
// program started and opening with its pid), where the session wrote because an earlier dump was at `dump`, left
// there when END or the rename failed or the program was killed. The words for the closing line, naming that
// exact file; "" when there is none.
std::string left_in_temporary(const std::string& dump, const timespec& launched, pid_t program) {
  for (const std::string& temp : inferscope::dump::temporaries_beside(dump)) {
    if (!written_since(FileVersion{}, version_of(temp), launched) || opening_pid(temp) != std::to_string(program))
      continue;
    return "; this run's dump is left at " + temp +
           (inferscope::dump::ends_with_end_chunk(temp) ? " (complete, but it did not replace " + dump + ")"
                                      : " (incomplete: no END chunk)");
  }
  return "";
}

// Why the file at `dump` is not this run's dump ("" when nothing is there), or nullopt when it is: new since the
// program started, and written by the program's own process. A file that is new but opens with another pid is
// another session's: two runs started together on one output both pass output_usable(), then one session takes
// the output and the other's runtime records nothing.
std::optional<std::string> not_this_runs(const std::string& dump, const FileVersion& before, const timespec& launched,
                                         pid_t program) {
  const FileVersion now = version_of(dump);
  if (!now.exists) return "";
  if (!written_since(before, now, launched)) return ": the file there is from an earlier run";
  const std::optional<std::string> pid = opening_pid(dump);
  if (!pid) return ": the file there does not start as a dump";
  if (*pid == std::to_string(program)) return std::nullopt;
  return ": the file there is the dump of another process" + (pid->empty() ? std::string() : ", pid " + *pid);
}

}  // namespace

FileVersion version_of(const std::string& path) {
  FileVersion v;
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
    v = {true, st.st_dev, st.st_ino, st.st_size, st.st_mtim};
  return v;
}

namespace {

// How the program ended, in the shell's terms: its exit status, or 128+N for signal N; and, for a signal, the words
// iscope-run says it with (" (the program was ended by signal 11, SIGSEGV)"), "" otherwise.
struct Ending {
  int status = 1;
  std::string by_signal;
};
Ending ending_of(int wait_status) {
  if (WIFEXITED(wait_status)) return {WEXITSTATUS(wait_status), ""};
  if (!WIFSIGNALED(wait_status)) return {1, ""};
  const int sig = WTERMSIG(wait_status);
  const char* abbrev = ::sigabbrev_np(sig);
  return {128 + sig, "the program was ended by signal " + std::to_string(sig) +
                         (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string()) +
                         (WCOREDUMP(wait_status) ? ", core dumped" : "")};
}

}  // namespace

int finish(const std::string& dump, const FileVersion& before, const timespec& launched, pid_t program, int status,
           bool quiet) {
  const Ending ended = ending_of(status);
  // The program's death by a signal is said whatever became of the dump: the shell would have said it (its last
  // lines of output may be missing), and iscope-run exits as the shell would, 128+N.
  if (!ended.by_signal.empty()) std::fprintf(stderr, "iscope-run: %s\n", ended.by_signal.c_str());
  const int failed = ended.by_signal.empty() ? kNoDump : ended.status;
  const std::optional<std::string> why_not = not_this_runs(dump, before, launched, program);
  if (!why_not && inferscope::dump::ends_with_end_chunk(dump)) {
    if (!quiet) std::fprintf(stderr, "iscope-run: dump written to %s\n", dump.c_str());
    return ended.status;
  }
  if (!why_not) {
    // This run's file, but its session never wrote END: a full disk, a file-size limit, no descriptor left for the
    // final snapshot, a kill, or a program that never ran its exit handlers (_exit(): dash ends so). "dump written"
    // would claim a whole dump.
    std::fprintf(stderr, "iscope-run: the dump at %s is incomplete: it has no END chunk, so the recorder did not "
                 "finish it (the program ended with status %d; either it ended without running its exit handlers, "
                 "with _exit() as dash does, or writing the end failed and the lines above say why); it is readable "
                 "up to its last whole chunk\n", dump.c_str(), ended.status);
    return failed;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kCannotStart) return kCannotStart;  // exec failed: said above
  std::fprintf(stderr, "iscope-run: no dump written to %s by this run%s (the program ended with status %d; its stderr "
               "may say why)%s\n", dump.c_str(), why_not->c_str(), ended.status,
               left_in_temporary(dump, launched, program).c_str());
  return failed;
}

}  // namespace iscope_run

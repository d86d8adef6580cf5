// File-name helpers iscope-run's parts share: where it runs from, whether a path exists, a path made absolute.
#pragma once

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace iscope_run {

/// The directory of this executable (/proc/self/exe), "." when it cannot be read.
inline std::string exe_dir() {
  char buf[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  const std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

inline bool exists(const std::string& p) {
  struct stat st;
  return !p.empty() && ::stat(p.c_str(), &st) == 0;
}

/// `p` against the working directory when it is relative.
inline std::string absolute(const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  char cwd[PATH_MAX] = {};
  if (!::getcwd(cwd, sizeof(cwd))) return p;
  return std::string(cwd) + "/" + p;
}

}  // namespace iscope_run

// Helpers shared by the foundation tests: temporary files, reading a dump back, running a helper process.
#pragma once

#include "dump/reader.hpp"

#include <inferscope/records.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace testutil {

// A file name in this test process's own new directory. Made by mkdtemp, not named by the pid alone: a pid is
// reused, and a directory left by an earlier run with the same pid made a test that creates a symlink fail with
// "File exists". A forked child shares its parent's directory (the name is kept from before the fork).
inline std::string temp_path(const std::string& name) {
  static const std::string dir = [] {
    std::string t = std::filesystem::temp_directory_path() / ("iscope-test-" + std::to_string(::getpid()) + "-XXXXXX");
    if (!::mkdtemp(t.data())) {
      std::perror(("mkdtemp " + t).c_str());
      std::abort();
    }
    return t;
  }();
  return dir + "/" + name;
}

/// An empty directory `name` in the test's temporary directory (emptied when a case runs again): what a run leaves
/// in it can be counted.
inline std::string fresh_dir(const std::string& name) {
  const std::string dir = temp_path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

struct RangeView {
  uint32_t thread;
  std::string name;
  uint32_t depth;
  uint64_t start, end;
  std::vector<inferscope::dump::Attr> attrs;
};

struct DumpContents {
  std::vector<RangeView> ranges;
  std::vector<RangeView> marks;  // start == end == ts
  std::vector<inferscope::AsyncRangeRecord> async;
  std::map<std::string, uint64_t> kinds;
  uint64_t records = 0;
};

inline DumpContents read_all(const inferscope::dump::DumpReader& r) {
  using namespace inferscope;
  DumpContents c;
  r.for_each_record([&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
    ++c.records;
    ++c.kinds[std::to_string(static_cast<int>(h.kind))];
    if (h.kind == RecordKind::kRange) {
      auto rec = dump::load<RangeRecord>(p);
      c.ranges.push_back({thread, r.string_at(rec.name), h.aux, rec.start, rec.end, r.attributes(p)});
    } else if (h.kind == RecordKind::kMark) {
      auto rec = dump::load<MarkRecord>(p);
      c.marks.push_back({thread, r.string_at(rec.name), 0, rec.ts, rec.ts, r.attributes(p)});
    } else if (h.kind == RecordKind::kAsyncRange) {
      c.async.push_back(dump::load<AsyncRangeRecord>(p));
    }
  });
  return c;
}

/// A key of the dump's process info ("" when absent; a later value for a key wins, as in the analyzer).
inline std::string process_value(const inferscope::dump::DumpReader& r, const std::string& key) {
  std::string v;
  for (const auto& [k, val] : r.process_info())
    if (k == key) v = val;
  return v;
}

inline size_t count_named(const std::vector<RangeView>& v, const std::string& name) {
  size_t n = 0;
  for (auto& r : v) n += r.name == name;
  return n;
}

/// Starts `argv` with extra environment entries (stdout to `stdout_file` when given); returns the pid.
inline pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                   const std::string& stdout_file = "") {
  std::vector<std::string> env;
  auto given = [&](const std::string& s) {  // the test's own value of a variable replaces the inherited one
    const std::string key = s.substr(0, s.find('=') + 1);
    for (auto& e : extra_env)
      if (e.rfind(key, 0) == 0) return true;
    return false;
  };
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    if (s.rfind("INFERSCOPE_", 0) == 0 || given(s)) continue;  // only what the test asks for
    env.push_back(s);
  }
  for (auto& e : extra_env) env.push_back(e);
  std::vector<char*> a, en;
  for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (auto& s : env) en.push_back(const_cast<char*>(s.c_str()));
  en.push_back(nullptr);
  pid_t pid = 0;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!stdout_file.empty())
    posix_spawn_file_actions_addopen(&fa, 1, stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int rc = ::posix_spawn(&pid, a[0], &fa, nullptr, a.data(), en.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

inline int wait_status(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {
  }
  return st;
}

/// The status of `pid` once it ends, or -1 when it is still running after `ms` milliseconds (it is then killed
/// with SIGKILL and reaped): a test of something that used to hang fails instead of hanging.
inline int wait_status_within(pid_t pid, int ms) {
  for (int waited = 0;; waited += 5) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    if (waited >= ms) break;
    ::usleep(5000);
  }
  ::kill(pid, SIGKILL);
  wait_status(pid);
  return -1;
}

inline std::string read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return {};
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

inline std::string binary(const std::string& rel) { return std::string(INFERSCOPE_BINARY_DIR) + "/" + rel; }

}  // namespace testutil

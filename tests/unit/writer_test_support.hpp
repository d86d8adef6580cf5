// Helpers of the runtime's writer tests (test_writer_files, test_writer_full_disk): a stream or ring config
// without collectors, ranges recorded at a pace the writer keeps up with, and the checks of a dump written
// through a disk that filled and freed.
#pragma once

#include <doctest/doctest.h>

#include "dump/files.hpp"
#include "runtime/runtime.hpp"
#include "test_util.hpp"

#include <inferscope/scope.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace inferscope::writer_test {

// Full capture: these tests are about how a stream or a ring is written (adaptive mode, the default, keeps its
// windows in memory; its own tests are in test_sampled_session and the crash cases of test_writer_files).
inline Config config_for(const std::string& path, BufferMode mode = BufferMode::kStream) {
  Config c;
  c.mode = CaptureMode::kFull;
  c.output = path;
  c.buffer_mode = mode;
  c.cupti = c.python = c.system = false;
  return c;
}

// Records `n` ranges named `name` in batches the writer keeps up with (no buffer_full drops).
template <class F>
void record_with(F one_range, int n) {
  for (int i = 0; i < n; ++i) {
    one_range();
    if (i % 500 == 499) {
      runtime::flush_now();
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  }
  runtime::flush_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
}

#define RECORD(name, n) record_with([] { ISCOPE_RANGE(name); }, n)

inline uint64_t drops_for(const dump::DumpReader& r, const std::string& reason) {
  uint64_t n = 0;
  for (const auto& d : r.drops())
    if (d.reason == reason) n += d.records;
  return n;
}

// What the analyzer would say about the END chunk's counts against the file.
inline std::map<std::string, uint64_t> accounting(const dump::DumpReader& r) {
  std::vector<std::string> warnings;
  std::map<std::string, uint64_t> drops;
  dump::report_file_accounting(r, warnings, drops);
  return drops;
}

// Checks a dump written through a disk that filled and freed: whole chunks only, complete, every range either
// in the file or counted (write_failed), and the END chunk agrees with the file.
inline void check_torn_free(const std::string& path, int recorded, const char* name) {
  dump::DumpReader r(path);
  CHECK_FALSE(r.damage());
  CHECK(r.complete());
  const uint64_t in_file = testutil::count_named(testutil::read_all(r).ranges, name);
  const uint64_t lost = drops_for(r, "write_failed");
  CHECK(lost > 0);
  CHECK(in_file + lost + drops_for(r, "buffer_full") == static_cast<uint64_t>(recorded));
  CHECK(r.end()->records_dropped >= lost);
  auto acc = accounting(r);
  CHECK(acc.count("lost_in_file") == 0);
  CHECK(acc.count("dropped_unlisted") == 0);
}

}  // namespace inferscope::writer_test

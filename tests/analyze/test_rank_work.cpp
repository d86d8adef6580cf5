// What each rank did inside its steps (lib/analyze/run/rank_work.hpp): the Python functions, ranges and kernels of each
// step, and the straggler's excess over the other ranks read from the matched steps only.
#include "analyze/run/rank_work.hpp"
#include "dump/builder.hpp"
#include "dump/clock_model.hpp"
#include "dump/reader.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace inferscope;
using namespace inferscope::analyze;

namespace {

constexpr int64_t kMs = 1'000'000;

RankStep span(uint64_t index, int64_t start_ms, int64_t end_ms) {
  RankStep s;
  s.index = index;
  s.start_ns = start_ms * kMs;
  s.end_ns = end_ms * kMs;
  return s;
}

double ms_of(const RankStep& s, const std::string& kind, const std::string& name) {
  auto it = s.work_ns.find({kind, name});
  return it == s.work_ns.end() ? 0 : it->second / kMs;
}

RankStep work(std::initializer_list<std::pair<std::pair<std::string, std::string>, double>> ms) {
  RankStep s;
  for (const auto& [key, v] : ms) s.work_ns[key] = v * kMs;
  s.work_read = true;
  return s;
}

}  // namespace

TEST_CASE("step work: self time of Python calls and ranges, kernel time, each in the step that holds its start") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("iscope_rank_work_" + std::to_string(::getpid()) + ".iscope")).string();
  {
    dump::DumpBuilder b(path, 1.0, 0);  // ticks are ns: the steps below are on the dump's clock
    const uint32_t t = b.thread("MainThread", 1);
    const uint32_t gpu = b.channel("cupti activity");
    const uint32_t load = b.code("load_checkpoint", "tp.py", 5), post = b.code("postprocess", "tp.py", 40),
                   inner = b.code("tolist", "tp.py", 41);
    b.pycall(t, load, 0, 1 * kMs, 9 * kMs);  // before the steps: one-off work, in no step
    // step 0 [10, 30): postprocess 12..20 holding tolist 13..16 (records in end order: the child first)
    b.pycall(t, inner, 1, 13 * kMs, 16 * kMs);
    b.pycall(t, post, 0, 12 * kMs, 20 * kMs);
    b.range(t, "decode", 0, 21 * kMs, 25 * kMs);
    b.kernel(gpu, "gemm", 1, 22 * kMs, 24 * kMs);
    // step 1 [30, 50): a kernel that starts in it and ends after it counts there, whole
    b.kernel(gpu, "gemm", 2, 48 * kMs, 52 * kMs);
    b.finish();
  }
  dump::DumpReader r(path);
  // the steps on the dump's clock (ticks are ns here, from the clock model's origin)
  const dump::ClockModel clock(r.calibration());
  std::vector<RankStep> steps = {span(0, 10, 30), span(1, 30, 50)};
  for (RankStep& s : steps) s.start_ns = clock.to_ns(uint64_t(s.start_ns)), s.end_ns = clock.to_ns(uint64_t(s.end_ns));
  add_step_work(r, steps);
  CHECK(steps[0].work_read);
  CHECK(steps[1].work_read);
  // past kMaxWorkSteps steps keep no work (the tables stay bounded however long the run)
  std::vector<RankStep> many(kMaxWorkSteps + 1, steps[0]);
  for (RankStep& s : many) s.work_ns.clear(), s.work_read = false;
  add_step_work(r, many);
  CHECK(many[kMaxWorkSteps - 1].work_read);
  CHECK_FALSE(many[kMaxWorkSteps].work_read);
  CHECK(many[kMaxWorkSteps].work_ns.empty());
  CHECK(ms_of(steps[0], "Python function", "postprocess (tp.py:40)") == doctest::Approx(5));  // 8 less tolist's 3
  CHECK(ms_of(steps[0], "Python function", "tolist (tp.py:41)") == doctest::Approx(3));
  CHECK(ms_of(steps[0], "range", "decode") == doctest::Approx(4));
  CHECK(ms_of(steps[0], "kernel", "gemm") == doctest::Approx(2));
  CHECK(ms_of(steps[1], "kernel", "gemm") == doctest::Approx(4));
  for (const RankStep& s : steps) CHECK(ms_of(s, "Python function", "load_checkpoint (tp.py:5)") == 0);
  std::filesystem::remove(path);
}

TEST_CASE("the straggler's excess: its mean per matched step over the most any other rank spent") {
  const std::pair<std::string, std::string> post{"Python function", "postprocess"}, step{"range", "step"},
      gemm{"kernel", "gemm"};
  // rank 1 spends 5 and 7 ms in postprocess (mean 6), rank 0 2 ms: 4 ms per step more
  const RankStep a0 = work({{post, 2}, {step, 1}, {gemm, 3}}), a1 = work({{post, 2}, {step, 1}, {gemm, 3}});
  const RankStep b0 = work({{post, 5}, {step, 5}, {gemm, 4}}), b1 = work({{post, 7}, {step, 5}, {gemm, 4}});
  const Excess did = straggler_excess({{&a0, &b0}, {&a1, &b1}}, 1);
  CHECK(did.kind == "Python function");  // the range's 4 ms excess is not over 1.25 x the function's
  CHECK(did.name == "postprocess");
  CHECK(did.ms == doctest::Approx(4));
  CHECK(did.what() == "Python function postprocess");

  // a range far larger than any function wins; so does a kernel larger than both
  const RankStep c0 = work({{post, 5}, {step, 9}}), c1 = work({{post, 5}, {step, 9}, {gemm, 20}});
  CHECK(straggler_excess({{&a0, &c0}}, 1).kind == "range");
  CHECK(straggler_excess({{&a0, &c1}}, 1).kind == "kernel");
  // late from GPU work: the kernel, though the host's function shows more (its wait for that kernel)
  const Excess gpu = straggler_excess({{&a0, &b0}, {&a1, &b1}}, 1, Lateness::kGpuWork);
  CHECK(gpu.what() == "kernel gemm");
  CHECK(gpu.ms == doctest::Approx(1));
  // ... and where no kernel ran more, what the host did
  CHECK(straggler_excess({{&a0, &a1}}, 1, Lateness::kGpuWork).what().empty());
  CHECK(straggler_excess({{&a0, &b0}}, 1, Lateness::kGpuWork).kind == "kernel");

  // a matched step whose work a rank did not read (past kMaxWorkSteps) is left out of the means, not read as 0
  RankStep unread = work({{post, 50}});
  unread.work_read = false;
  const Excess alone = straggler_excess({{&a0, &b0}}, 1), with_unread = straggler_excess({{&a0, &b0}, {&a1, &unread}}, 1);
  CHECK(with_unread.what() == alone.what());
  CHECK(with_unread.ms == doctest::Approx(alone.ms));

  // the other rank as straggler: nothing in excess; no matched step: nothing
  CHECK(straggler_excess({{&a0, &b0}}, 0).kind.empty());
  CHECK(straggler_excess({}, 0).kind.empty());
}

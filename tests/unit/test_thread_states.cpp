// dump::ThreadStateSlicer and the state names: the one reading of thread.state samples that the Perfetto trace's
// state tracks and the HTML timeline's state rows share.
#include "dump/thread_states.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

using inferscope::dump::ThreadStateSlice;
using inferscope::dump::ThreadStateSlicer;

namespace {

/// Every slice the samples give, closed ones first, then the open one.
std::vector<ThreadStateSlice> slices(const std::vector<std::pair<int64_t, int64_t>>& samples, int* refused = nullptr) {
  ThreadStateSlicer s;
  std::vector<ThreadStateSlice> out;
  std::optional<ThreadStateSlice> closed;
  for (const auto& [ts, code] : samples) {
    if (!s.add(ts, code, closed)) {
      if (refused) ++*refused;
      continue;
    }
    if (closed) out.push_back(*closed);
  }
  if (const auto open = s.finish()) out.push_back(*open);
  return out;
}

}  // namespace

TEST_CASE("thread states: a state holds from the sample that showed it to the first sample showing another") {
  const auto s = slices({{100, 'R'}, {200, 'R'}, {300, 'S'}, {400, 'S'}, {500, 'R'}});
  REQUIRE(s.size() == 3);
  CHECK(s[0].start == 100);
  CHECK(s[0].end == 300);
  CHECK(s[0].code == 'R');
  CHECK(s[1].start == 300);
  CHECK(s[1].end == 500);
  CHECK(s[1].code == 'S');
  // The last state ends at the last sample: nothing is known after it.
  CHECK(s[2].start == 500);
  CHECK(s[2].end == 500);
}

TEST_CASE("thread states: samples not later than the previous one are left out and counted") {
  int refused = 0;
  const auto s = slices({{100, 'R'}, {100, 'S'}, {50, 'D'}, {200, 'S'}}, &refused);
  CHECK(refused == 2);
  REQUIRE(s.size() == 2);
  CHECK(s[0].code == 'R');
  CHECK(s[0].end == 200);
  CHECK(s[1].code == 'S');
}

TEST_CASE("thread states: no samples, no slice") {
  CHECK(ThreadStateSlicer().finish() == std::nullopt);
}

TEST_CASE("thread states: a damaged dump's double has a code only where it has an int64") {
  using inferscope::dump::thread_state_code;
  CHECK(thread_state_code(false, 'S', 0) == 'S');
  CHECK(thread_state_code(true, 0, 82.0) == 'R');
  CHECK(thread_state_code(true, 0, std::nan("")) == -1);
  CHECK(thread_state_code(true, 0, 1e25) == -1);
  CHECK(thread_state_code(true, 0, -std::numeric_limits<double>::infinity()) == -1);
}

TEST_CASE("thread states: names as /proc words them, and what they mean for a step") {
  using inferscope::dump::thread_state_name;
  using inferscope::dump::thread_state_words;
  CHECK(thread_state_name('R') == "R (running)");
  CHECK(thread_state_name(1) == "state 1");
  // R is both on a CPU and waiting for one: the words say so rather than claim it ran.
  CHECK(thread_state_words('R') == "running or runnable");
  CHECK(thread_state_words('D') == "uninterruptible (I/O)");
  CHECK(thread_state_words('S') == "sleeping");
  CHECK(thread_state_words(7) == "state 7");
}

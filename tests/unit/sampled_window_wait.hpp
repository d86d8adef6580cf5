// Waiting on a sampling window's switch (test_fork, test_sampled_session): the writer thread opens and closes
// windows when it runs, which a loaded machine can delay past any pause between steps, so a test waits on the
// switch itself (runtime::sampled_window_state) before the steps a window must count.
#pragma once

#include "runtime/runtime.hpp"

#include <chrono>
#include <string>
#include <thread>

namespace testutil {

/// True once the running session's window state is `want` ("open", "off", ...), false after `limit` without it.
inline bool wait_sampled_window(const std::string& want, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (inferscope::runtime::sampled_window_state() != want && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return inferscope::runtime::sampled_window_state() == want;
}

}  // namespace testutil

// run_parallel: the analyzer's one way to run work on several threads (generic, no analysis).
#pragma once

#include <cstddef>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace inferscope::analyze::detail {

// Runs fn(0..n-1), each on its own thread (fn(0) on the caller's); rethrows the first failure after all ended.
template <class F>
void run_parallel(size_t n, F&& fn) {
  std::vector<std::exception_ptr> errors(n);
  auto guarded = [&](size_t i) {
    try {
      fn(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  size_t started = 1;
  try {
    for (; started < n; ++started) pool.emplace_back(guarded, started);
  } catch (const std::system_error&) {  // no more threads (limits): the rest runs here
  }
  if (n) guarded(0);
  for (size_t i = started; i < n; ++i) guarded(i);
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace inferscope::analyze::detail

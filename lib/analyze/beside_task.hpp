// One task run beside the caller's work, robust to the process's limits (docs/reliability.md, "Memory bounds").
#pragma once

#include <exception>
#include <system_error>
#include <thread>
#include <utility>

namespace inferscope::analyze::detail {

// Runs one task beside the caller's work: on a thread of its own when one can be started, else at once on the
// caller's (a process limit: RLIMIT_AS, RLIMIT_NPROC). `join()` waits and rethrows the task's failure; the
// destructor waits too, so a failure of the caller's own work meanwhile (out of memory) unwinds past a finished
// task. A bare std::thread threw "Resource temporarily unavailable" out of the analysis when it could not start,
// and ended the process (std::terminate) when the caller's work failed while it ran: iscope-analyze under
// `ulimit -v` of 16 or 32 MiB aborted (exit 134) instead of saying it ran out of memory.
class BesideTask {
 public:
  template <class F>
  explicit BesideTask(F&& fn) {
    auto guarded = [this, fn = std::forward<F>(fn)]() mutable {
      try {
        fn();
      } catch (...) {
        error_ = std::current_exception();
      }
    };
    try {
      thread_ = std::thread(guarded);
    } catch (const std::system_error&) {  // no thread to be had: the task runs here, now
      guarded();
    }
  }
  BesideTask(const BesideTask&) = delete;
  BesideTask& operator=(const BesideTask&) = delete;
  ~BesideTask() {
    if (thread_.joinable()) thread_.join();
  }
  void join() {
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  std::thread thread_;
  std::exception_ptr error_;
};

}  // namespace inferscope::analyze::detail

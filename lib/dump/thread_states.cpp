#include "dump/thread_states.hpp"

namespace inferscope::dump {

int64_t thread_state_code(bool is_double, int64_t i, double d) {
  if (!is_double) return i;
  if (!(d > -9.2e18 && d < 9.2e18)) return -1;  // NaN or out of range: no state code
  return static_cast<int64_t>(d);
}

std::string thread_state_name(int64_t code) {
  switch (code) {
    case 'R': return "R (running)";
    case 'S': return "S (sleeping)";
    case 'D': return "D (disk sleep)";
    case 'T': return "T (stopped)";
    case 't': return "t (tracing stop)";
    case 'X': return "X (dead)";
    case 'Z': return "Z (zombie)";
    case 'P': return "P (parked)";
    case 'I': return "I (idle)";
    case 'W': return "W (waking)";
    case 'K': return "K (wakekill)";
    default: return "state " + std::to_string(code);
  }
}

std::string thread_state_words(int64_t code) {
  switch (code) {
    case 'R': return "running or runnable";
    case 'S': return "sleeping";
    case 'D': return "uninterruptible (I/O)";
    case 'T':
    case 't': return "stopped";
    case 'X':
    case 'Z': return "exited";
    case 'I': return "idle";
    default: return thread_state_name(code);
  }
}

bool ThreadStateSlicer::add(int64_t ts, int64_t code, std::optional<ThreadStateSlice>& closed) {
  closed.reset();
  if (!seen_) {
    seen_ = true;
    code_ = code;
    since_ = last_ = ts;
    return true;
  }
  if (ts <= last_) return false;
  if (code != code_) {
    closed = ThreadStateSlice{since_, ts, code_};
    code_ = code;
    since_ = ts;
  }
  last_ = ts;
  return true;
}

std::optional<ThreadStateSlice> ThreadStateSlicer::finish() const {
  if (!seen_) return std::nullopt;
  return ThreadStateSlice{since_, last_, code_};
}

}  // namespace inferscope::dump

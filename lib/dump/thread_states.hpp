// A thread's scheduler state over time, read from the system collector's `thread.state` samples (the state
// letter of /proc/<tid>/task/<tid>/stat, docs/counters.md): one definition for every output that draws it, the
// Perfetto trace's state tracks (lib/export/perfetto_counters.cpp) and the HTML timeline's state lanes (the
// analyzer's representative step, lib/analyze/timeline_states.cpp).
//
// A sample is a snapshot: a state holds from the sample that first showed it to the first later sample that
// showed another (or, for the last state, to the last sample); what happened between two samples is not known.
//
//   dump::ThreadStateSlicer s;
//   std::optional<dump::ThreadStateSlice> done;
//   for (auto [ts, code] : samples)
//     if (s.add(ts, code, done) && done) draw(*done);   // a state that ended at ts
//   if (auto last = s.finish()) draw(*last);
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace inferscope::dump {

/// One stretch of one state, in the samples' time unit (ns).
struct ThreadStateSlice {
  int64_t start = 0, end = 0;
  int64_t code = 0;  ///< the state letter's ASCII code ('R' = 82), or any other number a damaged dump holds
};

/// A sample's state code from its stored value: the integer, or a double (a damaged dump) converted where it has
/// an int64 of its own, else -1.
int64_t thread_state_code(bool is_double, int64_t i, double d);

/// "R (running)" for 'R' (82), as /proc/<tid>/status words the scheduler states; "state <code>" for others.
std::string thread_state_name(int64_t code);

/// What a state means for the step, in a few words: "running or runnable" ('R': on a CPU or waiting for one;
/// the sample does not tell which), "sleeping", "uninterruptible (I/O)", ... ; "state <code>" for others.
std::string thread_state_words(int64_t code);

/// One thread's samples, in time order, as slices.
class ThreadStateSlicer {
 public:
  /// Takes a sample. False when it is not later than the previous one (left out, so that time runs forward);
  /// else `closed` holds the slice the sample ended (the state changed) or nothing.
  bool add(int64_t ts, int64_t code, std::optional<ThreadStateSlice>& closed);
  /// The state still open, up to the last sample (nothing before the first sample).
  std::optional<ThreadStateSlice> finish() const;

 private:
  bool seen_ = false;
  int64_t code_ = 0, since_ = 0, last_ = 0;
};

}  // namespace inferscope::dump

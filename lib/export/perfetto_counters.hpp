// The counter tracks of the Perfetto writer (perfetto.cpp decodes the records and says whose each sample is).
//
// A sample lands on the track of its counter and owner: one track per OS thread for the per-thread counters
// (the series of kThread and kOsThread scope of one thread join, as the thread table's os_tid says), per NUMA
// node, per GPU, one for the process and one for the machine. Cumulative counters (CPU time, context switches,
// faults, PSI stall time, NUMA page counts) become rates per second over the interval between two samples,
// their unit in the track name; `thread.state` becomes named slices on a state track beside the thread. A value
// equal to the one a track already shows is not written again. Internal to lib/report.
#pragma once

#include "dump/thread_states.hpp"
#include "export/perfetto_json.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace inferscope::exporter::perfetto {

/// How a cumulative counter reads as a rate: the unit shown, and the factor from "counter units per second".
struct RateUnit {
  std::string_view unit;  ///< "ms/s", "switches/s", "faults/s", "pages/s"
  double scale = 1;       ///< e.g. 1e-6 for a counter in ns shown in ms/s
};

/// The rate form of a cumulative counter of docs/counters.md (nullopt: a level, written as it is).
std::optional<RateUnit> cumulative_unit(std::string_view counter);

/// "R (running)" for 'R' (82): dump/thread_states.hpp, which also turns the samples into slices.
using dump::thread_state_name;

/// One sample, decoded, with the track it belongs to.
struct CounterSample {
  std::string_view counter;  ///< the dump's name, e.g. "thread.sched.run_ns"
  int64_t pid = 0;           ///< the process whose tracks hold it (the traced one, or a GPU pseudo-process)
  std::string_view owner;    ///< whose value it is, in the track name ("python3 3186", "NUMA node 0"); empty: the pid's
  int64_t ts_ns = 0;         ///< from the trace's origin
  bool is_double = false;
  int64_t i = 0;
  double d = 0;
};

/// The state track of one OS thread.
struct StateTrack {
  int64_t pid = 0, tid = 0;  ///< a tid of its own, clear of real thread ids
  std::string name;          ///< "python3 3186 · state"
};

class CounterTracks {
 public:
  explicit CounterTracks(EventWriter& w) : w_(w) {}

  /// Writes what the sample settles: a level that changed, the rate of the interval it closes.
  void add(const CounterSample& s);
  /// A thread.state sample: the previous state's slice ends here when the state changed.
  void add_state(const StateTrack& track, int64_t ts_ns, int64_t code);
  /// Closes every track: the last level where it was last sampled, a rate back to 0 at its last sample, the
  /// open state slice up to its last sample.
  void finish();
  /// Samples not later than their track's previous one, left out so that each track runs forward in time.
  uint64_t out_of_order() const { return out_of_order_; }

 private:
  struct Value {
    bool is_double = false;
    int64_t i = 0;
    double d = 0;
    int decimals = -1;  ///< a rate: written with this many decimals (-1: a level, as it came)
    bool operator==(const Value& o) const { return is_double == o.is_double && i == o.i && d == o.d; }
    double as_double() const { return is_double ? d : static_cast<double>(i); }
  };
  struct Track {
    std::optional<RateUnit> rate;
    bool have_last = false;  ///< a sample was seen
    int64_t last_ts = 0;     ///< the latest sample
    Value last;
    bool have_shown = false;  ///< a value was written
    int64_t shown_ts = 0;
    Value shown;  ///< what the track shows from shown_ts on
    bool have_at_origin = false;  ///< a value shown before the trace's origin, not written yet
    Value at_origin;              ///< that value, which the track holds at the origin
  };
  struct State {
    StateTrack track;
    dump::ThreadStateSlicer slicer;
  };

  void level(const std::string& name, int64_t pid, Track& t, int64_t ts, const Value& v);
  void rate(const std::string& name, int64_t pid, Track& t, int64_t ts, const Value& v);
  void show(const std::string& name, int64_t pid, Track& t, int64_t ts, const Value& v);
  void write(const std::string& name, int64_t pid, int64_t ts, const Value& v);
  void slice(const StateTrack& track, const dump::ThreadStateSlice& s);

  EventWriter& w_;
  std::map<std::pair<int64_t, std::string>, Track> tracks_;  ///< (pid, track name)
  std::map<std::pair<int64_t, int64_t>, State> states_;      ///< (pid, state tid)
  uint64_t out_of_order_ = 0;
};

}  // namespace inferscope::exporter::perfetto

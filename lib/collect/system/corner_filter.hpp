// Which samples of a cumulative counter to write so that linear interpolation between the written ones stays
// within a tolerance of every sample taken: a "swinging door" over (time, value) points. A thread that runs
// without pause, or stays blocked, is a straight line and costs two points however often it is sampled; only
// the corners, where its rate changes, are written. That is what lets the sampler read a thread's schedstat
// every millisecond (so the analyzer sees bursts of a few ms: a GIL holder, a producer's tokenizer) without
// writing a record per thread per millisecond.
//
//   CornerFilter f(50'000 /* value units: ns of CPU time */);
//   if (auto p = f.observe(ts, v)) write(*p);   // each sample
//   if (auto p = f.flush()) write(*p);          // keep-alive, the final round, a thread that exits
#pragma once

#include <cstdint>
#include <optional>

namespace inferscope::sys {

struct CounterPoint {
  uint64_t ts = 0;  ///< session clock ticks
  int64_t v = 0;
};

class CornerFilter {
 public:
  explicit CornerFilter(double tolerance) : tol_(tolerance) {}

  /// Takes a sample; returns the point to write now, if any. The first sample is always written. A later one is
  /// held back while one line from the last written point passes within the tolerance of every sample since;
  /// when the new sample breaks that, the previous sample (the corner) is returned and becomes the anchor. A
  /// sample no later than the anchor, or a value that goes backwards (a reused id), restarts the filter there.
  std::optional<CounterPoint> observe(uint64_t ts, int64_t v);
  /// The sample held back, to write now (keep-alive, final round, the thread went away); the filter then
  /// anchors there. nullopt when nothing is held back.
  std::optional<CounterPoint> flush();
  /// Whether a sample is held back.
  bool pending() const { return has_pending_; }
  /// The last written point (valid after the first observe).
  const CounterPoint& anchor() const { return anchor_; }

 private:
  void start_door(const CounterPoint& p);
  double tol_;
  bool has_anchor_ = false, has_pending_ = false;
  CounterPoint anchor_, pending_;
  double lo_ = 0, hi_ = 0;  ///< slopes (value per tick) from the anchor that keep every held sample in tolerance
};

}  // namespace inferscope::sys

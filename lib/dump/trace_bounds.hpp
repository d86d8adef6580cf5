// The trace's time origin and end: the one definition every output of a dump states its times from (the
// analyzer's reports, the JSON, the SQLite export and the Perfetto trace; docs/reports.md, "One time origin").
// They are the first start and the last end of the records that are the program's activity: ranges, Python
// calls, CUDA calls, GPU work (kernels, graph launches, copies, memsets), allocations and marks. Samplers'
// counters, clock checks, thread names and exits are not: a counter sampled as the session started would put
// the origin tens of ms before the program did anything. lib/analyze/ingest.cpp takes the same records (in its
// parallel pass, with these times); tests/report/test_time_origin.cpp checks that both agree on real dumps.
//
//   dump::TraceBounds b{dump::ClockModel(reader.calibration())};
//   dump::visit_records(reader, b);   // or dump::see_bounds(b, rec, cx) from a visitor of one's own
//   b.first_ns();                     // CLOCK_MONOTONIC ns of the origin (0 when no such record)
#pragma once

#include "dump/clock_model.hpp"
#include "dump/visit.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace inferscope::dump {

struct TraceBounds {
  const ClockModel& clock;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();

  void on(const RangeRecord& r, const RecordContext&) { span(r.start, r.end); }
  void on(const PyCallRecord& r, const RecordContext&) { span(r.start, r.end); }
  void on(const CudaApiRecord& r, const RecordContext&) { span(r.start, r.end); }
  void on(const GpuKernelRecord& r, const RecordContext&) { span(r.start, r.end); }
  void on(const GpuGraphLaunchRecord& r, const RecordContext&) { span(r.start, r.end); }
  void on(const GpuMemcpyRecord& r, const RecordContext&) { span(r.start, r.end); }
  void on(const GpuMemsetRecord& r, const RecordContext&) { span(r.start, r.end); }
  void on(const GpuMemoryRecord& r, const RecordContext&) { at(r.ts); }
  void on(const MarkRecord& r, const RecordContext&) { at(r.ts); }

  bool any() const { return first <= last; }
  /// The origin in CLOCK_MONOTONIC ns; 0 when the dump holds no such record.
  int64_t first_ns() const { return any() ? first : 0; }
  int64_t last_ns() const { return any() ? last : 0; }

 private:
  void span(uint64_t start, uint64_t end) {
    const int64_t s = clock.to_ns(start);
    seen(s, std::max(s, clock.to_ns(end)));
  }
  void at(uint64_t ts) {
    const int64_t s = clock.to_ns(ts);
    seen(s, s);
  }
  void seen(int64_t s, int64_t e) {
    first = std::min(first, s);
    last = std::max(last, e);
  }
};

/// Hands any record to `b`: the kinds it counts change it, the others are ignored (for a visitor that reads
/// every kind and finds the bounds in the same pass).
template <class Rec>
void see_bounds(TraceBounds& b, const Rec& rec, const RecordContext& cx) {
  if constexpr (requires { b.on(rec, cx); }) b.on(rec, cx);
}

}  // namespace inferscope::dump

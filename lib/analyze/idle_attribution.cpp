#include "analyze/idle_attribution.hpp"

#include <algorithm>

namespace inferscope::analyze::detail {
namespace {

enum class Drain : uint8_t { kNone, kSync, kMemory };  // what emptied the GPU's queue before this gap

bool is_sync(uint8_t kind) { return kind == kSync || kind == kCopySync; }
bool is_memory(uint8_t kind) { return kind == kAlloc || kind == kFree; }

Drain drain_of(uint8_t kind) {
  if (is_sync(kind)) return Drain::kSync;
  if (kind == kFree) return Drain::kMemory;  // cudaFree synchronizes the device
  return Drain::kNone;
}

// What a drain owns: the GPU-idle time after it, up to the time the host spent waiting in it. Had the host not
// waited, it would have reached the work that follows that much earlier, while the GPU still ran what it had
// queued; beyond that, the idle time is the host's own (work, or launches).
struct Walker {
  IdleCauses out;
  Drain drain = Drain::kNone;
  double budget = 0;  ///< ns of idle time the drain still owns

  double take_drain(double d) {
    if (drain == Drain::kNone || budget <= 0) return 0;
    const double t = std::min(d, budget);
    budget -= t;
    (drain == Drain::kSync ? out.sync : out.memory) += t;
    return t;
  }
  void launch_path(double d) { out.launch += d - take_drain(d); }
  void call_piece(uint8_t kind, double d) {
    if (is_sync(kind)) out.sync += d;
    else if (is_memory(kind)) out.memory += d;
    else launch_path(d);
  }
  // Host time outside calls; `host_gap` is the whole gap between the calls around it (-1: no call on one side).
  void host_piece(int64_t s, int64_t e, int64_t host_gap, int64_t dispatch_gap_ns) {
    const double d = double(e - s);
    if (d <= 0) return;
    if (host_gap >= 0 && host_gap < dispatch_gap_ns) {
      launch_path(d);
      return;
    }
    const double own = d - take_drain(d);
    out.host += own;
    if (own > 0 && e - s > out.longest_host.end - out.longest_host.start) out.longest_host = {s, e, 0};
  }
};

}  // namespace

IdleCauses attribute_idle_gap(const std::vector<const ApiOp*>& calls, size_t first, int64_t ga, int64_t gb,
                              int64_t dispatch_gap_ns) {
  Walker w;
  size_t j = first;
  while (j < calls.size() && calls[j]->end() <= ga) ++j;
  if (gb <= ga) return w.out;
  // The call the gap began in (or the last one before it) tells what drained the GPU.
  const ApiOp* before = j < calls.size() && calls[j]->start <= ga ? calls[j] : j > 0 ? calls[j - 1] : nullptr;
  if (before) {
    w.drain = drain_of(before->kind);
    // The wait in it, less the idle time already behind the gap's start when the call ended earlier (time
    // between steps, or cut off by the step's start), which that overlap would have had to cover first.
    const int64_t wait = std::min(ga, before->end()) - before->start, already = std::max<int64_t>(0, ga - before->end());
    w.budget = double(std::max<int64_t>(0, wait - already));
  }
  int64_t pos = ga;
  int64_t prev_end = j > 0 ? calls[j - 1]->end() : -1;
  for (; j < calls.size() && calls[j]->start < gb; ++j) {
    const ApiOp& c = *calls[j];
    if (c.start > pos) w.host_piece(pos, c.start, prev_end >= 0 ? c.start - prev_end : -1, dispatch_gap_ns);
    const int64_t s = std::max(pos, c.start), e = std::min(gb, c.end());
    if (e > s) w.call_piece(c.kind, double(e - s));
    pos = std::max(pos, std::min(gb, c.end()));
    prev_end = c.end();
  }
  if (pos < gb) {
    const int64_t next = j < calls.size() ? calls[j]->start : -1;
    w.host_piece(pos, gb, prev_end >= 0 && next >= 0 ? next - prev_end : -1, dispatch_gap_ns);
  }
  return w.out;
}

}  // namespace inferscope::analyze::detail

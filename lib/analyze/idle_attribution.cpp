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

struct Walker {
  IdleCauses out;
  Drain drain = Drain::kNone;

  // Launch-path time: the refill after whatever drained the GPU, else plain launch overhead.
  void launch_path(double d) {
    if (drain == Drain::kSync) out.sync += d;
    else if (drain == Drain::kMemory) out.memory += d;
    else out.launch += d;
  }
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
    out.host += d;
    drain = Drain::kNone;  // the host did real work: what follows is no longer the drain's refill
    if (e - s > out.longest_host.end - out.longest_host.start) out.longest_host = {s, e, 0};
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
  if (j < calls.size() && calls[j]->start <= ga) w.drain = drain_of(calls[j]->kind);
  else if (j > 0) w.drain = drain_of(calls[j - 1]->kind);
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

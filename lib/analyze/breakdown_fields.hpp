// The breakdown's fields, declared once: the writers that list every field (the JSON report's "breakdown", the
// SQLite export's breakdown table) iterate this list instead of naming the fields by hand, so a field added here
// reaches each of them, and a field added to Breakdown but not here fails to compile (the size check below).
#pragma once

#include "analyze/analysis.hpp"

#include <type_traits>

namespace inferscope::analyze {

/// Calls f(name, value) for each field of `b` (a Breakdown, const or not) in report order; `value` is a double,
/// except host_state_measured (bool). The names are the JSON keys and the SQLite columns.
template <class B, class F>
void for_each_breakdown_field(B& b, F&& f) {
  static_assert(std::is_same_v<std::remove_const_t<B>, Breakdown>);
  f("step_ms", b.step_ms);
  f("cpu_preprocessing_ms", b.cpu_preprocessing_ms);
  f("h2d_ms", b.h2d_ms);
  f("gpu_compute_ms", b.gpu_compute_ms);
  f("gpu_comm_ms", b.gpu_comm_ms);
  f("d2h_ms", b.d2h_ms);
  f("sync_wait_ms", b.sync_wait_ms);
  f("framework_overhead_ms", b.framework_overhead_ms);
  f("idle_ms", b.idle_ms);
  f("gpu_utilization", b.gpu_utilization);
  f("gpu_idle_waiting_on_host_ms", b.gpu_idle_waiting_on_host_ms);
  f("gpu_idle_gaps_between_kernels_ms", b.gpu_idle_gaps_between_kernels_ms);
  f("gpu_idle_waiting_on_sync_ms", b.gpu_idle_waiting_on_sync_ms);
  f("gpu_idle_in_memory_ms", b.gpu_idle_in_memory_ms);
  f("host_running_ms", b.host_running_ms);
  f("host_contention_ms", b.host_contention_ms);
  f("host_waiting_ms", b.host_waiting_ms);
  f("host_state_measured", b.host_state_measured);
}

/// The fields above: 17 doubles and a bool. A field added to Breakdown changes its size and stops the build
/// here until it is listed above (and this count raised).
inline constexpr int kBreakdownDoubles = 17;
static_assert(sizeof(Breakdown) == (kBreakdownDoubles + 1) * sizeof(double),
              "a field was added to Breakdown: list it in for_each_breakdown_field");

}  // namespace inferscope::analyze

// What the live server sends, made from a tap's snapshot (docs/live.md): the page's data (JSON) and the
// Prometheus text exposition (/metrics). Pure functions of the snapshot, unit-tested.
#pragma once

#include "live/tap.hpp"

#include <string>
#include <vector>

namespace inferscope::live {

/// The window the page summarises: the newest this many steps.
inline constexpr size_t kWindowSteps = 100;
/// Steps whose direct children make the breakdown (their children are still in the span ring).
inline constexpr size_t kBreakdownSteps = 20;

/// The q-quantile (0..1) of `values` (nearest rank; 0 when empty). Sorts a copy.
double quantile(std::vector<double> values, double q);

/// The page's data: state, counts, p50/p90 of the window, the slowest step, the breakdown, the timeline.
std::string render_data_json(const Snapshot& s);

/// Prometheus text format 0.0.4: the step histogram, records and drops, the session state.
std::string render_metrics(const Snapshot& s);

/// While no step has been seen, why the page shows none and what to do: "no step named 'step' yet: candidates seen:
/// range decode (120 times, 3.2 s), Python function infer (120 calls, 3.1 s); name one with --set step=NAME (or
/// ISCOPE_RANGE("step"))". "" once a step is seen.
std::string step_hint(const Snapshot& s);

/// The page itself; its script fetches `data?token=<token>` every second ("" when no token is required).
std::string render_page(const std::string& token);

/// `text` as a JSON string literal, quotes included.
std::string json_string(const std::string& text);

}  // namespace inferscope::live

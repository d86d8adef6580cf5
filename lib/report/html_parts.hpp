// What the HTML report's writers share (internal to lib/report): html.cpp writes the page, html_first.cpp its
// first screen, html_timeline.cpp the representative step's timeline
// (html_states.cpp its thread-state rows), html_script.hpp holds the page's scripts.
#pragma once

#include "analyze/analysis.hpp"
#include "report/escape.hpp"
#include "report/names.hpp"

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace inferscope::report::html {

/// The width of the page's figures (the breakdown bar, the timeline) in CSS pixels: the page's column on a
/// 1400 px screen.
inline constexpr double kFigureW = 1270;

inline std::string h(std::string_view s) { return html_escape(s); }

/// Prose from the analyzer, escaped, with each kernel's full name replaced by its short name (full on hover).
std::string prose(const KernelNames& names, std::string_view text);

/// The first screen (html_first.cpp): the headline, its spread, the primary cause and what to do first.
void write_first_screen(const analyze::Analysis& a, const KernelNames& names, std::ostream& out);
/// The data-quality notes, collapsed unless something in them is wrong.
void write_quality(const analyze::Analysis& a, const KernelNames& names, std::ostream& out);

/// The fill of a part of the breakdown bar: a cause (common.hpp's cause_rows: a finding's category, or
/// "unattributed") or a component (breakdown_rows); grey for any other key.
const char* breakdown_color(const std::string& key);
/// The grey breakdown_color gives a key it does not know.
inline constexpr const char* kUnknownBreakdownColor = "#7f8c8d";

/// The fill of a timeline span of this category (the timeline's legend uses the same).
const char* span_color(const std::string& category);

/// The fill of a thread-state row's stretch of this state ('R', 'S', ...; html_states.cpp).
const char* state_color(int64_t code);
/// Where a lane's thread-state row lies in the timeline's SVG.
struct StateRowGeometry {
  double x0 = 0, w = 0;        ///< the plot's left edge and width
  double y = 0, row_h = 0;     ///< the row's top and height
  double height = 0;           ///< the whole SVG's (for the row's clipping <svg>)
  double span = 1;             ///< ms the plot shows
  double label_dy = 0;         ///< a label's baseline below the row's top
};
/// A thread lane's state row (html_states.cpp): its name at the left, each state a light rect with its times and
/// label (data-s, data-e, data-l) that kTimelineScript places on zoom like a span.
void write_state_row(const std::vector<analyze::TimelineState>& states, const StateRowGeometry& g, std::ostream& out);
/// The states drawn in `rep`, one swatch each; nothing when no lane has states.
void write_state_legend(const analyze::RepresentativeStep& rep, std::ostream& out);

/// The representative step, one lane per thread and GPU stream, zoomable (kTimelineScript).
void write_timeline(const analyze::Analysis& a, const KernelNames& names, std::ostream& out);
/// The run's timeline (RunAnalysis::timeline): one step across the ranks, a lane per rank and its GPU.
void write_run_timeline(const analyze::RunAnalysis& run, const KernelNames& names, std::ostream& out);

}  // namespace inferscope::report::html

// The HTML timeline's thread-state rows: under a thread's lane, what the scheduler said the thread was doing
// (TimelineLane::states, sampled by the system collector; dump/thread_states.hpp), drawn only for lanes that have
// samples, in light fills with dark labels so that they never read as spans.
#include "dump/thread_states.hpp"
#include "report/common.hpp"
#include "report/html_parts.hpp"

#include <algorithm>
#include <set>

namespace inferscope::report::html {

const char* state_color(int64_t code) {
  switch (code) {
    case 'R': return "#abebc6";  // on a CPU or waiting for one
    case 'S': return "#e5e8e8";  // asleep by its own choice: a lock, a queue, a sleep
    case 'D': return "#fad7a0";  // uninterruptible: disk or other I/O
    default: return "#d7bde2";
  }
}

void write_state_row(const std::vector<analyze::TimelineState>& states, const StateRowGeometry& g, std::ostream& out) {
  out << "<text x=\"16\" y=\"" << fmt(g.y + g.label_dy, 1) << "\" fill=\"#5d6875\">thread state<title>the thread's "
      << "scheduler state, as the system collector sampled it: a state holds from the sample that showed it to the "
      << "next sample that showed another</title></text>\n";
  out << "<svg x=\"" << fmt(g.x0, 0) << "\" y=\"0\" width=\"" << fmt(g.w, 0) << "\" height=\"" << fmt(g.height, 0)
      << "\" viewBox=\"" << fmt(g.x0, 0) << " 0 " << fmt(g.w, 0) << ' ' << fmt(g.height, 0) << "\"><g class=\"tl-z\">\n";
  for (const auto& st : states) {
    const double s0 = std::clamp(st.start_ms, 0.0, g.span), s1 = std::clamp(st.end_ms, s0, g.span);
    const double x0 = s0 / g.span * g.w, w = std::max(0.6, (s1 - s0) / g.span * g.w);
    const std::string words = dump::thread_state_words(st.code);
    out << "<rect class=\"st\" x=\"" << fmt(g.x0 + x0, 2) << "\" y=\"" << fmt(g.y, 1) << "\" width=\"" << fmt(w, 2)
        << "\" height=\"" << fmt(g.row_h - 2, 0) << "\" fill=\"" << state_color(st.code) << "\" data-s=\"" << fmt(s0, 6)
        << "\" data-e=\"" << fmt(s1, 6) << "\" data-l=\"" << h(words) << "\" data-lc=\"#1d232b\"><title>"
        << h(dump::thread_state_name(st.code)) << ": " << h(words) << ", " << fmt(st.start_ms, 3) << "–"
        << fmt(st.end_ms, 3) << " ms (as sampled)</title></rect>";
    const size_t fits = w > 24 ? static_cast<size_t>((w - 4) / 6.6) : 0;
    if (words.size() <= fits)
      out << "<text class=\"sl\" x=\"" << fmt(g.x0 + x0 + 2, 2) << "\" y=\"" << fmt(g.y + g.label_dy, 1)
          << "\" fill=\"#1d232b\" pointer-events=\"none\">" << h(words) << "</text>";
    out << '\n';
  }
  out << "</g></svg>\n";
}

void write_state_legend(const analyze::RepresentativeStep& rep, std::ostream& out) {
  std::set<int64_t> drawn;
  for (const auto& l : rep.lanes)
    for (const auto& st : l.states) drawn.insert(st.code);
  if (drawn.empty()) return;
  out << "<div class=\"legend\" id=\"tl-state-legend\">thread state (sampled): ";
  for (const int64_t code : drawn)
    out << "<span><i class=\"sw\" style=\"background:" << state_color(code) << "\"></i>" << h(dump::thread_state_words(code))
        << (code > 32 && code < 127 ? " (" + std::string(1, static_cast<char>(code)) + ")" : std::string()) << "</span>";
  out << "</div>";
}

}  // namespace inferscope::report::html

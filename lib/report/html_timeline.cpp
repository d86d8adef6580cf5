// The HTML report's timelines: the representative step's, one lane per thread and GPU stream, and the run's (one
// step across the ranks, a lane per rank and its GPU). Spans in rows by depth, short GPU spans as a density strip. The page is drawn for the whole step (and reads so without a
// script); every span carries its times and label, from which kTimelineScript (html_script.hpp) redraws the
// view at any zoom: positions, labels that now fit, and the strip for what is still too short to draw.
#include "report/common.hpp"
#include "report/escape.hpp"
#include "report/html_parts.hpp"
#include "report/labels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace inferscope::report::html {
namespace {

using analyze::TimelineLane;
using analyze::TimelineSpan;

// Rows tall enough for a 12 px label (docs/reports.md); kTimelineScript places labels kLabelDy below a row's top.
constexpr double kLabelW = 190, kPlotW = kFigureW - kLabelW - 40, kRowH = 20, kLanePad = 8, kAxisH = 20;
constexpr double kLabelDy = 14;
constexpr size_t kMaxRows = 16;  // deeper spans share the last row, so a runaway stack stays legible
// GPU spans narrower than this are not widened to stay visible (a run of 1.5 us kernels drawn that way looks
// busy at 3 % utilization): they add to a strip whose opacity per pixel is the busy fraction there, at least
// kMinOpacity % where anything ran. kTimelineScript uses the same two numbers when it redraws a zoomed view.
constexpr double kMinGpuPx = 2.0;
constexpr long kMinOpacity = 8;
constexpr size_t kPx = static_cast<size_t>(kPlotW);
static_assert(kPlotW == static_cast<double>(kPx), "the strip has one bucket per plot pixel");

/// Where the lanes sit: the plot's time span (the step, or longer where a span outlasts it), each lane's top and
/// its rows by depth.
struct Layout {
  double span = 1;
  double height = kAxisH;
  std::vector<double> lane_y;
  std::vector<std::map<uint32_t, size_t>> lane_rows;  // depth -> row
  std::vector<double> state_y;  // the top of a lane's thread-state row (below its spans), -1 for none
};

/// A mark over the lanes, in ms from the step's start.
struct Mark {
  double start_ms = 0, end_ms = 0;
  bool hl = false;  ///< the primary finding's example (else a step or token boundary)
  std::string title;
  bool token = false;  ///< a generation loop's token boundary: the start of a per-token call
};

/// Rows per lane: the depths the lane uses, in order, without gaps (an analyzer may put API calls at a large
/// depth to draw them innermost).
Layout layout(const analyze::RepresentativeStep& rep) {
  Layout lay;
  lay.span = rep.step.duration_ms;
  for (const auto& l : rep.lanes)
    for (const auto& s : l.spans) lay.span = std::max(lay.span, s.end_ms);
  if (!(lay.span > 0)) lay.span = 1;
  for (const auto& l : rep.lanes) {
    std::map<uint32_t, size_t> rows;
    for (const auto& s : l.spans) rows[s.depth];
    size_t i = 0;
    for (auto& [depth, row] : rows) row = std::min(i++, kMaxRows - 1);
    lay.lane_y.push_back(lay.height);
    lay.height += static_cast<double>(std::max<size_t>(1, std::min(rows.size(), kMaxRows))) * kRowH;
    lay.state_y.push_back(l.states.empty() ? -1 : lay.height);
    lay.height += (l.states.empty() ? 0 : kRowH) + kLanePad;
    lay.lane_rows.push_back(std::move(rows));
  }
  return lay;
}

/// Tick spacing of about a tenth of the span, rounded to 1, 2 or 5 times a power of ten.
double nice_step(double span) {
  if (!(span > 0)) return 1;
  const double raw = span / 10;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

/// The ticks for the whole step (in <g id=ticks_id>); kTimelineScript replaces the zoomable timeline's with the
/// visible range's.
void write_ticks(const Layout& lay, const char* ticks_id, std::ostream& out) {
  out << "<g id=\"" << ticks_id << "\">";
  const double step = nice_step(lay.span);
  for (double t = 0; t <= lay.span + 1e-9; t += step) {
    const double x = kLabelW + t / lay.span * kPlotW;
    out << "<line x1=\"" << fmt(x, 1) << "\" y1=\"" << kAxisH - 4 << "\" x2=\"" << fmt(x, 1) << "\" y2=\""
        << fmt(lay.height, 0) << "\" stroke=\"#e3e7eb\"/><text x=\"" << fmt(x + 2, 1) << "\" y=\"12\" fill=\"#5d6875\">"
        << fmt(t, step < 0.01 ? 3 : step < 1 ? 2 : 1) << " ms</text>\n";
  }
  out << "</g>\n";
}

/// The zoom buttons, shown by kTimelineScript (without it they would do nothing); with `hl`, one that zooms to it.
void write_controls(std::ostream& out, const Mark* hl) {
  out << "<div class=\"tl-controls\" hidden><button type=\"button\" data-zoom=\"in\" title=\"zoom in (+)\">+</button>"
         "<button type=\"button\" data-zoom=\"out\" title=\"zoom out (&minus;)\">&minus;</button>"
         "<button type=\"button\" data-zoom=\"reset\" title=\"the whole step (0)\">whole step</button>";
  if (hl)
    out << "<button type=\"button\" id=\"tl-goto-hl\" data-goto-s=\"" << fmt(hl->start_ms, 6) << "\" data-goto-e=\""
        << fmt(hl->end_ms, 6) << "\" title=\"zoom to the primary finding's example\">the diagnosed span</button>";
  out << " <span class=\"muted\">"
         "wheel: zoom at the pointer · drag: pan · keys (after a click on the timeline): + &minus; 0 &larr; &rarr;"
         "</span> <span id=\"tl-view\" class=\"muted\"></span></div>\n";
}

/// One lane's short GPU spans, per (row, category): how busy each plot pixel is and how many spans start there.
class DensityStrips {
 public:
  void add(size_t row, const std::string& category, double x0, double x1) {
    auto& st = strips_[{row, category}];
    const size_t first = std::min(static_cast<size_t>(x0), kPx - 1);
    ++st.spans[first];
    for (size_t px = first; px < kPx && static_cast<double>(px) < x1; ++px)
      st.busy[px] += std::min(x1, static_cast<double>(px + 1)) - std::max(x0, static_cast<double>(px));
  }

  /// Each strip as runs of pixels with the same busy fraction in hundredths, the fraction as the fill's opacity.
  void write(double lane_y, double span, std::ostream& out) const {
    for (const auto& strip : strips_) {  // no structured binding: clang 14 (the fuzz build) cannot capture one
      const auto& st = strip.second;
      const double y = lane_y + static_cast<double>(strip.first.first) * kRowH;
      const auto level = [&](size_t px) { return std::lround(std::min(1.0, st.busy[px]) * 100.0); };
      for (size_t px = 0; px < kPx;) {
        const long lv = level(px);
        size_t end = px + 1;
        while (end < kPx && level(end) == lv) ++end;
        write_run(st, px, end, lv, y, span, strip.first.second, out);
        px = end;
      }
    }
  }

 private:
  struct Strip {
    std::vector<double> busy = std::vector<double>(kPx, 0.0);     // busy part of each pixel, 0..1 (more on overlap)
    std::vector<uint32_t> spans = std::vector<uint32_t>(kPx, 0);  // spans starting in each pixel
  };

  static void write_run(const Strip& st, size_t px, size_t end, long lv, double y, double span,
                        const std::string& category, std::ostream& out) {
    uint32_t n = 0;
    double busy = 0;
    for (size_t k = px; k < end; ++k) n += st.spans[k], busy += std::min(1.0, st.busy[k]);
    if (lv == 0 && n == 0) return;
    const double t0 = static_cast<double>(px) / kPlotW * span, t1 = static_cast<double>(end) / kPlotW * span;
    out << "<rect class=\"density\" x=\"" << fmt(kLabelW + static_cast<double>(px), 2) << "\" y=\"" << fmt(y, 1)
        << "\" width=\"" << end - px << "\" height=\"" << kRowH - 2 << "\" fill=\"" << span_color(category)
        << "\" fill-opacity=\"" << fmt(static_cast<double>(std::max(kMinOpacity, lv)) / 100.0, 2) << "\"><title>" << n
        << " short " << h(category) << " span(s) in " << fmt(t0, 3) << "–" << fmt(t1, 3) << " ms, busy "
        << fmt(busy / static_cast<double>(end - px) * 100.0, 0) << " % of it</title></rect>\n";
  }

  std::map<std::pair<size_t, std::string>, Strip> strips_;  // (row, category)
};

/// A span's label in `fits` characters: the whole label, else its last part ("poll" of "serve.Batcher.poll",
/// "gemm" of "cutlass::gemm"), cut with "…" where at least 5 characters fit; else none
/// (never two letters and a dot: the full label is on hover). kTimelineScript's fitLabel is the same rule.
std::string fit_label(const std::string& label, size_t fits) {
  if (label.size() <= fits) return label;  // bytes >= code points: fits for sure
  std::string tail = label;
  for (const char* sep : {"::", "."}) {  // the first kind of separator the label has; a tail of 3 or more
    const size_t at = label.rfind(sep);
    if (at == std::string::npos) continue;
    if (label.size() - at - std::strlen(sep) >= 3) tail = label.substr(at + std::strlen(sep));
    break;
  }
  if (tail.size() <= fits) return tail;
  return fits >= 5 ? truncate(tail, fits) : std::string();
}

/// What every lane's spans need to be drawn.
struct LaneContext {
  const Layout& lay;
  const KernelNames& names;
  double y0;                        // the lane's top
  const std::map<uint32_t, size_t>& rows;
  bool gpu;
  double state_y;                   // its thread-state row's top (-1: none)
};

/// One span: a rect with its times (data-s, data-e, in ms from the step's start) and label (data-l) for the
/// script, its full name and times on hover, and its label where it fits. Too short a GPU span goes to the
/// strip, and is written hidden (class g) for the script to show once zooming makes it wide enough.
void write_span(const LaneContext& c, const TimelineSpan& s, DensityStrips& strips, std::ostream& out) {
  const double span = c.lay.span;
  const double s0 = std::min(std::max(0.0, s.start_ms), span), s1 = std::max(s0, std::min(s.end_ms, span));
  const double x0 = s0 / span * kPlotW, x1 = s1 / span * kPlotW;
  const double y = c.y0 + static_cast<double>(c.rows.at(s.depth)) * kRowH;
  const std::string title = h(s.label) + " [" + h(s.category) + "] " + fmt(s.start_ms, 3) + "–" + fmt(s.end_ms, 3) +
                            " ms (" + fmt((s.end_ms - s.start_ms) * 1000.0, 1) + " us)";
  const std::string times = " data-s=\"" + fmt(s0, 6) + "\" data-e=\"" + fmt(s1, 6) + "\"";
  if (c.gpu && s.label.rfind("merged ", 0) == 0) {
    // The analyzer joined short spans with the gaps between them: how busy the GPU was in there is not known,
    // so the block is an outline, never a filled, busy-looking bar.
    out << "<rect class=\"merged\" x=\"" << fmt(kLabelW + x0, 2) << "\" y=\"" << fmt(y + 0.5, 1) << "\" width=\""
        << fmt(std::max(0.6, x1 - x0), 2) << "\" height=\"" << kRowH - 3 << "\" fill=\"none\" stroke=\""
        << span_color(s.category) << "\" stroke-dasharray=\"2 2\"" << times << "><title>" << title
        << ": an outline, as the busy time inside is not known</title></rect>\n";
    return;
  }
  const bool short_gpu = c.gpu && x1 - x0 < kMinGpuPx;
  if (short_gpu) strips.add(c.rows.at(s.depth), s.category, x0, x1);
  const double w = std::max(0.6, x1 - x0);
  const std::string label = s.category == "kernel" ? c.names.short_of(s.label) : s.label;
  out << "<rect" << (c.gpu ? " class=\"g\"" : "") << " x=\"" << fmt(kLabelW + x0, 2) << "\" y=\"" << fmt(y, 1)
      << "\" width=\"" << fmt(w, 2) << "\" height=\"" << kRowH - 2 << "\" fill=\"" << span_color(s.category) << '"'
      << (short_gpu ? " display=\"none\"" : "") << times << (c.gpu ? " data-c=\"" + h(s.category) + '"' : "")
      << (s.correlation ? " data-k=\"" + std::to_string(s.correlation) + '"' : "")
      << " data-l=\"" << h(label) << "\"><title>" << title
      << "</title></rect>";
  // A label only where it fits, shortened smartly (fit_label; kTimelineScript's rule too).
  const size_t fits = w > 24 ? static_cast<size_t>((w - 4) / 6.6) : 0;
  const std::string shown = short_gpu ? std::string() : fit_label(label, fits);
  if (!shown.empty())
    out << "<text class=\"sl\" x=\"" << fmt(kLabelW + x0 + 2, 2) << "\" y=\"" << fmt(y + kLabelDy, 1)
        << "\" fill=\"#fff\" pointer-events=\"none\">" << h(shown) << "</text>";
  out << '\n';
}

/// A lane: its name, then its spans in a nested <svg> over the plot, which clips what a zoomed view pushes
/// out of it (g.tl-z holds the spans the script places; it adds its own strips there).
void write_lane(const LaneContext& c, const TimelineLane& l, std::ostream& out) {
  out << "<g><text x=\"4\" y=\"" << fmt(c.y0 + kLabelDy, 1) << "\" fill=\"" << (l.gpu ? "#1e8449" : "#1d232b") << "\">"
      << h(truncate(l.name, 30)) << "<title>" << h(l.name) << "</title></text>\n"
      << "<svg x=\"" << fmt(kLabelW, 0) << "\" y=\"0\" width=\"" << fmt(kPlotW, 0) << "\" height=\""
      << fmt(c.lay.height, 0) << "\" viewBox=\"" << fmt(kLabelW, 0) << " 0 " << fmt(kPlotW, 0) << ' '
      << fmt(c.lay.height, 0) << "\"><g class=\"tl-z\">\n";
  DensityStrips strips;
  for (const auto& s : l.spans) write_span(c, s, strips, out);
  strips.write(c.y0, c.lay.span, out);
  out << "</g></svg>\n";
  if (c.state_y >= 0)
    write_state_row(l.states, {kLabelW, kPlotW, c.state_y, kRowH, c.lay.height, c.lay.span, kLabelDy}, out);
  out << "</g>\n";
}

/// Over the lanes, the layer kTimelineScript draws a selection's arrows in (a CUDA call to the GPU work it
/// launched, joined by data-k), clipped to the plot.
void write_arrow_layer(const Layout& lay, std::ostream& out) {
  out << "<svg x=\"" << fmt(kLabelW, 0) << "\" y=\"0\" width=\"" << fmt(kPlotW, 0) << "\" height=\"" << fmt(lay.height, 0)
      << "\" viewBox=\"" << fmt(kLabelW, 0) << " 0 " << fmt(kPlotW, 0) << ' ' << fmt(lay.height, 0)
      << "\" pointer-events=\"none\"><g id=\"tl-arrows\"></g></svg>\n";
}

/// Whether any span of `rep` carries a correlation id (a call and its GPU work both drawn).
bool has_pairs(const analyze::RepresentativeStep& rep) {
  for (const auto& l : rep.lanes)
    for (const auto& s : l.spans)
      if (s.correlation) return true;
  return false;
}


/// Marks over every lane, behind the spans: the step's boundaries (class sb) and the primary finding's example
/// spans (class hl), placed on zoom like the spans (data-s, data-e).
void write_marks(const Layout& lay, const std::vector<Mark>& marks, std::ostream& out) {
  if (marks.empty()) return;
  out << "<svg x=\"" << fmt(kLabelW, 0) << "\" y=\"0\" width=\"" << fmt(kPlotW, 0) << "\" height=\"" << fmt(lay.height, 0)
      << "\" viewBox=\"" << fmt(kLabelW, 0) << " 0 " << fmt(kPlotW, 0) << ' ' << fmt(lay.height, 0) << "\"><g class=\"tl-z\">\n";
  for (const auto& m : marks) {
    const double s0 = std::clamp(m.start_ms, 0.0, lay.span), s1 = std::clamp(m.end_ms, s0, lay.span);
    const double x0 = s0 / lay.span * kPlotW, w = std::max(m.hl ? 3.0 : 1.5, (s1 - s0) / lay.span * kPlotW);
    out << "<rect class=\"mk " << (m.hl ? "hl" : m.token ? "tk" : "sb") << "\" x=\"" << fmt(kLabelW + x0, 2) << "\" y=\"" << kAxisH - 4
        << "\" width=\"" << fmt(w, 2) << "\" height=\"" << fmt(lay.height - kAxisH + 4, 0) << "\" data-s=\"" << fmt(s0, 6)
        << "\" data-e=\"" << fmt(s1, 6) << "\"><title>" << h(m.title) << "</title></rect>\n";
  }
  out << "</g></svg>\n";
}

/// The lanes of `rep` as one SVG: the step timeline's (#tl-svg, which kTimelineScript zooms) or another (the run's).
void write_lanes(const analyze::RepresentativeStep& rep, const KernelNames& names, const char* svg_id,
                 const char* ticks_id, const char* label, std::ostream& out, const std::vector<Mark>& marks = {}) {
  const Layout lay = layout(rep);
  out << "<svg id=\"" << svg_id << "\" tabindex=\"0\" role=\"img\" aria-label=\"" << label << "\" width=\""
      << kFigureW << "\" height=\"" << fmt(lay.height, 0) << "\" viewBox=\"0 0 " << kFigureW << ' '
      << fmt(lay.height, 0) << "\" data-span=\"" << fmt(lay.span, 6) << "\" data-x0=\"" << kLabelW << "\" data-w=\""
      << kPlotW << "\" data-h=\"" << fmt(lay.height, 0) << "\" data-min-gpu-px=\"" << kMinGpuPx
      << "\" data-min-opacity=\"" << fmt(static_cast<double>(kMinOpacity) / 100.0, 2) << "\" data-label-dy=\""
      << kLabelDy << "\">\n";
  write_ticks(lay, ticks_id, out);
  write_marks(lay, marks, out);
  for (size_t li = 0; li < rep.lanes.size(); ++li)
    write_lane({lay, names, lay.lane_y[li], lay.lane_rows[li], rep.lanes[li].gpu, lay.state_y[li]}, rep.lanes[li], out);
  if (has_pairs(rep)) write_arrow_layer(lay, out);
  out << "</svg>\n";
}

/// The legend of the categories drawn in `rep`, in the order given (only those that occur).
void write_legend(std::initializer_list<const char*> categories, const analyze::RepresentativeStep& rep,
                  std::ostream& out) {
  std::set<std::string> drawn;
  for (const auto& l : rep.lanes)
    for (const auto& s : l.spans) drawn.insert(s.category);
  out << "<div class=\"legend\">";
  for (const char* c : categories)
    if (drawn.count(c)) out << "<span><i class=\"sw\" style=\"background:" << span_color(c) << "\"></i>" << c << "</span>";
  out << "</div>";
}

/// Where the primary finding's first example lies when it is not in the step drawn: "The primary finding's
/// example (...) is at 4226.737–4235.209 ms, outside this step: the Perfetto trace has it at that time. ".
std::string outside_note(const analyze::Analysis& a) {
  if (a.findings.empty() || a.findings.front().examples.empty()) return {};
  const auto& x = a.findings.front().examples.front();
  return "The primary finding's example (" + h(x.what) + ") is at " + fmt(x.start_ms, 3) + "–" + fmt(x.end_ms, 3) +
         " ms, outside this step: the Perfetto trace (--perfetto) shows it at that time. ";
}

/// The longest stretch of the drawn step in which no GPU lane has a span (a merged block counts as busy), in ms
/// from its start; {0, 0} when the step has no GPU lane.
std::pair<double, double> longest_gpu_idle(const analyze::RepresentativeStep& rep) {
  std::vector<std::pair<double, double>> busy;
  for (const auto& l : rep.lanes)
    if (l.gpu)
      for (const auto& sp : l.spans) busy.emplace_back(sp.start_ms, sp.end_ms);
  if (busy.empty()) return {0, 0};
  std::sort(busy.begin(), busy.end());
  std::pair<double, double> best{0, 0};
  double at = 0;  // the end of the busy time so far
  for (const auto& [b0, b1] : busy) {
    if (b0 - at > best.second - best.first) best = {at, b0};
    at = std::max(at, b1);
  }
  if (rep.step.duration_ms - at > best.second - best.first) best = {at, rep.step.duration_ms};
  return best;
}

/// The categories of GPU idle time on the host's side, whose examples may lie in other steps than the one drawn.
constexpr std::string_view kIdleCauses[] = {"wait", "cpu_bound", "cpu_contention", "sync_bound", "memory_alloc"};
static_assert(std::ranges::all_of(kIdleCauses, is_category), "kIdleCauses: names from analyze::kCategories");

/// When the primary finding is one of kIdleCauses, the longest GPU-idle stretch of this step, highlighted as where
/// such time shows: at least 5 % of the step.
void add_idle_mark(const analyze::Analysis& a, std::vector<Mark>& marks) {
  const auto& f = a.findings.front();
  if (std::ranges::find(kIdleCauses, f.category) == std::end(kIdleCauses)) return;
  const auto [s0, s1] = longest_gpu_idle(a.representative);
  if (s1 - s0 < 0.05 * a.representative.step.duration_ms || !(s1 > s0)) return;
  marks.push_back({s0, s1, true, "the GPU idle for " + fmt(s1 - s0, 3) + " ms, the longest in this step: time like this is "
                   "what the primary finding (" + category_name(f.category) + ") is about"});
}

/// A generation loop's token boundaries in the drawn step: the start of each call of the per-token function on the
/// thread lane that holds most of them (the step's thread; the analyzer's cut keeps these calls first).
std::vector<Mark> token_marks(const analyze::Analysis& a) {
  std::vector<Mark> best;
  if (!a.generation.detected || a.generation.token_function.empty()) return best;
  for (const auto& l : a.representative.lanes) {
    if (l.gpu) continue;
    std::vector<Mark> marks;
    for (const auto& s : l.spans)
      if (s.category == "python" && s.label == a.generation.token_function)
        marks.push_back({s.start_ms, s.start_ms, false, "", true});
    if (marks.size() > best.size()) best = std::move(marks);
  }
  std::sort(best.begin(), best.end(), [](const Mark& x, const Mark& y) { return x.start_ms < y.start_ms; });
  for (size_t i = 0; i < best.size(); ++i)
    best[i].title = "token " + std::to_string(i + 1) + " starts: a call of " + a.generation.token_function;
  return best;
}

/// The step's boundaries and, where they fall in it, the primary finding's example spans (ms from its start).
std::vector<Mark> step_marks(const analyze::Analysis& a) {
  const auto& st = a.representative.step;
  std::vector<Mark> marks = {
      {0, 0, false, "step " + std::to_string(st.index) + " starts (" + fmt(st.start_ms, 3) + " ms in the trace)"},
      {st.duration_ms, st.duration_ms, false,
       "step " + std::to_string(st.index) + " ends (" + fmt(st.start_ms + st.duration_ms, 3) + " ms in the trace)"}};
  if (a.findings.empty()) return marks;
  for (const auto& x : a.findings.front().examples) {
    const double s0 = x.start_ms - st.start_ms, s1 = x.end_ms - st.start_ms;
    if (s1 >= 0 && s0 <= st.duration_ms) marks.push_back({s0, s1, true, "the primary finding's example: " + x.what});
  }
  if (marks.size() == 2) add_idle_mark(a, marks);
  return marks;
}

}  // namespace

void write_timeline(const analyze::Analysis& a, const KernelNames& names, std::ostream& out) {
  const auto& rep = a.representative;
  out << "<section id=\"timeline\"><h2>Representative step</h2>\n";
  if (rep.lanes.empty()) {
    out << "<p class=\"muted\">No timeline: the analysis kept no representative step.</p></section>\n";
    return;
  }
  std::vector<Mark> marks = step_marks(a);
  const std::vector<Mark> tokens = token_marks(a);
  marks.insert(marks.begin(), tokens.begin(), tokens.end());  // drawn first: under the step's own marks
  const auto hl = std::find_if(marks.begin(), marks.end(), [](const Mark& m) { return m.hl; });
  out << "<p class=\"muted\">Step " << rep.step.index << " from " << fmt(rep.step.start_ms, 3) << " ms of the trace (the "
      << "Perfetto trace's Steps track has it at the same time), lasting " << fmt(rep.step.duration_ms, 3)
      << " ms; dark lines mark its start and end"
      << (tokens.empty() ? std::string(". ")
                         : ", thin violet lines the start of each of its " + std::to_string(tokens.size()) +
                               " tokens (the calls of <code>" + h(a.generation.token_function) + "</code>). ")
      << (hl != marks.end() && hl->title.starts_with("the primary") ? "Highlighted: the primary finding's example. "
          : hl != marks.end() ? "Highlighted: the longest GPU-idle stretch of this step, time like the primary finding's. " +
                                    outside_note(a)
                              : outside_note(a))
      << "Hover a span for its name and times.</p>\n";
  write_controls(out, hl != marks.end() ? &*hl : nullptr);
  write_lanes(rep, names, "tl-svg", "tl-ticks", "timeline of the representative step", out, marks);
  write_legend({"range", "python", "api", "sync", "kernel", "graph", "h2d", "d2h", "copy", "memset", "memory", "alloc"},
               rep, out);
  write_state_legend(rep, out);
  if (has_pairs(rep))
    out << "<p class=\"muted\" id=\"tl-arrow-hint\">Click a CUDA call or the GPU work it launched: an arrow joins "
           "them (Esc clears it). <span id=\"tl-sel\"></span></p>";
  out << "</section>\n";
}

void write_run_timeline(const analyze::RunAnalysis& run, const KernelNames& names, std::ostream& out) {
  const auto& rep = run.timeline;
  if (rep.lanes.empty()) return;
  out << "<h3>One step across the ranks</h3>\n<p class=\"muted\">Step " << rep.step.index << " on every rank, on the "
      << "clock the ranks share, from the first rank's start (" << fmt(rep.step.duration_ms, 3) << " ms to the last "
      << "rank's end): the step whose slowest rank took the median time. Each collective is split into the wait for the "
      << "last rank to arrive and the transfer after. Hover a span for its name and times.</p>\n";
  write_lanes(rep, names, "run-svg", "run-ticks", "one step across the ranks", out);
  write_legend({"range", "kernel", "collective_wait", "collective"}, rep, out);
  out << "\n";
}

const char* span_color(const std::string& category) {
  if (category == "range") return "#4f7cac";
  if (category == "python") return "#5dade2";
  if (category == "api") return "#8e44ad";
  if (category == "sync") return "#c0392b";
  if (category == "kernel") return "#27ae60";
  if (category == "graph") return "#1e8449";  // a whole CUDA graph launch: the kernels' green, darker
  if (category == "h2d") return "#e67e22";
  if (category == "d2h") return "#d35400";
  if (category == "memset") return "#16a085";
  if (category == "copy") return "#f39c12";
  if (category == "memory" || category == "alloc") return "#f1c40f";
  if (category == "collective") return "#2471a3";       // NCCL moving data once every rank arrived
  if (category == "collective_wait") return "#e74c3c";  // NCCL waiting for the last rank

  return "#95a5a6";
}

}  // namespace inferscope::report::html

// The HTML report's timelines: the representative step's, one lane per thread and GPU stream, and the run's (one
// step across the ranks, a lane per rank and its GPU). Spans in rows by depth, short GPU spans as a density strip. The page is drawn for the whole step (and reads so without a
// script); every span carries its times and label, from which kTimelineScript (html_script.hpp) redraws the
// view at any zoom: positions, labels that now fit, and the strip for what is still too short to draw.
#include "report/common.hpp"
#include "report/escape.hpp"
#include "report/html_parts.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace inferscope::report::html {
namespace {

using analyze::TimelineLane;
using analyze::TimelineSpan;

constexpr double kLabelW = 190, kPlotW = kFigureW - kLabelW - 40, kRowH = 15, kLanePad = 6, kAxisH = 20;
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
    lay.height += static_cast<double>(std::max<size_t>(1, std::min(rows.size(), kMaxRows))) * kRowH + kLanePad;
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

/// The zoom buttons, shown by kTimelineScript (without it they would do nothing).
void write_controls(std::ostream& out) {
  out << "<div class=\"tl-controls\" hidden><button type=\"button\" data-zoom=\"in\" title=\"zoom in (+)\">+</button>"
         "<button type=\"button\" data-zoom=\"out\" title=\"zoom out (&minus;)\">&minus;</button>"
         "<button type=\"button\" data-zoom=\"reset\" title=\"the whole step (0)\">reset</button> <span class=\"muted\">"
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

/// What every lane's spans need to be drawn.
struct LaneContext {
  const Layout& lay;
  const KernelNames& names;
  double y0;                        // the lane's top
  const std::map<uint32_t, size_t>& rows;
  bool gpu;
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
      << " data-l=\"" << h(label) << "\"><title>" << title
      << "</title></rect>";
  // A label only where it fits: about 6 px per character (kTimelineScript's rule too).
  const size_t fits = w > 24 ? static_cast<size_t>((w - 4) / 6.2) : 0;
  if (!short_gpu && fits >= 3)
    out << "<text class=\"sl\" x=\"" << fmt(kLabelW + x0 + 2, 2) << "\" y=\"" << fmt(y + 10, 1)
        << "\" fill=\"#fff\" pointer-events=\"none\">" << h(truncate(label, fits)) << "</text>";
  out << '\n';
}

/// A lane: its name, then its spans in a nested <svg> over the plot, which clips what a zoomed view pushes
/// out of it (g.tl-z holds the spans the script places; it adds its own strips there).
void write_lane(const LaneContext& c, const TimelineLane& l, std::ostream& out) {
  out << "<g><text x=\"4\" y=\"" << fmt(c.y0 + 11, 1) << "\" fill=\"" << (l.gpu ? "#1e8449" : "#1d232b") << "\">"
      << h(truncate(l.name, 30)) << "<title>" << h(l.name) << "</title></text>\n"
      << "<svg x=\"" << fmt(kLabelW, 0) << "\" y=\"0\" width=\"" << fmt(kPlotW, 0) << "\" height=\""
      << fmt(c.lay.height, 0) << "\" viewBox=\"" << fmt(kLabelW, 0) << " 0 " << fmt(kPlotW, 0) << ' '
      << fmt(c.lay.height, 0) << "\"><g class=\"tl-z\">\n";
  DensityStrips strips;
  for (const auto& s : l.spans) write_span(c, s, strips, out);
  strips.write(c.y0, c.lay.span, out);
  out << "</g></svg></g>\n";
}


/// The lanes of `rep` as one SVG: the step timeline's (#tl-svg, which kTimelineScript zooms) or another (the run's).
void write_lanes(const analyze::RepresentativeStep& rep, const KernelNames& names, const char* svg_id,
                 const char* ticks_id, const char* label, std::ostream& out) {
  const Layout lay = layout(rep);
  out << "<svg id=\"" << svg_id << "\" tabindex=\"0\" role=\"img\" aria-label=\"" << label << "\" width=\""
      << kFigureW << "\" height=\"" << fmt(lay.height, 0) << "\" viewBox=\"0 0 " << kFigureW << ' '
      << fmt(lay.height, 0) << "\" data-span=\"" << fmt(lay.span, 6) << "\" data-x0=\"" << kLabelW << "\" data-w=\""
      << kPlotW << "\" data-h=\"" << fmt(lay.height, 0) << "\" data-min-gpu-px=\"" << kMinGpuPx
      << "\" data-min-opacity=\"" << fmt(static_cast<double>(kMinOpacity) / 100.0, 2) << "\">\n";
  write_ticks(lay, ticks_id, out);
  for (size_t li = 0; li < rep.lanes.size(); ++li)
    write_lane({lay, names, lay.lane_y[li], lay.lane_rows[li], rep.lanes[li].gpu}, rep.lanes[li], out);
  out << "</svg>\n";
}

void write_legend(std::initializer_list<const char*> categories, std::ostream& out) {
  out << "<div class=\"legend\">";
  for (const char* c : categories)
    out << "<span><i class=\"sw\" style=\"background:" << span_color(c) << "\"></i>" << c << "</span>";
  out << "</div>";
}

}  // namespace

void write_timeline(const analyze::Analysis& a, const KernelNames& names, std::ostream& out) {
  const auto& rep = a.representative;
  out << "<section id=\"timeline\"><h2>Representative step</h2>\n";
  if (rep.lanes.empty()) {
    out << "<p class=\"muted\">No timeline: the analysis kept no representative step.</p></section>\n";
    return;
  }
  out << "<p class=\"muted\">Step " << rep.step.index << " at " << fmt(rep.step.start_ms, 3) << " ms, lasting "
      << fmt(rep.step.duration_ms, 3) << " ms. Hover a span for its name and times.</p>\n";
  write_controls(out);
  write_lanes(rep, names, "tl-svg", "tl-ticks", "timeline of the representative step", out);
  write_legend({"range", "python", "api", "sync", "kernel", "graph", "h2d", "d2h", "copy", "memset"}, out);
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
  write_legend({"range", "kernel", "collective_wait", "collective"}, out);
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

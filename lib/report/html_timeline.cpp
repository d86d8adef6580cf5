// The HTML report's timeline of the representative step: one lane per thread and GPU stream, spans in rows by
// depth, short GPU spans as a density strip; zoomed and panned by kTimelineScript (html_script.hpp).
#include "report/common.hpp"
#include "report/escape.hpp"
#include "report/html_parts.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace inferscope::report::html {
namespace {

using analyze::Analysis;

/// Tick spacing of about a tenth of the span, rounded to 1, 2 or 5 times a power of ten.
double nice_step(double span) {
  if (!(span > 0)) return 1;
  const double raw = span / 10;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

}  // namespace

void write_timeline(const Analysis& a, const KernelNames& names, std::ostream& out) {
  const auto& rep = a.representative;
  out << "<section id=\"timeline\"><h2>Representative step</h2>\n";
  if (rep.lanes.empty()) {
    out << "<p class=\"muted\">No timeline: the analysis kept no representative step.</p></section>\n";
    return;
  }
  double span = rep.step.duration_ms;
  for (const auto& l : rep.lanes)
    for (const auto& s : l.spans) span = std::max(span, s.end_ms);
  if (!(span > 0)) span = 1;
  out << "<p class=\"muted\">Step " << rep.step.index << " at " << fmt(rep.step.start_ms, 3) << " ms, lasting "
      << fmt(rep.step.duration_ms, 3) << " ms. Hover a span for its name and times.</p>\n";

  constexpr double kLabelW = 190, kPlotW = 960, kRowH = 15, kLanePad = 6, kAxisH = 20;
  constexpr size_t kMaxRows = 16;  // deeper spans share the last row, so a runaway stack stays legible
  // Rows per lane: the depths the lane uses, in order, without gaps (an analyzer may put API calls at a
  // large depth to draw them innermost).
  double height = kAxisH;
  std::vector<double> lane_y;
  std::vector<std::map<uint32_t, size_t>> lane_rows;
  for (const auto& l : rep.lanes) {
    std::map<uint32_t, size_t> rows;
    for (const auto& s : l.spans) rows[s.depth];
    size_t i = 0;
    for (auto& [depth, row] : rows) row = std::min(i++, kMaxRows - 1);
    lane_y.push_back(height);
    height += static_cast<double>(std::max<size_t>(1, std::min(rows.size(), kMaxRows))) * kRowH + kLanePad;
    lane_rows.push_back(std::move(rows));
  }
  const double total_w = kLabelW + kPlotW + 40;  // room for the last tick label
  // Zoom and pan (kTimelineScript): the spans of every lane sit in a "tl-z" group the script scales and shifts
  // along x, inside a nested <svg> over the plot that clips them; lane names stay put and the script redraws the ticks for the visible range.
  out << "<div class=\"tl-controls\"><button type=\"button\" data-zoom=\"in\" title=\"zoom in (or the mouse wheel)\">+"
         "</button><button type=\"button\" data-zoom=\"out\" title=\"zoom out\">&minus;</button><button type=\"button\" "
         "data-zoom=\"reset\">reset</button> <span class=\"muted\">wheel: zoom at the pointer, drag: pan</span> "
         "<span id=\"tl-view\" class=\"muted\"></span></div>\n";
  out << "<svg id=\"tl-svg\" role=\"img\" aria-label=\"timeline of the representative step\" width=\"" << total_w
      << "\" height=\"" << fmt(height, 0) << "\" viewBox=\"0 0 " << total_w << ' ' << fmt(height, 0) << "\" data-span=\""
      << fmt(span, 6) << "\" data-x0=\"" << kLabelW << "\" data-w=\"" << kPlotW << "\" data-h=\"" << fmt(height, 0) << "\">\n"
      << "<g id=\"tl-ticks\">";
  // A nested <svg> over the plot area with the same coordinates clips what zooming pushes out of it.
  const std::string plot_viewport = "<svg x=\"" + fmt(kLabelW, 0) + "\" y=\"0\" width=\"" + fmt(kPlotW, 0) +
                                    "\" height=\"" + fmt(height, 0) + "\" viewBox=\"" + fmt(kLabelW, 0) + " 0 " +
                                    fmt(kPlotW, 0) + ' ' + fmt(height, 0) + "\">";
  const double step = nice_step(span);
  for (double t = 0; t <= span + 1e-9; t += step) {
    const double x = kLabelW + t / span * kPlotW;
    out << "<line x1=\"" << fmt(x, 1) << "\" y1=\"" << kAxisH - 4 << "\" x2=\"" << fmt(x, 1) << "\" y2=\""
        << fmt(height, 0) << "\" stroke=\"#e3e7eb\"/><text x=\"" << fmt(x + 2, 1) << "\" y=\"12\" fill=\"#5d6875\">"
        << fmt(t, step < 0.01 ? 3 : step < 1 ? 2 : 1) << " ms</text>\n";
  }
  out << "</g>\n";
  for (size_t li = 0; li < rep.lanes.size(); ++li) {
    const auto& l = rep.lanes[li];
    const double y0 = lane_y[li];
    out << "<g><text x=\"4\" y=\"" << fmt(y0 + 11, 1) << "\" fill=\"" << (l.gpu ? "#1e8449" : "#1d232b") << "\">"
        << h(truncate(l.name, 30)) << "<title>" << h(l.name) << "</title></text>\n"
        << plot_viewport << "<g class=\"tl-z\">\n";
    // GPU spans narrower than kMinGpuPx are not widened to stay visible (a run of 1.5 us kernels drawn that way
    // looks busy at 3 % utilization): they add to a strip whose opacity per pixel is the busy fraction there.
    constexpr double kMinGpuPx = 2.0;
    constexpr size_t kPx = static_cast<size_t>(kPlotW);
    struct Strip {
      std::vector<double> busy = std::vector<double>(kPx, 0.0);     // busy part of each pixel, 0..1 (and more on overlap)
      std::vector<uint32_t> spans = std::vector<uint32_t>(kPx, 0);  // spans starting in each pixel
    };
    std::map<std::pair<size_t, std::string>, Strip> strips;  // (row, category)
    for (const auto& s : l.spans) {
      const double x0 = std::min(std::max(0.0, s.start_ms), span) / span * kPlotW;
      const double x1 = std::max(x0, std::min(s.end_ms, span) / span * kPlotW);
      const size_t row = lane_rows[li].at(s.depth);
      const double y = y0 + static_cast<double>(row) * kRowH;
      const bool merged = s.label.rfind("merged ", 0) == 0;
      const std::string title = h(s.label) + " [" + h(s.category) + "] " + fmt(s.start_ms, 3) + "–" +
                                fmt(s.end_ms, 3) + " ms (" + fmt((s.end_ms - s.start_ms) * 1000.0, 1) + " us)";
      if (l.gpu && merged) {
        // The analyzer joined short spans with the gaps between them: how busy the GPU was in there is not
        // known, so the block is an outline, never a filled, busy-looking bar.
        out << "<rect class=\"merged\" x=\"" << fmt(kLabelW + x0, 2) << "\" y=\"" << fmt(y + 0.5, 1) << "\" width=\""
            << fmt(std::max(0.6, x1 - x0), 2) << "\" height=\"" << kRowH - 3 << "\" fill=\"none\" stroke=\""
            << span_color(s.category) << "\" stroke-dasharray=\"2 2\"><title>" << title
            << ": an outline, as the busy time inside is not known</title></rect>\n";
        continue;
      }
      if (l.gpu && x1 - x0 < kMinGpuPx) {
        auto& st = strips[{row, s.category}];
        const size_t first = std::min(static_cast<size_t>(x0), kPx - 1);
        ++st.spans[first];
        for (size_t px = first; px < kPx && static_cast<double>(px) < x1; ++px)
          st.busy[px] += std::min(x1, static_cast<double>(px + 1)) - std::max(x0, static_cast<double>(px));
        continue;
      }
      const double w = std::max(0.6, x1 - x0);
      const std::string label = s.category == "kernel" ? names.short_of(s.label) : s.label;
      out << "<rect x=\"" << fmt(kLabelW + x0, 2) << "\" y=\"" << fmt(y, 1) << "\" width=\"" << fmt(w, 2)
          << "\" height=\"" << kRowH - 2 << "\" fill=\"" << span_color(s.category) << "\"><title>" << title
          << "</title></rect>";
      // A label only where it fits: about 6 px per character.
      const size_t fits = w > 24 ? static_cast<size_t>((w - 4) / 6.2) : 0;
      if (fits >= 3) {
        out << "<text class=\"sl\" x=\"" << fmt(kLabelW + x0 + 2, 2) << "\" y=\"" << fmt(y + 10, 1)
            << "\" fill=\"#fff\" pointer-events=\"none\">" << h(truncate(label, fits)) << "</text>";
      }
      out << '\n';
    }
    // Each strip as runs of pixels with the same busy fraction in hundredths, the fraction as the fill's opacity
    // (at least kMinOpacity where anything ran, so a lone short kernel stays visible).
    constexpr long kMinOpacity = 8;
    for (const auto& strip : strips) {  // no structured binding: clang 14 (the fuzz build) cannot capture one
      const auto& key = strip.first;
      const auto& st = strip.second;
      const double y = y0 + static_cast<double>(key.first) * kRowH;
      const auto level = [&](size_t px) { return std::lround(std::min(1.0, st.busy[px]) * 100.0); };
      for (size_t px = 0; px < kPx;) {
        const long lv = level(px);
        size_t end = px + 1;
        while (end < kPx && level(end) == lv) ++end;
        uint32_t n = 0;
        double busy = 0;
        for (size_t k = px; k < end; ++k) n += st.spans[k], busy += std::min(1.0, st.busy[k]);
        if (lv > 0 || n > 0) {
          const double t0 = static_cast<double>(px) / kPlotW * span, t1 = static_cast<double>(end) / kPlotW * span;
          out << "<rect class=\"density\" x=\"" << fmt(kLabelW + static_cast<double>(px), 2) << "\" y=\"" << fmt(y, 1)
              << "\" width=\"" << end - px << "\" height=\"" << kRowH - 2 << "\" fill=\"" << span_color(key.second)
              << "\" fill-opacity=\"" << fmt(std::max(kMinOpacity, lv) / 100.0, 2) << "\"><title>" << n << " short "
              << h(key.second) << " span(s) in " << fmt(t0, 3) << "–" << fmt(t1, 3) << " ms, busy "
              << fmt(busy / static_cast<double>(end - px) * 100.0, 0) << " % of it</title></rect>\n";
        }
        px = end;
      }
    }
    out << "</g></svg></g>\n";
  }
  out << "</svg>\n<div class=\"legend\">";
  for (const char* c : {"range", "python", "api", "sync", "kernel", "h2d", "d2h", "copy", "memset"})
    out << "<span><i class=\"sw\" style=\"background:" << span_color(c) << "\"></i>" << c << "</span>";
  out << "</div></section>\n";
}

const char* span_color(const std::string& category) {
  if (category == "range") return "#4f7cac";
  if (category == "python") return "#5dade2";
  if (category == "api") return "#8e44ad";
  if (category == "sync") return "#c0392b";
  if (category == "kernel") return "#27ae60";
  if (category == "h2d") return "#e67e22";
  if (category == "d2h") return "#d35400";
  if (category == "memset") return "#16a085";
  if (category == "copy") return "#f39c12";
  if (category == "memory" || category == "alloc") return "#f1c40f";
  return "#95a5a6";
}

}  // namespace inferscope::report::html

// The representative timeline's cut, by tiers (timeline_cut.hpp).
#include "analyze/timeline_cut.hpp"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace inferscope::analyze::detail {
namespace {

/// One span of a lane, by position.
struct Ref {
  TimelineLane* lane = nullptr;
  size_t index = 0;
};

/// Spans kept or dropped together (a launch and its GPU work), ranked within their tier by their widest span.
struct Unit {
  int tier = 3;
  double width = 0;
  std::vector<Ref> spans;
};

bool is_host_call(const TimelineSpan& s) { return s.category == "api" || s.category == "sync"; }

/// The units of `lanes`: GPU work joined with its launching call by correlation id, the rest one span each.
std::vector<Unit> units_of(std::map<std::string, TimelineLane>& lanes, const std::string& token_function) {
  std::unordered_map<uint32_t, size_t> gpu_unit;  // correlation id -> unit holding its GPU work
  std::vector<Unit> units;
  for (auto& [name, lane] : lanes) {
    if (!lane.gpu) continue;
    for (size_t i = 0; i < lane.spans.size(); ++i) {
      const TimelineSpan& s = lane.spans[i];
      const double w = s.end_ms - s.start_ms;
      if (s.correlation) {
        auto [it, fresh] = gpu_unit.emplace(s.correlation, units.size());
        if (!fresh) {  // a second activity of one launch (a graph's kernels): the same unit
          units[it->second].spans.push_back({&lane, i});
          units[it->second].width = std::max(units[it->second].width, w);
          continue;
        }
      }
      units.push_back({2, w, {{&lane, i}}});  // tier 1 once its call is found below
    }
  }
  for (auto& [name, lane] : lanes) {
    if (lane.gpu) continue;
    for (size_t i = 0; i < lane.spans.size(); ++i) {
      const TimelineSpan& s = lane.spans[i];
      const double w = s.end_ms - s.start_ms;
      if (is_host_call(s) && s.correlation) {
        if (const auto it = gpu_unit.find(s.correlation); it != gpu_unit.end()) {
          Unit& u = units[it->second];
          u.tier = 1;
          u.spans.push_back({&lane, i});
          continue;
        }
      }
      const bool structure = s.category == "range" || (!token_function.empty() && s.category == "python" &&
                                                       s.label == token_function);
      units.push_back({structure ? 0 : is_host_call(s) ? 2 : 3, w, {{&lane, i}}});
    }
  }
  return units;
}

}  // namespace

TimelineCut cut_timeline(std::map<std::string, TimelineLane>& lanes, size_t max_spans, const std::string& token_function) {
  TimelineCut cut;
  for (const auto& [name, lane] : lanes) cut.before += lane.spans.size();
  if (cut.before <= max_spans) {
    cut.kept = cut.before;
    return cut;
  }
  std::vector<Unit> units = units_of(lanes, token_function);
  // Longest first within a tier; the structure's tier gets a quarter of the budget, its rest competes last.
  std::stable_sort(units.begin(), units.end(), [](const Unit& x, const Unit& y) {
    return x.tier != y.tier ? x.tier < y.tier : x.width > y.width;
  });
  const size_t structure_budget = max_spans / 4;
  size_t structure_kept = 0;
  for (Unit& u : units)
    if (u.tier == 0 && (structure_kept += u.spans.size()) > structure_budget) u.tier = 4;
  std::stable_sort(units.begin(), units.end(), [](const Unit& x, const Unit& y) { return x.tier < y.tier; });
  std::unordered_map<const TimelineLane*, std::vector<bool>> keep;
  for (auto& [name, lane] : lanes) keep[&lane].assign(lane.spans.size(), false);
  for (const Unit& u : units) {
    if (cut.kept + u.spans.size() > max_spans) continue;  // a pair with one place left: a smaller unit may fit
    for (const Ref& r : u.spans) keep[r.lane][r.index] = true;
    cut.kept += u.spans.size();
  }
  for (auto& [name, lane] : lanes) {
    const std::vector<bool>& k = keep[&lane];
    std::vector<TimelineSpan> out;
    for (size_t i = 0; i < lane.spans.size(); ++i)
      if (k[i]) out.push_back(std::move(lane.spans[i]));
    lane.spans = std::move(out);
  }
  return cut;
}

}  // namespace inferscope::analyze::detail

// Stage "child frames" (waits.hpp): what the child processes recorded beside a dump (iscope-run
// --follow-children: `<stem>.<pid>.iscope`) ran during the parent's steady steps, as Python self time by function.
// Both dumps are on CLOCK_MONOTONIC once their own calibration is applied, so the parent's span selects the
// child's records directly.
#include "analyze/children.hpp"
#include "analyze/summary.hpp"
#include "analyze/waits/waits.hpp"
#include "dump/clock_model.hpp"
#include "dump/reader.hpp"
#include "dump/visit.hpp"

#include <algorithm>
#include <exception>

namespace inferscope::analyze::detail {
namespace {

// Self time (a call's time in the span less its children's) by code id.
struct ChildSelfTime {
  const dump::ClockModel& clock;
  int64_t s, e;
  std::map<uint32_t, double> self;
  std::vector<double> kids;
  void on(const PyCallRecord& rec, const dump::RecordContext& rc) {
    const int64_t a = std::max(s, clock.to_ns(rec.start)), b = std::min(e, clock.to_ns(rec.end));
    const double ov = b > a ? double(b - a) : 0.0;
    const size_t d = rc.aux();
    if (kids.size() < d + 2) kids.resize(d + 2, 0.0);
    const double mine = std::max(0.0, ov - kids[d + 1]);
    kids[d + 1] = 0;
    kids[d] += ov;
    if (mine > 0) self[rec.code] += mine;
  }
};

}  // namespace

std::vector<ChildFrames> read_child_frames(const std::string& parent_path, const ParentFacts& parent,
                                           int64_t span_start, int64_t span_end) {
  std::vector<ChildFrames> out;
  for (const auto& [pid, path] : child_dump_paths(parent_path, parent)) {
    try {
      dump::DumpReader r(path);
      const dump::ClockModel clock(r.calibration());
      ChildFrames c;
      c.pid = uint32_t(pid);
      for (const auto& chunk : r.event_chunks()) {
        ChildSelfTime v{clock, span_start, span_end, {}, {}};  // one thread's chunks: depths are per thread
        try {
          dump::visit_records(r, chunk, v);
        } catch (const dump::DumpError&) {  // the child's own analysis reports its damage
        }
        for (auto& [code, ns] : v.self) {
          auto it = r.code_table().find(code);
          c.hot_ns.emplace_back(it == r.code_table().end() ? "<code " + std::to_string(code) + ">" : it->second.qualname, ns);
        }
      }
      std::sort(c.hot_ns.begin(), c.hot_ns.end(), [](auto& x, auto& y) { return x.first < y.first; });
      std::vector<std::pair<std::string, double>> merged;
      for (auto& [name, ns] : c.hot_ns) {
        if (!merged.empty() && merged.back().first == name) merged.back().second += ns;
        else merged.emplace_back(name, ns);
      }
      std::sort(merged.begin(), merged.end(), [](auto& x, auto& y) { return x.second > y.second; });
      if (merged.size() > 5) merged.resize(5);
      c.hot_ns = std::move(merged);
      if (!c.hot_ns.empty()) out.push_back(std::move(c));
    } catch (const std::exception&) {  // unreadable: the children section of the report says why
    }
  }
  return out;
}

}  // namespace inferscope::analyze::detail

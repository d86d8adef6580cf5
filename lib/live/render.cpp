#include "live/render.hpp"

#include "live/render_gpu.hpp"
#include "live/render_serving.hpp"
#include "live/render_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>

namespace inferscope::live {

namespace {

std::string name_of(const Snapshot& s, uint32_t id) {
  auto it = s.names.find(id);
  return it == s.names.end() ? "?" : it->second;
}


std::vector<Span> newest(const std::vector<Span>& v, size_t n) {
  return {v.end() - std::min(n, v.size()), v.end()};
}

// Mean time per step in each direct child of the step (by name), over the newest steps, plus what no child covers.
std::string breakdown_json(const Snapshot& s) {
  // Only steps whose children are all still in the span ring (it keeps the newest ranges only).
  const uint64_t kept_from = s.spans.empty() ? 0 : s.spans.front().start;
  std::vector<Span> steps;
  for (const Span& st : newest(s.steps, kBreakdownSteps))
    if (st.start >= kept_from) steps.push_back(st);
  std::map<std::string, double> total;
  double step_ms = 0;
  for (const Span& st : steps) {
    step_ms += ms(s, st.end - st.start);
    for (const Span& c : s.spans)
      if (c.thread == st.thread && c.depth == st.depth + 1 && c.start >= st.start && c.end <= st.end)
        total[name_of(s, c.name)] += ms(s, c.end - c.start);
  }
  if (steps.empty()) return "[]";
  std::vector<std::pair<std::string, double>> rows(total.begin(), total.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second > b.second; });
  double covered = 0;
  std::string out = "[";
  for (auto& [name, t] : rows) {
    covered += t;
    out += "{\"name\":" + json_string(name) + ",\"ms\":" + num(t / steps.size()) + "},";
  }
  out += "{\"name\":\"(not in a child range)\",\"ms\":" + num(std::max(0.0, step_ms - covered) / steps.size()) + "}]";
  return out;
}

std::string span_json(const Snapshot& s, const Span& x, bool step) {
  return "{\"thread\":" + std::to_string(x.thread) + ",\"name\":" + json_string(name_of(s, x.name)) +
         ",\"depth\":" + std::to_string(x.depth) + ",\"start_ms\":" + num(at_ms(s, x.start)) +
         ",\"dur_ms\":" + num(ms(s, x.end - x.start)) + ",\"step\":" + (step ? "true" : "false") + "}";
}

// The newest kTimelineSteps steps up to now and every range that overlaps them, on every thread; once steps have
// settled on the GPU side, the newest settled ones instead (their GPU activities have arrived) and the ranges
// inside their time range (a step or range that only touches its edges is not drawn).
std::string timeline_json(const Snapshot& s) {
  const bool settled = s.timeline_to != 0;
  auto in_settled = [&](const Span& x) { return x.end > s.timeline_from && x.start < s.timeline_to; };
  std::vector<Span> steps;
  if (settled) std::copy_if(s.steps.begin(), s.steps.end(), std::back_inserter(steps), in_settled);
  else steps = newest(s.steps, kTimelineSteps);
  const uint64_t from = settled ? s.timeline_from
                                : steps.empty() ? (s.spans.empty() ? 0 : s.spans.front().start) : steps.front().start;
  const uint64_t to = settled ? s.timeline_to : s.now_ticks;
  std::string out = "{\"from_ms\":" + num(at_ms(s, from)) + ",\"to_ms\":" + num(at_ms(s, to)) + ",\"spans\":[";
  bool first = true;
  auto add = [&](const Span& x, bool step) {
    if (settled ? !in_settled(x) : x.end < from) return;
    out += (first ? "" : ",") + span_json(s, x, step);
    first = false;
  };
  for (const Span& x : steps) add(x, true);
  for (const Span& x : s.spans) add(x, false);
  out += "],\"threads\":{";
  first = true;
  for (auto& [id, name] : s.threads) {
    out += (first ? "\"" : ",\"") + std::to_string(id) + "\":" + json_string(name);
    first = false;
  }
  return out + "},\"gpu\":" + gpu_timeline_json(s) + "}";
}

}  // namespace

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * double(v.size())));
  return v[std::min(v.size() - 1, rank ? rank - 1 : 0)];
}

std::string json_string(const std::string& t) {
  std::string o = "\"";
  for (unsigned char c : t) {
    if (c == '"' || c == '\\') o += '\\', o += char(c);
    else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", c);
      o += b;
    } else o += char(c);
  }
  return o + "\"";
}

std::string step_hint(const Snapshot& s) {
  if (s.steps_total > 0) return {};
  const std::string named = "no step named '" + s.step_name + "' yet";
  if (s.step_candidates.empty())
    return named + ", and no repeated top-level range or Python function either; mark a step with ISCOPE_RANGE(\"" +
           s.step_name + "\") or inferscope_py.scope(\"" + s.step_name + "\")";
  std::string seen;
  bool python = false;
  for (const StepCandidate& c : s.step_candidates) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.3g s", c.seconds);
    seen += (seen.empty() ? "" : ", ") + std::string(c.python ? "Python function " : "range ") + c.name + " (" +
            std::to_string(c.count) + (c.python ? " calls, " : " times, ") + secs + ")";
    python |= c.python;
  }
  return named + ": candidates seen: " + seen + "; name one with --set step=NAME (or ISCOPE_RANGE(\"" + s.step_name +
         "\")" + (python ? ", or wrap a Python function's body in inferscope_py.scope(\"" + s.step_name + "\")" : "") +
         ")";
}

std::string render_data_json(const Snapshot& s) {
  const auto window = newest(s.steps, kWindowSteps);
  std::vector<double> d;
  const Span* slowest = nullptr;
  for (const Span& x : window) {
    d.push_back(ms(s, x.end - x.start));
    if (!slowest || x.end - x.start > slowest->end - slowest->start) slowest = &x;
  }
  std::string out = "{\"state\":" + json_string(s.state) + ",\"steps_total\":" + std::to_string(s.steps_total) +
                    ",\"step_name\":" + json_string(s.step_name) + ",\"step_hint\":" + json_string(step_hint(s)) +
                    ",\"records_total\":" + std::to_string(s.records_total) +
                    ",\"dropped_records\":" + std::to_string(s.dropped_records) +
                    ",\"now_ms\":" + num(at_ms(s, s.now_ticks)) + ",\"window_steps\":" + std::to_string(window.size()) +
                    ",\"p50_ms\":" + num(quantile(d, 0.5)) + ",\"p90_ms\":" + num(quantile(d, 0.9));
  out += ",\"slowest\":";
  out += slowest ? span_json(s, *slowest, true) : "null";
  out += ",\"recent_ms\":[";
  for (size_t i = 0; i < d.size(); ++i) out += (i ? "," : "") + num(d[i]);
  out += "],\"breakdown\":" + breakdown_json(s) + ",\"timeline\":" + timeline_json(s) +
         ",\"gpu\":" + gpu_json(s) + ",\"serving\":" + serving_json(s) + "}";
  return out;
}

std::string render_metrics(const Snapshot& s) {
  std::string o;
  o += histogram_text("inferscope_step_duration_seconds", "Duration of each step range, as recorded.", kBucketBounds,
                      s.buckets, s.steps_over_last_bound, s.step_seconds_sum, s.steps_total);
  o += "# HELP inferscope_records_total Records the session has drained from the threads' buffers.\n";
  o += "# TYPE inferscope_records_total counter\n";
  o += "inferscope_records_total " + std::to_string(s.records_total) + "\n";
  o += "# HELP inferscope_dropped_records_total Records the session could not keep (all reasons).\n";
  o += "# TYPE inferscope_dropped_records_total counter\n";
  o += "inferscope_dropped_records_total " + std::to_string(s.dropped_records) + "\n";
  o += "# HELP inferscope_session_state The session's state (1 for the current one).\n";
  o += "# TYPE inferscope_session_state gauge\n";
  for (const char* st : {"recording", "stopping"})
    o += std::string("inferscope_session_state{state=\"") + st + "\"} " + (s.state == st ? "1" : "0") + "\n";
  return o + gpu_metrics(s) + serving_metrics(s);
}

}  // namespace inferscope::live

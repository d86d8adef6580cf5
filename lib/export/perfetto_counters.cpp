#include "export/perfetto_counters.hpp"

#include <inferscope/counter_names.hpp>

#include <algorithm>
#include <cmath>

namespace inferscope::exporter::perfetto {

std::optional<RateUnit> cumulative_unit(std::string_view c) {
  // The cumulative counters of docs/counters.md; every other counter is a level.
  namespace n = counter_names;
  static const std::pair<std::string_view, RateUnit> exact[] = {
      {n::kCpuUserNs, {"ms/s", 1e-6}},          {n::kCpuSystemNs, {"ms/s", 1e-6}},
      {n::kThreadCpuUserNs, {"ms/s", 1e-6}},    {n::kThreadCpuSystemNs, {"ms/s", 1e-6}},
      {n::kThreadSchedRunNs, {"ms/s", 1e-6}},   {n::kThreadSchedWaitNs, {"ms/s", 1e-6}},
      {n::kPerfTaskClockNs, {"ms/s", 1e-6}},    {n::kCtxVoluntary, {"switches/s", 1}},
      {n::kCtxInvoluntary, {"switches/s", 1}},  {n::kThreadCtxVoluntary, {"switches/s", 1}},
      {n::kThreadCtxInvoluntary, {"switches/s", 1}}, {n::kMemMinorFaults, {"faults/s", 1}},
      {n::kMemMajorFaults, {"faults/s", 1}},
  };
  for (const auto& [name, unit] : exact)
    if (c == name) return unit;
  if (c.starts_with("psi.") && c.ends_with("_us")) return RateUnit{"ms/s", 1e-3};  // stall time in µs
  if (c.starts_with("numa.") && !c.ends_with("_bytes")) return RateUnit{"pages/s", 1};
  return std::nullopt;
}

namespace {

std::string track_name(const CounterSample& s, const std::optional<RateUnit>& rate) {
  std::string name(s.counter);
  if (rate) {
    name += " [";
    name += rate->unit;
    name += ']';
  }
  if (!s.owner.empty()) {
    name += " (";
    name += s.owner;
    name += ')';
  }
  return name;
}

}  // namespace

void CounterTracks::add(const CounterSample& s) {
  const std::optional<RateUnit> rate_unit = cumulative_unit(s.counter);
  const std::string name = track_name(s, rate_unit);
  Track& t = tracks_[{s.pid, name}];
  t.rate = rate_unit;
  const Value v{s.is_double, s.is_double ? 0 : s.i, s.is_double ? s.d : 0};
  if (t.have_last && (s.ts_ns < t.last_ts || (t.rate && s.ts_ns == t.last_ts))) {
    ++out_of_order_;
    return;
  }
  if (t.rate) rate(name, s.pid, t, s.ts_ns, v);
  else level(name, s.pid, t, s.ts_ns, v);
  t.have_last = true;
  t.last_ts = s.ts_ns;
  t.last = v;
}

void CounterTracks::level(const std::string& name, int64_t pid, Track& t, int64_t ts, const Value&) {
  // A level is written one sample late: samples at one instant (two allocations) collapse to the last. The
  // collector writes a level again once a second even when it did not move (keep-alive): the track already
  // shows it, so only a change is written, and the last sample at finish.
  if (t.have_last && ts > t.last_ts && (!t.have_shown || !(t.shown == t.last))) show(name, pid, t, t.last_ts, t.last);
}

void CounterTracks::rate(const std::string& name, int64_t pid, Track& t, int64_t ts, const Value& v) {
  if (!t.have_last) return;  // a rate needs two samples
  // The rate of [last, ts] is shown from `last` on. A decrease is a new series (a thread id reused by a new
  // thread, a counter reset): its interval shows 0 rather than a negative rate.
  const double delta = v.as_double() - t.last.as_double();
  const double unit_rate = 1e9 / static_cast<double>(ts - t.last_ts) * t.rate->scale;  // one count more or less
  // As many decimals as tell one count from the next, no more: the delta is still exact (rate × interval),
  // and the digits beyond it were noise that neither compresses nor reads.
  const int decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(unit_rate))), 0, 9);
  const double scale = std::pow(10.0, decimals);  // exact: the same rate gives the same double at any decimals
  const double per_s = delta > 0 ? std::round(delta * unit_rate * scale) / scale : 0;
  const Value r{true, 0, per_s, decimals};
  if (!t.have_shown || !(t.shown == r)) show(name, pid, t, t.last_ts, r);
}

void CounterTracks::show(const std::string& name, int64_t pid, Track& t, int64_t ts, const Value& v) {
  // Samples from before the trace's origin (a sampler starts with the session, before the program does
  // anything): trace viewers drop negative times, so the last value shown before it is written at the origin,
  // once, when the track first moves after it (or at finish).
  if (ts < 0) {
    t.at_origin = v;
    t.have_at_origin = true;
  } else {
    if (t.have_at_origin && ts > 0) write(name, pid, 0, t.at_origin);
    t.have_at_origin = false;
    write(name, pid, ts, v);
  }
  t.have_shown = true;
  t.shown_ts = ts;
  t.shown = v;
}

void CounterTracks::write(const std::string& name, int64_t pid, int64_t ts, const Value& v) {
  w_.begin_counter(Name(name), pid);
  w_.field_us("ts", ts);
  Args a;
  if (v.decimals >= 0) a.fixed("value", v.d, v.decimals);
  else if (v.is_double) a.d("value", v.d);
  else a.i("value", v.i);
  w_.field_raw("args", a.json());
  w_.end();
}

void CounterTracks::add_state(const StateTrack& track, int64_t ts, int64_t code) {
  auto [it, fresh] = states_.try_emplace({track.pid, track.tid});
  State& s = it->second;
  if (fresh) {
    w_.begin('M', "thread_name", "", track.pid, track.tid);
    w_.field_raw("args", Args{}.s("name", track.name).json());
    w_.end();
    s.track = track;
  }
  std::optional<dump::ThreadStateSlice> closed;
  if (!s.slicer.add(ts, code, closed)) ++out_of_order_;
  else if (closed) slice(s.track, *closed);
}

void CounterTracks::slice(const StateTrack& track, const dump::ThreadStateSlice& s) {
  if (s.end <= 0 && s.start < 0) return;  // over before the trace's origin
  w_.begin('X', Name(thread_state_name(s.code)), "thread_state", track.pid, track.tid);
  w_.field_us("ts", std::max<int64_t>(0, s.start));  // a state held since before the origin: from it
  w_.field_us("dur", s.end - std::max<int64_t>(0, s.start));
  w_.end();
}

void CounterTracks::finish() {
  for (auto& [key, t] : tracks_) {
    if (!t.have_last) continue;
    if (t.rate) {
      if (!t.have_shown) continue;  // one sample: no rate
      // After its last sample nothing more is known to have been spent or counted.
      if (t.last_ts > t.shown_ts && t.shown.d != 0) show(key.second, key.first, t, t.last_ts, Value{true, 0, 0});
    } else if (!t.have_shown || t.last_ts > t.shown_ts) {
      show(key.second, key.first, t, t.last_ts, t.last);  // where the level was last seen
    }
  }
  for (auto& [key, t] : tracks_)
    if (t.have_at_origin) write(key.second, key.first, 0, t.at_origin);  // nothing after the origin moved it
  for (const auto& [key, s] : states_)
    if (const auto open = s.slicer.finish()) slice(s.track, *open);
  tracks_.clear();
  states_.clear();
}

}  // namespace inferscope::exporter::perfetto

#include "runtime/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

namespace inferscope::runtime {
namespace {

constexpr size_t kMaxSlowSteps = 1024;

using sampling::Request;

uint64_t ms_to_ticks(double ms, double ticks_per_ns) { return static_cast<uint64_t>(std::llround(ms * 1e6 * ticks_per_ns)); }

sampling::ScheduleOptions schedule_of(const Config& c, double tpn) {
  sampling::ScheduleOptions o;
  o.window_steps = c.window_steps;
  o.every_steps = c.window_every_steps;
  o.window_ticks = ms_to_ticks(c.window_ms, tpn);
  o.every_ticks = ms_to_ticks(c.window_every_ms, tpn);
  o.neighbours = c.slow_step_neighbours;
  if (c.mode == CaptureMode::kAdaptive) o.baseline_steps = std::max<uint32_t>(c.baseline_steps, 1);
  return o;
}

sampling::SlowStepOptions slow_of(const Config& c) {
  sampling::SlowStepOptions o;
  o.threshold_ns = c.slow_step_ms * 1e6;
  o.factor = c.slow_step_factor;
  o.percentile = c.slow_step_percentile;
  return o;
}

sampling::StoreOptions store_of(const Config& c) {
  sampling::StoreOptions o;
  o.max_windows = c.windows_kept;
  o.max_bytes = std::max<uint64_t>(c.trace_size_mb, 1) << 20;
  o.max_preroll_bytes = std::max<uint64_t>(o.max_bytes / 16, 64 << 10);
  if (c.mode == CaptureMode::kAdaptive) o.max_kept_bytes = o.max_bytes / 2;  // the baseline: the rest is the windows'
  return o;
}

void set_detail(const std::vector<Collector*>& collectors, bool on) {
  for (Collector* c : collectors) c->set_detail(on);
}

}  // namespace

Sampler::Sampler(const Config& config, uint64_t start_ticks, double ticks_per_ns)
    : cfg_(config),
      start_ticks_(start_ticks),
      ticks_per_ns_(ticks_per_ns > 0 ? ticks_per_ns : 1.0),
      sched_(schedule_of(config, ticks_per_ns_), start_ticks),
      detector_(slow_of(config)),
      store_(store_of(config)) {
  if (config.mode == CaptureMode::kAdaptive) open_baseline();
}

// Adaptive mode: the collectors record in full from their start and the scheduler starts with the baseline open, so
// its window opens here, at the session's start (before any record is routed), and is kept whatever comes after.
void Sampler::open_baseline() {
  dump::WindowEntry e{};
  e.index = full_open_ = baseline_index_ = next_index_++;
  e.begin_ticks = full_begin_ = start_ticks_;
  e.first_step = 0;
  e.reason = static_cast<uint8_t>(dump::WindowReason::kBaseline);
  e.flags = dump::kWindowFull | dump::kWindowKept;
  store_.open(e);
  ++windows_opened_;
}

std::string Sampler::step_name(const Config& config) { return config.step.empty() ? "step" : config.step; }

bool Sampler::step_ended(uint32_t thread, uint64_t start, uint64_t end) {
  std::lock_guard lk(mu_);
  const double dur_ns = double(end > start ? end - start : 0) / ticks_per_ns_;
  const bool slow = detector_.observe(dur_ns);
  slow_seen_ += slow;
  sched_.step_ended(start, end, slow, detector_.last_bound_ns(), thread);
  return sched_.switch_pending();
}

// Detail goes on before the window's begin is taken, and its end is taken before detail goes off: every step a
// window counts ran wholly with the collectors on.
void Sampler::open_window(const Request& r, const std::vector<Collector*>& collectors) {
  set_detail(collectors, true);
  const uint64_t begin = detail::now();
  {
    std::lock_guard lk(mu_);
    sched_.opened(begin);
  }
  dump::WindowEntry e{};
  e.index = full_open_ = next_index_++;
  e.begin_ticks = full_begin_ = begin;
  e.first_step = r.step;
  e.reason = static_cast<uint8_t>(r.reason);
  e.flags = dump::kWindowFull;
  store_.open(e);
  ++windows_opened_;
}

void Sampler::close_window(const Request& r, const std::vector<Collector*>& collectors) {
  const uint64_t end = detail::now();
  set_detail(collectors, false);
  {
    std::lock_guard lk(mu_);
    sched_.closed(end);
  }
  store_.close(full_open_, end, r.steps, r.slow_steps);
  window_ticks_ += end - full_begin_;
  full_open_ = 0;
}

void Sampler::note_slow(const Request& r) {
  dump::SlowStepEntry e{};
  e.start_ticks = r.begin;
  e.end_ticks = r.end;
  e.step = r.step;
  e.thread_id = r.thread;
  e.bound_us = static_cast<uint32_t>(std::min(r.bound_ns / 1e3, 4e9));
  slow_.push_back(e);
  if (slow_.size() > kMaxSlowSteps) slow_.pop_front();
  if (!r.in_window) ++light_slow_;
  pins_.push_back(r.begin);
}

void Sampler::carry_out(const std::vector<Request>& requests, const std::vector<Collector*>& collectors,
                        bool finishing) {
  for (const Request& r : requests) {
    switch (r.kind) {
      case Request::kOpen:
        if (!finishing) open_window(r, collectors);
        break;
      case Request::kClose:
        if (!finishing) close_window(r, collectors);
        break;
      case Request::kSlowStep:
        note_slow(r);
        break;
      case Request::kNeighboursBegin: {
        dump::WindowEntry e{};
        e.index = light_open_ = next_index_++;
        e.begin_ticks = r.begin;
        e.first_step = r.step;
        e.reason = static_cast<uint8_t>(dump::WindowReason::kNeighbours);
        store_.open(e);
        break;
      }
      case Request::kNeighboursEnd:
        store_.close(light_open_, r.end, r.steps, light_slow_);
        light_open_ = 0;
        light_slow_ = 0;  // counted from the slow step that opened the next one (its request comes first)
        break;
    }
  }
  for (uint64_t t : pins_) store_.pin_at(t);
  pins_.clear();
}

void Sampler::before_drain(const std::vector<Collector*>& collectors, bool finishing) {
  std::vector<Request> requests;
  {
    std::lock_guard lk(mu_);
    if (!finishing) sched_.tick(detail::now());
    requests = sched_.take();
  }
  carry_out(requests, collectors, finishing);
}

void Sampler::route(const std::vector<std::vector<uint8_t>>& chunks) {
  constexpr size_t kHead = sizeof(dump::ChunkHeader) + sizeof(dump::EventsHeader);
  for (const auto& c : chunks) {
    if (c.size() < kHead) continue;
    dump::EventsHeader eh;
    std::memcpy(&eh, c.data() + sizeof(dump::ChunkHeader), sizeof(eh));
    store_.add_events(eh.thread_id, c.data() + kHead, c.size() - kHead);
  }
  uint64_t horizon;
  const bool baseline_full = baseline_index_ && full_open_ == baseline_index_ && store_.kept_full();
  {
    std::lock_guard lk(mu_);
    horizon = sched_.preroll_horizon();
    if (baseline_full) sched_.end_baseline();  // carried out at the next drain, like any close
  }
  store_.trim_preroll(horizon);
}

std::vector<dump::SlowStepEntry> Sampler::slow_entries() const {
  std::vector<dump::SlowStepEntry> out(slow_.begin(), slow_.end());
  for (auto& e : out) {
    e.window = store_.window_at(e.start_ticks);
    e.flags = e.window && store_.is_full(e.window) ? 1u : 0u;
  }
  return out;
}

dump::SamplingSummary Sampler::summary(uint32_t step_name_id, uint64_t now) {
  dump::SamplingSummary s{};
  {
    std::lock_guard lk(mu_);
    s.steps_seen = sched_.steps_seen();
    s.steps_in_windows = sched_.steps_in_windows();
    s.flags = sched_.saw_steps() ? 1u : 0u;
    s.slow_steps_seen = static_cast<uint32_t>(std::min<uint64_t>(slow_seen_, UINT32_MAX));
  }
  s.begin_ticks = start_ticks_;
  s.end_ticks = now;
  s.window_ticks = window_ticks_ + (full_open_ && now > full_begin_ ? now - full_begin_ : 0);
  s.windows_opened = windows_opened_;
  s.windows_dropped = store_.windows_dropped();
  s.slow_steps_listed = static_cast<uint32_t>(slow_.size());
  s.step_name = step_name_id;
  s.records_outside = store_.records_outside();
  return s;
}

void Sampler::write(std::vector<uint8_t>& out, uint32_t step_name_id) {
  store_.write_events(out);
  write_summary(out, step_name_id);
}

void Sampler::write_summary(std::vector<uint8_t>& out, uint32_t step_name_id) {
  const uint64_t now = detail::now();
  dump::ChunkBuilder sb(dump::ChunkType::kSampling);
  sb.add(summary(step_name_id, now));
  sb.finish_into(out);
  auto windows = store_.entries(now);
  {  // the full window still open: the steps it has counted so far (a closed one has them from its close)
    std::lock_guard lk(mu_);
    for (auto& w : windows)
      if (full_open_ && w.index == full_open_) {
        w.steps = sched_.counted();
        w.slow_steps = sched_.counted_slow();
      }
  }
  if (!windows.empty()) {
    dump::ChunkBuilder wb(dump::ChunkType::kWindows);
    for (auto& w : windows) wb.add(w);
    wb.finish_into(out);
  }
  const auto slow = slow_entries();
  if (!slow.empty()) {
    dump::ChunkBuilder lb(dump::ChunkType::kSlowSteps);
    for (auto& e : slow) lb.add(e);
    lb.finish_into(out);
  }
}

std::vector<std::tuple<uint32_t, std::string, uint64_t, uint64_t>> Sampler::drops() const {
  std::vector<std::tuple<uint32_t, std::string, uint64_t, uint64_t>> out;
  for (auto& [t, c] : store_.dropped()) out.emplace_back(t, kDropReasons[0], c.first, c.second);
  for (auto& [t, c] : store_.refused()) out.emplace_back(t, kDropReasons[1], c.first, c.second);
  return out;
}

std::vector<std::pair<std::string, std::string>> Sampler::process_info() const {
  auto n = [](double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  const bool adaptive = cfg_.mode == CaptureMode::kAdaptive;
  std::vector<std::pair<std::string, std::string>> info = {{"mode", adaptive ? "adaptive" : "sampled"},
          {"sampled.step", step_name(cfg_)},
          {"sampled.window_steps", std::to_string(cfg_.window_steps)},
          {"sampled.window_every_steps", std::to_string(cfg_.window_every_steps)},
          {"sampled.window_ms", std::to_string(cfg_.window_ms)},
          {"sampled.window_every_ms", std::to_string(cfg_.window_every_ms)},
          {"sampled.windows_kept", std::to_string(cfg_.windows_kept)},
          {"sampled.slow_step_ms", n(cfg_.slow_step_ms)},
          {"sampled.slow_step_factor", n(cfg_.slow_step_factor)},
          {"sampled.slow_step_percentile", n(cfg_.slow_step_percentile)},
          {"sampled.slow_step_neighbours", std::to_string(cfg_.slow_step_neighbours)}};
  if (adaptive) info.emplace_back("sampled.baseline_steps", std::to_string(cfg_.baseline_steps));
  return info;
}

}  // namespace inferscope::runtime

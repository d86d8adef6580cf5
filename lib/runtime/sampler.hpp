// Sampled and adaptive modes inside a running session (docs/sampled-mode.md): the scheduler and the slow-step test, fed by
// the threads that end steps, and the ring of windows, fed by the writer. Internal to lib/runtime.
//
// Threads: step_ended() runs on any application thread (a short lock, no allocation in the common case, a
// wake-up byte to the writer only when a window opens or closes); everything else runs on the writer thread,
// which also switches the collectors' detail, so an application thread never waits on CUPTI or the GIL.
#pragma once

#include "runtime/runtime.hpp"
#include "runtime/sampling/slow_steps.hpp"
#include "runtime/sampling/window_scheduler.hpp"
#include "runtime/sampling/window_store.hpp"

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace inferscope::runtime {

class Sampler {
 public:
  /// `ticks_per_ns`: the session clock's rate (the settings' ms become ticks).
  Sampler(const Config& config, uint64_t start_ticks, double ticks_per_ns);

  /// What drops() names its counts: windows the ring dropped, records refused for want of room.
  static constexpr const char* kDropReasons[] = {"sample_window_dropped", "sample_window_full"};

  /// The name of the range that marks a step: Config::step, or "step" when it is empty.
  static std::string step_name(const Config& config);

  /// A step range [start, end] ended on dump thread `thread`. True when the writer should come now.
  bool step_ended(uint32_t thread, uint64_t start, uint64_t end);

  /// Writer, before each drain: carries out the scheduler's requests (switching the collectors' detail) and lets
  /// the clock move timed windows. `finishing`: the session stops; nothing is switched any more.
  void before_drain(const std::vector<Collector*>& collectors, bool finishing);
  /// Writer: routes drained EVENTS chunks into the windows, then forgets pre-roll no slow step can reach.
  void route(const std::vector<std::vector<uint8_t>>& chunks);
  /// Writer: the kept windows' EVENTS chunks, then the SAMPLING, WINDOWS and SLOW_STEPS chunks.
  void write(std::vector<uint8_t>& out, uint32_t step_name_id);
  /// Writer: the SAMPLING, WINDOWS and SLOW_STEPS chunks alone (what follows the windows' records).
  void write_summary(std::vector<uint8_t>& out, uint32_t step_name_id);
  /// Where the scheduler's window stands (any thread).
  sampling::WindowScheduler::State window_state() {
    std::lock_guard lk(mu_);
    return sched_.state();
  }
  /// Adaptive mode: the baseline is still open (writer thread).
  bool baseline_open() const { return baseline_index_ != 0 && full_open_ == baseline_index_; }
  /// The ring of windows, for the crash image (read by a crash handler only while the writer changes nothing).
  const sampling::WindowStore& store() const { return store_; }
  /// Writer: what the ring dropped, per thread: (thread, reason, records, bytes).
  std::vector<std::tuple<uint32_t, std::string, uint64_t, uint64_t>> drops() const;
  /// Records the written dump holds.
  uint64_t records_kept() const { return store_.records_kept(); }
  /// The settings, for the dump's process info.
  std::vector<std::pair<std::string, std::string>> process_info() const;

 private:
  void open_baseline();
  void open_window(const sampling::Request& r, const std::vector<Collector*>& collectors);
  void close_window(const sampling::Request& r, const std::vector<Collector*>& collectors);
  void note_slow(const sampling::Request& r);
  void carry_out(const std::vector<sampling::Request>& requests, const std::vector<Collector*>& collectors,
                 bool finishing);
  std::vector<dump::SlowStepEntry> slow_entries() const;
  dump::SamplingSummary summary(uint32_t step_name_id, uint64_t now);

  const Config cfg_;
  const uint64_t start_ticks_;
  const double ticks_per_ns_;

  std::mutex mu_;  // the scheduler and the slow-step test: application threads and the writer
  sampling::WindowScheduler sched_;
  sampling::SlowStepDetector detector_;
  uint64_t slow_seen_ = 0;

  // Writer thread only.
  sampling::WindowStore store_;
  uint32_t next_index_ = 1;
  uint32_t full_open_ = 0, light_open_ = 0;  // indexes of the windows open now (0: none)
  uint32_t baseline_index_ = 0;              // adaptive mode: the baseline's window (0: none)
  uint32_t light_slow_ = 0;                  // slow steps in the light capture open now
  uint64_t full_begin_ = 0, window_ticks_ = 0;
  uint32_t windows_opened_ = 0;
  std::deque<dump::SlowStepEntry> slow_;  // the newest kMaxSlowSteps
  std::vector<uint64_t> pins_;            // slow steps' starts, pinned once the batch of requests is carried out
};

}  // namespace inferscope::runtime

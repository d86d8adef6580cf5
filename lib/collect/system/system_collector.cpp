// The system collector: one sampling thread that runs SystemSampler every Config::sample_period_ms and writes its
// counters, and the time each round took, through the runtime channel "system". Between rounds, every
// Config::thread_sample_us, it reads the busy and known threads' schedstat (SystemSampler::fast_round); the time
// those reads take is added up and written as one overhead record per round.
#include "collect/system/cgroup_cpu.hpp"
#include "collect/system/sampler.hpp"
#include "runtime/runtime.hpp"
#include "runtime/session.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace inferscope::sys {
namespace {

// On a recording thread as it exits (runtime::set_thread_exit_hook): its last CPU reading, on its own ring.
void on_thread_exit(uint32_t thread_id) noexcept {
  try {
    const std::string dir = "/proc/self/task/" + std::to_string(::syscall(SYS_gettid));
    sample_thread_at_exit(dir, thread_id, [](const CounterRecord& r) { detail::emit_record(&r, sizeof(r)); });
  } catch (...) {
  }
}

class SystemCollector final : public runtime::Collector {
 public:
  const char* name() const override { return "system"; }
  bool wanted(const Config& config) const override { return config.system; }

  std::string start(const Config& config) override {
    channel_ = runtime::open_channel("system");
    if (!channel_) return "off: no running session";
    SamplerOptions o;
    o.period_ms = config.sample_period_ms ? config.sample_period_ms : 1;
    o.nvml = config.nvml;
    o.perf = config.perf_sampling;
    o.thread_sample_us = config.thread_sample_us;
    o.nvml_library = nvml_library_for_testing();
    period_ = std::chrono::milliseconds(o.period_ms);
    sampler_ = std::make_unique<SystemSampler>(
        o, [this](const CounterRecord& r) { channel_->write(&r, sizeof(r)); }, [](uint64_t& generation, ThreadMap& map) {
          const uint64_t now = runtime::session_threads_generation();
          if (now == generation) return false;
          generation = now;  // read before the table: a thread binding meanwhile shows next round
          map = runtime::session_threads();
          return true;
        });
    std::string status = sampler_->open();
    if (const uint32_t us = sampler_->fast_every_us()) {
      fast_ = std::chrono::microseconds(us);
      status += "; busy and known threads' schedstat every " + std::to_string(us) + " us";
    }
    // One plain line for each thing the collector cannot do; the rest of the run goes on.
    if (!sampler_->gpu_note().empty() && config.nvml)
      runtime::log(LogLevel::kInfo, "system collector: " + sampler_->gpu_note());
    if (!sampler_->perf_note().empty()) runtime::log(LogLevel::kInfo, "system collector: " + sampler_->perf_note());
    overhead_name_ = runtime::intern("system_sampler");
    fast_name_ = runtime::intern("system_sampler_threads");
    runtime::set_thread_exit_hook(on_thread_exit);
    sampled_ = records_in_windows(config.mode);
    paused_ = !detail_at_start(config.mode);
    thread_ = std::thread([this] { run(); });
    return "on: " + status + (!sampled_ ? "" : paused_ ? "; inside sampled windows only"
                                                        : "; in full at first, then inside sampled windows only");
  }

  // Sampled mode: the sampling thread sleeps between windows.
  void set_detail(bool on) override {
    if (!sampled_) return;
    {
      std::lock_guard lk(mu_);
      paused_ = !on;
    }
    cv_.notify_all();
  }

  void stop() override {
    runtime::set_thread_exit_hook(nullptr);  // the final round below reads every thread still alive
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (sampler_ && sampler_->skipped_samples())
      runtime::log(LogLevel::kInfo, "system collector: skipped " + std::to_string(sampler_->skipped_samples()) +
                                        " unreadable samples; last: " + sampler_->last_error());
  }

 private:
  void run() {
    pthread_setname_np(pthread_self(), "iscope-system");
    auto next = std::chrono::steady_clock::now();
    for (;;) {
      bool final;
      {
        std::unique_lock lk(mu_);
        // Fast ticks until the round is due (none when fast_ is zero).
        while (!stopping_ && fast_.count() > 0) {
          const auto tick = std::chrono::steady_clock::now() + fast_;
          if (tick >= next) break;
          if (cv_.wait_until(lk, tick, [this] { return stopping_; })) break;
          if (paused_) break;
          lk.unlock();
          const uint64_t t0 = detail::now();
          sampler_->fast_round();
          fast_ticks_ += detail::now() - t0;
          lk.lock();
        }
        cv_.wait_until(lk, next, [this] { return stopping_; });
        cv_.wait(lk, [this] { return stopping_ || !paused_; });
        final = stopping_;
      }
      one_round(final);
      if (final) return;
      // A round that overran (a loaded machine) starts the next period from now instead of catching up.
      next += period_;
      const auto now = std::chrono::steady_clock::now();
      if (next < now) next = now + period_;
    }
  }

  // One overhead record per round: the round itself, and before it (ending where the round starts) the time the
  // fast ticks since the last round took, so the dump's collector overhead counts both.
  void one_round(bool final) {
    const uint64_t start = detail::now();
    if (fast_ticks_) {
      const OverheadRecord f{{RecordKind::kCollectorOverhead, 1, sizeof(OverheadRecord)}, fast_name_,
                             start - std::min(start, fast_ticks_), start};
      channel_->write(&f, sizeof(f));
      fast_ticks_ = 0;
    }
    sampler_->round(final);
    const OverheadRecord r{{RecordKind::kCollectorOverhead, 0, sizeof(OverheadRecord)}, overhead_name_, start,
                           detail::now()};
    channel_->write(&r, sizeof(r));
  }

  runtime::Channel* channel_ = nullptr;
  std::unique_ptr<SystemSampler> sampler_;
  std::chrono::milliseconds period_{10};
  uint32_t overhead_name_ = 0, fast_name_ = 0;
  std::chrono::microseconds fast_{0};  // between rounds: busy and known threads' schedstat (0: off)
  uint64_t fast_ticks_ = 0;         // ticks the fast reads took since the last round (session clock)
  std::thread thread_;
  std::mutex mu_;  // the sampler thread and stop() only
  std::condition_variable cv_;
  bool stopping_ = false;
  bool sampled_ = false;
  bool paused_ = false;  // sampled mode, between windows
};

}  // namespace
}  // namespace inferscope::sys

extern "C" void inferscope_register_system_collector() {
  // The container's CPU limit goes into the dump's head (cpu_quota, cpu_quota_period_us, cpu_quota_source).
  inferscope::runtime::register_process_info_source([] { return inferscope::sys::cgroup_cpu_process_info("/proc", ""); });
  inferscope::runtime::register_collector([] { return std::make_unique<inferscope::sys::SystemCollector>(); });
}

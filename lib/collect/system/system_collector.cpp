// The system collector: one sampling thread that runs SystemSampler every Config::sample_period_ms and writes its
// counters, and the time each round took, through the runtime channel "system". Between rounds, every
// Config::thread_sample_us, it reads the busy and known threads' schedstat (SystemSampler::fast_round); the time
// those reads take is added up and written as one overhead record per round. inferscope_system_set_parts switches
// the sampler's parts within a running session, for measuring what each costs (sampler_parts.hpp).
#include "collect/system/cgroup_cpu.hpp"
#include "collect/system/sampler.hpp"
#include "collect/system/sampler_parts.hpp"
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

class SystemCollector;
// The running collector, for inferscope_system_set_parts (at most one: one session per process).
std::mutex g_active_mu;
SystemCollector* g_active = nullptr;

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
    // Named before start() returns, so whoever looks for it by name right after finds it (bench/gpu).
    pthread_setname_np(thread_.native_handle(), "iscope-system");
    {
      std::lock_guard lk(g_active_mu);
      g_active = this;
    }
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
    {
      std::lock_guard lk(g_active_mu);
      if (g_active == this) g_active = nullptr;
    }
    runtime::set_thread_exit_hook(nullptr);  // the final round below reads every thread still alive
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
      parts_ = kAllSamplerParts;  // the final round writes every value, whatever a benchmark switched off
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (sampler_ && sampler_->skipped_samples())
      runtime::log(LogLevel::kInfo, "system collector: skipped " + std::to_string(sampler_->skipped_samples()) +
                                        " unreadable samples; last: " + sampler_->last_error());
  }

  // Which parts run from now on, and how often the fast rounds come (0: as the session set it). "" when done;
  // otherwise why not.
  std::string set_parts(const SamplerParts& p) {
    std::lock_guard lk(mu_);
    if (p.tick_us) {
      if (!sampler_->fast_every_us())
        return "this session has no fast rounds (thread_sample_us is 0, or no schedstat), so tick_us cannot be set";
      if (std::chrono::microseconds(p.tick_us) >= period_)
        return "tick_us must be shorter than the sampling period (" + std::to_string(period_.count()) + " ms)";
      fast_ = std::chrono::microseconds(p.tick_us);
    }
    parts_ = p.mask;
    cv_.notify_all();
    return "";
  }

 private:
  // Whether anything is to be sampled now (mu_ held): not between sampled windows, and some part on.
  bool active() const { return !paused_ && (parts_ & (kPartRounds | kPartTicks)) != 0; }

  void run() {
    auto next = std::chrono::steady_clock::now();
    for (;;) {
      bool final, rounds;
      {
        std::unique_lock lk(mu_);
        sampler_->set_parts(parts_);
        // Fast ticks until the round is due (none when fast_ is zero or the part is off).
        while (!stopping_ && fast_.count() > 0 && (parts_ & kPartTicks)) {
          const auto tick = std::chrono::steady_clock::now() + fast_;
          if (tick >= next) break;
          if (cv_.wait_until(lk, tick, [this] { return stopping_; })) break;
          if (!active() || !(parts_ & kPartTicks)) break;
          sampler_->set_parts(parts_);
          lk.unlock();
          const uint64_t t0 = detail::now();
          sampler_->fast_round();
          fast_ticks_ += detail::now() - t0;
          lk.lock();
        }
        cv_.wait_until(lk, next, [this] { return stopping_; });
        cv_.wait(lk, [this] { return stopping_ || active(); });
        final = stopping_;
        rounds = final || (parts_ & kPartRounds);
        sampler_->set_parts(parts_);
      }
      if (rounds) one_round(final);
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
  uint32_t parts_ = kAllSamplerParts;  // SamplerPart bits (inferscope_system_set_parts)
};

}  // namespace
}  // namespace inferscope::sys

extern "C" INFERSCOPE_API int inferscope_system_set_parts(const char* spec) {
  using namespace inferscope;
  std::string err;
  const auto parts = sys::parse_sampler_parts(spec ? spec : "", &err);
  if (!parts) {
    runtime::log(LogLevel::kError, err);
    return -1;
  }
  std::lock_guard lk(sys::g_active_mu);
  if (!sys::g_active) return -2;
  if (err = sys::g_active->set_parts(*parts); !err.empty()) {
    runtime::log(LogLevel::kError, "inferscope_system_set_parts: " + err);
    return -1;
  }
  return 0;
}

extern "C" void inferscope_register_system_collector() {
  // The container's CPU limit goes into the dump's head (cpu_quota, cpu_quota_period_us, cpu_quota_source).
  inferscope::runtime::register_process_info_source([] { return inferscope::sys::cgroup_cpu_process_info("/proc", ""); });
  inferscope::runtime::register_collector([] { return std::make_unique<inferscope::sys::SystemCollector>(); });
}

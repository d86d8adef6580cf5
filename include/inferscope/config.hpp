// InferScope session configuration: one settings model for the runtime, the collectors and the tools.
//
// Every field has a snake_case key used by .inferscope.yaml, and an environment variable INFERSCOPE_<KEY>
// (upper case). Precedence: command-line flags > environment > .inferscope.yaml > defaults; `iscope-config
// show` prints each effective value and where it came from. docs/configuration.md lists every key; the
// allowed values are enforced by the key table in lib/config/settings_table.cpp.
//
//   inferscope::Config cfg;                 // defaults
//   cfg.output = "serve.iscope";
//   cfg.buffer_mode = inferscope::BufferMode::kRing;
//   inferscope::Session session(cfg);       // records until `session` goes out of scope
//
// A session started in code takes the fields the code changed from their defaults; every other setting comes from
// the environment, then .inferscope.yaml, then the defaults (inferscope::start_exactly reads neither).
#pragma once

#include <cstdint>
#include <string>

namespace inferscope {

/// How recorded data leaves the per-thread buffers.
enum class BufferMode {
  kStream,  ///< chunks are appended to the dump as they fill: a long run is limited by disk, not memory
  kRing,    ///< flight recorder: `trace_size_mb` in memory, oldest overwritten, written at stop/exit/SIGUSR2/flush
};

enum class LogLevel { kError, kWarn, kInfo, kDebug };

/// How much of the run is recorded in full detail.
enum class CaptureMode {
  kFull,     ///< everything the collectors see, for the whole session
  kSampled,  ///< always-on profile: full detail only inside windows (docs/sampled-mode.md); a bounded ring of them
  kAdaptive, ///< full detail for the first `baseline_steps` steps (warm-up and the steps the analysis reads), then
             ///< as kSampled (docs/sampled-mode.md, "Adaptive capture")
};

/// The modes whose records are kept in a ring of windows and written whole (sampled and adaptive).
constexpr bool records_in_windows(CaptureMode m) { return m != CaptureMode::kFull; }
/// The modes whose collectors record in full from the session's start (full and adaptive).
constexpr bool detail_at_start(CaptureMode m) { return m != CaptureMode::kSampled; }

struct Config {
  // --- session -----------------------------------------------------------------------------------------
  bool enable = false;                        ///< enable: start a session automatically (INFERSCOPE_ENABLE)
  std::string output;                         ///< output: dump path; "" means inferscope-<pid>.iscope
  BufferMode buffer_mode = BufferMode::kStream;  ///< buffer_mode: stream | ring
  uint64_t trace_size_mb = 100;               ///< trace_size_mb: ring-mode memory budget (1..65536)
  uint32_t thread_buffer_kb = 1024;           ///< thread_buffer_kb: per-thread buffer (64..262144, power of 2)
  uint32_t flush_period_ms = 20;              ///< flush_period_ms: how often the writer drains (1..10000)
  uint32_t calibration_period_ms = 1000;      ///< calibration_period_ms: clock calibration pairs (10..600000)
  LogLevel log_level = LogLevel::kWarn;       ///< log_level: error | warn | info | debug
  bool handle_signals = true;                 ///< handle_signals: write the dump on SIGINT/SIGTERM (env start)
  bool follow_children = false;               ///< follow_children: a forked or spawned child records into
                                              ///< <stem>.<pid>.iscope (else it records nothing)

  // --- live page and metrics (docs/live.md) --------------------------------------------------------------
  std::string live;                           ///< live: serve the live page and /metrics on [ADDR:]PORT ("" = off)
  bool live_token = true;                     ///< live_token: a random token in the URL is required
  bool live_any_address = false;              ///< live_any_address: allow binding to a non-loopback address

  // --- sampled mode (docs/sampled-mode.md) -----------------------------------------------------------
  CaptureMode mode = CaptureMode::kAdaptive;  ///< mode: full | sampled | adaptive (full when buffer_mode is ring)
  uint32_t baseline_steps = 100;              ///< baseline_steps: adaptive: steps recorded in full from the start
  uint32_t window_steps = 10;                 ///< window_steps: steps recorded in full per window (1..1000000)
  uint32_t window_every_steps = 500;          ///< window_every_steps: a window starts every N steps (2..1e9)
  uint32_t window_ms = 200;                   ///< window_ms: a timed window's length, while no step is seen
  uint32_t window_every_ms = 10000;           ///< window_every_ms: a timed window starts every S ms
  uint32_t windows_kept = 16;                 ///< windows_kept: the ring: the newest windows kept (1..100000)
  double slow_step_ms = 0;                    ///< slow_step_ms: a step longer than this is slow (0 = off)
  double slow_step_factor = 3;                ///< slow_step_factor: slow above k x the running percentile (0 = off)
  double slow_step_percentile = 99;           ///< slow_step_percentile: that percentile of the steps' durations
  uint32_t slow_step_neighbours = 2;          ///< slow_step_neighbours: steps kept on each side of a slow one

  // --- GPU collector (CUPTI) -------------------------------------------------------------------------
  bool cupti = true;                          ///< cupti: collect GPU activity when a driver is present
  std::string cupti_activities = "default";   ///< cupti_activities: default | minimal | full | none, or a
                                              ///< comma list of those and kernel, memcpy, memset, memory,
                                              ///< sync, graph, graph_nodes, runtime, driver, api,
                                              ///< runtime_all, nvtx,
                                              ///< overhead, api_activity, api_callbacks
  uint32_t cupti_buffer_kb = 8192;            ///< cupti_buffer_kb: one CUPTI activity buffer (64..262144)
  bool graph_nodes = false;                   ///< graph_nodes: every kernel node of a CUDA graph launch as its
                                              ///< own record (off: one record per graph launch)
  bool nvtx_capture = true;                   ///< nvtx_capture: record NVTX ranges the application emits
  bool nvtx_emit = false;                     ///< nvtx_emit: also emit ISCOPE ranges as NVTX (Nsight Systems)

  // --- Python collector ------------------------------------------------------------------------------
  bool python = true;                         ///< python: trace Python calls when running under Python
  std::string python_mode = "default";        ///< python_mode: default | full | off
  std::string python_include;                 ///< python_include: comma list of module or path prefixes
  std::string python_exclude;                 ///< python_exclude: comma list of module or path prefixes
  uint32_t python_max_depth = 0;              ///< python_max_depth: 0 = unlimited (0..100000)

  // --- system collector ------------------------------------------------------------------------------
  bool system = true;                         ///< system: sample /proc and NVML counters
  uint32_t sample_period_ms = 10;             ///< sample_period_ms: system sampling period (1..60000)
  uint32_t thread_sample_us = 1000;           ///< thread_sample_us: busy and known threads' schedstat between
                                              ///< rounds, in microseconds (0 = off; 100..1000000)
  bool nvml = true;                           ///< nvml: sample GPU counters through NVML when present
  bool perf_sampling = false;                 ///< perf_sampling: per-thread cpu-clock samples via perf_event_open

  // --- reports and analyzer --------------------------------------------------------------------------
  std::string report;                         ///< report: write this report at exit (.md, .html or .json)
  std::string step;                           ///< step: name of the step range ("" = detect)
  double launch_bound_max_kernel_us = 20.0;   ///< launch_bound_max_kernel_us: "short kernel" (0.1..1e6)
  std::string skip_steps = "auto";            ///< skip_steps: leading warm-up steps to leave out ("auto" = detect)
};

/// The file name used when Config::output is empty: "inferscope-<pid>.iscope".
__attribute__((visibility("default"))) std::string default_output_path();

}  // namespace inferscope

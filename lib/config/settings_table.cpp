// The settings table and the generic parsing/formatting it drives. Adding a setting means adding a field to
// inferscope::Config and one row here; the file, environment, flags, `iscope-config` and the docs follow.
#include "text/edit_distance.hpp"
#include "config/key_table.hpp"
#include "config/settings.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <vector>

namespace inferscope::config::detail {
namespace {

// Indexed by the enum's value, so the order must follow the declarations in config.hpp.
constexpr std::array<std::string_view, 2> kBufferModeNames = {"stream", "ring"};
constexpr std::array<std::string_view, 4> kLogLevelNames = {"error", "warn", "info", "debug"};
constexpr std::array<std::string_view, 3> kCaptureModeNames = {"full", "sampled", "adaptive"};
static_assert(static_cast<int>(BufferMode::kRing) == 1 && static_cast<int>(LogLevel::kDebug) == 3 &&
                  static_cast<int>(CaptureMode::kSampled) == 1 && static_cast<int>(CaptureMode::kAdaptive) == 2,
              "enum name tables follow the enum declarations");

std::span<const std::string_view> enum_names(BufferMode) { return kBufferModeNames; }
std::span<const std::string_view> enum_names(LogLevel) { return kLogLevelNames; }
std::span<const std::string_view> enum_names(CaptureMode) { return kCaptureModeNames; }

constexpr std::array<std::string_view, 3> kPythonModes = {"default", "full", "off"};

// cupti_activities: a preset, or a comma list of presets and activity kinds (their union). The CUPTI
// collector maps each name to CUPTI activity kinds; a name it does not know must be rejected here, before
// the session starts, not discovered later.
// Keep in step with parse_activity_set() in lib/collect/cupti/cupti_collector.cpp.
constexpr std::array<std::string_view, 4> kCuptiPresets = {"default", "minimal", "full", "none"};
constexpr std::array<std::string_view, 15> kCuptiActivityKinds = {
    "kernel", "memcpy", "memset", "memory", "sync", "graph", "graph_nodes", "runtime", "driver", "api",
    "runtime_all", "nvtx", "overhead", "api_activity", "api_callbacks"};

bool contains(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string join(std::span<const std::string_view> names, std::string_view separator) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += separator;
    out += n;
  }
  return out;
}

std::string check_cupti_activities(std::string_view value) {
  size_t named = 0;  // items that are not empty: ",,," names nothing, as "" does
  size_t begin = 0;
  while (begin <= value.size()) {
    size_t end = value.find(',', begin);
    if (end == std::string_view::npos) end = value.size();
    std::string_view item = value.substr(begin, end - begin);
    // Spaces around a name and empty items are allowed, as the collector reads the list.
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty() && !contains(kCuptiPresets, item) && !contains(kCuptiActivityKinds, item))
      return "'" + std::string(item) + "' is not a CUPTI preset or activity kind";
    named += !item.empty();
    begin = end + 1;
  }
  return named ? "" : "the list is empty";
}

constexpr std::string_view kCuptiActivitiesAllowed =
    "default | minimal | full | none, or a comma list of those and of kernel, memcpy, memset, memory, sync, "
    "graph, graph_nodes, runtime, driver, api, runtime_all, nvtx, overhead, api_activity, api_callbacks";

// live: "", "PORT" or "ADDR:PORT" (the port a number 0..65535; 0 lets the system pick one).
std::string check_live(std::string_view value) {
  if (value.empty()) return "";
  const size_t colon = value.rfind(':');
  const std::string_view port = colon == std::string_view::npos ? value : value.substr(colon + 1);
  unsigned n = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || n > 65535)
    return "'" + std::string(value) + "' is not PORT or ADDR:PORT (a port 0..65535)";
  if (colon == 0) return "'" + std::string(value) + "' has an empty address";
  return "";
}

std::string check_report(std::string_view value) {
  if (value.empty()) return "";
  for (std::string_view ext : {".md", ".html", ".json"})
    if (value.size() > ext.size() && value.ends_with(ext)) return "";
  return "'" + std::string(value) + "' does not end in .md, .html or .json";
}

std::string check_skip_steps(std::string_view value) {
  if (value == "auto") return "";
  if (!value.empty() && value.size() <= 9 && std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "";
  return "'" + std::string(value) + "' is neither auto nor a step count";
}

// Designated initializers keep each row self-describing; the order is the order of the Config fields, which
// is the order of `show`, `keys` and the docs. constexpr, not just const: the runtime resolves the
// configuration from a shared-library constructor, which can run before this file's dynamic initializers, so
// the table must be initialized at compile time.
constexpr KeyDef kKeys[] = {
    // --- session
    {.key = "enable", .section = "session", .member = &Config::enable,
     .doc = "Start a session automatically when the process starts."},
    {.key = "output", .section = "session", .member = &Config::output,
     .doc = "Dump path; empty means inferscope-<pid>.iscope in the working directory."},
    {.key = "buffer_mode", .section = "session", .member = &Config::buffer_mode,
     .doc = "How full capture (mode: full) writes: stream: chunks are appended to the dump as they fill (a long "
            "run is limited by disk); ring: flight recorder keeping the last trace_size_mb in memory, written at "
            "stop, exit, SIGUSR2 or flush. Given with mode left at its default, either means mode: full; sampled "
            "and adaptive keep their own ring of windows."},
    {.key = "trace_size_mb", .section = "session", .member = &Config::trace_size_mb,
     .doc = "Memory budget in MiB of a ring (buffer_mode: ring) and of the windows of adaptive (the default) and "
            "sampled modes (adaptive's baseline holds at most half).", .min = 1, .max = 65536},
    {.key = "thread_buffer_kb", .section = "session", .member = &Config::thread_buffer_kb,
     .doc = "Per-thread event buffer in KiB.", .min = 64, .max = 262144, .power_of_two = true},
    {.key = "flush_period_ms", .section = "session", .member = &Config::flush_period_ms,
     .doc = "How often the writer thread drains the per-thread buffers.", .min = 1, .max = 10000},
    {.key = "calibration_period_ms", .section = "session", .member = &Config::calibration_period_ms,
     .doc = "How often a clock calibration pair is recorded.", .min = 10, .max = 600000},
    {.key = "log_level", .section = "session", .member = &Config::log_level,
     .doc = "Verbosity of InferScope's own messages on stderr."},
    {.key = "handle_signals", .section = "session", .member = &Config::handle_signals,
     .doc = "Write the dump on SIGINT/SIGTERM when the session was started from the environment."},
    {.key = "follow_children", .section = "session", .member = &Config::follow_children,
     .doc = "Record child processes too (fork, multiprocessing, exec'd programs), each into a dump named after the "
            "parent's with the child's pid (run.4242.iscope). Otherwise a child records nothing."},
    // --- live page and metrics
    {.key = "live", .section = "live", .member = &Config::live,
     .doc = "Serve a live page (step time, breakdown, timeline of the last steps, updated every second) and a "
            "Prometheus /metrics endpoint on [ADDR:]PORT while the program runs; the address is 127.0.0.1 unless "
            "given (docs/live.md). Empty: off.",
     .check = check_live, .check_allowed = "empty, PORT or ADDR:PORT (PORT 0..65535; 0 picks a free port)"},
    {.key = "live_token", .section = "live", .member = &Config::live_token,
     .doc = "Require the random token printed with the live page's URL (?token=...) for the page, its data and "
            "/metrics. Off: anyone who can reach the port reads them."},
    {.key = "live_any_address", .section = "live", .member = &Config::live_any_address,
     .doc = "Allow `live` to bind an address other than loopback (127.0.0.1, ::1, localhost); refused otherwise."},
    // --- sampled mode
    {.key = "mode", .section = "sampled", .member = &Config::mode,
     .doc = "adaptive (the default): full detail for the first baseline_steps steps (the warm-up and the steps "
            "the analysis reads), then as sampled; that part is never dropped from the ring, and a run shorter "
            "than it is recorded whole. full: everything, for the whole session, streamed to the dump or kept in a "
            "ring (buffer_mode; the default mode when buffer_mode is ring). sampled: an always-on profile that records full detail "
            "(kernels, API calls, Python, ranges) only inside windows, keeps the newest windows_kept of them in "
            "memory (within trace_size_mb) and writes them at stop, exit, SIGUSR2, flush_ring() or a crash; "
            "buffer_mode does not apply to sampled or adaptive."},
    {.key = "baseline_steps", .section = "sampled", .member = &Config::baseline_steps,
     .doc = "Adaptive mode: steps recorded in full from the start before windows take over (the part also ends "
            "once it holds half of trace_size_mb). 100: the analysis reads at most 64 typical steps and the "
            "warm-up before them (docs/sampled-mode.md, \"Adaptive capture\").",
     .min = 1, .max = 1000000},
    {.key = "window_steps", .section = "sampled", .member = &Config::window_steps,
     .doc = "Sampled mode: steps recorded in full detail per window. A step is a range named by `step` (\"step\" "
            "when empty).",
     .min = 1, .max = 1000000},
    {.key = "window_every_steps", .section = "sampled", .member = &Config::window_every_steps,
     .doc = "Sampled mode: a window starts every this many steps (the first after this many); must exceed "
            "window_steps.",
     .min = 2, .max = 1e9},
    {.key = "window_ms", .section = "sampled", .member = &Config::window_ms,
     .doc = "Sampled mode: the length of a timed window, used while no step range has been seen.",
     .min = 1, .max = 3600000},
    {.key = "window_every_ms", .section = "sampled", .member = &Config::window_every_ms,
     .doc = "Sampled mode: a timed window starts every this many ms (the first after this long); must exceed "
            "window_ms. Also the longest a step window stays open.",
     .min = 10, .max = 86400000},
    {.key = "windows_kept", .section = "sampled", .member = &Config::windows_kept,
     .doc = "Sampled mode: the ring of windows: the newest this many are kept (windows holding a slow step "
            "last); older ones are dropped and counted.",
     .min = 1, .max = 100000},
    {.key = "slow_step_ms", .section = "sampled", .member = &Config::slow_step_ms,
     .doc = "Sampled mode: a step longer than this is slow and kept with its neighbours (0: no fixed threshold).",
     .min = 0, .max = 1e7},
    {.key = "slow_step_factor", .section = "sampled", .member = &Config::slow_step_factor,
     .doc = "Sampled mode: a step longer than this many times the running slow_step_percentile of the steps' own "
            "durations is slow (0: off).",
     .min = 0, .max = 1e6},
    {.key = "slow_step_percentile", .section = "sampled", .member = &Config::slow_step_percentile,
     .doc = "Sampled mode: the percentile slow_step_factor multiplies, over the last 1024 steps.",
     .min = 50, .max = 99.9},
    {.key = "slow_step_neighbours", .section = "sampled", .member = &Config::slow_step_neighbours,
     .doc = "Sampled mode: steps kept on each side of a slow step.",
     .min = 0, .max = 100},
    // --- GPU collector (CUPTI)
    {.key = "cupti", .section = "cupti", .member = &Config::cupti,
     .doc = "Collect GPU activity through CUPTI when a driver is present."},
    {.key = "cupti_activities", .section = "cupti", .member = &Config::cupti_activities,
     .doc = "Which CUPTI activity kinds to record. The selected CUDA API calls (launches, copies, syncs, "
            "allocations) are recorded through callbacks on the calling thread; add api_activity to have CUPTI "
            "record them as API activity records instead (put on the calling thread by its OS thread id; cheaper "
            "per launch only where a program makes few other CUDA calls: on a PyTorch step it costs more); "
            "api_callbacks forces the callbacks.",
     .list = true, .check = check_cupti_activities,
     .check_allowed = kCuptiActivitiesAllowed},
    {.key = "cupti_buffer_kb", .section = "cupti", .member = &Config::cupti_buffer_kb,
     .doc = "Size of one CUPTI activity buffer in KiB.", .min = 64, .max = 262144},
    {.key = "graph_nodes", .section = "cupti", .member = &Config::graph_nodes,
     .doc = "Record every kernel, copy and memset of each CUDA graph launch as its own record. Off: one record "
            "per graph launch with its GPU start and end, attributed to the launching call; on a graph of many "
            "small kernels that costs a fraction of tracing the nodes (docs/benchmarks.md)."},
    {.key = "nvtx_capture", .section = "cupti", .member = &Config::nvtx_capture,
     .doc = "Record the NVTX ranges the application emits."},
    {.key = "nvtx_emit", .section = "cupti", .member = &Config::nvtx_emit,
     .doc = "Also emit ISCOPE ranges as NVTX ranges (visible in Nsight Systems)."},
    // --- Python collector
    {.key = "python", .section = "python", .member = &Config::python,
     .doc = "Trace Python calls when the process runs Python."},
    {.key = "python_mode", .section = "python", .member = &Config::python_mode,
     .doc = "default: your code and model forward passes; full: every Python function, stdlib and installed packages included (C functions are not traced); off: no tracing.",
     .choices = kPythonModes},
    {.key = "python_include", .section = "python", .member = &Config::python_include,
     .doc = "Only trace modules or paths starting with one of these prefixes (empty: all).", .list = true},
    {.key = "python_exclude", .section = "python", .member = &Config::python_exclude,
     .doc = "Do not trace modules or paths starting with one of these prefixes.", .list = true},
    {.key = "python_max_depth", .section = "python", .member = &Config::python_max_depth,
     .doc = "Deepest Python call depth recorded; 0 means unlimited.", .min = 0, .max = 100000},
    // --- system collector
    {.key = "system", .section = "system", .member = &Config::system,
     .doc = "Sample /proc and NVML counters."},
    {.key = "sample_period_ms", .section = "system", .member = &Config::sample_period_ms,
     .doc = "System sampling period.", .min = 1, .max = 60000},
    {.key = "thread_sample_us", .section = "system", .member = &Config::thread_sample_us,
     .doc = "Between sampling rounds, read the on-CPU time of the threads the session knows and of the threads that "
            "ran lately this often (microseconds), so that bursts of a few ms are seen (whom the step waits on); 0: "
            "only every sample_period_ms.",
     .min = 0, .max = 1000000},
    {.key = "nvml", .section = "system", .member = &Config::nvml,
     .doc = "Sample GPU counters through NVML when present."},
    {.key = "perf_sampling", .section = "system", .member = &Config::perf_sampling,
     .doc = "Per-thread cpu-clock samples through perf_event_open."},
    // --- reports and analyzer
    {.key = "report", .section = "analysis", .member = &Config::report,
     .doc = "Write this report at exit; the extension picks the format (empty: none).",
     .check = check_report, .check_allowed = "empty, or a path ending in .md, .html or .json"},
    {.key = "step", .section = "analysis", .member = &Config::step,
     .doc = "Name of the range that marks one inference step; empty means detect it."},
    {.key = "launch_bound_max_kernel_us", .section = "analysis", .member = &Config::launch_bound_max_kernel_us,
     .doc = "Kernels shorter than this count as short for the launch_bound finding (microseconds).",
     .min = 0.1, .max = 1e6},
    {.key = "skip_steps", .section = "analysis", .member = &Config::skip_steps,
     .doc = "Leading steps to leave out as warm-up; auto detects them (slow outliers, the first CUDA call).",
     .check = check_skip_steps, .check_allowed = "auto, or a step count (0 keeps every step)"},
};

template <class T>
std::string format_value(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_enum_v<T>) {
    return std::string(enum_names(T{})[static_cast<size_t>(value)]);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else if constexpr (std::is_same_v<T, double>) {
    // Shortest fixed-point text that reads back to the same value: "1000000", not "1e+06".
    char buf[512];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed);
    return std::string(buf, end);
  } else {
    return std::to_string(value);
  }
}

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string parse_bool(std::string_view text, bool& out) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") {
    out = true;
    return "";
  }
  if (lower == "false" || lower == "0" || lower == "no" || lower == "off") {
    out = false;
    return "";
  }
  return quoted(text) + " is not a boolean";
}

template <class T>
std::string parse_integer(const KeyDef& def, std::string_view text, T& out) {
  std::string_view digits = text.starts_with('-') ? text.substr(1) : text;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return quoted(text) + " is not an integer";
  if (text.starts_with('-')) return std::string(text) + " is out of range";
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || static_cast<double>(value) < def.min || static_cast<double>(value) > def.max)
    return std::string(text) + " is out of range";
  if (def.power_of_two && !std::has_single_bit(value)) return std::string(text) + " is not a power of two";
  out = static_cast<T>(value);
  return "";
}

std::string parse_number(const KeyDef& def, std::string_view text, double& out) {
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ptr != text.data() + text.size() || (ec != std::errc() && ec != std::errc::result_out_of_range) ||
      std::isnan(value))
    return quoted(text) + " is not a number";
  if (ec == std::errc::result_out_of_range || value < def.min || value > def.max)
    return std::string(text) + " is out of range";
  out = value;
  return "";
}

template <class E>
std::string parse_enum(std::string_view text, E& out) {
  auto names = enum_names(E{});
  auto it = std::find(names.begin(), names.end(), text);
  if (it == names.end()) return quoted(text) + " is not an allowed value";
  out = static_cast<E>(it - names.begin());
  return "";
}

std::string parse_string(const KeyDef& def, std::string_view text, std::string& out) {
  // YAML's "\0" makes one: every user of the value reads it as a C string, cut at the NUL (output "a\0b.iscope"
  // wrote the dump to "a").
  if (text.find('\0') != std::string_view::npos)
    return "holds a NUL character (\\0), which no path or name can hold: everything after it would be lost";
  if (!def.choices.empty() && !contains(def.choices, text)) return quoted(text) + " is not an allowed value";
  if (def.check) {
    std::string problem = def.check(text);
    if (!problem.empty()) return problem;
  }
  out = std::string(text);
  return "";
}

std::string range_text(const KeyDef& def) {
  return "[" + format_value(def.min) + ", " + format_value(def.max) + "]";
}

}  // namespace

std::span<const KeyDef> key_defs() { return kKeys; }

const KeyDef* find_key(std::string_view key) {
  for (const KeyDef& def : kKeys)
    if (def.key == key) return &def;
  return nullptr;
}

std::string assign(const KeyDef& def, Config& config, std::string_view text) {
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::remove_reference_t<decltype(config.*member)>;
        // A value of "" for a non-string key is a mistake ("enable:" with nothing after it), not a default.
        if constexpr (!std::is_same_v<T, std::string>) {
          if (text.empty()) return "the value is empty";
        }
        if constexpr (std::is_same_v<T, bool>) {
          return parse_bool(text, config.*member);
        } else if constexpr (std::is_enum_v<T>) {
          return parse_enum(text, config.*member);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return parse_string(def, text, config.*member);
        } else if constexpr (std::is_same_v<T, double>) {
          return parse_number(def, text, config.*member);
        } else {
          return parse_integer(def, text, config.*member);
        }
      },
      def.member);
}

std::string format(const KeyDef& def, const Config& config) {
  return std::visit([&](auto member) { return format_value(config.*member); }, def.member);
}

std::string_view type_name(const KeyDef& def) {
  return std::visit(
      [&](auto member) -> std::string_view {
        using T = std::remove_reference_t<decltype(Config{}.*member)>;
        if constexpr (std::is_same_v<T, bool>) return "boolean";
        else if constexpr (std::is_enum_v<T>) return "choice";
        else if constexpr (std::is_same_v<T, double>) return "number";
        else if constexpr (std::is_same_v<T, std::string>)
          return def.list ? "list" : def.choices.empty() ? "string" : "choice";
        else return "integer";
      },
      def.member);
}

bool is_string(const KeyDef& def) { return std::holds_alternative<std::string Config::*>(def.member); }

std::string allowed(const KeyDef& def) {
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::remove_reference_t<decltype(Config{}.*member)>;
        if constexpr (std::is_same_v<T, bool>) {
          return "true or false (also yes/no, on/off, 1/0)";
        } else if constexpr (std::is_enum_v<T>) {
          return "one of: " + join(enum_names(T{}), ", ");
        } else if constexpr (std::is_same_v<T, double>) {
          return "a number in " + range_text(def);
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (!def.choices.empty()) return "one of: " + join(def.choices, ", ");
          if (def.check) return std::string(def.check_allowed);
          return def.list ? "a comma-separated list (or a YAML sequence)" : "any text";
        } else {
          return std::string(def.power_of_two ? "a power of two" : "an integer") + " in " + range_text(def);
        }
      },
      def.member);
}

std::string env_name(std::string_view key) {
  std::string name = "INFERSCOPE_";
  for (char c : key) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string closest_key(std::string_view typed) {
  // Keys are lower case; "Trace_Size_MB" is one mistake (the case), not five.
  std::string unknown(typed);
  std::transform(unknown.begin(), unknown.end(), unknown.begin(), [](unsigned char c) { return std::tolower(c); });
  std::vector<std::string_view> keys;
  for (const KeyDef& def : kKeys) keys.push_back(def.key);
  const std::vector<std::string> close = text::closest_names(unknown, keys);
  return close.empty() ? std::string() : close.front();
}

}  // namespace inferscope::config::detail

namespace inferscope::config {

std::optional<bool> parse_boolean(std::string_view text) {
  bool value = false;
  if (!detail::parse_bool(text, value).empty()) return std::nullopt;
  return value;
}

}  // namespace inferscope::config

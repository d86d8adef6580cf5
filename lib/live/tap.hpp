// The live tap (docs/live.md): a bounded summary of the newest steps and ranges, fed by the session's writer
// thread from the EVENTS chunks it has just drained (the record path the dump already uses), read by the live
// server. No clock of its own (the writer passes the session clock to advance()), no threads, no globals: unit
// tests drive it directly. GPU records and CUDA API calls go to a StepSettler (step_settler.hpp).
//
// Why the writer feeds it: the application's threads never see it (their hot path stays two clock reads and a
// ring store), the writer already holds every record once per flush period, and it already takes the string
// table's lock, so names are resolved there and the server never touches a runtime lock.
#pragma once

#include "live/serving_meter.hpp"
#include "live/step_settler.hpp"
#include "live/tap_types.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace inferscope {
enum class RecordKind : uint8_t;  // inferscope/records.hpp
}

namespace inferscope::live {

/// Steps the timeline shows (the GPU activities copied for it are those of these steps). Once GPU activity has
/// been seen, the timeline shows the newest *settled* steps: a step's GPU records arrive up to about a second
/// after it ended (step_settler.hpp), so the newest steps would show an empty GPU lane.
inline constexpr size_t kTimelineSteps = 5;
/// GPU activities the timeline shows at most (the newest): more rectangles make the page's redraw each second slow.
inline constexpr size_t kTimelineGpuSpans = 4096;

/// The step-time histogram's upper bounds, in seconds (Prometheus `le`; +Inf is implied).
inline constexpr std::array<double, 14> kBucketBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                         0.25,  0.5,    1.0,   2.5,  5.0,   10.0, 30.0};

/// Python calls at most this deep (frames on their thread, from 0) count as step candidates: a loop's body is
/// called from the script's top level, from main() or one level below.
inline constexpr uint32_t kCandidateDepth = 3;
/// Step candidates a snapshot names at most.
inline constexpr size_t kMaxCandidates = 5;

/// Something repeated that could be the step, seen while no step (a range named by the setting `step`) has been:
/// a top-level range, or a Python function called near the top of its thread's stack.
struct StepCandidate {
  std::string name;
  bool python = false;  ///< a Python function (else a range)
  uint64_t count = 0;   ///< ranges or calls that ended
  double seconds = 0;   ///< their total time
};

/// What the server reads: a copy, taken under the tap's lock.
struct Snapshot {
  std::vector<Span> steps;  ///< the newest steps, oldest first
  std::vector<Span> spans;  ///< the newest other ranges, oldest first
  std::map<uint32_t, std::string> names;    ///< string id -> text (ranges' names)
  std::map<uint32_t, std::string> threads;  ///< dump thread id -> name
  uint64_t steps_total = 0;
  std::string step_name;  ///< the range a step is (the setting `step`, "step" when empty)
  /// While no step has been seen: the repeated top-level ranges and shallow Python functions, most time first
  /// (at most kMaxCandidates; each seen twice or more). Empty once a step is seen.
  std::vector<StepCandidate> step_candidates;
  double step_seconds_sum = 0;
  std::array<uint64_t, kBucketBounds.size()> buckets{};  ///< non-cumulative counts per bucket
  uint64_t steps_over_last_bound = 0;                    ///< steps above the last bound (+Inf only)
  uint64_t records_total = 0;
  uint64_t dropped_records = 0;
  uint64_t origin_ticks = 0;  ///< session start
  uint64_t now_ticks = 0;     ///< the newest record's end seen
  double ticks_per_ns = 1.0;
  std::string state = "recording";
  // The GPU side (step_settler.hpp), as of the last advance(); gpu_seen false: no GPU activity recorded, and none of the rest means anything.
  bool gpu_seen = false;
  uint64_t gpu_records = 0;
  std::vector<GpuSpan> gpu_spans;        ///< the timeline's GPU activities, newest first
  /// The timeline's time range once steps have settled (the newest kTimelineSteps settled steps); both 0 before:
  /// the timeline then shows the newest steps up to now.
  uint64_t timeline_from = 0, timeline_to = 0;
  std::vector<SettledStep> settled;      ///< the newest settled steps, oldest first
  uint64_t steps_settled = 0, steps_pending = 0, steps_incomplete = 0;
  std::array<double, kCategories> category_seconds{};  ///< complete settled steps' seconds per Category
  /// Generation calls and requests measured so far (serving_meter.hpp); empty histograms when none was seen.
  ServingView serving;
};

class Tap {
 public:
  /// `resolve`: string id -> text, called on the feeding thread only, once per new id.
  Tap(uint32_t step_name, uint64_t origin_ticks, double ticks_per_ns, std::function<std::string(uint32_t)> resolve,
      size_t step_capacity = 1024, size_t span_capacity = 8192);

  /// Feeding thread (the writer): the records of one drained EVENTS chunk's payload of dump thread `thread`.
  void observe(uint32_t thread, const uint8_t* records, size_t bytes);
  /// Feeding thread: the session's cumulative dropped records, and a thread's name.
  void set_dropped(uint64_t records);
  /// Feeding thread, before the first observe(): code id -> a Python function's qualified name, for the step
  /// candidates (without it, Python calls are not counted).
  void set_code_names(std::function<std::string(uint32_t)> resolve_code);
  /// `os_tid` (0: unknown) places CUDA API records that name their caller's OS thread (CUPTI's API activity
  /// records, written to the `gpu` channel) on that thread.
  void set_thread_name(uint32_t thread, const std::string& name, uint32_t os_tid = 0);
  /// Feeding thread, once per writer cycle: the session clock now; settles the steps whose GPU records are in.
  void advance(uint64_t now_ticks);
  void set_state(const std::string& state);

  /// Any thread: a copy of what the tap holds now (the GPU side as of the last advance()).
  Snapshot snapshot() const;

 private:
  void add_range(uint32_t thread, uint32_t name, uint32_t depth, uint64_t start, uint64_t end);
  void add_step(const Span& s);
  void remember_name(uint32_t id);
  void add_python_call(uint32_t thread, uint8_t depth, const uint8_t* record, size_t size);
  void add_coroutine(uint32_t thread, const uint8_t* record, size_t size);
  struct Seen {
    uint64_t count = 0, ticks = 0;
  };
  static void count_candidate(std::map<uint32_t, Seen>& seen, uint32_t id, uint64_t ticks);
  std::vector<StepCandidate> step_candidates() const;
  void add_gpu(RecordKind kind, const uint8_t* record, size_t size);
  void add_api(uint32_t thread, const uint8_t* record, size_t size);
  uint8_t api_kind_of(uint32_t name);

  const uint32_t step_name_;
  const uint64_t origin_;
  const double ticks_per_ns_;
  std::function<std::string(uint32_t)> resolve_;
  mutable std::mutex mu_;
  std::vector<Span> steps_, spans_;  // fixed-size rings
  size_t steps_next_ = 0, spans_next_ = 0;
  uint64_t steps_total_ = 0, spans_total_ = 0;
  double sum_ = 0;
  std::array<uint64_t, kBucketBounds.size()> buckets_{};
  uint64_t over_ = 0, records_ = 0, dropped_ = 0, now_ = 0;
  std::map<uint32_t, std::string> names_, threads_;
  std::string step_text_;  // the step's name, resolved once
  // Step candidates, counted only while no step has been seen: top-level ranges by name id, Python calls by code id.
  std::map<uint32_t, Seen> range_seen_, python_seen_;
  std::function<std::string(uint32_t)> resolve_code_;
  std::map<uint32_t, std::string> code_names_;
  ServingMeter serving_;  // fed every Python call and coroutine record, under mu_
  std::map<uint32_t, uint32_t> thread_of_os_tid_;
  std::map<uint32_t, uint8_t> api_kinds_;  // CUDA API name id -> text::ApiKind
  // The timeline's range: the newest kTimelineSteps settled steps, or before any settled, the newest steps to
  // now (to = UINT64_MAX). The feeding thread's alone.
  std::pair<uint64_t, uint64_t> timeline_range() const;
  std::vector<Span> recent_settled_;  // the newest kTimelineSteps settled complete steps, in settling order (feeding thread)
  StepSettler gpu_;  // the feeding thread's alone (observe, advance): its scans run outside mu_
  // What advance() publishes from gpu_ (under mu_, read by snapshot()).
  struct GpuView {
    bool seen = false;
    uint64_t records = 0, settled_total = 0, pending = 0, incomplete = 0;
    std::array<double, kCategories> seconds{};
    std::vector<SettledStep> settled;  // ring of kSettledCapacity
    size_t settled_next = 0;
    std::vector<GpuSpan> timeline;
    uint64_t timeline_from = 0, timeline_to = 0;  // 0, 0: no step settled yet
  } gpu_view_;
  std::string state_ = "recording";
};

/// The newest `n` of a ring (oldest first), `total` being how many were ever written to it.
std::vector<Span> ring_tail(const std::vector<Span>& ring, size_t next, uint64_t total);

}  // namespace inferscope::live

#include "import/warnings.hpp"

namespace inferscope::import {

std::string message(const ImportWarning& w, const std::string& p) {
  const std::string n = std::to_string(w.count);
  switch (w.issue) {
    case ImportIssue::kNoEvents: return p + ": the trace holds no events";
    case ImportIssue::kUnknownEventType:
      return p + ": " + n + " event(s) of unknown type '" + w.name + "' were skipped";
    case ImportIssue::kNoHostCounters:
      return p + ": a torch.profiler (Kineto) trace records no per-thread CPU time, context switches, GIL waits, "
                 "page faults or memory counters: cpu_contention and host memory pressure cannot be judged from it "
                 "(record with iscope-run for those)";
    case ImportIssue::kHostMemoryKindUnknown:
      return p + ": " + n + " of " + std::to_string(w.of) +
             " host copies do not say whether host memory was pageable or pinned (no \"(Pageable -> Device)\" in "
             "the name): they count as unknown, not as pageable";
    case ImportIssue::kCopyDirectionUnknown:
      return p + ": " + n + " copies name no direction (HtoD, DtoH, ...): counted as unknown";
    case ImportIssue::kGpuAnnotationsSkipped:
      return p + ": " + n + " GPU-side annotation(s) (gpu_user_annotation) were "
                            "skipped: steps and ranges come from the CPU-side annotations";
    case ImportIssue::kUncorrelatedGpuWork:
      return p + ": " + n + " GPU activities carry no correlation id (args.correlation "
                            "or a launch flow): they are not linked to the call that launched them";
    case ImportIssue::kNegativeDuration:
      return p + ": " + n + " event(s) with a negative duration were kept as instants";
    case ImportIssue::kCategoriesSkipped: {
      std::string list;
      for (auto& [cat, k] : w.skipped) list += (list.empty() ? "" : ", ") + cat + " x" + std::to_string(k);
      return p + ": events of categories not analysed were skipped: " + list +
             (w.from_perfetto_export ? " (analyse the dump itself for counters, allocations and GPU syncs)" : "");
    }
  }
  return p + ": import warning";
}

}  // namespace inferscope::import

// What an importer says about a trace it converted: each warning a kind and its figures, rendered into a sentence
// naming the file only when a report shows it (message()), so no caller edits the text afterwards.
//
//   std::vector<import::ImportWarning> w = import::import_json_trace("trace.json").warnings;
//   for (auto& x : w) std::cerr << import::message(x, "trace.json") << "\n";
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace inferscope::import {

enum class ImportIssue : uint8_t {
  kNoEvents,               ///< the trace holds no events
  kUnknownEventType,       ///< `count` events of the seeds' format with the unknown type `name` were skipped
  kNoHostCounters,         ///< a torch.profiler trace: no CPU time, context switches, GIL waits, faults, memory
  kHostMemoryKindUnknown,  ///< `count` of `of` host copies say neither pageable nor pinned
  kCopyDirectionUnknown,   ///< `count` copies name no direction
  kGpuAnnotationsSkipped,  ///< `count` gpu_user_annotation events were skipped
  kUncorrelatedGpuWork,    ///< `count` GPU activities carry no correlation id
  kNegativeDuration,       ///< `count` events with a negative duration were kept as instants
  kCategoriesSkipped,      ///< events of the categories in `skipped` (name, count) were not analysed
};

struct ImportWarning {
  ImportIssue issue = ImportIssue::kNoEvents;
  uint64_t count = 0;
  uint64_t of = 0;
  std::string name;                                      ///< kUnknownEventType: the event type
  std::vector<std::pair<std::string, uint64_t>> skipped;  ///< kCategoriesSkipped: category, events
  bool from_perfetto_export = false;  ///< kCategoriesSkipped: the trace is InferScope's own export of a dump
};

/// The warning as a report prints it, naming the trace at `path`.
std::string message(const ImportWarning& w, const std::string& path);

}  // namespace inferscope::import

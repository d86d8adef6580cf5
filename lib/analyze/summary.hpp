// `iscope-analyze DUMP --summary`: what a dump holds, computed in one streaming pass over its records (printed by
// report::print_summary, lib/report/text_writers.hpp).
#pragma once

#include "analyze/duration_stats.hpp"
#include "dump/reader.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace inferscope::analyze {

struct NamedStats {
  DurationStats duration;
  uint64_t self_ns = 0;
};

struct ThreadSummary {
  uint64_t records = 0;
  uint64_t first_ts = ~0ull;
  uint64_t last_ts = 0;
};

/// Everything the summary prints, in nanoseconds.
struct Summary {
  std::map<std::string, NamedStats> ranges;    ///< ISCOPE ranges and NVTX ranges by name
  std::map<std::string, NamedStats> python;    ///< Python functions by qualified name
  std::map<std::string, NamedStats> kernels;   ///< GPU kernels by name
  std::map<std::string, uint64_t> marks;       ///< mark name -> count
  std::map<std::string, uint64_t> async_counts;
  std::map<std::string, DurationStats> async;  ///< async spans by name
  std::map<uint32_t, ThreadSummary> threads;
  std::map<std::string, uint64_t> kinds;       ///< record kind name -> count
  uint64_t memcpy_bytes = 0;
  uint64_t records = 0;
  uint64_t first_ts = ~0ull, last_ts = 0;
  std::vector<std::string> damage;  ///< malformed records met: each skipped the rest of its chunk (dump/visit.hpp)
};

/// Computes the summary in one pass; a malformed record skips the rest of its chunk and is named in `damage`.
Summary summarize(const dump::DumpReader& reader);

const char* record_kind_name(RecordKind k);

}  // namespace inferscope::analyze

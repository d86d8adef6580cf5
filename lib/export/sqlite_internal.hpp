// What the parts of the SQLite exporter share (internal to lib/export): the schema text and the two writers,
// one for the dump's records and steps (sqlite_trace.cpp), one for the analysis (sqlite_analysis.cpp).
#pragma once

#include "analyze/analysis.hpp"
#include "dump/reader.hpp"
#include "export/sqlite_db.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace inferscope::exporter::detail {

extern const char* const kSchema;
/// CREATE TABLE breakdown: its columns from the analysis's breakdown field list.
std::string breakdown_schema();
extern const char* const kIndexes;

/// What writing the records learned that the meta table reports.
struct TraceInfo {
  int64_t first_ns = 0, last_ns = 0;  ///< the trace's first and last event (as the analyzer bounds it)
  double ns_per_tick = 1;
  uint64_t steps_found = 0;           ///< step instances the exporter found for the analysis's step name
  uint64_t rows = 0;
  std::vector<std::string> notes;     ///< anything the export could not do exactly (also in `warnings`)
};

/// Writes threads, drops, ranges, Python calls and functions, marks, counters, CUDA calls, kernels, copies,
/// memsets, syncs, allocations, graph launches and steps. Throws ExportError or dump::DumpError.
void write_trace(Db& db, const dump::DumpReader& reader, const analyze::Analysis& analysis, TraceInfo& info);

/// Writes meta, process, step_summary, breakdown, kernel_summary, findings (with evidence, metrics, examples,
/// suggestions) and warnings. Returns the rows written.
uint64_t write_analysis(Db& db, const analyze::Analysis& analysis, const TraceInfo& info);

}  // namespace inferscope::exporter::detail

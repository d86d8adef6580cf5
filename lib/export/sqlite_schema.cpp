// The tables of the SQLite export. docs/sqlite-schema.md describes each column; change both together and
// raise kSqliteSchemaVersion when a column changes meaning or goes away.
#include "export/sqlite_internal.hpp"

#include "analyze/breakdown_fields.hpp"

#include <type_traits>

namespace inferscope::exporter::detail {

// Times: *_ns are CLOCK_MONOTONIC nanoseconds (the dump's clock model); *_ms are milliseconds from the trace's
// first event, like every time in the analysis. The launcher columns (api_id .. launched_by) repeat on every
// table of GPU work so that a query needs no join to say who launched it.
#define ISCOPE_LAUNCHER_COLUMNS                                                                   \
  "api_id INTEGER, launch_thread_id INTEGER, py_call_id INTEGER, py_function TEXT, range_id INTEGER, " \
  "range_name TEXT, layer TEXT, launched_by TEXT"

const char* const kSchema =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value);"
    "CREATE TABLE process (key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE threads (id INTEGER PRIMARY KEY, os_tid INTEGER, pid INTEGER, name TEXT, is_channel INTEGER, "
    "first_ns INTEGER, end_ns INTEGER, busy_ms REAL, cpu_ms REAL, involuntary_switches INTEGER);"
    "CREATE TABLE drops (thread_id INTEGER, reason TEXT, records INTEGER, bytes INTEGER);"
    "CREATE TABLE ranges (id INTEGER PRIMARY KEY, thread_id INTEGER, kind TEXT, name TEXT, depth INTEGER, "
    "start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, start_ms REAL, is_layer INTEGER, attrs TEXT);"
    "CREATE TABLE python_functions (code_id INTEGER PRIMARY KEY, qualname TEXT, file TEXT, line INTEGER);"
    "CREATE TABLE python_calls (id INTEGER PRIMARY KEY, thread_id INTEGER, code_id INTEGER, qualname TEXT, "
    "depth INTEGER, start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, start_ms REAL);"
    "CREATE TABLE marks (id INTEGER PRIMARY KEY, thread_id INTEGER, kind TEXT, name TEXT, ts_ns INTEGER, "
    "t_ms REAL, attrs TEXT);"
    "CREATE TABLE counters (id INTEGER PRIMARY KEY, name TEXT, scope TEXT, target INTEGER, thread_id INTEGER, "
    "ts_ns INTEGER, t_ms REAL, value REAL);"
    "CREATE TABLE cuda_api (id INTEGER PRIMARY KEY, thread_id INTEGER, os_tid INTEGER, domain TEXT, cbid INTEGER, "
    "name TEXT, correlation INTEGER, start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, start_ms REAL, "
    "from_cupti INTEGER, step INTEGER, py_call_id INTEGER, py_function TEXT, range_id INTEGER, range_name TEXT, "
    "layer TEXT, called_from TEXT);"
    "CREATE TABLE kernels (id INTEGER PRIMARY KEY, correlation INTEGER, name TEXT, start_ns INTEGER, "
    "end_ns INTEGER, dur_ns INTEGER, start_ms REAL, step INTEGER, device INTEGER, context INTEGER, "
    "stream INTEGER, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, "
    "block_z INTEGER, registers INTEGER, static_smem INTEGER, dynamic_smem INTEGER, graph_id INTEGER, "
    ISCOPE_LAUNCHER_COLUMNS ");"
    "CREATE TABLE copies (id INTEGER PRIMARY KEY, correlation INTEGER, direction TEXT, src_memory TEXT, "
    "dst_memory TEXT, bytes INTEGER, start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, start_ms REAL, "
    "step INTEGER, device INTEGER, dst_device INTEGER, context INTEGER, stream INTEGER, is_async INTEGER, "
    "graph_id INTEGER, " ISCOPE_LAUNCHER_COLUMNS ");"
    "CREATE TABLE memsets (id INTEGER PRIMARY KEY, correlation INTEGER, memory TEXT, bytes INTEGER, "
    "value INTEGER, start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, start_ms REAL, step INTEGER, "
    "device INTEGER, context INTEGER, stream INTEGER, " ISCOPE_LAUNCHER_COLUMNS ");"
    "CREATE TABLE syncs (id INTEGER PRIMARY KEY, correlation INTEGER, kind TEXT, start_ns INTEGER, "
    "end_ns INTEGER, dur_ns INTEGER, start_ms REAL, step INTEGER, device INTEGER, context INTEGER, "
    "stream INTEGER, event INTEGER, " ISCOPE_LAUNCHER_COLUMNS ");"
    "CREATE TABLE allocations (id INTEGER PRIMARY KEY, correlation INTEGER, op TEXT, memory TEXT, "
    "address INTEGER, bytes INTEGER, ts_ns INTEGER, t_ms REAL, step INTEGER, device INTEGER, stream INTEGER, "
    ISCOPE_LAUNCHER_COLUMNS ");"
    "CREATE TABLE graph_launches (id INTEGER PRIMARY KEY, correlation INTEGER, graph_id INTEGER, "
    "start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, start_ms REAL, step INTEGER, device INTEGER, "
    "context INTEGER, stream INTEGER, " ISCOPE_LAUNCHER_COLUMNS ");"
    "CREATE TABLE steps (step INTEGER PRIMARY KEY, thread_id INTEGER, range_id INTEGER, py_call_id INTEGER, "
    "start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, start_ms REAL, dur_ms REAL, gpu_busy_ns INTEGER, "
    "gpu_idle_ns INTEGER, kernels INTEGER, kernel_ns INTEGER, phase TEXT);"
    "CREATE TABLE step_summary (name TEXT, detected INTEGER, count INTEGER, mean_ms REAL, p50_ms REAL, "
    "p90_ms REAL, p99_ms REAL, max_ms REAL, min_ms REAL);"
    "CREATE TABLE kernel_summary (rank INTEGER PRIMARY KEY, name TEXT, count INTEGER, total_ms REAL, "
    "mean_us REAL, share REAL, launched_by TEXT, short_name TEXT, whole_graph INTEGER);"
    "CREATE TABLE findings (id INTEGER PRIMARY KEY, category TEXT, title TEXT, impact_ms REAL, impact_pct REAL, "
    "confidence REAL, uncertain INTEGER, is_primary INTEGER, rule TEXT, informational INTEGER, "
    "impact_estimated INTEGER, impact_per TEXT);"
    "CREATE TABLE finding_evidence (finding_id INTEGER, seq INTEGER, sentence TEXT);"
    "CREATE TABLE finding_metrics (finding_id INTEGER, name TEXT, value REAL);"
    "CREATE TABLE finding_examples (finding_id INTEGER, start_ms REAL, end_ms REAL, what TEXT);"
    "CREATE TABLE suggestions (finding_id INTEGER, seq INTEGER, action TEXT, priority TEXT, impact_ms REAL, "
    "estimated INTEGER, model TEXT, needs TEXT, try_command TEXT, measured TEXT);"
    "CREATE TABLE warnings (seq INTEGER PRIMARY KEY, message TEXT);";

// Indexes are built after the rows are in: one sort per index instead of a B-tree update per row.
const char* const kIndexes =
    "CREATE INDEX kernels_step ON kernels(step);"
    "CREATE INDEX kernels_api ON kernels(api_id);"
    "CREATE INDEX kernels_correlation ON kernels(correlation);"
    "CREATE INDEX cuda_api_correlation ON cuda_api(correlation);"
    "CREATE INDEX ranges_thread_start ON ranges(thread_id, start_ns);"
    "CREATE INDEX python_calls_thread_start ON python_calls(thread_id, start_ns);"
    "CREATE INDEX copies_step ON copies(step);";

#undef ISCOPE_LAUNCHER_COLUMNS

// The breakdown table: one column per field of the analysis's breakdown list (analyze/breakdown_fields.hpp),
// REAL, and INTEGER for the flag.
std::string breakdown_schema() {
  std::string cols;
  const analyze::Breakdown none;
  analyze::for_each_breakdown_field(none, [&cols](const char* name, const auto& value) {
    const bool flag = std::is_same_v<std::decay_t<decltype(value)>, bool>;
    cols += (cols.empty() ? "" : ", ") + std::string(name) + (flag ? " INTEGER" : " REAL");
  });
  return "CREATE TABLE breakdown (" + cols + ");";
}

}  // namespace inferscope::exporter::detail

// Writes a dump and its analysis into one SQLite database (`iscope-analyze DUMP --sqlite out.db`): every
// record of the dump as a row (threads, ranges, Python calls, CUDA calls, kernels, copies, ...), each GPU
// activity linked to its launch call and to the Python function and range around that call, the steps, and the
// analysis (breakdown, findings, suggestions). docs/sqlite-schema.md describes every table and column.
//
//   dump::DumpReader r("run.iscope");
//   analyze::Analysis a = analyze::analyze_dump(r, {});
//   exporter::write_sqlite(r, a, "run.db");   // sqlite3 run.db 'SELECT name, count(*) FROM kernels GROUP BY 1'
#pragma once

#include "analyze/analysis.hpp"
#include "dump/reader.hpp"

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>

namespace inferscope::exporter {

/// The database could not be written; the message names the path and why. Nothing is left at the output path.
class ExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Version of the layout in docs/sqlite-schema.md, stored in the `meta` table; raised when a column changes.
inline constexpr int kSqliteSchemaVersion = 1;

struct SqliteStats {
  uint64_t rows = 0;  ///< rows written, all tables together
};

/// Writes `reader`'s records and `analysis` (the analysis of that same dump) into a new SQLite database at
/// `out_path`, replacing a regular file there (through a symlink: the file it points to; the link stays). The
/// database is built in a temporary file beside that file, created exclusively, in one transaction, and renamed
/// into place only when complete. Throws ExportError, before anything is written, when a device node, FIFO,
/// socket or directory is there (also at the end of a symlink: a rename would replace it with a regular file),
/// when its directory does not exist or `out_path` is the dump itself; and when writing fails.
/// dump::DumpError for a malformed record.
SqliteStats write_sqlite(const dump::DumpReader& reader, const analyze::Analysis& analysis,
                         const std::string& out_path);

/// For tools: writes the database (`reader` null: the input was not a dump) or says why not on `err`, each line
/// starting with `tool`. Returns whether the database was written.
bool write_sqlite_for_tool(const dump::DumpReader* reader, const analyze::Analysis& analysis,
                           const std::string& out_path, const char* tool, std::ostream& err);

}  // namespace inferscope::exporter

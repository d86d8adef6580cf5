// write_sqlite: checks the output path (the rule of every tool output, dump::resolve_output: a device node, FIFO
// or directory there is refused, a symlink leads to its file), builds the database in a temporary file beside it
// (created exclusively; one transaction, prepared statements, indexes last) and renames it into place, so a
// reader never sees half a database.
#include "export/sqlite.hpp"

#include "export/sqlite_internal.hpp"

#include "dump/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace inferscope::exporter {
namespace {

namespace fs = std::filesystem;

// Why the database cannot go to `t`, where `out` leads (dump::resolve_output: the rule of every other output);
// empty when it can. A device node, FIFO or socket cannot be renamed over without being destroyed, and a
// database cannot be streamed into one.
std::string why_unusable(const std::string& out, const dump::OutputTarget& t) {
  if (out.empty()) return "no SQLite output path given";
  if (!t.error.empty()) return "cannot write " + t.error;
  if (t.direct)
    return "cannot write " + out + ": it is " + dump::file_kind(t.mode) + (t.path != out ? " (" + t.path + ")" : std::string()) +
           "; a SQLite database is written to a regular file only, built beside it and renamed into place (choose "
           "another path)";
  std::error_code ec;
  const fs::path dir = fs::path(t.path).has_parent_path() ? fs::path(t.path).parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) return "cannot write " + out + ": the directory " + dir.string() + " does not exist";
  return "";
}

// Removes the temporary file unless the export completed.
struct TempFile {
  std::string path;
  bool keep = false;
  ~TempFile() {
    if (!keep && !path.empty()) ::unlink(path.c_str());
  }
};

void fsync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw ExportError("cannot write " + path + ": " + why);
  }
  ::close(fd);
}

}  // namespace

SqliteStats write_sqlite(const dump::DumpReader& reader, const analyze::Analysis& analysis,
                         const std::string& out_path) {
  const dump::OutputTarget target = dump::resolve_output(out_path);
  if (std::string why = why_unusable(out_path, target); !why.empty()) throw ExportError(why);
  if (dump::same_file(target.path, reader.path()))
    throw ExportError("refusing to write the SQLite database over its input " + reader.path());
  // Created exclusively (O_EXCL, a fresh name): a file or link planted at a guessable temporary name is never
  // opened. SQLite takes the empty file as a new database.
  TempFile tmp;
  const int fd = dump::create_temp_beside(target.path, tmp.path);
  if (fd < 0) throw ExportError("cannot write " + out_path + ": cannot create a temporary file beside it: " + std::strerror(errno));
  ::close(fd);
  detail::TraceInfo info;
  uint64_t rows = 0;
  {
    detail::Db db(tmp.path);
    // The file is private until the rename: no journal, no syncs while writing, one transaction.
    db.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE; "
            "PRAGMA cache_size=-65536;");
    db.exec("BEGIN");
    db.exec(detail::kSchema);
    db.exec(detail::breakdown_schema());
    detail::write_trace(db, reader, analysis, info);
    rows = info.rows + detail::write_analysis(db, analysis, info);
    db.exec(detail::kIndexes);
    db.exec("COMMIT");
    db.close();
  }
  fsync_file(tmp.path);
  // Checked again just before the rename: something other than a regular file put there meanwhile (a device
  // node, a FIFO, a link) is left alone rather than replaced.
  const dump::OutputTarget now = dump::resolve_output(out_path);
  if (now.path != target.path || now.direct)
    throw ExportError("cannot write " + out_path + ": it changed while the database was written (now " +
                      (now.direct ? dump::file_kind(now.mode) : now.path) + "); left as it is");
  if (::rename(tmp.path.c_str(), target.path.c_str()) != 0)
    throw ExportError("cannot write " + out_path + ": " + std::strerror(errno));
  tmp.keep = true;
  return {rows};
}

bool write_sqlite_for_tool(const dump::DumpReader* reader, const analyze::Analysis& analysis,
                           const std::string& out_path, const char* tool, std::ostream& err) {
  if (!reader) {
    err << tool << ": --sqlite needs a dump, not a JSON trace\n";
    return false;
  }
  try {
    write_sqlite(*reader, analysis, out_path);
    return true;
  } catch (const ExportError& e) {
    err << tool << ": " << e.what() << "\n";
  } catch (const dump::DumpError& e) {
    err << tool << ": " << e.what() << "\n";
  }
  return false;
}

}  // namespace inferscope::exporter

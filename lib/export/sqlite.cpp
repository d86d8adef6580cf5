// write_sqlite: checks the output path, builds the database in a temporary file beside it (one transaction,
// prepared statements, indexes last) and renames it into place, so a reader never sees half a database.
#include "export/sqlite.hpp"

#include "export/sqlite_internal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace inferscope::exporter {
namespace {

namespace fs = std::filesystem;

void check_output_path(const std::string& input, const std::string& out) {
  if (out.empty()) throw ExportError("no SQLite output path given");
  std::error_code ec;
  const fs::path dir = fs::path(out).has_parent_path() ? fs::path(out).parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw ExportError("cannot write " + out + ": the directory " + dir.string() + " does not exist");
  const bool same = fs::exists(out, ec) ? fs::equivalent(input, out, ec)
                                        : fs::weakly_canonical(input, ec) == fs::weakly_canonical(out, ec);
  if (same) throw ExportError("refusing to write the SQLite database over its input " + input);
  if (fs::is_directory(out, ec)) throw ExportError("cannot write " + out + ": it is a directory");
}

// Removes the temporary file unless the export completed.
struct TempFile {
  std::string path;
  bool keep = false;
  ~TempFile() {
    if (!keep) ::unlink(path.c_str());
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
  check_output_path(reader.path(), out_path);
  TempFile tmp{out_path + ".tmp-" + std::to_string(::getpid())};
  ::unlink(tmp.path.c_str());  // a leftover of a crashed export with the same pid
  detail::TraceInfo info;
  uint64_t rows = 0;
  {
    detail::Db db(tmp.path);
    // The file is private until the rename: no journal, no syncs while writing, one transaction.
    db.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE; "
            "PRAGMA cache_size=-65536;");
    db.exec("BEGIN");
    db.exec(detail::kSchema);
    detail::write_trace(db, reader, analysis, info);
    rows = info.rows + detail::write_analysis(db, analysis, info);
    db.exec(detail::kIndexes);
    db.exec("COMMIT");
    db.close();
  }
  fsync_file(tmp.path);
  if (::rename(tmp.path.c_str(), out_path.c_str()) != 0)
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

// A small RAII layer over the SQLite C API for the exporter: a connection, prepared statements with typed
// binds, and errors as exceptions that name the statement. Internal to lib/export.
#pragma once

#include "export/sqlite.hpp"

#include <cstdint>
#include <optional>
#include <type_traits>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace inferscope::exporter::detail {

class Db {
 public:
  /// Creates (or opens) the database file; throws ExportError.
  explicit Db(const std::string& path);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  /// Runs one or more statements without results.
  void exec(std::string_view sql);
  /// Closes the connection, reporting a failure to flush as an ExportError.
  void close();
  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

/// One prepared INSERT reused for every row: bind columns 1..n in order with `<<`, then `row()`.
class Stmt {
 public:
  Stmt(Db& db, std::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& operator<<(int64_t v);
  Stmt& operator<<(uint64_t v) { return *this << static_cast<int64_t>(v); }
  Stmt& operator<<(uint32_t v) { return *this << static_cast<int64_t>(v); }
  Stmt& operator<<(int v) { return *this << static_cast<int64_t>(v); }
  Stmt& operator<<(bool v) { return *this << static_cast<int64_t>(v ? 1 : 0); }
  Stmt& operator<<(double v);
  /// Text that outlives the row (no copy is made).
  Stmt& operator<<(std::string_view v);
  Stmt& operator<<(const char* v) { return *this << std::string_view(v); }
  Stmt& operator<<(const std::string& v) { return *this << std::string_view(v); }
  /// A temporary string: SQLite copies it.
  Stmt& operator<<(std::string&& v);
  Stmt& operator<<(std::nullopt_t);
  template <class T>
  Stmt& operator<<(const std::optional<T>& v) {
    if (!v) return *this << std::nullopt;
    // A string inside an optional is usually a temporary's (attrs_json(...)): SQLite must copy it, since the
    // row is stepped after the optional is gone (ASan: stack-use-after-scope with a static binding).
    if constexpr (std::is_same_v<T, std::string>) return *this << std::string(*v);
    else return *this << *v;
  }
  /// Executes the statement with the bound values and resets it for the next row.
  void row();

 private:
  [[noreturn]] void fail(const char* what, int rc);
  Db& db_;
  sqlite3_stmt* stmt_ = nullptr;
  int col_ = 0;
};

}  // namespace inferscope::exporter::detail

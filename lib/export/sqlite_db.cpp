#include "export/sqlite_db.hpp"

#include <sqlite3.h>

namespace inferscope::exporter::detail {

Db::Db(const std::string& path) : path_(path) {
  const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw ExportError("cannot create " + path + ": " + msg);
  }
}

Db::~Db() {
  if (db_) sqlite3_close(db_);
}

void Db::exec(std::string_view sql) {
  char* err = nullptr;
  const std::string s(sql);
  if (sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw ExportError(path_ + ": " + msg + " (in: " + s.substr(0, 80) + ")");
  }
}

void Db::close() {
  if (!db_) return;
  const int rc = sqlite3_close(db_);
  if (rc != SQLITE_OK) throw ExportError(path_ + ": closing the database failed: " + sqlite3_errstr(rc));
  db_ = nullptr;
}

Stmt::Stmt(Db& db, std::string_view sql) : db_(db) {
  if (sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt_,
                         nullptr) != SQLITE_OK)
    throw ExportError(db.path() + ": " + sqlite3_errmsg(db.handle()) + " (in: " + std::string(sql.substr(0, 80)) + ")");
}

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

void Stmt::fail(const char* what, int rc) {
  throw ExportError(db_.path() + ": " + what + " failed: " + sqlite3_errmsg(db_.handle()) + " (" +
                    sqlite3_errstr(rc) + ") in: " + sqlite3_sql(stmt_));
}

Stmt& Stmt::operator<<(int64_t v) {
  if (int rc = sqlite3_bind_int64(stmt_, ++col_, v); rc != SQLITE_OK) fail("bind", rc);
  return *this;
}

Stmt& Stmt::operator<<(double v) {
  if (int rc = sqlite3_bind_double(stmt_, ++col_, v); rc != SQLITE_OK) fail("bind", rc);
  return *this;
}

Stmt& Stmt::operator<<(std::string_view v) {
  if (int rc = sqlite3_bind_text(stmt_, ++col_, v.data(), static_cast<int>(v.size()), SQLITE_STATIC); rc != SQLITE_OK)
    fail("bind", rc);
  return *this;
}

Stmt& Stmt::operator<<(std::string&& v) {
  if (int rc = sqlite3_bind_text(stmt_, ++col_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); rc != SQLITE_OK)
    fail("bind", rc);
  return *this;
}

Stmt& Stmt::operator<<(std::nullopt_t) {
  if (int rc = sqlite3_bind_null(stmt_, ++col_); rc != SQLITE_OK) fail("bind", rc);
  return *this;
}

void Stmt::row() {
  const int rc = sqlite3_step(stmt_);
  if (rc != SQLITE_DONE) fail("insert", rc);
  sqlite3_reset(stmt_);
  col_ = 0;
}

}  // namespace inferscope::exporter::detail

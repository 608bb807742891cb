#include "server/store/store_sqlite.h"

#include <sqlite3.h>

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace autoaccel::store_internal {

absl::StatusCode CodeFor(int rc) {
  switch (rc) {
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE:
      return absl::StatusCode::kAlreadyExists;
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return absl::StatusCode::kFailedPrecondition;
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
    case SQLITE_TOOBIG:
      return absl::StatusCode::kInvalidArgument;
    case SQLITE_NOTADB:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_CORRUPT:
      return absl::StatusCode::kDataLoss;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return absl::Status(
      CodeFor(rc),
      absl::StrCat("store: ", what, ": ", msg, " (sqlite code ", rc, ")",
                   (rc & 0xff) == SQLITE_FULL ? ": the disk holding the database is full" : ""));
}

absl::Status Annotate(const absl::Status& s, absl::string_view prefix) {
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat("store: ", prefix, absl::StripPrefix(s.message(), "store: ")));
}

void DbCloser::operator()(sqlite3* db) const { sqlite3_close_v2(db); }

absl::Status Exec(sqlite3* db, const char* sql, absl::string_view what) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, what);
  return absl::OkStatus();
}

// ---- Statement --------------------------------------------------------------

absl::StatusOr<Statement> Statement::Prepare(sqlite3* db, absl::string_view sql, const char* what) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, what);
  return Statement(db, stmt, what);
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      what_(other.what_),
      cache_(other.cache_),
      next_param_(other.next_param_),
      bind_rc_(other.bind_rc_) {}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  if (cache_ != nullptr) {
    cache_->Return(stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
}

// ---- StatementCache ---------------------------------------------------------

StatementCache::~StatementCache() {
  for (auto& [sql, stmt] : idle_) sqlite3_finalize(stmt);
}

absl::StatusOr<Statement> StatementCache::Prepare(sqlite3* db, const std::string& sql,
                                                  const char* what) {
  if (auto it = idle_.find(sql); it != idle_.end()) {
    sqlite3_stmt* stmt = it->second;
    idle_.erase(it);
    return Statement(db, stmt, what, this);
  }
  ASSIGN_OR_RETURN(Statement fresh, Statement::Prepare(db, sql, what));
  fresh.cache_ = this;
  return fresh;
}

void StatementCache::Return(sqlite3_stmt* stmt) {
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  idle_.emplace(sqlite3_sql(stmt), stmt);
}

Statement& Statement::Bind(absl::string_view text) {
  // SQLITE_TRANSIENT: SQLite copies, so temporaries are fine.
  return Check(sqlite3_bind_text64(stmt_, next_param_++, text.data(), text.size(), SQLITE_TRANSIENT,
                                   SQLITE_UTF8));
}

Statement& Statement::Bind(int64_t value) {
  return Check(sqlite3_bind_int64(stmt_, next_param_++, value));
}

Statement& Statement::Bind(absl::Time t) {
  int64_t us;
  if (t == absl::InfinitePast()) {
    us = std::numeric_limits<int64_t>::min();
  } else if (t == absl::InfiniteFuture()) {
    us = std::numeric_limits<int64_t>::max();
  } else {
    us = absl::ToUnixMicros(t);
  }
  return Bind(us);
}

absl::StatusOr<bool> Statement::Step() {
  if (bind_rc_ != SQLITE_OK) return SqliteError(db_, bind_rc_, what_);
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, what_);
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  next_param_ = 1;
  bind_rc_ = SQLITE_OK;
}

absl::StatusOr<int> Statement::Run() {
  ASSIGN_OR_RETURN(bool row, Step());
  (void)row;
  return sqlite3_changes(db_);
}

std::string Statement::Text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  return p == nullptr ? std::string() : std::string(p, sqlite3_column_bytes(stmt_, col));
}

int64_t Statement::Int64(int col) const { return sqlite3_column_int64(stmt_, col); }

int Statement::Int(int col) const { return sqlite3_column_int(stmt_, col); }

absl::Time Statement::Time(int col) const {
  int64_t us = Int64(col);
  if (us == std::numeric_limits<int64_t>::min()) return absl::InfinitePast();
  if (us == std::numeric_limits<int64_t>::max()) return absl::InfiniteFuture();
  return absl::FromUnixMicros(us);
}

Statement& Statement::Check(int rc) {
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

// ---- Transaction ------------------------------------------------------------

absl::StatusOr<Transaction> Transaction::Begin(sqlite3* db) {
  RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE", "begin transaction"));
  return Transaction(db);
}

Transaction::Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Transaction::~Transaction() {
  // SQLite may already have rolled back by itself after some errors.
  if (db_ != nullptr && !sqlite3_get_autocommit(db_)) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

absl::Status Transaction::Commit() {
  RETURN_IF_ERROR(Exec(db_, "COMMIT", "commit transaction"));
  db_ = nullptr;
  return absl::OkStatus();
}

}  // namespace autoaccel::store_internal

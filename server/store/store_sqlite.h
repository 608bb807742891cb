// The store's SQLite plumbing: SQLite result codes -> canonical absl codes,
// and RAII wrappers for a connection, a prepared statement and a write
// transaction. Internal to the store (server/store/store*.cc); nothing here knows
// the schema.
//
// Contract:
//  - Errors are absl::Status with the code chosen by CodeFor (the table in
//    server/store/store.h) and the message "store: <what>: <SQLite's message>
//    (sqlite code N)".
//  - None of these types locks anything: the caller serialises use of one
//    connection (Store does so with its mutex).
#ifndef AUTOACCEL_SERVER_STORE_STORE_SQLITE_H_
#define AUTOACCEL_SERVER_STORE_STORE_SQLITE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct sqlite3;
struct sqlite3_stmt;

namespace autoaccel::store_internal {

// The canonical code for an (extended) SQLite result code.
absl::StatusCode CodeFor(int rc);

// `what` says what was being done; SQLite's message and code follow. `db`
// may be null (then the code's generic text is used).
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what);

// "store: <prefix><message without its own 'store: '>"; OK stays OK.
absl::Status Annotate(const absl::Status& s, absl::string_view prefix);

struct DbCloser {
  void operator()(sqlite3* db) const;
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;

// Runs SQL with no parameters and no result rows (several statements allowed).
absl::Status Exec(sqlite3* db, const char* sql, absl::string_view what);

class StatementCache;

// One prepared statement. Bind() fills parameters ?1, ?2, ... in call order;
// a bind error is kept and reported by the next Step().
class Statement {
 public:
  // `what` names the operation in error messages; it must outlive the
  // statement (a string literal).
  static absl::StatusOr<Statement> Prepare(sqlite3* db, absl::string_view sql, const char* what);

  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  ~Statement();

  // Text is copied by SQLite, so temporaries are fine.
  Statement& Bind(absl::string_view text);
  Statement& Bind(int64_t value);
  Statement& Bind(int value) { return Bind(static_cast<int64_t>(value)); }
  // Microseconds since the epoch (finer parts truncated towards the past);
  // the infinities map to the int64 extremes.
  Statement& Bind(absl::Time t);

  // True while a row is available; false once done.
  absl::StatusOr<bool> Step();
  // Makes the statement ready to bind and run again (from ?1).
  void Reset();
  // Runs a statement that returns no rows; gives the number of rows changed.
  absl::StatusOr<int> Run();

  // Column readers of the current row (REQUIRES: Step() returned true).
  std::string Text(int col) const;
  int64_t Int64(int col) const;
  int Int(int col) const;
  absl::Time Time(int col) const;  // the inverse of Bind(absl::Time)

 private:
  friend class StatementCache;
  Statement(sqlite3* db, sqlite3_stmt* stmt, const char* what, StatementCache* cache = nullptr)
      : db_(db), stmt_(stmt), what_(what), cache_(cache) {}
  Statement& Check(int rc);

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  const char* what_;
  StatementCache* cache_;  // where it goes back to instead of being finalized; may be null
  int next_param_ = 1;
  int bind_rc_ = 0;  // SQLITE_OK
};

// Prepared statements kept for reuse, by their SQL: preparing the same
// statement again for every write was about a sixth of the coordinator's
// time in a burst of submissions. A Statement from Prepare goes back here,
// reset, when destroyed. Not thread-safe: its owner's lock guards it and
// every Statement it handed out. Destroy it before the database closes, or
// after with sqlite3_close_v2 (which waits for the statements).
class StatementCache {
 public:
  StatementCache() = default;
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;
  ~StatementCache();
  // As Statement::Prepare, reusing an idle statement of the same `sql`.
  absl::StatusOr<Statement> Prepare(sqlite3* db, const std::string& sql, const char* what);

 private:
  friend class Statement;
  void Return(sqlite3_stmt* stmt);
  std::unordered_multimap<std::string, sqlite3_stmt*> idle_;
};

// BEGIN IMMEDIATE takes the write lock up front (waiting on the busy
// timeout), so a transaction never fails half-way because another writer got
// in first, and what it reads cannot change before it commits. Rolled back
// on destruction unless committed.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(sqlite3* db);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();
  absl::Status Commit();

 private:
  explicit Transaction(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

}  // namespace autoaccel::store_internal

#endif  // AUTOACCEL_SERVER_STORE_STORE_SQLITE_H_

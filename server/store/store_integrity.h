// Whether a database file is the coordinator's and is sound, and whether it
// is still the file at its path: the checks Store::Open makes before it
// writes anything, and the check before every write that catches a file
// deleted or replaced under a running server (SQLite would go on writing
// to the unlinked inode, and the history would be gone after a restart).
// Internal to the store (server/store/store*.cc).
//
// Errors name the file and say what to do:
//   FAILED_PRECONDITION  another application's file; the file was deleted
//                        or replaced while open
//   DATA_LOSS            PRAGMA quick_check finds the file damaged
// Not thread-safe: the caller serialises use (Store does with its mutex).
#ifndef AUTOACCEL_SERVER_STORE_STORE_INTEGRITY_H_
#define AUTOACCEL_SERVER_STORE_STORE_INTEGRITY_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

struct sqlite3;

namespace autoaccel::store_internal {

// PRAGMA application_id of the files this build creates or migrates
// ("aacc"); files of older builds carry 0.
inline constexpr int32_t kApplicationId = 0x61616363;

// OK when the open database `db` (at `path`, carrying schema `user_version`)
// is the coordinator's or empty: its application_id is 0 or kApplicationId,
// and it has either no table at all (a new file) or, with a schema version,
// the jobs, trials and strategies tables. Else FAILED_PRECONDITION
// "store: database 'PATH' is not an autoaccel database (it has the tables
// a, b, ...; ...)". SQLite's errors (a damaged schema) as Store's table.
absl::Status CheckOwnDatabase(sqlite3* db, const std::string& path, int user_version);

// DATA_LOSS "store: database 'PATH' is damaged: <finding>; restore it from
// a backup ...". `s` stays as it is unless it is DATA_LOSS (SQLite's
// SQLITE_CORRUPT) or `s` is OK.
absl::Status Damaged(const std::string& path, absl::string_view finding);
absl::Status DamagedIfCorrupt(const std::string& path, absl::Status s);

// PRAGMA quick_check (every page read, no index cross-checks: linear in the
// file's size). DATA_LOSS "store: database 'PATH' is damaged: <SQLite's
// first finding>; restore it from a backup (autoaccel-server --backup)".
absl::Status CheckNotDamaged(sqlite3* db, const std::string& path);

// The identity (device and inode) of a database's file and of its WAL, to
// notice either being deleted or replaced while the database is open.
class FileWatch {
 public:
  // Records the identity of the file at `path` now (REQUIRES: just opened).
  // ":memory:" and "" are never checked.
  explicit FileWatch(std::string path);

  // OK while `path` is still the file that was opened and PATH-wal (from the
  // first call that finds one) still the same WAL; else
  // FAILED_PRECONDITION "store: database 'PATH' was deleted (or replaced)
  // while the server was running; ..." (and so on every later call).
  absl::Status Check();

 private:
  struct Identity {
    dev_t dev = 0;
    ino_t ino = 0;
    bool known = false;
  };
  const std::string path_;
  Identity db_, wal_;
  absl::Status failed_;  // sticky: the first failure
};

}  // namespace autoaccel::store_internal

#endif  // AUTOACCEL_SERVER_STORE_STORE_INTEGRITY_H_

#include "server/store/store_backup.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "server/store/store_integrity.h"
#include "server/store/store_schema.h"
#include "server/store/store_sqlite.h"

namespace autoaccel {

using store_internal::Annotate;
using store_internal::DbPtr;
using store_internal::SqliteError;
using store_internal::Statement;

namespace {

// As the store's: how long the copy waits for a writer's lock.
constexpr absl::Duration kBusyTimeout = absl::Seconds(5);

absl::StatusOr<DbPtr> OpenDb(const std::string& path, int flags, absl::string_view where) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  DbPtr db(raw);
  if (rc != SQLITE_OK) return Annotate(SqliteError(db.get(), rc, "open"), where);
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), static_cast<int>(absl::ToInt64Milliseconds(kBusyTimeout)));
  return db;
}

absl::StatusOr<int64_t> Count(sqlite3* db, const char* sql) {
  ASSIGN_OR_RETURN(Statement stmt, Statement::Prepare(db, sql, "count rows"));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.Int64(0) : 0;
}

// The copy itself, into `tmp`.
absl::StatusOr<BackupSummary> CopyTo(sqlite3* src, const std::string& tmp,
                                     absl::string_view dest_where) {
  ASSIGN_OR_RETURN(DbPtr dst, OpenDb(tmp, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, dest_where));
  sqlite3_backup* backup = sqlite3_backup_init(dst.get(), "main", src, "main");
  if (backup == nullptr) {
    return Annotate(SqliteError(dst.get(), sqlite3_errcode(dst.get()), "start the copy"),
                    dest_where);
  }
  // All pages in one step: one read transaction, one snapshot. A writer's
  // lock (rollback-journal sources only) is waited out, up to the timeout.
  const absl::Time give_up = absl::Now() + kBusyTimeout;
  int rc;
  while (true) {
    rc = sqlite3_backup_step(backup, -1);
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || absl::Now() > give_up) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  const int finished = sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) return Annotate(SqliteError(nullptr, rc, "copy"), dest_where);
  if (finished != SQLITE_OK) {
    return Annotate(SqliteError(dst.get(), finished, "finish the copy"), dest_where);
  }
  // One self-contained file: the source's WAL flag came with its header.
  RETURN_IF_ERROR(
      Annotate(store_internal::Exec(dst.get(), "PRAGMA journal_mode = DELETE", "leave WAL mode"),
               dest_where));
  RETURN_IF_ERROR(store_internal::CheckNotDamaged(dst.get(), tmp));
  BackupSummary summary;
  absl::StatusOr<int> version = store_internal::ReadUserVersion(dst.get());
  if (!version.ok()) return Annotate(version.status(), dest_where);
  summary.schema_version = *version;
  absl::StatusOr<int64_t> jobs = Count(dst.get(), "SELECT count(*) FROM jobs");
  absl::StatusOr<int64_t> trials = Count(dst.get(), "SELECT count(*) FROM trials");
  if (!jobs.ok()) return Annotate(jobs.status(), dest_where);
  if (!trials.ok()) return Annotate(trials.status(), dest_where);
  summary.jobs = *jobs;
  summary.trials = *trials;
  return summary;
}

}  // namespace

absl::StatusOr<BackupSummary> BackupDatabase(const std::string& source, const std::string& dest) {
  const std::string where = absl::StrCat("database '", source, "': ");
  struct stat st;
  if (stat(source.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("store: ", where, "no such file to back up"));
  }
  struct stat to;
  if (stat(dest.c_str(), &to) == 0 && to.st_dev == st.st_dev && to.st_ino == st.st_ino) {
    return absl::InvalidArgumentError(
        absl::StrCat("store: ", where, "--backup names the database itself; give another file"));
  }
  // Read-only: the copy never migrates or otherwise writes the source.
  ASSIGN_OR_RETURN(DbPtr src, OpenDb(source, SQLITE_OPEN_READONLY, where));
  absl::StatusOr<int> version = store_internal::ReadUserVersion(src.get());
  if (!version.ok()) return Annotate(version.status(), where);
  RETURN_IF_ERROR(store_internal::CheckOwnDatabase(src.get(), source, *version));
  if (*version == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("store: ", where, "empty (no autoaccel-server has used it yet)"));
  }
  const std::string tmp = absl::StrCat(dest, ".tmp");
  const std::string dest_where = absl::StrCat("backup '", dest, "': ");
  std::remove(tmp.c_str());
  absl::StatusOr<BackupSummary> summary = CopyTo(src.get(), tmp, dest_where);
  if (summary.ok() && std::rename(tmp.c_str(), dest.c_str()) != 0) {
    summary = absl::FailedPreconditionError(
        absl::StrCat("store: ", dest_where, "cannot rename ", tmp, " to it"));
  }
  if (!summary.ok()) {
    std::remove(tmp.c_str());
    return summary.status();
  }
  if (stat(dest.c_str(), &st) == 0) summary->bytes = st.st_size;
  return summary;
}

}  // namespace autoaccel

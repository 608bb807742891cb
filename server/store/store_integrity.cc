#include "server/store/store_integrity.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "server/store/store_sqlite.h"

namespace autoaccel::store_internal {
namespace {

// The tables every schema version from 1 on has.
constexpr const char* kOwnTables[] = {"jobs", "trials", "strategies"};

absl::Status Foreign(const std::string& path, absl::string_view why) {
  return absl::FailedPreconditionError(
      absl::StrCat("store: database '", path, "' is not an autoaccel database (", why,
                   "); give --db a new file or one an autoaccel-server created"));
}

absl::StatusOr<int64_t> ApplicationId(sqlite3* db) {
  ASSIGN_OR_RETURN(Statement app,
                   Statement::Prepare(db, "PRAGMA application_id", "read application id"));
  ASSIGN_OR_RETURN(bool row, app.Step());
  return row ? app.Int64(0) : 0;
}

absl::StatusOr<std::vector<std::string>> TableNames(sqlite3* db) {
  ASSIGN_OR_RETURN(Statement list,
                   Statement::Prepare(db,
                                      "SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                      "name NOT LIKE 'sqlite_%' ORDER BY name",
                                      "list tables"));
  std::vector<std::string> tables;
  while (true) {
    ASSIGN_OR_RETURN(bool more, list.Step());
    if (!more) return tables;
    tables.push_back(list.Text(0));
  }
}

}  // namespace

absl::Status CheckOwnDatabase(sqlite3* db, const std::string& path, int user_version) {
  const std::string where = absl::StrCat("database '", path, "': ");
  absl::StatusOr<int64_t> id = ApplicationId(db);
  if (!id.ok()) return DamagedIfCorrupt(path, Annotate(id.status(), where));
  if (*id != 0 && *id != kApplicationId) {
    return Foreign(
        path, absl::StrCat("its application_id is ", *id, ", autoaccel's is ", kApplicationId));
  }
  absl::StatusOr<std::vector<std::string>> listed = TableNames(db);
  if (!listed.ok()) return DamagedIfCorrupt(path, Annotate(listed.status(), where));
  const std::vector<std::string>& tables = *listed;
  if (tables.empty()) return absl::OkStatus();  // a new file
  const std::string found = absl::StrCat("it has the tables ", absl::StrJoin(tables, ", "));
  if (user_version == 0) return Foreign(path, absl::StrCat(found, " and no schema version"));
  for (const char* own : kOwnTables) {
    if (std::find(tables.begin(), tables.end(), own) == tables.end()) {
      return Foreign(path, absl::StrCat(found, " but no ", own, " table"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNotDamaged(sqlite3* db, const std::string& path) {
  ASSIGN_OR_RETURN(Statement check,
                   Statement::Prepare(db, "PRAGMA quick_check(1)", "check the file"));
  absl::StatusOr<bool> row = check.Step();
  std::string finding;
  if (!row.ok()) {
    finding = std::string(row.status().message());
  } else if (*row && check.Text(0) != "ok") {
    finding = check.Text(0);
  } else {
    return absl::OkStatus();
  }
  return Damaged(path, finding);
}

absl::Status Damaged(const std::string& path, absl::string_view finding) {
  return absl::DataLossError(absl::StrCat("store: database '", path, "' is damaged: ", finding,
                                          "; restore it from a backup (autoaccel-server --backup) "
                                          "or move it aside to start afresh"));
}

absl::Status DamagedIfCorrupt(const std::string& path, absl::Status s) {
  if (s.code() != absl::StatusCode::kDataLoss) return s;
  return Damaged(path,
                 absl::StripPrefix(s.message(), absl::StrCat("store: database '", path, "': ")));
}

FileWatch::FileWatch(std::string path) : path_(std::move(path)) {
  if (path_.empty() || path_ == ":memory:") return;
  struct stat st;
  if (stat(path_.c_str(), &st) == 0) db_ = {st.st_dev, st.st_ino, true};
}

absl::Status FileWatch::Check() {
  if (!failed_.ok() || !db_.known) return failed_;
  // "" while `file` is the one seen, else what became of it.
  auto gone = [](const std::string& file, const Identity& was) {
    struct stat st;
    if (stat(file.c_str(), &st) != 0) {
      return absl::StrCat("was deleted (", std::strerror(errno), ")");
    }
    if (st.st_dev != was.dev || st.st_ino != was.ino) {
      return std::string("was replaced by another file");
    }
    return std::string();
  };
  const std::string wal_path = path_ + "-wal";
  std::string why = gone(path_, db_);
  if (!why.empty()) {
    why = absl::StrCat("' ", why);
  } else if (wal_.known) {
    why = gone(wal_path, wal_);
    if (!why.empty()) why = absl::StrCat("': its write-ahead log '", wal_path, "' ", why);
  }
  if (why.empty()) {
    struct stat st;
    if (!wal_.known && stat(wal_path.c_str(), &st) == 0) wal_ = {st.st_dev, st.st_ino, true};
    return absl::OkStatus();
  }
  failed_ = absl::FailedPreconditionError(absl::StrCat(
      "store: database '", path_, why,
      " while the server was running; nothing more is written (it would be lost). Restart the "
      "server: it opens whatever file is at the path then (restore one from a backup made with "
      "autoaccel-server --backup)"));
  return failed_;
}

}  // namespace autoaccel::store_internal

// The store's schema over time: the ordered, append-only list of migrations
// that builds the current tables from an empty file, and the code that brings
// a file up to kCurrentSchemaVersion. Internal to the store.
//
// The SQL here is history: a released migration is never edited; a change
// (a column added to a table in server/store/store_columns.h, a table dropped) is
// a new entry, and kCurrentSchemaVersion below moves with it (a
// static_assert keeps them together).
#ifndef AUTOACCEL_SERVER_STORE_STORE_SCHEMA_H_
#define AUTOACCEL_SERVER_STORE_STORE_SCHEMA_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;

namespace autoaccel::store_internal {

// The schema version this build writes; Store::Open migrates older files to
// it and refuses newer ones.
inline constexpr int kCurrentSchemaVersion = 12;

// PRAGMA user_version: the schema version the file carries (0 when new).
absl::StatusOr<int> ReadUserVersion(sqlite3* db);

// FAILED_PRECONDITION: the file at `path` carries schema `version`, newer
// than this build writes.
absl::Status RefuseNewer(const std::string& path, int version);

// Applies the migrations the file lacks, all in one BEGIN IMMEDIATE
// transaction (another process may migrate the same file at once: the
// version is read again under the write lock), and sets user_version.
// Returns how many ran (0 when the file was current: nothing is written).
// Errors other than RefuseNewer's are prefixed with `where`; on any error
// nothing is changed.
absl::StatusOr<int> Migrate(sqlite3* db, const std::string& path, absl::string_view where);

}  // namespace autoaccel::store_internal

#endif  // AUTOACCEL_SERVER_STORE_STORE_SCHEMA_H_

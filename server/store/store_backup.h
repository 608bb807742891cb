// A copy of the coordinator's database while a server uses it
// (autoaccel-server --db FILE --backup COPY), with SQLite's online backup
// API: the copy is one consistent snapshot, taken in a single read
// transaction, so a server writing the file meanwhile (in WAL mode its
// writes do not wait for readers) neither waits nor ends up half in it.
//
// Any thread; opens its own connections (no Store needed, none disturbed).
#ifndef AUTOACCEL_SERVER_STORE_STORE_BACKUP_H_
#define AUTOACCEL_SERVER_STORE_STORE_BACKUP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace autoaccel {

struct BackupSummary {
  int64_t bytes = 0;       // the copy's size
  int schema_version = 0;  // the copy's (the source's) schema version
  int64_t jobs = 0;        // jobs in the copy
  int64_t trials = 0;      // trials in the copy
};

// Copies the database at `source` (which must exist and be autoaccel's, of
// any schema version) to `dest`: written to DEST.tmp, checked (PRAGMA
// quick_check), then renamed over `dest`, so `dest` is either the old file
// or a complete copy. The copy is a single file in rollback-journal mode
// (no -wal beside it); Store::Open opens it as any database.
// Errors, naming the file: FAILED_PRECONDITION (no such source, not
// autoaccel's, dest not writable), UNAVAILABLE (the source stayed locked
// past the busy timeout), DATA_LOSS (the source is damaged), RESOURCE_EXHAUSTED
// (disk full). Nothing is left at DEST.tmp on error.
absl::StatusOr<BackupSummary> BackupDatabase(const std::string& source, const std::string& dest);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_STORE_STORE_BACKUP_H_

// The coordinator's durable state: jobs, their trials and the strategy
// database (best known strategy per model+hardware signature), kept in one
// SQLite file. (Registered workers are not stored: they register again after
// a coordinator restart.)
//
// Where the parts live: the records (server/store/records.h); this class
// (server/store/store.cc); each table's columns
// and row codecs (server/store/store_columns.h); the schema and its migrations
// (server/store/store_schema.cc); SQLite statements, transactions and error codes
// (server/store/store_sqlite.h). A new field of a record is a line in its table in
// store_columns.h and a migration that adds the column in store_schema.cc.
//
// Contract shared by every method:
//  - Thread-safe: any thread may call any method; calls are serialised by an
//    internal mutex. Several Store objects (or processes) may open the same
//    file: writers then wait on SQLite's busy timeout and, past it, get
//    UNAVAILABLE.
//  - Every write is one transaction: on error nothing of the call is kept.
//    Every write returns absl::Status, so a caller can tell that its change
//    was not stored.
//  - Times are stored with microsecond precision (finer parts are truncated
//    towards the past); absl::InfinitePast() and absl::InfiniteFuture()
//    round-trip exactly.
//  - Errors use canonical codes; SQLite's own message is included:
//      INVALID_ARGUMENT    a record breaks a rule below (empty id, ...)
//      NOT_FOUND           the row to update or read does not exist
//      ALREADY_EXISTS      a create would duplicate an id
//      FAILED_PRECONDITION a referenced row is missing; the file cannot be
//                          used (not a database, another application's
//                          database, no permission, newer schema); the
//                          file (or its WAL) was deleted or replaced while
//                          open: then every later write fails too
//      UNAVAILABLE         the file stayed locked past the busy timeout
//      RESOURCE_EXHAUSTED  the disk (or LimitSizeForTesting's cap) is full,
//                          or SQLite ran out of memory
//      DATA_LOSS           a stored row cannot be decoded or the file is
//                          corrupt (Open checks every page first)
//      INTERNAL            anything else SQLite reports
#ifndef AUTOACCEL_SERVER_STORE_STORE_H_
#define AUTOACCEL_SERVER_STORE_STORE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/job_state.h"  // JobState, JobStateName, IsTerminal
#include "server/store/records.h"
#include "server/store/store_integrity.h"
#include "spec/trial.h"

struct sqlite3;

namespace autoaccel {
namespace store_internal {
class Transaction;
class StatementCache;
}  // namespace store_internal

// Whether an answer offered for a signature (`candidate`) takes the place
// of the one stored: policy, not storage. The coordinator's is
// server/database_answer.h's ReplacesStoredAnswer; the store executes it
// (Store::FinishJob).
using AnswerPrecedence = bool (*)(const StrategyRecord& candidate, const StrategyRecord& stored);

// Which stored answers ListStrategies returns; an empty field matches all.
struct StrategyFilter {
  // exact; "launcher:NAME" also matches "launcher:NAME:FAMILY"
  std::string model_family;
  std::string device_type;  // exact: "cpu", "cuda"
};

class Store {
 public:
  // Opens (creating if needed) the database at `path`, enables WAL and
  // foreign keys, sets a busy timeout, and migrates the schema to the
  // version this build writes (server/store/store_schema.h) inside one
  // transaction. A missing or empty file
  // becomes a fresh database. A file that is not a database, cannot be
  // opened, belongs to another application (its application_id, or tables
  // that are not ours: server/store/store_integrity.h) or carries a schema newer
  // than this build gives FAILED_PRECONDITION with `path` in the message; a
  // damaged one (PRAGMA quick_check, which reads every page: about a second
  // per GB) DATA_LOSS naming it and SQLite's finding. Nothing is changed.
  // ":memory:" gives a private in-memory database (no WAL).
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  int schema_version() const { return schema_version_; }
  // How many migrations Open applied: 0 when the file was already current.
  int migrations_applied() const { return migrations_applied_; }
  const std::string& path() const { return path_; }

  // ALREADY_EXISTS on a duplicate job_id.
  absl::Status CreateJob(const JobRecord& job);
  // Replaces every field of the job with that id; NOT_FOUND if missing.
  absl::Status UpdateJob(const JobRecord& job);
  absl::StatusOr<JobRecord> GetJob(const std::string& job_id);  // NOT_FOUND
  // Newest created first (ties: last created first). limit > 0 caps the
  // count, 0 means all, negative is INVALID_ARGUMENT.
  absl::StatusOr<std::vector<JobRecord>> ListJobs(int limit);
  // The same, only `owner`'s jobs.
  absl::StatusOr<std::vector<JobRecord>> ListJobsOf(const std::string& owner, int limit);
  // Jobs not in a terminal state (left QUEUED/WAITING_FOR_WORKERS/RUNNING,
  // e.g. by a crashed server), oldest first, so the server can resume or
  // fail them in submission order.
  absl::StatusOr<std::vector<JobRecord>> ListUnfinishedJobs();

  // Inserts the trial or replaces the one with the same trial_id.
  // FAILED_PRECONDITION if its job does not exist.
  absl::Status UpsertTrial(const TrialRecord& trial);
  // All or nothing, in one transaction: if any record is rejected, none is
  // written and the error names the offending trial.
  absl::Status UpsertTrials(const std::vector<TrialRecord>& trials);
  // UpdateJob of each job and UpsertTrials of the trials, in one
  // transaction: all or nothing, with the first error either would give.
  absl::Status WriteJobsAndTrials(const std::vector<JobRecord>& jobs,
                                  const std::vector<TrialRecord>& trials);
  // The job's trials by index (ties: by trial_id). An unknown job gives an
  // empty list.
  absl::StatusOr<std::vector<TrialRecord>> ListTrials(const std::string& job_id);
  // At most `limit` (> 0) of the job's trials with index >= `from_index`, by
  // index; PRUNED ones only with `include_pruned`. A page of a long list
  // reads only that page.
  absl::StatusOr<std::vector<TrialRecord>> ListTrialsFrom(const std::string& job_id, int from_index,
                                                          int limit, bool include_pruned);

  // The newest SUCCEEDED trials of jobs whose request's device_type is
  // `device_type` (a request without one counts as "cpu"), torchscript
  // models and proxy trials (whose metrics are extrapolated, not measured)
  // left out: the jobs newest created first, each job's trials last
  // proposed first, at most `limit` (> 0, else INVALID_ARGUMENT) in all.
  // Reads the jobs one at a time, so a long history costs what the answer
  // holds.
  absl::StatusOr<std::vector<MeasuredTrialRecord>> ListMeasuredTrials(
      const std::string& device_type, int limit);

  // Finishes a job atomically: replaces the job row (NOT_FOUND if missing)
  // and, if `best` is set, makes it the answer for best->signature when
  // nothing is stored for it or `replaces(*best, stored)` — read,
  // compared and written in one BEGIN IMMEDIATE transaction, so that of two
  // coordinators finishing jobs on one file the better answer stays. A
  // replacing answer keeps the stored one's created_at (a first answer
  // keeps its own). A `best` that does not replace the stored answer is not
  // an error.
  // INVALID_ARGUMENT for an empty best->signature, or a `best` without
  // `replaces`.
  // REQUIRES: IsTerminal(job.state), else INVALID_ARGUMENT.
  absl::Status FinishJob(const JobRecord& job, const std::optional<StrategyRecord>& best,
                         AnswerPrecedence replaces = nullptr);
  // nullopt when nothing is stored for `signature`.
  absl::StatusOr<std::optional<StrategyRecord>> GetStrategy(const std::string& signature);
  // Deletes the answers whose every SUCCEEDED trial of their strategy, in
  // the job that stored them, ran on worker `worker_id` (alone or in a
  // gang): what a worker found untrustworthy measured without a witness.
  // Returns their signatures.
  absl::StatusOr<std::vector<std::string>> WithdrawAnswersMeasuredOnlyOn(
      const std::string& worker_id);
  // The answers `filter` matches, most recently updated first; `limit` as
  // for ListJobs.
  absl::StatusOr<std::vector<StrategyRecord>> ListStrategies(const StrategyFilter& filter,
                                                             int limit);

  // `timer` (empty: none) hears how long each write (CreateJob, UpdateJob,
  // UpsertTrial(s), FinishJob) took, waiting for the store's lock included,
  // failed ones too; it is called on the writing thread after the write,
  // with no lock of the store held. Replaces the timer set before.
  void SetWriteTimer(std::function<void(absl::Duration)> timer);

  // Whether the store can take writes now, cheaply (two stat calls; for
  // /readyz): FAILED_PRECONDITION once its file (or WAL) was deleted or
  // replaced (FileWatch); RESOURCE_EXHAUSTED "store: the disk holding 'PATH'
  // is full (N KiB free)" while its file system has less than
  // kMinFreeDiskBytes free; OK otherwise (and for ":memory:").
  absl::Status Health();
  static constexpr int64_t kMinFreeDiskBytes = 8 << 20;

  // Caps the database file at about `max_bytes` (never below its current
  // size), so that writes past it fail as on a full disk. Free pages inside
  // the file (left by a dropped table) are used up first, by a table of
  // filler kept in the file, so that a write needing a new page fails even
  // then. For tests of what a failed write does.
  absl::Status LimitSizeForTesting(int64_t max_bytes);

 private:
  Store(std::string path, sqlite3* db, int schema_version, int migrations_applied);

  // Every write's transaction: FAILED_PRECONDITION once the file at path()
  // is no longer the one opened (store_integrity.h: FileWatch).
  absl::StatusOr<store_internal::Transaction> BeginWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Times one write method for the write timer, from its construction (before
  // the lock) to its destruction.
  class WriteTiming;
  absl::Status UpsertTrialsLocked(const std::vector<TrialRecord>& trials)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status UpdateJobLocked(const JobRecord& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<StrategyRecord>> GetStrategyLocked(const std::string& signature)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const int schema_version_;
  const int migrations_applied_;
  absl::Mutex mu_;
  store_internal::FileWatch watch_ ABSL_GUARDED_BY(mu_);
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);  // owned; closed by ~Store
  // Statements of db_, prepared once (destroyed after ~Store's
  // sqlite3_close_v2, which waits for them).
  const std::unique_ptr<store_internal::StatementCache> statements_ ABSL_PT_GUARDED_BY(mu_);
  absl::Mutex timer_mu_;
  std::function<void(absl::Duration)> write_timer_ ABSL_GUARDED_BY(timer_mu_);
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_STORE_STORE_H_

#include "server/store/store.h"

#include <sqlite3.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/store/store_columns.h"
#include "server/store/store_integrity.h"
#include "server/store/store_schema.h"
#include "server/store/store_sqlite.h"

namespace autoaccel {

using store_internal::Annotate;
using store_internal::DbPtr;
using store_internal::Exec;
using store_internal::kJobs;
using store_internal::kStrategies;
using store_internal::kTrials;
using store_internal::OnConflict;
using store_internal::Statement;
using store_internal::Transaction;

namespace {

// How long a write waits for another connection's lock before UNAVAILABLE.
constexpr int kBusyTimeoutMs = 5000;

// ---- Validation -------------------------------------------------------------

absl::Status ValidateJob(const JobRecord& job) {
  if (job.job_id.empty()) return absl::InvalidArgumentError("store: job.job_id must not be empty");
  if (job.trials_total < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store: job '", job.job_id, "': trials_total must be >= 0, got ", job.trials_total));
  }
  return absl::OkStatus();
}

absl::Status ValidateTrial(const TrialRecord& t) {
  if (t.trial_id.empty())
    return absl::InvalidArgumentError("store: trial.trial_id must not be empty");
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("store: trial '", t.trial_id, "': ", what));
  };
  if (t.job_id.empty()) return bad("job_id must not be empty");
  if (t.index < 0) return bad(absl::StrCat("index must be >= 0, got ", t.index));
  // A PRUNED trial never ran: attempt 0. Everything else ran at least once.
  const int min_attempt = t.status == TrialStatus::kPruned ? 0 : 1;
  if (t.attempt < min_attempt) {
    return bad(absl::StrCat("attempt must be >= ", min_attempt, ", got ", t.attempt));
  }
  return absl::OkStatus();
}

absl::Status ValidateLimit(int limit) {
  if (limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("store: limit must be >= 0 (0 means no limit), got ", limit));
  }
  return absl::OkStatus();
}

// SQLite reads a negative LIMIT as "no limit".
int64_t SqlLimit(int limit) { return limit == 0 ? -1 : limit; }

}  // namespace

// ---- Opening ----------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  const std::string where = absl::StrCat("database '", path, "': ");
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  DbPtr db(raw);  // sqlite3_open_v2 may hand back a handle even on failure
  if (rc != SQLITE_OK) {
    return Annotate(store_internal::SqliteError(db.get(), rc, "open"), where);
  }
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);

  // Reading the header first catches a file that is not a database (and a
  // newer schema) before anything is written to it.
  absl::StatusOr<int> version = store_internal::ReadUserVersion(db.get());
  if (!version.ok()) {
    return store_internal::DamagedIfCorrupt(path, Annotate(version.status(), where));
  }
  // Another application's file (its own application_id or tables) is
  // refused before anything is written to it; so is a damaged one.
  RETURN_IF_ERROR(store_internal::CheckOwnDatabase(db.get(), path, *version));
  if (*version > store_internal::kCurrentSchemaVersion)
    return store_internal::RefuseNewer(path, *version);
  RETURN_IF_ERROR(store_internal::CheckNotDamaged(db.get(), path));
  if (sqlite3_db_readonly(db.get(), "main") == 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("store: ", where, "opened read-only; the coordinator needs to write"));
  }

  // WAL lets readers (e.g. the sqlite3 CLI) look while the server writes.
  // An in-memory database answers "memory", which is fine.
  RETURN_IF_ERROR(Annotate(Exec(db.get(), "PRAGMA journal_mode = WAL", "enable WAL"), where));
  // In WAL mode, NORMAL syncs the log at checkpoints, not at every commit:
  // a crashed server loses nothing (the OS holds what it wrote), a power
  // loss may lose the last commits but never corrupts the file (SQLite's
  // recommended setting for WAL). FULL's sync per commit made a burst of 200
  // submissions take 0.6-1.3 s instead of 0.2 s (docs/BENCHMARKS.md).
  RETURN_IF_ERROR(
      Annotate(Exec(db.get(), "PRAGMA synchronous = NORMAL", "sync at checkpoints"), where));
  // Per connection, and a no-op inside a transaction: set it before any.
  RETURN_IF_ERROR(
      Annotate(Exec(db.get(), "PRAGMA foreign_keys = ON", "enable foreign keys"), where));

  ASSIGN_OR_RETURN(int applied, store_internal::Migrate(db.get(), path, where));
  return std::unique_ptr<Store>(
      new Store(path, db.release(), store_internal::kCurrentSchemaVersion, applied));
}

Store::Store(std::string path, sqlite3* db, int schema_version, int migrations_applied)
    : path_(std::move(path)),
      schema_version_(schema_version),
      migrations_applied_(migrations_applied),
      watch_(path_),
      db_(db),
      statements_(std::make_unique<store_internal::StatementCache>()) {}

Store::~Store() { sqlite3_close_v2(db_); }

class Store::WriteTiming {
 public:
  explicit WriteTiming(Store* store) : store_(store), start_(absl::Now()) {}
  ~WriteTiming() {
    absl::MutexLock lock(&store_->timer_mu_);
    if (store_->write_timer_) store_->write_timer_(absl::Now() - start_);
  }

 private:
  Store* const store_;
  const absl::Time start_;
};

void Store::SetWriteTimer(std::function<void(absl::Duration)> timer) {
  absl::MutexLock lock(&timer_mu_);
  write_timer_ = std::move(timer);
}

absl::Status Store::Health() {
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(watch_.Check());
  }
  if (path_.empty() || path_ == ":memory:") return absl::OkStatus();
  struct statvfs fs;
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &fs) != 0) return absl::OkStatus();
  const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  if (free_bytes < kMinFreeDiskBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("store: the disk holding '", path_,
                                                     "' is full (", free_bytes / 1024,
                                                     " KiB free): free space on it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Transaction> Store::BeginWriteLocked() {
  RETURN_IF_ERROR(watch_.Check());
  return Transaction::Begin(db_);
}

// ---- Jobs -------------------------------------------------------------------

absl::Status Store::CreateJob(const JobRecord& job) {
  RETURN_IF_ERROR(ValidateJob(job));
  const WriteTiming timing(this);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, BeginWriteLocked());
  ASSIGN_OR_RETURN(
      Statement stmt,
      statements_->Prepare(db_, InsertSql(kJobs, OnConflict::kDoNothing), "insert job"));
  BindRow(stmt, kJobs, job);
  ASSIGN_OR_RETURN(int changed, stmt.Run());
  if (changed == 0) {
    return absl::AlreadyExistsError(absl::StrCat("store: job '", job.job_id, "' already exists"));
  }
  return txn.Commit();
}

absl::Status Store::UpdateJobLocked(const JobRecord& job) {
  ASSIGN_OR_RETURN(Statement stmt, statements_->Prepare(db_, UpdateSql(kJobs), "update job"));
  BindRow(stmt, kJobs, job);
  ASSIGN_OR_RETURN(int changed, stmt.Run());
  if (changed == 0) {
    return absl::NotFoundError(absl::StrCat("store: job '", job.job_id, "' not found"));
  }
  return absl::OkStatus();
}

absl::Status Store::UpdateJob(const JobRecord& job) {
  RETURN_IF_ERROR(ValidateJob(job));
  const WriteTiming timing(this);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, BeginWriteLocked());
  RETURN_IF_ERROR(UpdateJobLocked(job));
  return txn.Commit();
}

absl::StatusOr<JobRecord> Store::GetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement stmt,
                   statements_->Prepare(db_, SelectSql(kJobs, "WHERE job_id = ?1"), "get job"));
  stmt.Bind(job_id);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("store: job '", job_id, "' not found"));
  return ReadRow(stmt, kJobs);
}

absl::StatusOr<std::vector<JobRecord>> Store::ListJobs(int limit) {
  RETURN_IF_ERROR(ValidateLimit(limit));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement stmt,
      statements_->Prepare(db_, SelectSql(kJobs, "ORDER BY created_at DESC, rowid DESC LIMIT ?1"),
                           "list jobs"));
  stmt.Bind(SqlLimit(limit));
  return ReadRows(stmt, kJobs);
}

absl::StatusOr<std::vector<JobRecord>> Store::ListJobsOf(const std::string& owner, int limit) {
  RETURN_IF_ERROR(ValidateLimit(limit));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement stmt,
                   statements_->Prepare(db_,
                                        SelectSql(kJobs,
                                                  "WHERE owner = ?1 ORDER BY created_at DESC, "
                                                  "rowid DESC LIMIT ?2"),
                                        "list a user's jobs"));
  stmt.Bind(owner).Bind(SqlLimit(limit));
  return ReadRows(stmt, kJobs);
}

absl::StatusOr<std::vector<JobRecord>> Store::ListUnfinishedJobs() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement stmt,
      Statement::Prepare(
          db_, SelectSql(kJobs, "WHERE state IN (?1, ?2, ?3) ORDER BY created_at ASC, rowid ASC"),
          "list unfinished jobs"));
  stmt.Bind(JobStateName(JobState::kQueued))
      .Bind(JobStateName(JobState::kWaitingForWorkers))
      .Bind(JobStateName(JobState::kRunning));
  return ReadRows(stmt, kJobs);
}

// ---- Trials -----------------------------------------------------------------

absl::Status Store::UpsertTrialsLocked(const std::vector<TrialRecord>& trials) {
  // Two statements prepared once and reused: a job's tens of thousands of
  // pruned candidates are written in one call.
  ASSIGN_OR_RETURN(Statement check,
                   statements_->Prepare(db_, "SELECT 1 FROM jobs WHERE job_id = ?1", "find job"));
  ASSIGN_OR_RETURN(
      Statement stmt,
      statements_->Prepare(db_, InsertSql(kTrials, OnConflict::kReplace), "upsert trial"));
  std::string checked_job;  // the last job found (a call's trials share one)
  for (const TrialRecord& t : trials) {
    RETURN_IF_ERROR(ValidateTrial(t));
    if (t.job_id != checked_job) {
      // Checked here, not left to the foreign key, so the error names the job.
      check.Reset();
      check.Bind(t.job_id);
      ASSIGN_OR_RETURN(bool found, check.Step());
      if (!found) {
        return absl::FailedPreconditionError(absl::StrCat("store: trial '", t.trial_id,
                                                          "' refers to job '", t.job_id,
                                                          "', which does not exist"));
      }
      checked_job = t.job_id;
    }
    stmt.Reset();
    BindRow(stmt, kTrials, t);
    RETURN_IF_ERROR(stmt.Run().status());
  }
  return absl::OkStatus();
}

absl::Status Store::UpsertTrial(const TrialRecord& trial) {
  const WriteTiming timing(this);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, BeginWriteLocked());
  RETURN_IF_ERROR(UpsertTrialsLocked({trial}));
  return txn.Commit();
}

absl::Status Store::UpsertTrials(const std::vector<TrialRecord>& trials) {
  const WriteTiming timing(this);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, BeginWriteLocked());
  RETURN_IF_ERROR(UpsertTrialsLocked(trials));
  return txn.Commit();
}

absl::Status Store::WriteJobsAndTrials(const std::vector<JobRecord>& jobs,
                                       const std::vector<TrialRecord>& trials) {
  for (const JobRecord& job : jobs) RETURN_IF_ERROR(ValidateJob(job));
  const WriteTiming timing(this);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, BeginWriteLocked());
  for (const JobRecord& job : jobs) RETURN_IF_ERROR(UpdateJobLocked(job));
  RETURN_IF_ERROR(UpsertTrialsLocked(trials));
  return txn.Commit();
}

absl::StatusOr<std::vector<TrialRecord>> Store::ListTrialsFrom(const std::string& job_id,
                                                               int from_index, int limit,
                                                               bool include_pruned) {
  if (limit <= 0) return absl::InvalidArgumentError("store: limit must be positive");
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement stmt,
                   statements_->Prepare(db_,
                                        SelectSql(kTrials,
                                                  "WHERE job_id = ?1 AND idx >= ?2 AND "
                                                  "(?3 OR status != 'PRUNED') "
                                                  "ORDER BY idx ASC, trial_id ASC LIMIT ?4"),
                                        "list trials from"));
  stmt.Bind(job_id).Bind(from_index).Bind(include_pruned ? 1 : 0).Bind(limit);
  return ReadRows(stmt, kTrials);
}

absl::StatusOr<std::vector<TrialRecord>> Store::ListTrials(const std::string& job_id) {
  return ListTrialsFrom(job_id, 0, std::numeric_limits<int>::max(), /*include_pruned=*/true);
}

absl::StatusOr<std::vector<MeasuredTrialRecord>> Store::ListMeasuredTrials(
    const std::string& device_type, int limit) {
  if (limit <= 0) return absl::InvalidArgumentError("store: limit must be positive");
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement jobs,
                   statements_->Prepare(
                       db_,
                       "SELECT job_id, model_json, "
                       "CASE WHEN model_json = '' THEN request_json ELSE '' END FROM jobs "
                       "WHERE COALESCE(json_extract(request_json, '$.device_type'), 'cpu') = ?1 "
                       "AND COALESCE(json_extract(request_json, '$.model.family'), '') "
                       "!= 'torchscript' ORDER BY created_at DESC, rowid DESC",
                       "list measured trials"));
  jobs.Bind(device_type);
  // Prepared once and reset per job: parsing it for each of thousands of
  // jobs was most of a burst of submissions' time.
  ASSIGN_OR_RETURN(Statement trials,
                   statements_->Prepare(db_,
                                        SelectSql(kTrials,
                                                  "WHERE job_id = ?1 AND status = 'SUCCEEDED' "
                                                  "AND proxy_json = '' "
                                                  "ORDER BY idx DESC, trial_id DESC LIMIT ?2"),
                                        "list measured trials"));
  std::vector<MeasuredTrialRecord> out;
  while (static_cast<int>(out.size()) < limit) {
    ASSIGN_OR_RETURN(bool row, jobs.Step());
    if (!row) break;
    const std::string job_id = jobs.Text(0), model_json = jobs.Text(1), request_json = jobs.Text(2);
    trials.Reset();
    trials.Bind(job_id).Bind(limit - static_cast<int>(out.size()));
    ASSIGN_OR_RETURN(std::vector<TrialRecord> records, ReadRows(trials, kTrials));
    for (TrialRecord& r : records) out.push_back({std::move(r), model_json, request_json});
  }
  return out;
}

// ---- Finishing a job and the strategy database ------------------------------

absl::Status Store::FinishJob(const JobRecord& job, const std::optional<StrategyRecord>& best,
                              AnswerPrecedence replaces) {
  RETURN_IF_ERROR(ValidateJob(job));
  if (best.has_value() && replaces == nullptr) {
    return absl::InvalidArgumentError(
        "store: FinishJob: an answer offered needs the precedence that weighs it");
  }
  if (!IsTerminal(job.state)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store: FinishJob('", job.job_id, "'): state must be SUCCEEDED, FAILED or CANCELLED, got ",
        JobStateName(job.state)));
  }
  const WriteTiming timing(this);
  absl::MutexLock lock(&mu_);
  // BEGIN IMMEDIATE holds the write lock from here to the commit, so the
  // stored answer read below is still the stored answer when it is replaced.
  ASSIGN_OR_RETURN(Transaction txn, BeginWriteLocked());
  RETURN_IF_ERROR(UpdateJobLocked(job));
  if (best.has_value()) {
    if (best->signature.empty()) {
      return absl::InvalidArgumentError("store: strategy.signature must not be empty");
    }
    ASSIGN_OR_RETURN(std::optional<StrategyRecord> stored, GetStrategyLocked(best->signature));
    if (!stored.has_value() || replaces(*best, *stored)) {
      StrategyRecord row = *best;
      if (stored.has_value() && stored->created_at != absl::InfinitePast()) {
        row.created_at = stored->created_at;
      }
      ASSIGN_OR_RETURN(Statement stmt,
                       statements_->Prepare(db_, InsertSql(kStrategies, OnConflict::kReplace),
                                            "upsert strategy"));
      BindRow(stmt, kStrategies, row);
      RETURN_IF_ERROR(stmt.Run().status());
    }
  }
  return txn.Commit();
}

absl::StatusOr<std::optional<StrategyRecord>> Store::GetStrategyLocked(
    const std::string& signature) {
  ASSIGN_OR_RETURN(
      Statement stmt,
      statements_->Prepare(db_, SelectSql(kStrategies, "WHERE signature = ?1"), "get strategy"));
  stmt.Bind(signature);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<StrategyRecord>();
  ASSIGN_OR_RETURN(StrategyRecord s, ReadRow(stmt, kStrategies));
  return std::optional<StrategyRecord>(std::move(s));
}

absl::StatusOr<std::optional<StrategyRecord>> Store::GetStrategy(const std::string& signature) {
  absl::MutexLock lock(&mu_);
  return GetStrategyLocked(signature);
}

absl::StatusOr<std::vector<std::string>> Store::WithdrawAnswersMeasuredOnlyOn(
    const std::string& worker_id) {
  const WriteTiming timing(this);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, BeginWriteLocked());
  std::vector<std::string> withdrawn;
  {
    // A trial's worker_id lists a gang's workers joined by commas.
    ASSIGN_OR_RETURN(Statement stmt, statements_->Prepare(db_, R"sql(
DELETE FROM strategies AS s
WHERE EXISTS (SELECT 1 FROM trials AS t
              WHERE t.job_id = s.job_id AND t.strategy_text = s.strategy_text
                AND t.status = 'SUCCEEDED')
  AND NOT EXISTS (SELECT 1 FROM trials AS t
                  WHERE t.job_id = s.job_id AND t.strategy_text = s.strategy_text
                    AND t.status = 'SUCCEEDED'
                    AND instr(',' || t.worker_id || ',', ',' || ?1 || ',') = 0)
RETURNING signature)sql",
                                                          "withdraw answers"));
    stmt.Bind(worker_id);
    for (;;) {
      ASSIGN_OR_RETURN(const bool row, stmt.Step());
      if (!row) break;
      withdrawn.push_back(stmt.Text(0));
    }
  }
  RETURN_IF_ERROR(txn.Commit());
  return withdrawn;
}

absl::StatusOr<std::vector<StrategyRecord>> Store::ListStrategies(const StrategyFilter& filter,
                                                                  int limit) {
  RETURN_IF_ERROR(ValidateLimit(limit));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement stmt,
                   statements_->Prepare(db_,
                                        SelectSql(kStrategies,
                                                  "WHERE (?1 = '' OR model_family = ?1 OR "
                                                  "(substr(?1, 1, 9) = 'launcher:' AND "
                                                  "substr(model_family, 1, length(?1) + 1) = "
                                                  "?1 || ':')) AND "
                                                  "(?2 = '' OR device_type = ?2) "
                                                  "ORDER BY updated_at DESC, rowid DESC LIMIT ?3"),
                                        "list strategies"));
  stmt.Bind(filter.model_family).Bind(filter.device_type).Bind(SqlLimit(limit));
  return ReadRows(stmt, kStrategies);
}

absl::Status Store::LimitSizeForTesting(int64_t max_bytes) {
  absl::MutexLock lock(&mu_);
  const int64_t page = 4096;  // SQLite's default page size, which Open keeps
  int64_t free_pages = 0;
  {
    ASSIGN_OR_RETURN(Statement count,
                     statements_->Prepare(db_, "PRAGMA freelist_count", "count free pages"));
    ASSIGN_OR_RETURN(bool row, count.Step());
    if (row) free_pages = count.Int64(0);
  }
  if (free_pages > 0) {
    const std::string fill = absl::StrCat(
        "CREATE TABLE IF NOT EXISTS filler_for_testing (b BLOB); "
        "INSERT INTO filler_for_testing VALUES (zeroblob(",
        free_pages * page, "))");
    RETURN_IF_ERROR(Exec(db_, fill.c_str(), "fill free pages"));
  }
  const std::string sql =
      absl::StrCat("PRAGMA max_page_count = ", std::max<int64_t>(1, max_bytes / page));
  return Exec(db_, sql.c_str(), "limit the database size");
}

}  // namespace autoaccel

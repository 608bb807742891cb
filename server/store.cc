#include "server/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace autoaccel {
namespace {

// How long a write waits for another connection's lock before UNAVAILABLE.
constexpr int kBusyTimeoutMs = 5000;

// Ordered, append-only: a released migration is never edited, a change is a
// new entry. Each runs once, inside the transaction that bumps user_version.
struct Migration {
  int version;
  const char* sql;
};
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE jobs (
  job_id         TEXT    NOT NULL PRIMARY KEY,
  state          TEXT    NOT NULL,
  status_message TEXT    NOT NULL,
  request_json   TEXT    NOT NULL,
  signature      TEXT    NOT NULL,
  created_at     INTEGER NOT NULL,
  started_at     INTEGER NOT NULL,
  finished_at    INTEGER NOT NULL,
  deadline       INTEGER NOT NULL,
  best_trial_id  TEXT    NOT NULL,
  trials_total   INTEGER NOT NULL
);
CREATE INDEX jobs_by_created_at ON jobs(created_at);
CREATE INDEX jobs_by_state ON jobs(state);
CREATE TABLE trials (
  trial_id      TEXT    NOT NULL PRIMARY KEY,
  job_id        TEXT    NOT NULL REFERENCES jobs(job_id) ON DELETE CASCADE,
  idx           INTEGER NOT NULL,
  attempt       INTEGER NOT NULL,
  strategy_text TEXT    NOT NULL,
  strategy_json TEXT    NOT NULL,
  status        TEXT    NOT NULL,
  reason        TEXT    NOT NULL,
  metrics_json  TEXT    NOT NULL,
  worker_id     TEXT    NOT NULL,
  started_at    INTEGER NOT NULL,
  finished_at   INTEGER NOT NULL
);
CREATE INDEX trials_by_job ON trials(job_id, idx);
CREATE TABLE strategies (
  signature         TEXT    NOT NULL PRIMARY KEY,
  model_family      TEXT    NOT NULL,
  model_config_json TEXT    NOT NULL,
  seq_len           INTEGER NOT NULL,
  global_batch_size INTEGER NOT NULL,
  hardware          TEXT    NOT NULL,
  strategy_text     TEXT    NOT NULL,
  strategy_json     TEXT    NOT NULL,
  metrics_json      TEXT    NOT NULL,
  job_id            TEXT    NOT NULL,
  updated_at        INTEGER NOT NULL
);
CREATE INDEX strategies_by_updated_at ON strategies(updated_at);
CREATE TABLE workers (
  worker_id     TEXT    NOT NULL PRIMARY KEY,
  address       TEXT    NOT NULL,
  devices_json  TEXT    NOT NULL,
  registered_at INTEGER NOT NULL,
  last_seen     INTEGER NOT NULL
);
)sql"},
    // Which search algorithm the job runs ("auto: bayes (...)").
    {2, R"sql(
ALTER TABLE jobs ADD COLUMN algorithm TEXT NOT NULL DEFAULT '';
)sql"},
    // Infrastructure failures: the reasons of a trial's attempts that failed
    // outside the strategy (JSON array), and whether its final failure was
    // one; the trial a confirmation trial measures again; whether a stored
    // answer was measured again.
    {3, R"sql(
ALTER TABLE trials ADD COLUMN failed_attempts TEXT NOT NULL DEFAULT '[]';
ALTER TABLE trials ADD COLUMN infrastructure INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN confirms TEXT NOT NULL DEFAULT '';
ALTER TABLE strategies ADD COLUMN confirmed INTEGER NOT NULL DEFAULT 0;
)sql"},
};
static_assert(kMigrations[std::size(kMigrations) - 1].version == Store::kCurrentSchemaVersion,
              "the last migration must produce kCurrentSchemaVersion");

// ---- SQLite errors -> absl codes ------------------------------------------

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

// `what` says what was being done; SQLite's message and code follow.
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return absl::Status(CodeFor(rc),
                      absl::StrCat("store: ", what, ": ", msg, " (sqlite code ", rc, ")"));
}

// ---- Small RAII wrappers ----------------------------------------------------

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;

// One prepared statement. Bind() fills parameters ?1, ?2, ... in call order;
// a bind error is kept and reported by the next Step().
class Statement {
 public:
  // `what` names the operation in error messages.
  static absl::StatusOr<Statement> Prepare(sqlite3* db, absl::string_view sql, const char* what) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db, rc, what);
    return Statement(db, stmt, what);
  }

  Statement(Statement&& other) noexcept
      : db_(other.db_),
        stmt_(std::exchange(other.stmt_, nullptr)),
        what_(other.what_),
        next_param_(other.next_param_),
        bind_rc_(other.bind_rc_) {}
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  Statement& Bind(absl::string_view text) {
    // SQLITE_TRANSIENT: SQLite copies, so temporaries are fine.
    return Check(sqlite3_bind_text64(stmt_, next_param_++, text.data(), text.size(),
                                     SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  Statement& Bind(int64_t value) { return Check(sqlite3_bind_int64(stmt_, next_param_++, value)); }
  Statement& Bind(int value) { return Bind(static_cast<int64_t>(value)); }
  // Microseconds since the epoch; the infinities map to the int64 extremes.
  Statement& Bind(absl::Time t) {
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

  // True while a row is available; false once done.
  absl::StatusOr<bool> Step() {
    if (bind_rc_ != SQLITE_OK) return SqliteError(db_, bind_rc_, what_);
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, rc, what_);
  }
  // Makes the statement ready to bind and run again (from ?1).
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    next_param_ = 1;
    bind_rc_ = SQLITE_OK;
  }
  // Runs a statement that returns no rows; gives the number of rows changed.
  absl::StatusOr<int> Run() {
    ASSIGN_OR_RETURN(bool row, Step());
    (void)row;
    return sqlite3_changes(db_);
  }

  std::string Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p == nullptr ? std::string() : std::string(p, sqlite3_column_bytes(stmt_, col));
  }
  int64_t Int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  int Int(int col) const { return sqlite3_column_int(stmt_, col); }
  absl::Time Time(int col) const {
    int64_t us = Int64(col);
    if (us == std::numeric_limits<int64_t>::min()) return absl::InfinitePast();
    if (us == std::numeric_limits<int64_t>::max()) return absl::InfiniteFuture();
    return absl::FromUnixMicros(us);
  }

 private:
  Statement(sqlite3* db, sqlite3_stmt* stmt, const char* what)
      : db_(db), stmt_(stmt), what_(what) {}
  Statement& Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  const char* what_;
  int next_param_ = 1;
  int bind_rc_ = SQLITE_OK;
};

// Runs SQL with no parameters and no result rows (several statements allowed).
absl::Status Exec(sqlite3* db, const char* sql, absl::string_view what) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, what);
  return absl::OkStatus();
}

// BEGIN IMMEDIATE takes the write lock up front (waiting on the busy
// timeout), so a transaction never fails half-way because another writer got
// in first. Rolled back on destruction unless committed.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(sqlite3* db) {
    RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE", "begin transaction"));
    return Transaction(db);
  }
  Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction() {
    // SQLite may already have rolled back by itself after some errors.
    if (db_ != nullptr && !sqlite3_get_autocommit(db_)) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  absl::Status Commit() {
    RETURN_IF_ERROR(Exec(db_, "COMMIT", "commit transaction"));
    db_ = nullptr;
    return absl::OkStatus();
  }

 private:
  explicit Transaction(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

absl::StatusOr<int> ReadUserVersion(sqlite3* db) {
  ASSIGN_OR_RETURN(Statement stmt,
                   Statement::Prepare(db, "PRAGMA user_version", "read schema version"));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::InternalError("store: PRAGMA user_version returned no row");
  return stmt.Int(0);
}

absl::Status RefuseNewer(const std::string& path, int version) {
  return absl::FailedPreconditionError(
      absl::StrCat("store: database '", path, "' has schema version ", version,
                   ", newer than this build supports (", Store::kCurrentSchemaVersion,
                   "); use a newer autoaccel-server or another database file"));
}

// "store: <prefix><message without its own 'store: '>".
absl::Status Annotate(const absl::Status& s, absl::string_view prefix) {
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat("store: ", prefix, absl::StripPrefix(s.message(), "store: ")));
}

// Applies the missing migrations in one transaction. Returns how many ran.
// Errors other than RefuseNewer are prefixed with `where`.
absl::StatusOr<int> Migrate(sqlite3* db, const std::string& path, absl::string_view where) {
  absl::StatusOr<Transaction> txn = Transaction::Begin(db);
  if (!txn.ok()) return Annotate(txn.status(), where);
  // Read again under the write lock: another process may have migrated.
  absl::StatusOr<int> version = ReadUserVersion(db);
  if (!version.ok()) return Annotate(version.status(), where);
  if (*version > Store::kCurrentSchemaVersion) return RefuseNewer(path, *version);
  int applied = 0;
  for (const Migration& m : kMigrations) {
    if (m.version <= *version) continue;
    RETURN_IF_ERROR(
        Annotate(Exec(db, m.sql, absl::StrCat("migrate to schema version ", m.version)), where));
    ++applied;
  }
  if (applied == 0) return 0;  // nothing written; the transaction rolls back harmlessly
  // PRAGMA takes no bound parameters; the value is our own constant.
  std::string set_version = absl::StrCat("PRAGMA user_version = ", Store::kCurrentSchemaVersion);
  RETURN_IF_ERROR(Annotate(Exec(db, set_version.c_str(), "write schema version"), where));
  RETURN_IF_ERROR(Annotate(txn->Commit(), where));
  return applied;
}

// ---- Row encoding -----------------------------------------------------------

std::string MetricsToText(const TrialMetrics& m) { return TrialMetricsToJson(m).dump(); }

absl::StatusOr<TrialMetrics> MetricsFromText(const std::string& text, absl::string_view where) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::DataLossError(absl::StrCat("store: ", where, ": metrics are not valid JSON"));
  }
  absl::StatusOr<TrialMetrics> m = TrialMetricsFromJson(j);
  if (!m.ok())
    return absl::DataLossError(absl::StrCat("store: ", where, ": ", m.status().message()));
  return m;
}

constexpr char kJobColumns[] =
    "job_id, state, status_message, request_json, signature, created_at, started_at, "
    "finished_at, deadline, best_trial_id, trials_total, algorithm";

// Binds every column of kJobColumns but the first, in order (?2 ... ?12),
// after the caller bound job_id as ?1.
void BindJobFields(Statement& stmt, const JobRecord& job) {
  stmt.Bind(JobStateName(job.state))
      .Bind(job.status_message)
      .Bind(job.request_json)
      .Bind(job.signature)
      .Bind(job.created_at)
      .Bind(job.started_at)
      .Bind(job.finished_at)
      .Bind(job.deadline)
      .Bind(job.best_trial_id)
      .Bind(job.trials_total)
      .Bind(job.algorithm);
}

absl::StatusOr<JobRecord> ReadJob(const Statement& stmt) {
  JobRecord job;
  job.job_id = stmt.Text(0);
  absl::StatusOr<JobState> state = ParseJobState(stmt.Text(1));
  if (!state.ok()) {
    return absl::DataLossError(
        absl::StrCat("store: job '", job.job_id, "': ", state.status().message()));
  }
  job.state = *state;
  job.status_message = stmt.Text(2);
  job.request_json = stmt.Text(3);
  job.signature = stmt.Text(4);
  job.created_at = stmt.Time(5);
  job.started_at = stmt.Time(6);
  job.finished_at = stmt.Time(7);
  job.deadline = stmt.Time(8);
  job.best_trial_id = stmt.Text(9);
  job.trials_total = stmt.Int(10);
  job.algorithm = stmt.Text(11);
  return job;
}

absl::StatusOr<std::vector<JobRecord>> ReadJobs(Statement& stmt) {
  std::vector<JobRecord> jobs;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(JobRecord job, ReadJob(stmt));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

constexpr char kTrialColumns[] =
    "trial_id, job_id, idx, attempt, strategy_text, strategy_json, status, reason, "
    "metrics_json, worker_id, started_at, finished_at, failed_attempts, infrastructure, confirms";

absl::StatusOr<TrialRecord> ReadTrial(const Statement& stmt) {
  TrialRecord t;
  t.trial_id = stmt.Text(0);
  t.job_id = stmt.Text(1);
  t.index = stmt.Int(2);
  t.attempt = stmt.Int(3);
  t.strategy_text = stmt.Text(4);
  t.strategy_json = stmt.Text(5);
  absl::StatusOr<TrialStatus> status = ParseTrialStatus(stmt.Text(6));
  if (!status.ok()) {
    return absl::DataLossError(
        absl::StrCat("store: trial '", t.trial_id, "': ", status.status().message()));
  }
  t.status = *status;
  t.reason = stmt.Text(7);
  ASSIGN_OR_RETURN(t.metrics,
                   MetricsFromText(stmt.Text(8), absl::StrCat("trial '", t.trial_id, "'")));
  t.worker_id = stmt.Text(9);
  t.started_at = stmt.Time(10);
  t.finished_at = stmt.Time(11);
  nlohmann::json failed = nlohmann::json::parse(stmt.Text(12), nullptr, false);
  if (!failed.is_array()) {
    return absl::DataLossError(
        absl::StrCat("store: trial '", t.trial_id, "': failed_attempts is not a JSON array"));
  }
  for (const nlohmann::json& reason : failed) {
    if (reason.is_string()) t.failed_attempts.push_back(reason.get<std::string>());
  }
  t.infrastructure = stmt.Int(13) != 0;
  t.confirms = stmt.Text(14);
  return t;
}

constexpr char kStrategyColumns[] =
    "signature, model_family, model_config_json, seq_len, global_batch_size, hardware, "
    "strategy_text, strategy_json, metrics_json, job_id, updated_at, confirmed";

absl::StatusOr<StrategyRecord> ReadStrategy(const Statement& stmt) {
  StrategyRecord s;
  s.signature = stmt.Text(0);
  s.model_family = stmt.Text(1);
  s.model_config_json = stmt.Text(2);
  s.seq_len = stmt.Int(3);
  s.global_batch_size = stmt.Int(4);
  s.hardware = stmt.Text(5);
  s.strategy_text = stmt.Text(6);
  s.strategy_json = stmt.Text(7);
  ASSIGN_OR_RETURN(s.metrics,
                   MetricsFromText(stmt.Text(8), absl::StrCat("strategy '", s.signature, "'")));
  s.job_id = stmt.Text(9);
  s.updated_at = stmt.Time(10);
  s.confirmed = stmt.Int(11) != 0;
  return s;
}

constexpr char kWorkerColumns[] = "worker_id, address, devices_json, registered_at, last_seen";

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

absl::Status UpsertStrategyLocked(sqlite3* db, const StrategyRecord& s) {
  if (s.signature.empty()) {
    return absl::InvalidArgumentError("store: strategy.signature must not be empty");
  }
  ASSIGN_OR_RETURN(Statement stmt,
                   Statement::Prepare(
                       db,
                       absl::StrCat("INSERT INTO strategies (", kStrategyColumns,
                                    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) "
                                    "ON CONFLICT(signature) DO UPDATE SET "
                                    "model_family = excluded.model_family, "
                                    "model_config_json = excluded.model_config_json, "
                                    "seq_len = excluded.seq_len, "
                                    "global_batch_size = excluded.global_batch_size, "
                                    "hardware = excluded.hardware, "
                                    "strategy_text = excluded.strategy_text, "
                                    "strategy_json = excluded.strategy_json, "
                                    "metrics_json = excluded.metrics_json, "
                                    "job_id = excluded.job_id, "
                                    "updated_at = excluded.updated_at, "
                                    "confirmed = excluded.confirmed"),
                       "upsert strategy"));
  stmt.Bind(s.signature)
      .Bind(s.model_family)
      .Bind(s.model_config_json)
      .Bind(s.seq_len)
      .Bind(s.global_batch_size)
      .Bind(s.hardware)
      .Bind(s.strategy_text)
      .Bind(s.strategy_json)
      .Bind(MetricsToText(s.metrics))
      .Bind(s.job_id)
      .Bind(s.updated_at)
      .Bind(s.confirmed ? 1 : 0);
  return stmt.Run().status();
}

}  // namespace

// ---- Job states -------------------------------------------------------------

namespace {
constexpr std::pair<JobState, absl::string_view> kJobStates[] = {
    {JobState::kQueued, "QUEUED"},   {JobState::kWaitingForWorkers, "WAITING_FOR_WORKERS"},
    {JobState::kRunning, "RUNNING"}, {JobState::kSucceeded, "SUCCEEDED"},
    {JobState::kFailed, "FAILED"},   {JobState::kCancelled, "CANCELLED"},
};
}  // namespace

absl::string_view JobStateName(JobState s) { return EnumName(kJobStates, s, "UNKNOWN"); }

absl::StatusOr<JobState> ParseJobState(absl::string_view name) {
  if (std::optional<JobState> s = EnumFromName(kJobStates, name)) return *s;
  return absl::InvalidArgumentError(absl::StrCat("job state: unknown value '", name,
                                                 "' (allowed: ", EnumNameList(kJobStates), ")"));
}

bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

// ---- Store ------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  const std::string where = absl::StrCat("database '", path, "': ");
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  DbPtr db(raw);  // sqlite3_open_v2 may hand back a handle even on failure
  if (rc != SQLITE_OK) {
    return Annotate(SqliteError(db.get(), rc, "open"), where);
  }
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);

  // Reading the header first catches a file that is not a database (and a
  // newer schema) before anything is written to it.
  absl::StatusOr<int> version = ReadUserVersion(db.get());
  if (!version.ok()) return Annotate(version.status(), where);
  if (*version > kCurrentSchemaVersion) return RefuseNewer(path, *version);
  if (sqlite3_db_readonly(db.get(), "main") == 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("store: ", where, "opened read-only; the coordinator needs to write"));
  }

  // WAL lets readers (e.g. the sqlite3 CLI) look while the server writes.
  // An in-memory database answers "memory", which is fine.
  RETURN_IF_ERROR(Annotate(Exec(db.get(), "PRAGMA journal_mode = WAL", "enable WAL"), where));
  // Per connection, and a no-op inside a transaction: set it before any.
  RETURN_IF_ERROR(
      Annotate(Exec(db.get(), "PRAGMA foreign_keys = ON", "enable foreign keys"), where));

  ASSIGN_OR_RETURN(int applied, Migrate(db.get(), path, where));
  return std::unique_ptr<Store>(new Store(path, db.release(), kCurrentSchemaVersion, applied));
}

Store::Store(std::string path, sqlite3* db, int schema_version, int migrations_applied)
    : path_(std::move(path)),
      schema_version_(schema_version),
      migrations_applied_(migrations_applied),
      db_(db) {}

Store::~Store() { sqlite3_close_v2(db_); }

absl::Status Store::CreateJob(const JobRecord& job) {
  RETURN_IF_ERROR(ValidateJob(job));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_));
  ASSIGN_OR_RETURN(Statement stmt,
                   Statement::Prepare(db_,
                                      absl::StrCat("INSERT INTO jobs (", kJobColumns,
                                                   ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                                                   "?10, ?11, ?12) ON CONFLICT(job_id) DO NOTHING"),
                                      "insert job"));
  stmt.Bind(job.job_id);
  BindJobFields(stmt, job);
  ASSIGN_OR_RETURN(int changed, stmt.Run());
  if (changed == 0) {
    return absl::AlreadyExistsError(absl::StrCat("store: job '", job.job_id, "' already exists"));
  }
  return txn.Commit();
}

absl::Status Store::UpdateJobLocked(const JobRecord& job) {
  ASSIGN_OR_RETURN(Statement stmt,
                   Statement::Prepare(db_,
                                      "UPDATE jobs SET state = ?2, status_message = ?3, "
                                      "request_json = ?4, signature = ?5, created_at = ?6, "
                                      "started_at = ?7, finished_at = ?8, deadline = ?9, "
                                      "best_trial_id = ?10, trials_total = ?11, algorithm = ?12 "
                                      "WHERE job_id = ?1",
                                      "update job"));
  stmt.Bind(job.job_id);
  BindJobFields(stmt, job);
  ASSIGN_OR_RETURN(int changed, stmt.Run());
  if (changed == 0) {
    return absl::NotFoundError(absl::StrCat("store: job '", job.job_id, "' not found"));
  }
  return absl::OkStatus();
}

absl::Status Store::UpdateJob(const JobRecord& job) {
  RETURN_IF_ERROR(ValidateJob(job));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_));
  RETURN_IF_ERROR(UpdateJobLocked(job));
  return txn.Commit();
}

absl::StatusOr<JobRecord> Store::GetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement stmt,
      Statement::Prepare(db_, absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE job_id = ?1"),
                         "get job"));
  stmt.Bind(job_id);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("store: job '", job_id, "' not found"));
  return ReadJob(stmt);
}

absl::StatusOr<std::vector<JobRecord>> Store::ListJobs(int limit) {
  RETURN_IF_ERROR(ValidateLimit(limit));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement stmt,
                   Statement::Prepare(db_,
                                      absl::StrCat("SELECT ", kJobColumns,
                                                   " FROM jobs ORDER BY created_at DESC, "
                                                   "rowid DESC LIMIT ?1"),
                                      "list jobs"));
  stmt.Bind(SqlLimit(limit));
  return ReadJobs(stmt);
}

absl::StatusOr<std::vector<JobRecord>> Store::ListUnfinishedJobs() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement stmt,
                   Statement::Prepare(db_,
                                      absl::StrCat("SELECT ", kJobColumns,
                                                   " FROM jobs WHERE state IN (?1, ?2, ?3) "
                                                   "ORDER BY created_at ASC, rowid ASC"),
                                      "list unfinished jobs"));
  stmt.Bind(JobStateName(JobState::kQueued))
      .Bind(JobStateName(JobState::kWaitingForWorkers))
      .Bind(JobStateName(JobState::kRunning));
  return ReadJobs(stmt);
}

absl::Status Store::UpsertTrialsLocked(const std::vector<TrialRecord>& trials) {
  // Two statements prepared once and reused: a job's tens of thousands of
  // pruned candidates are written in one call.
  ASSIGN_OR_RETURN(Statement check,
                   Statement::Prepare(db_, "SELECT 1 FROM jobs WHERE job_id = ?1", "find job"));
  ASSIGN_OR_RETURN(
      Statement stmt,
      Statement::Prepare(
          db_,
          absl::StrCat(
              "INSERT INTO trials (", kTrialColumns,
              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) "
              "ON CONFLICT(trial_id) DO UPDATE SET "
              "job_id = excluded.job_id, idx = excluded.idx, "
              "attempt = excluded.attempt, "
              "strategy_text = excluded.strategy_text, "
              "strategy_json = excluded.strategy_json, "
              "status = excluded.status, reason = excluded.reason, "
              "metrics_json = excluded.metrics_json, "
              "worker_id = excluded.worker_id, "
              "started_at = excluded.started_at, "
              "finished_at = excluded.finished_at, "
              "failed_attempts = excluded.failed_attempts, "
              "infrastructure = excluded.infrastructure, "
              "confirms = excluded.confirms"),
          "upsert trial"));
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
    stmt.Bind(t.trial_id)
        .Bind(t.job_id)
        .Bind(t.index)
        .Bind(t.attempt)
        .Bind(t.strategy_text)
        .Bind(t.strategy_json)
        .Bind(TrialStatusName(t.status))
        .Bind(t.reason)
        .Bind(MetricsToText(t.metrics))
        .Bind(t.worker_id)
        .Bind(t.started_at)
        .Bind(t.finished_at)
        .Bind(nlohmann::json(t.failed_attempts).dump())
        .Bind(t.infrastructure ? 1 : 0)
        .Bind(t.confirms);
    RETURN_IF_ERROR(stmt.Run().status());
  }
  return absl::OkStatus();
}

absl::Status Store::UpsertTrial(const TrialRecord& trial) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_));
  RETURN_IF_ERROR(UpsertTrialsLocked({trial}));
  return txn.Commit();
}

absl::Status Store::UpsertTrials(const std::vector<TrialRecord>& trials) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_));
  RETURN_IF_ERROR(UpsertTrialsLocked(trials));
  return txn.Commit();
}

absl::StatusOr<std::vector<TrialRecord>> Store::ListTrialsFrom(const std::string& job_id,
                                                               int from_index, int limit,
                                                               bool include_pruned) {
  if (limit <= 0) return absl::InvalidArgumentError("store: limit must be positive");
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement stmt,
      Statement::Prepare(db_,
                         absl::StrCat("SELECT ", kTrialColumns,
                                      " FROM trials WHERE job_id = ?1 AND idx >= ?2 AND "
                                      "(?3 OR status != 'PRUNED') "
                                      "ORDER BY idx ASC, trial_id ASC LIMIT ?4"),
                         "list trials from"));
  stmt.Bind(job_id).Bind(from_index).Bind(include_pruned ? 1 : 0).Bind(limit);
  std::vector<TrialRecord> trials;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(TrialRecord t, ReadTrial(stmt));
    trials.push_back(std::move(t));
  }
  return trials;
}

absl::StatusOr<std::vector<TrialRecord>> Store::ListTrials(const std::string& job_id) {
  return ListTrialsFrom(job_id, 0, std::numeric_limits<int>::max(), /*include_pruned=*/true);
}

absl::Status Store::FinishJob(const JobRecord& job, const std::optional<StrategyRecord>& best) {
  RETURN_IF_ERROR(ValidateJob(job));
  if (!IsTerminal(job.state)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store: FinishJob('", job.job_id, "'): state must be SUCCEEDED, FAILED or CANCELLED, got ",
        JobStateName(job.state)));
  }
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_));
  RETURN_IF_ERROR(UpdateJobLocked(job));
  if (best.has_value()) RETURN_IF_ERROR(UpsertStrategyLocked(db_, *best));
  return txn.Commit();
}

absl::StatusOr<std::optional<StrategyRecord>> Store::GetStrategy(const std::string& signature) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement stmt,
      Statement::Prepare(
          db_, absl::StrCat("SELECT ", kStrategyColumns, " FROM strategies WHERE signature = ?1"),
          "get strategy"));
  stmt.Bind(signature);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<StrategyRecord>();
  ASSIGN_OR_RETURN(StrategyRecord s, ReadStrategy(stmt));
  return std::optional<StrategyRecord>(std::move(s));
}

absl::StatusOr<std::vector<StrategyRecord>> Store::ListStrategies(int limit) {
  RETURN_IF_ERROR(ValidateLimit(limit));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement stmt,
                   Statement::Prepare(db_,
                                      absl::StrCat("SELECT ", kStrategyColumns,
                                                   " FROM strategies ORDER BY updated_at DESC, "
                                                   "rowid DESC LIMIT ?1"),
                                      "list strategies"));
  stmt.Bind(SqlLimit(limit));
  std::vector<StrategyRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(StrategyRecord s, ReadStrategy(stmt));
    out.push_back(std::move(s));
  }
  return out;
}

absl::Status Store::LimitSizeForTesting(int64_t max_bytes) {
  absl::MutexLock lock(&mu_);
  const int64_t page = 4096;  // SQLite's default page size, which Open keeps
  const std::string sql =
      absl::StrCat("PRAGMA max_page_count = ", std::max<int64_t>(1, max_bytes / page));
  return Exec(db_, sql.c_str(), "limit the database size");
}

absl::Status Store::UpsertWorker(const WorkerRecord& w) {
  if (w.worker_id.empty()) {
    return absl::InvalidArgumentError("store: worker.worker_id must not be empty");
  }
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_));
  ASSIGN_OR_RETURN(Statement stmt,
                   Statement::Prepare(db_,
                                      absl::StrCat("INSERT INTO workers (", kWorkerColumns,
                                                   ") VALUES (?1, ?2, ?3, ?4, ?5) "
                                                   "ON CONFLICT(worker_id) DO UPDATE SET "
                                                   "address = excluded.address, "
                                                   "devices_json = excluded.devices_json, "
                                                   "registered_at = excluded.registered_at, "
                                                   "last_seen = excluded.last_seen"),
                                      "upsert worker"));
  stmt.Bind(w.worker_id)
      .Bind(w.address)
      .Bind(w.devices_json)
      .Bind(w.registered_at)
      .Bind(w.last_seen);
  RETURN_IF_ERROR(stmt.Run().status());
  return txn.Commit();
}

absl::StatusOr<std::vector<WorkerRecord>> Store::ListWorkers() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement stmt,
      Statement::Prepare(
          db_, absl::StrCat("SELECT ", kWorkerColumns, " FROM workers ORDER BY worker_id"),
          "list workers"));
  std::vector<WorkerRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    WorkerRecord w;
    w.worker_id = stmt.Text(0);
    w.address = stmt.Text(1);
    w.devices_json = stmt.Text(2);
    w.registered_at = stmt.Time(3);
    w.last_seen = stmt.Time(4);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace autoaccel

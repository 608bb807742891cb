#include "server/store/store_schema.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/store/store.h"
#include "server/store/store_integrity.h"
#include "server/store/store_sqlite.h"

namespace autoaccel::store_internal {
namespace {

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
    // The workers table was written on every registration and never read:
    // the coordinator keeps its worker registry in memory (workers register
    // again after a restart).
    {4, R"sql(
DROP TABLE IF EXISTS workers;
)sql"},
    // The strategy database's provenance: the engine version that measured
    // each answer (0: stored before versions were recorded, older than
    // every version), when the signature got its first answer (older rows:
    // when their answer was stored), and the device type, for listing by it
    // (older rows: read from their hardware, "cpu x1"). A job answered from
    // the database keeps the answer that answered it.
    {5, R"sql(
ALTER TABLE strategies ADD COLUMN engine_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE strategies ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0;
UPDATE strategies SET created_at = updated_at;
ALTER TABLE strategies ADD COLUMN device_type TEXT NOT NULL DEFAULT '';
UPDATE strategies SET device_type = substr(hardware, 1, instr(hardware, ' x') - 1)
  WHERE instr(hardware, ' x') > 1;
ALTER TABLE jobs ADD COLUMN answered_from TEXT NOT NULL DEFAULT '';
)sql"},
    // What the job's cost model predicted for each proposed trial
    // (TrialPredictionToJson; '' for none).
    {6, R"sql(
ALTER TABLE trials ADD COLUMN predicted_json TEXT NOT NULL DEFAULT '';
)sql"},
    // A launcher job's launcher as the workers defined it ('' for the
    // engine's jobs).
    {7, R"sql(
ALTER TABLE jobs ADD COLUMN launcher_json TEXT NOT NULL DEFAULT '';
)sql"},
    // The user who submitted each job ('' for jobs of a coordinator that
    // authenticates no users, and for every older job), and listing a
    // user's jobs by it.
    {8, R"sql(
ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_by_owner ON jobs(owner, created_at);
)sql"},
    // The steps the searcher asked each trial to measure (0: the job's), so
    // that a job resumed after a restart measures its trials as proposed.
    {9, R"sql(
ALTER TABLE trials ADD COLUMN measured_steps INTEGER NOT NULL DEFAULT 0;
)sql"},
    // How sure the job that stored each answer was of it (AnswerCertainty as
    // JSON; '' for older answers: not recorded).
    {10, R"sql(
ALTER TABLE strategies ADD COLUMN certainty_json TEXT NOT NULL DEFAULT '';
)sql"},
    // The model an engine job measured, validated at admission (JSON; ''
    // for launcher jobs, torchscript models and older jobs: warm start reads
    // their requests).
    {11, R"sql(
ALTER TABLE jobs ADD COLUMN model_json TEXT NOT NULL DEFAULT '';
)sql"},
    // A proxy trial's own measurement (ProxyMeasurementToJson; '' for a
    // trial measured at full size), and a proxy job's full-size checks.
    {12, R"sql(
ALTER TABLE trials ADD COLUMN proxy_json TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN full_size INTEGER NOT NULL DEFAULT 0;
)sql"},
};
static_assert(kMigrations[std::size(kMigrations) - 1].version == kCurrentSchemaVersion,
              "the last migration must produce kCurrentSchemaVersion");

}  // namespace

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
                   ", newer than this build supports (", kCurrentSchemaVersion,
                   "); use a newer autoaccel-server or another database file"));
}

absl::StatusOr<int> Migrate(sqlite3* db, const std::string& path, absl::string_view where) {
  absl::StatusOr<Transaction> txn = Transaction::Begin(db);
  if (!txn.ok()) return Annotate(txn.status(), where);
  // Read again under the write lock: another process may have migrated.
  absl::StatusOr<int> version = ReadUserVersion(db);
  if (!version.ok()) return Annotate(version.status(), where);
  if (*version > kCurrentSchemaVersion) return RefuseNewer(path, *version);
  int applied = 0;
  for (const Migration& m : kMigrations) {
    if (m.version <= *version) continue;
    RETURN_IF_ERROR(
        Annotate(Exec(db, m.sql, absl::StrCat("migrate to schema version ", m.version)), where));
    ++applied;
  }
  if (applied == 0) return 0;  // nothing written; the transaction rolls back harmlessly
  // PRAGMA takes no bound parameters; the value is our own constant.
  std::string set_version = absl::StrCat("PRAGMA user_version = ", kCurrentSchemaVersion);
  RETURN_IF_ERROR(Annotate(Exec(db, set_version.c_str(), "write schema version"), where));
  // Marks the file as autoaccel's for CheckOwnDatabase (store_integrity.h).
  const std::string set_id = absl::StrCat("PRAGMA application_id = ", kApplicationId);
  RETURN_IF_ERROR(Annotate(Exec(db, set_id.c_str(), "write application id"), where));
  RETURN_IF_ERROR(Annotate(txn->Commit(), where));
  return applied;
}

}  // namespace autoaccel::store_internal

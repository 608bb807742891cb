#include "server/store/store.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/database_answer.h"
#include "server/store/store_schema.h"  // kCurrentSchemaVersion
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "store_test.XXXXXX").string();
    char* made = mkdtemp(tmpl.data());
    if (made == nullptr) ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::unique_ptr<Store> OpenOrDie(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

// Runs one SQL statement on the file directly, bypassing Store, and returns
// the first column of the first row as text ("" if none).
std::string RawSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string result;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    ADD_FAILURE() << "sqlite3_open " << path << ": " << sqlite3_errmsg(db);
  } else {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
    } else {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) {
        const unsigned char* text = sqlite3_column_text(stmt, 0);
        if (text != nullptr) result = reinterpret_cast<const char*>(text);
      } else if (rc != SQLITE_DONE) {
        ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
      }
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return result;
}

// Field-by-field views, so a mismatch prints which field differs.
auto Tie(const TrialMetrics& m) {
  return std::make_tuple(m.measured_steps, m.step_time_median_s, m.step_time_min_s,
                         m.step_time_max_s, m.tokens_per_second, m.samples_per_second,
                         m.achieved_tflops, m.peak_memory_bytes, m.peak_rss_bytes, m.final_loss);
}
auto Tie(const JobRecord& j) {
  return std::make_tuple(j.job_id, JobStateName(j.state), j.status_message, j.request_json,
                         j.signature, j.created_at, j.started_at, j.finished_at, j.deadline,
                         j.best_trial_id, j.trials_total, j.answered_from, j.launcher_json);
}
auto Tie(const TrialRecord& t) {
  return std::tuple_cat(
      std::make_tuple(t.trial_id, t.job_id, t.index, t.attempt, t.strategy_text, t.strategy_json,
                      TrialStatusName(t.status), t.reason, t.worker_id, t.started_at, t.finished_at,
                      t.failed_attempts, t.infrastructure, t.confirms, t.predicted,
                      t.measured_steps),
      Tie(t.metrics));
}
auto Tie(const StrategyRecord& s) {
  return std::tuple_cat(
      std::make_tuple(s.signature, s.model_family, s.model_config_json, s.seq_len,
                      s.global_batch_size, s.hardware, s.strategy_text, s.strategy_json, s.job_id,
                      s.updated_at, s.confirmed, s.device_type, s.engine_version, s.created_at),
      std::make_tuple(s.certainty.certainty, s.certainty.figure, s.certainty.interval_low,
                      s.certainty.interval_high, s.certainty.spread, s.certainty.measurements,
                      s.certainty.tied_with),
      Tie(s.metrics));
}

// Whole microseconds: the store's precision.
absl::Time T(int64_t us) { return absl::FromUnixMicros(us); }
constexpr int64_t kBase = 1'700'000'000'123'456;  // Nov 2023, with a microsecond part

TrialMetrics SomeMetrics(double scale) {
  TrialMetrics m;
  m.measured_steps = 7;
  m.step_time_median_s = 0.1234567890123 * scale;
  m.step_time_min_s = 0.1 * scale;
  m.step_time_max_s = 0.3333333333333333 * scale;
  m.tokens_per_second = 12345.678 / scale;
  m.samples_per_second = 6.02e23;
  m.achieved_tflops = 1e-7;
  m.peak_memory_bytes = int64_t{81} << 30;   // beyond 32 bits
  m.peak_rss_bytes = 9'007'199'254'740'993;  // not representable as a double
  m.final_loss = -2.5;
  return m;
}

JobRecord MakeJob(const std::string& id, int64_t created_us, JobState state = JobState::kQueued) {
  JobRecord job;
  job.job_id = id;
  job.state = state;
  job.created_at = T(created_us);
  return job;
}

TrialRecord MakeTrial(const std::string& job_id, int index) {
  TrialRecord t;
  t.job_id = job_id;
  t.index = index;
  t.trial_id = absl::StrCat(job_id, "-t", index);
  t.strategy_text = absl::StrCat("mbs=", index + 1);
  t.strategy_json = absl::StrCat(R"({"micro_batch_size":)", index + 1, "}");
  return t;
}

StrategyRecord MakeStrategy(const std::string& signature, const std::string& job_id,
                            const std::string& text) {
  StrategyRecord s;
  s.signature = signature;
  s.model_family = "gpt2";
  s.model_config_json = R"({"n_layer":2})";
  s.seq_len = 128;
  s.global_batch_size = 16;
  s.hardware = "cpu x1";
  s.device_type = "cpu";
  s.strategy_text = text;
  s.strategy_json = absl::StrCat(R"({"text":")", text, "\"}");
  s.metrics = SomeMetrics(1.0);
  s.job_id = job_id;
  s.updated_at = T(kBase + 99);
  return s;
}

TEST(StoreTest, EverythingSurvivesCloseAndReopen) {
  TempDir dir;
  const std::string path = dir.File("state.db");

  JobRecord job = MakeJob("job-1", kBase, JobState::kRunning);
  job.status_message = "3/40 trials done — ünïcode";
  job.request_json = R"({"model":"gpt2","world_size":1,"quote":"it's"})";
  job.signature = "gpt2|cfg=abc|cpu x1";
  job.started_at = T(kBase + 1);
  job.deadline = T(kBase + 600'000'000);
  job.best_trial_id = "job-1-t1";
  job.trials_total = 40;

  JobRecord fresh = MakeJob("job-2", kBase + 5);  // infinities left at their defaults

  TrialRecord t0 = MakeTrial("job-1", 0);
  t0.status = TrialStatus::kSucceeded;
  t0.metrics = SomeMetrics(1.0);
  t0.worker_id = "w1,w2";
  t0.predicted = TrialPrediction{0.1234567890123, int64_t{81} << 30, 4321.0987654321};
  t0.measured_steps = 3;  // halving's early rung
  t0.started_at = T(kBase + 10);
  t0.finished_at = T(kBase + 20);
  TrialRecord t1 = MakeTrial("job-1", 1);
  t1.attempt = 2;
  t1.status = TrialStatus::kOom;
  t1.reason = "CUDA out of memory; tried to allocate 2 GiB";
  t1.metrics = SomeMetrics(3.0);
  t1.failed_attempts = {"attempt 1: rank 0 on worker w2: rendezvous at h:29500 failed"};
  TrialRecord t2 = MakeTrial("job-1", 2);
  t2.status = TrialStatus::kFailed;
  t2.infrastructure = true;
  t2.failed_attempts = {"attempt 1: worker w1 lost", "attempt 2: worker w2 lost"};
  t2.confirms = "job-1-t0";

  JobRecord done = job;
  done.state = JobState::kSucceeded;
  done.finished_at = T(kBase + 30);
  done.status_message = "done";
  StrategyRecord best = MakeStrategy(job.signature, job.job_id, "dp=1 mbs=1");
  best.confirmed = true;
  best.engine_version = 3;
  best.created_at = T(kBase + 25);
  best.certainty = {"tie", 1234.5, 1200.25, 1268.75, 0.03, 3, {"mbs=2,ga=1", "mbs=4,ga=1"}};
  fresh.answered_from = R"({"jobId":"job-0","engineVersion":"3"})";
  fresh.launcher_json = R"({"name":"hf","format":"hf-trainer"})";

  {
    std::unique_ptr<Store> store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->CreateJob(job));
    ASSERT_OK(store->CreateJob(fresh));
    ASSERT_OK(store->UpsertTrials({t1, t0, t2}));
    ASSERT_OK(store->FinishJob(done, best, &ReplacesStoredAnswer));
  }

  std::unique_ptr<Store> store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);

  absl::StatusOr<JobRecord> got = store->GetJob("job-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Tie(*got), Tie(done));

  absl::StatusOr<JobRecord> got_fresh = store->GetJob("job-2");
  ASSERT_TRUE(got_fresh.ok()) << got_fresh.status();
  EXPECT_EQ(Tie(*got_fresh), Tie(fresh));
  EXPECT_EQ(got_fresh->started_at, absl::InfinitePast());
  EXPECT_EQ(got_fresh->finished_at, absl::InfinitePast());
  EXPECT_EQ(got_fresh->deadline, absl::InfiniteFuture());

  absl::StatusOr<std::vector<TrialRecord>> trials = store->ListTrials("job-1");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 3u);
  EXPECT_EQ(Tie((*trials)[0]), Tie(t0));
  EXPECT_EQ(Tie((*trials)[1]), Tie(t1));
  EXPECT_EQ(Tie((*trials)[2]), Tie(t2));

  absl::StatusOr<std::optional<StrategyRecord>> strategy = store->GetStrategy(job.signature);
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  ASSERT_TRUE(strategy->has_value());
  EXPECT_EQ(Tie(**strategy), Tie(best));
}

TEST(StoreTest, TimesBeforeTheEpochAndSubMicrosecondsAreHandled) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("t.db"));
  ASSERT_NE(store, nullptr);
  JobRecord job = MakeJob("old", -1'234'567);
  job.deadline = T(kBase) + absl::Nanoseconds(999);  // finer than the store keeps
  ASSERT_OK(store->CreateJob(job));
  absl::StatusOr<JobRecord> got = store->GetJob("old");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->created_at, T(-1'234'567));
  EXPECT_EQ(got->deadline, T(kBase));
}

// Drops what schemas 5 (strategy provenance), 6 (trial predictions), 7
// (a job's launcher), 8 (a job's owner), 9 (a trial's measured steps), 10
// (an answer's certainty), 11 (a job's measured model) and 12 (a proxy
// trial's measurement) added, as a file written before them (the caller
// sets user_version).
void BackToSchemaFour(const std::string& path) {
  RawSql(path, "ALTER TABLE trials DROP COLUMN proxy_json");
  RawSql(path, "ALTER TABLE trials DROP COLUMN full_size");
  RawSql(path, "ALTER TABLE jobs DROP COLUMN model_json");
  RawSql(path, "ALTER TABLE strategies DROP COLUMN certainty_json");
  RawSql(path, "ALTER TABLE trials DROP COLUMN measured_steps");
  RawSql(path, "DROP INDEX jobs_by_owner");
  RawSql(path, "ALTER TABLE jobs DROP COLUMN owner");
  for (const char* column : {"engine_version", "created_at", "device_type"}) {
    RawSql(path, absl::StrCat("ALTER TABLE strategies DROP COLUMN ", column));
  }
  RawSql(path, "ALTER TABLE jobs DROP COLUMN answered_from");
  RawSql(path, "ALTER TABLE trials DROP COLUMN predicted_json");
  RawSql(path, "ALTER TABLE jobs DROP COLUMN launcher_json");
}

TEST(StoreTest, MigratesANewFileAndDoesNotMigrateTwice) {
  TempDir dir;
  const std::string path = dir.File("new.db");
  ASSERT_FALSE(std::filesystem::exists(path));
  {
    std::unique_ptr<Store> store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->schema_version(), store_internal::kCurrentSchemaVersion);
    EXPECT_EQ(store->migrations_applied(), store_internal::kCurrentSchemaVersion);
    ASSERT_OK(store->CreateJob(MakeJob("kept", kBase)));
  }
  EXPECT_EQ(RawSql(path, "PRAGMA user_version"),
            std::to_string(store_internal::kCurrentSchemaVersion));
  EXPECT_EQ(RawSql(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawSql(path,
                   "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
                   "('jobs', 'trials', 'strategies')"),
            "3");
  EXPECT_EQ(RawSql(path, "SELECT count(*) FROM sqlite_schema WHERE name = 'workers'"), "0");

  std::unique_ptr<Store> again = OpenOrDie(path);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->schema_version(), store_internal::kCurrentSchemaVersion);
  EXPECT_EQ(again->migrations_applied(), 0);
  EXPECT_TRUE(again->GetJob("kept").ok());
}

TEST(StoreTest, AVersionOneFileGainsTheJobsAlgorithmAndKeepsItsJobs) {
  TempDir dir;
  const std::string path = dir.File("v1.db");
  {
    std::unique_ptr<Store> store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->CreateJob(MakeJob("old", kBase)));
  }
  // Back to the first schema, as a file written before the columns existed.
  RawSql(path, "ALTER TABLE jobs DROP COLUMN algorithm");
  RawSql(path, "ALTER TABLE trials DROP COLUMN failed_attempts");
  RawSql(path, "ALTER TABLE trials DROP COLUMN infrastructure");
  RawSql(path, "ALTER TABLE trials DROP COLUMN confirms");
  RawSql(path, "ALTER TABLE strategies DROP COLUMN confirmed");
  BackToSchemaFour(path);
  RawSql(path, "PRAGMA user_version = 1");
  std::unique_ptr<Store> store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->migrations_applied(), store_internal::kCurrentSchemaVersion - 1);
  absl::StatusOr<JobRecord> old = store->GetJob("old");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->algorithm, "");
  EXPECT_EQ(old->model_json, "") << "an older job's model is its request's";
  JobRecord job = *old;
  job.algorithm = "auto: bayes (2311 candidates, room for about 90 trials)";
  ASSERT_OK(store->UpdateJob(job));
  EXPECT_EQ(store->GetJob("old")->algorithm, job.algorithm);
}

TEST(StoreTest, AVersionThreeFileLosesItsWorkersTableAndKeepsEverythingElse) {
  TempDir dir;
  const std::string path = dir.File("v3.db");
  const std::string sig = "gpt2|h=768|cpu x1";
  JobRecord done = MakeJob("old", kBase, JobState::kRunning);
  done.signature = sig;
  {
    std::unique_ptr<Store> store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->CreateJob(done));
    ASSERT_OK(store->UpsertTrial(MakeTrial("old", 0)));
    done.state = JobState::kSucceeded;
    ASSERT_OK(store->FinishJob(done, MakeStrategy(sig, "old", "mbs=2"), &ReplacesStoredAnswer));
  }
  // As a version 3 build left it: with the workers table it wrote on every
  // registration.
  RawSql(path,
         "CREATE TABLE workers (worker_id TEXT NOT NULL PRIMARY KEY, address TEXT NOT NULL, "
         "devices_json TEXT NOT NULL, registered_at INTEGER NOT NULL, last_seen INTEGER NOT NULL)");
  RawSql(path, "INSERT INTO workers VALUES ('w1', '127.0.0.1:5051', '{}', 1, 2)");
  BackToSchemaFour(path);
  RawSql(path, "PRAGMA user_version = 3");
  ASSERT_EQ(RawSql(path, "SELECT count(*) FROM workers"), "1");

  std::unique_ptr<Store> store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), store_internal::kCurrentSchemaVersion);
  EXPECT_EQ(store->migrations_applied(), store_internal::kCurrentSchemaVersion - 3);
  EXPECT_EQ(RawSql(path, "SELECT count(*) FROM sqlite_schema WHERE name = 'workers'"), "0");
  absl::StatusOr<JobRecord> job = store->GetJob("old");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(Tie(*job), Tie(done));
  absl::StatusOr<std::vector<TrialRecord>> trials = store->ListTrials("old");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 1u);
  EXPECT_EQ(Tie((*trials)[0]), Tie(MakeTrial("old", 0)));
  absl::StatusOr<std::optional<StrategyRecord>> strategy = store->GetStrategy(sig);
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  ASSERT_TRUE(strategy->has_value());
  EXPECT_EQ((*strategy)->strategy_text, "mbs=2");
  EXPECT_OK(store->CreateJob(MakeJob("new", kBase + 1)));
}

TEST(StoreTest, AVersionFourFileGainsTrialPredictionsAndItsTrialsHaveNone) {
  TempDir dir;
  const std::string path = dir.File("v4.db");
  {
    std::unique_ptr<Store> store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->CreateJob(MakeJob("old", kBase)));
    ASSERT_OK(store->UpsertTrial(MakeTrial("old", 0)));
  }
  BackToSchemaFour(path);
  RawSql(path, "PRAGMA user_version = 4");
  std::unique_ptr<Store> store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->migrations_applied(), store_internal::kCurrentSchemaVersion - 4);
  absl::StatusOr<std::vector<TrialRecord>> trials = store->ListTrials("old");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 1u);
  EXPECT_FALSE((*trials)[0].predicted.has_value());
  TrialRecord t = (*trials)[0];
  t.predicted = TrialPrediction{0.5, 1 << 20, 100};
  ASSERT_OK(store->UpsertTrial(t));
  EXPECT_EQ(store->ListTrials("old")->at(0).predicted, t.predicted);
}

TEST(StoreTest, MeasuredTrialsAreTheNewestSucceededOnesOfTheDeviceTypeWithTheirRequests) {
  std::unique_ptr<Store> store = OpenOrDie(":memory:");
  ASSERT_NE(store, nullptr);
  // Oldest first: a cpu job, a cuda job, a torchscript cpu job, a cpu job
  // whose request names no device type (the default, cpu), a newer cpu job.
  const std::vector<std::pair<std::string, std::string>> jobs = {
      {"cpu-old", R"({"model":{"family":"gpt2"},"device_type":"cpu","seq_len":16})"},
      {"cuda", R"({"model":{"family":"gpt2"},"device_type":"cuda","seq_len":16})"},
      {"script", R"({"model":{"family":"torchscript"},"device_type":"cpu","seq_len":16})"},
      {"default", R"({"model":{"family":"llama"},"seq_len":32})"},
      {"cpu-new", R"({"model":{"family":"bert"},"device_type":"cpu","seq_len":64})"},
  };
  for (size_t j = 0; j < jobs.size(); ++j) {
    JobRecord job = MakeJob(jobs[j].first, kBase + static_cast<int64_t>(j));
    job.request_json = jobs[j].second;
    // The newest job keeps what it measured: its request is not needed.
    if (job.job_id == "cpu-new") job.model_json = R"({"family":"bert"})";
    ASSERT_OK(store->CreateJob(job));
    for (int i = 0; i < 3; ++i) {
      TrialRecord t = MakeTrial(job.job_id, i);
      t.status = i == 1 ? TrialStatus::kOom : TrialStatus::kSucceeded;
      t.metrics = SomeMetrics(1.0 + i);
      ASSERT_OK(store->UpsertTrial(t));
    }
  }
  absl::StatusOr<std::vector<MeasuredTrialRecord>> all = store->ListMeasuredTrials("cpu", 100);
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> ids;
  for (const MeasuredTrialRecord& r : *all) {
    ids.push_back(r.trial.trial_id);
    EXPECT_EQ(r.trial.status, TrialStatus::kSucceeded);
    if (r.trial.job_id == "cpu-new") {
      EXPECT_EQ(r.model_json, R"({"family":"bert"})");
      EXPECT_EQ(r.request_json, "");
      continue;
    }
    EXPECT_EQ(r.model_json, "");
    EXPECT_EQ(r.request_json, std::find_if(jobs.begin(), jobs.end(), [&](const auto& j) {
                                return j.first == r.trial.job_id;
                              })->second);
  }
  EXPECT_THAT(ids, ElementsAre("cpu-new-t2", "cpu-new-t0", "default-t2", "default-t0", "cpu-old-t2",
                               "cpu-old-t0"));
  absl::StatusOr<std::vector<MeasuredTrialRecord>> three = store->ListMeasuredTrials("cpu", 3);
  ASSERT_TRUE(three.ok()) << three.status();
  ASSERT_EQ(three->size(), 3u);
  EXPECT_EQ((*three)[2].trial.trial_id, "default-t2");
  absl::StatusOr<std::vector<MeasuredTrialRecord>> cuda = store->ListMeasuredTrials("cuda", 100);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(cuda->size(), 2u);
  EXPECT_EQ(store->ListMeasuredTrials("cpu", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StoreTest, MigratesAnEmptyFile) {
  TempDir dir;
  const std::string path = dir.File("empty.db");
  std::ofstream(path).close();
  ASSERT_EQ(std::filesystem::file_size(path), 0u);
  std::unique_ptr<Store> store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), store_internal::kCurrentSchemaVersion);
  EXPECT_EQ(store->migrations_applied(), store_internal::kCurrentSchemaVersion);
  EXPECT_OK(store->CreateJob(MakeJob("a", kBase)));
}

TEST(StoreTest, RefusesASchemaNewerThanThisBuild) {
  TempDir dir;
  const std::string path = dir.File("future.db");
  { ASSERT_NE(OpenOrDie(path), nullptr); }
  const int newer = store_internal::kCurrentSchemaVersion + 1;
  RawSql(path, absl::StrCat("PRAGMA user_version = ", newer));

  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr(path));
  EXPECT_THAT(store.status().message(), HasSubstr(absl::StrCat("schema version ", newer)));
  EXPECT_THAT(store.status().message(), HasSubstr("newer"));
  // Refused without touching it.
  EXPECT_EQ(RawSql(path, "PRAGMA user_version"), std::to_string(newer));
}

TEST(StoreTest, RefusesANewerSchemaBeforeChangingTheFile) {
  TempDir dir;
  const std::string path = dir.File("foreign.db");
  // Written by "a newer build" that never used WAL.
  RawSql(path, "CREATE TABLE future (x INTEGER)");
  RawSql(path, absl::StrCat("PRAGMA user_version = ", store_internal::kCurrentSchemaVersion + 5));
  ASSERT_EQ(RawSql(path, "PRAGMA journal_mode"), "delete");

  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RawSql(path, "PRAGMA journal_mode"), "delete");
  EXPECT_EQ(RawSql(path, "SELECT count(*) FROM sqlite_schema"), "1");
}

TEST(StoreTest, RefusesAFileThatIsNotADatabase) {
  TempDir dir;
  const std::string path = dir.File("notes.txt");
  {
    std::ofstream out(path);
    for (int i = 0; i < 200; ++i) out << "this is not an SQLite database, just text\n";
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr(path));
  EXPECT_THAT(store.status().message(), HasSubstr("not a database"));
}

TEST(StoreTest, RefusesAPathThatCannotBeCreated) {
  TempDir dir;
  const std::string path = dir.File("no/such/dir/state.db");
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr(path));
}

TEST(StoreTest, FinishJobWritesJobAndStrategyAndLaterOnesReplaceIt) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("s.db"));
  ASSERT_NE(store, nullptr);
  const std::string sig = "gpt2|h=768|cpu x1";

  absl::StatusOr<std::optional<StrategyRecord>> none = store->GetStrategy(sig);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  JobRecord first = MakeJob("j1", kBase, JobState::kRunning);
  first.signature = sig;
  ASSERT_OK(store->CreateJob(first));
  first.state = JobState::kSucceeded;
  first.best_trial_id = "j1-t3";
  ASSERT_OK(store->FinishJob(first, MakeStrategy(sig, "j1", "mbs=4"), &ReplacesStoredAnswer));

  absl::StatusOr<JobRecord> job = store->GetJob("j1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, JobState::kSucceeded);
  EXPECT_EQ(job->best_trial_id, "j1-t3");
  absl::StatusOr<std::optional<StrategyRecord>> s = store->GetStrategy(sig);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->has_value());
  EXPECT_EQ((*s)->strategy_text, "mbs=4");
  EXPECT_EQ((*s)->job_id, "j1");

  JobRecord second = MakeJob("j2", kBase + 1, JobState::kRunning);
  second.signature = sig;
  ASSERT_OK(store->CreateJob(second));
  second.state = JobState::kSucceeded;
  StrategyRecord better = MakeStrategy(sig, "j2", "mbs=8 zero1");
  better.updated_at = T(kBase + 1000);
  ASSERT_OK(store->FinishJob(second, better, &ReplacesStoredAnswer));

  s = store->GetStrategy(sig);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->has_value());
  EXPECT_EQ(Tie(**s), Tie(better));
  absl::StatusOr<std::vector<StrategyRecord>> all = store->ListStrategies(StrategyFilter(), 0);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 1u);

  // A job that ends without a winner leaves the strategy alone.
  JobRecord third = MakeJob("j3", kBase + 2, JobState::kRunning);
  third.signature = sig;
  ASSERT_OK(store->CreateJob(third));
  third.state = JobState::kFailed;
  ASSERT_OK(store->FinishJob(third, std::nullopt));
  s = store->GetStrategy(sig);
  ASSERT_TRUE(s.ok() && s->has_value());
  EXPECT_EQ((*s)->job_id, "j2");
  absl::StatusOr<JobRecord> failed = store->GetJob("j3");
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->state, JobState::kFailed);
}

TEST(StoreTest, FinishJobIsAtomic) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("s.db"));
  ASSERT_NE(store, nullptr);

  // Unknown job: the strategy must not be written either.
  JobRecord ghost = MakeJob("ghost", kBase, JobState::kSucceeded);
  absl::Status st =
      store->FinishJob(ghost, MakeStrategy("sig", "ghost", "mbs=1"), &ReplacesStoredAnswer);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  absl::StatusOr<std::optional<StrategyRecord>> s = store->GetStrategy("sig");
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->has_value());

  // Bad strategy: the job must not be marked finished.
  ASSERT_OK(store->CreateJob(MakeJob("j", kBase, JobState::kRunning)));
  JobRecord done = MakeJob("j", kBase, JobState::kSucceeded);
  st = store->FinishJob(done, MakeStrategy("", "j", "mbs=1"), &ReplacesStoredAnswer);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  absl::StatusOr<JobRecord> job = store->GetJob("j");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kRunning);

  // An answer offered without the precedence that weighs it.
  st = store->FinishJob(done, MakeStrategy("sig", "j", "mbs=1"));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_EQ(store->GetJob("j")->state, JobState::kRunning);

  // Not a terminal state.
  st = store->FinishJob(MakeJob("j", kBase, JobState::kWaitingForWorkers), std::nullopt);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  job = store->GetJob("j");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kRunning);
}

// Finishes a new job of its own with `answer` as the signature's candidate.
absl::Status FinishWith(Store& store, const std::string& job_id, const StrategyRecord& answer) {
  JobRecord job = MakeJob(job_id, kBase, JobState::kRunning);
  job.signature = answer.signature;
  if (absl::Status s = store.CreateJob(job); !s.ok()) return s;
  job.state = JobState::kSucceeded;
  return store.FinishJob(job, answer, &ReplacesStoredAnswer);
}

StrategyRecord Answer(const std::string& job_id, double tokens_per_second, bool confirmed) {
  StrategyRecord s = MakeStrategy("sig", job_id, absl::StrCat("mbs=", job_id));
  s.metrics.tokens_per_second = tokens_per_second;
  s.confirmed = confirmed;
  return s;
}

// The answer stored for "sig" (an empty record, reported, if none).
StrategyRecord StoredForSig(Store& store) {
  absl::StatusOr<std::optional<StrategyRecord>> s = store.GetStrategy("sig");
  EXPECT_TRUE(s.ok() && s->has_value()) << s.status();
  return s.ok() && s->has_value() ? **s : StrategyRecord();
}

TEST(StoreTest, AConfirmedAnswerReplacesOneMeasuredOnceAndOtherwiseTheFasterStays) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("s.db"));
  ASSERT_NE(store, nullptr);
  auto stored_job = [&] { return StoredForSig(*store).job_id; };
  ASSERT_OK(FinishWith(*store, "a", Answer("a", 1000, false)));
  EXPECT_EQ(stored_job(), "a");
  ASSERT_OK(FinishWith(*store, "b", Answer("b", 900, false)));  // slower, same kind
  EXPECT_EQ(stored_job(), "a");
  ASSERT_OK(FinishWith(*store, "c", Answer("c", 1000, false)));  // as fast: the later one
  EXPECT_EQ(stored_job(), "c");
  ASSERT_OK(FinishWith(*store, "d", Answer("d", 500, true)));  // confirmed beats once-measured
  EXPECT_EQ(stored_job(), "d");
  ASSERT_OK(FinishWith(*store, "e", Answer("e", 5000, false)));  // once-measured never does
  EXPECT_EQ(stored_job(), "d");
  ASSERT_OK(FinishWith(*store, "f", Answer("f", 400, true)));  // slower confirmed
  EXPECT_EQ(stored_job(), "d");
  ASSERT_OK(FinishWith(*store, "g", Answer("g", 600, true)));
  EXPECT_EQ(stored_job(), "g");
  // The jobs that did not replace the answer are finished all the same.
  absl::StatusOr<JobRecord> e = store->GetJob("e");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->state, JobState::kSucceeded);
}

StrategyRecord Versioned(const std::string& job_id, double tokens_per_second, bool confirmed,
                         int engine_version) {
  StrategyRecord s = Answer(job_id, tokens_per_second, confirmed);
  s.engine_version = engine_version;
  return s;
}

TEST(StoreTest, FinishJobAppliesTheEngineVersionRuleAndKeepsTheFirstStoredDate) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("s.db"));
  ASSERT_NE(store, nullptr);
  auto stored = [&] { return StoredForSig(*store); };
  StrategyRecord first = Versioned("a", 5000, true, 1);
  first.created_at = T(kBase);
  first.updated_at = T(kBase);
  ASSERT_OK(FinishWith(*store, "a", first));
  StrategyRecord newer = Versioned("b", 100, false, 2);
  newer.created_at = T(kBase + 1000);
  newer.updated_at = T(kBase + 1000);
  ASSERT_OK(FinishWith(*store, "b", newer));
  EXPECT_EQ(stored().job_id, "b") << "a newer engine's answer replaces an older one, slower or not";
  EXPECT_EQ(stored().engine_version, 2);
  EXPECT_EQ(stored().updated_at, T(kBase + 1000));
  EXPECT_EQ(stored().created_at, T(kBase)) << "the signature's first answer keeps its date";
  ASSERT_OK(FinishWith(*store, "c", Versioned("c", 9000, true, 1)));
  EXPECT_EQ(stored().job_id, "b") << "an older engine's answer never replaces a newer one";
  ASSERT_OK(FinishWith(*store, "d", Versioned("d", 200, false, 2)));
  EXPECT_EQ(stored().job_id, "d") << "within a version, the faster one";
}

TEST(StoreTest, ListStrategiesFiltersByModelFamilyAndDeviceType) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("s.db"));
  ASSERT_NE(store, nullptr);
  int n = 0;
  for (const auto& [family, device] : std::vector<std::pair<std::string, std::string>>{
           {"gpt2", "cpu"}, {"gpt2", "cuda"}, {"llama", "cuda"}}) {
    StrategyRecord s =
        MakeStrategy(absl::StrCat("sig-", family, "-", device), absl::StrCat("j", n), "mbs=1");
    s.model_family = family;
    s.device_type = device;
    s.hardware = absl::StrCat(device, " x1");
    s.updated_at = T(kBase + ++n);
    ASSERT_OK(FinishWith(*store, s.job_id, s));
  }
  auto jobs = [&](const std::string& family, const std::string& device, int limit = 0) {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<StrategyRecord>> list =
        store->ListStrategies(StrategyFilter{family, device}, limit);
    EXPECT_TRUE(list.ok()) << list.status();
    for (const StrategyRecord& s : list.ok() ? *list : std::vector<StrategyRecord>()) {
      out.push_back(s.job_id);
    }
    return out;
  };
  EXPECT_THAT(jobs("", ""), ElementsAre("j2", "j1", "j0"));  // newest first
  EXPECT_THAT(jobs("gpt2", ""), ElementsAre("j1", "j0"));
  EXPECT_THAT(jobs("", "cuda"), ElementsAre("j2", "j1"));
  EXPECT_THAT(jobs("gpt2", "cuda"), ElementsAre("j1"));
  EXPECT_THAT(jobs("bert", ""), ElementsAre());
  EXPECT_THAT(jobs("", "", 1), ElementsAre("j2"));
}

TEST(StoreTest, AVersionFourFileKeepsItsAnswersAsUnversionedAndListableByDevice) {
  TempDir dir;
  const std::string path = dir.File("v4.db");
  StrategyRecord legacy = MakeStrategy("sig", "old", "mbs=2");
  legacy.hardware = "cuda x8";
  legacy.updated_at = T(kBase + 7);
  {
    std::unique_ptr<Store> store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(FinishWith(*store, "old", legacy));
  }
  BackToSchemaFour(path);
  RawSql(path, "PRAGMA user_version = 4");

  std::unique_ptr<Store> store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->migrations_applied(), store_internal::kCurrentSchemaVersion - 4);
  absl::StatusOr<std::optional<StrategyRecord>> s = store->GetStrategy("sig");
  ASSERT_TRUE(s.ok() && s->has_value()) << s.status();
  EXPECT_EQ((*s)->engine_version, 0) << "older than every engine version";
  EXPECT_EQ((*s)->created_at, legacy.updated_at);
  EXPECT_EQ((*s)->device_type, "cuda") << "read from its hardware";
  absl::StatusOr<std::vector<StrategyRecord>> cuda =
      store->ListStrategies(StrategyFilter{"", "cuda"}, 0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(cuda->size(), 1u);
  absl::StatusOr<JobRecord> job = store->GetJob("old");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->answered_from, "");
  EXPECT_EQ(job->launcher_json, "");
  // Any answer of a versioned engine replaces it, even a slower one.
  StrategyRecord slower = MakeStrategy("sig", "new", "mbs=1");
  slower.metrics.tokens_per_second = 1;
  slower.engine_version = 1;
  ASSERT_OK(FinishWith(*store, "new", slower));
  EXPECT_EQ((*store->GetStrategy("sig"))->job_id, "new");
}

TEST(StoreTest, UpsertTrialsIsAllOrNothing) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("t.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->CreateJob(MakeJob("j", kBase)));
  TrialRecord existing = MakeTrial("j", 0);
  ASSERT_OK(store->UpsertTrial(existing));

  TrialRecord changed = existing;
  changed.status = TrialStatus::kRunning;
  TrialRecord orphan = MakeTrial("no-such-job", 5);
  absl::Status st = store->UpsertTrials({MakeTrial("j", 1), changed, orphan});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("no-such-job"));

  absl::StatusOr<std::vector<TrialRecord>> trials = store->ListTrials("j");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 1u);
  EXPECT_EQ(Tie((*trials)[0]), Tie(existing));

  // An invalid record is rejected the same way.
  TrialRecord bad = MakeTrial("j", 2);
  bad.attempt = 0;
  st = store->UpsertTrials({MakeTrial("j", 1), bad});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  trials = store->ListTrials("j");
  ASSERT_TRUE(trials.ok());
  EXPECT_EQ(trials->size(), 1u);
}

TEST(StoreTest, UpsertTrialReplacesByIdAndListsByIndex) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("t.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->CreateJob(MakeJob("j", kBase)));
  ASSERT_OK(store->CreateJob(MakeJob("other", kBase)));
  ASSERT_OK(store->UpsertTrials({MakeTrial("j", 2), MakeTrial("j", 0), MakeTrial("other", 1)}));
  ASSERT_OK(store->UpsertTrial(MakeTrial("j", 1)));

  TrialRecord retried = MakeTrial("j", 2);
  retried.attempt = 2;
  retried.status = TrialStatus::kSucceeded;
  retried.metrics = SomeMetrics(2.0);
  ASSERT_OK(store->UpsertTrial(retried));

  absl::StatusOr<std::vector<TrialRecord>> trials = store->ListTrials("j");
  ASSERT_TRUE(trials.ok()) << trials.status();
  std::vector<int> indices;
  for (const TrialRecord& t : *trials) indices.push_back(t.index);
  EXPECT_THAT(indices, ElementsAre(0, 1, 2));
  EXPECT_EQ(Tie(trials->back()), Tie(retried));

  absl::StatusOr<std::vector<TrialRecord>> unknown = store->ListTrials("nobody");
  ASSERT_TRUE(unknown.ok());
  EXPECT_THAT(*unknown, IsEmpty());
}

TEST(StoreTest, ATrialPageReadsFromAnIndexAndLeavesPrunedOnesOutUnlessAsked) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("t.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->CreateJob(MakeJob("j", kBase)));
  std::vector<TrialRecord> trials;
  for (int i = 0; i < 6; ++i) {
    trials.push_back(MakeTrial("j", i));
    if (i % 2 == 1) {
      trials.back().status = TrialStatus::kPruned;
      trials.back().attempt = 0;
    }
  }
  ASSERT_OK(store->UpsertTrials(trials));
  auto indices = [&](int from, int limit, bool pruned) {
    std::vector<int> out;
    absl::StatusOr<std::vector<TrialRecord>> page = store->ListTrialsFrom("j", from, limit, pruned);
    EXPECT_TRUE(page.ok()) << page.status();
    for (const TrialRecord& t : page.ok() ? *page : std::vector<TrialRecord>()) {
      out.push_back(t.index);
    }
    return out;
  };
  EXPECT_THAT(indices(0, 2, false), ElementsAre(0, 2));
  EXPECT_THAT(indices(3, 10, false), ElementsAre(4));
  EXPECT_THAT(indices(1, 3, true), ElementsAre(1, 2, 3));
  EXPECT_EQ(store->ListTrialsFrom("j", 0, 0, true).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StoreTest, ReportsMissingAndDuplicateRows) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("e.db"));
  ASSERT_NE(store, nullptr);

  JobRecord job = MakeJob("j", kBase);
  job.status_message = "original";
  ASSERT_OK(store->CreateJob(job));
  JobRecord dup = job;
  dup.status_message = "impostor";
  absl::Status st = store->CreateJob(dup);
  EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists) << st;
  EXPECT_THAT(st.message(), HasSubstr("'j'"));
  absl::StatusOr<JobRecord> got = store->GetJob("j");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status_message, "original");

  st = store->UpdateJob(MakeJob("missing", kBase));
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_EQ(store->GetJob("missing").status().code(), absl::StatusCode::kNotFound);

  job.status_message = "updated";
  job.state = JobState::kWaitingForWorkers;
  ASSERT_OK(store->UpdateJob(job));
  got = store->GetJob("j");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(Tie(*got), Tie(job));

  st = store->UpsertTrial(MakeTrial("missing", 0));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;

  EXPECT_EQ(store->CreateJob(MakeJob("", kBase)).code(), absl::StatusCode::kInvalidArgument);
  TrialRecord no_id = MakeTrial("j", 0);
  no_id.trial_id.clear();
  EXPECT_EQ(store->UpsertTrial(no_id).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->ListJobs(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->ListStrategies(StrategyFilter(), -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StoreTest, ARowThatCannotBeDecodedIsDataLossNamingIt) {
  TempDir dir;
  const std::string path = dir.File("d.db");
  std::unique_ptr<Store> store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->CreateJob(MakeJob("j", kBase)));
  ASSERT_OK(store->UpsertTrial(MakeTrial("j", 0)));
  JobRecord done = MakeJob("j", kBase, JobState::kSucceeded);
  ASSERT_OK(store->FinishJob(done, MakeStrategy("sig", "j", "mbs=1"), &ReplacesStoredAnswer));

  RawSql(path, "UPDATE trials SET failed_attempts = '{}'");
  absl::StatusOr<std::vector<TrialRecord>> trials = store->ListTrials("j");
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(trials.status().message(),
              HasSubstr("store: trial 'j-t0': failed_attempts is not a JSON array"));
  RawSql(path, "UPDATE strategies SET metrics_json = 'nope'");
  absl::StatusOr<std::optional<StrategyRecord>> strategy = store->GetStrategy("sig");
  EXPECT_EQ(strategy.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(strategy.status().message(),
              HasSubstr("store: strategy 'sig': metrics are not valid JSON"));
  RawSql(path, "UPDATE jobs SET state = 'DONE'");
  absl::StatusOr<JobRecord> job = store->GetJob("j");
  EXPECT_EQ(job.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(job.status().message(), HasSubstr("store: job 'j': job state: unknown value 'DONE'"));
}

TEST(StoreTest, ListJobsIsNewestFirst) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.File("l.db"));
  ASSERT_NE(store, nullptr);
  // Created out of time order, with a tie broken by creation order.
  ASSERT_OK(store->CreateJob(MakeJob("b", kBase + 2)));
  ASSERT_OK(store->CreateJob(MakeJob("a", kBase + 1)));
  ASSERT_OK(store->CreateJob(MakeJob("d", kBase + 3)));
  ASSERT_OK(store->CreateJob(MakeJob("c", kBase + 3)));

  auto ids = [&](int limit) {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<JobRecord>> jobs = store->ListJobs(limit);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    if (jobs.ok()) {
      for (const JobRecord& j : *jobs) out.push_back(j.job_id);
    }
    return out;
  };
  EXPECT_THAT(ids(0), ElementsAre("c", "d", "b", "a"));
  EXPECT_THAT(ids(2), ElementsAre("c", "d"));
  EXPECT_THAT(ids(10), ElementsAre("c", "d", "b", "a"));
}

TEST(StoreTest, UnfinishedJobsAreFoundAfterACrash) {
  TempDir dir;
  const std::string path = dir.File("crash.db");
  {
    std::unique_ptr<Store> store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->CreateJob(MakeJob("running", kBase + 3, JobState::kRunning)));
    ASSERT_OK(store->CreateJob(MakeJob("ok", kBase + 1, JobState::kSucceeded)));
    ASSERT_OK(store->CreateJob(MakeJob("queued", kBase + 2, JobState::kQueued)));
    ASSERT_OK(store->CreateJob(MakeJob("failed", kBase + 4, JobState::kFailed)));
    ASSERT_OK(store->CreateJob(MakeJob("waiting", kBase + 5, JobState::kWaitingForWorkers)));
    ASSERT_OK(store->CreateJob(MakeJob("cancelled", kBase + 6, JobState::kCancelled)));
    // No FinishJob: the server "crashed".
  }
  std::unique_ptr<Store> store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<JobRecord>> jobs = store->ListUnfinishedJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  std::vector<std::string> ids;
  for (const JobRecord& j : *jobs) ids.push_back(j.job_id);
  EXPECT_THAT(ids, ElementsAre("queued", "running", "waiting"));

  ASSERT_OK(store->FinishJob(MakeJob("running", kBase + 3, JobState::kFailed), std::nullopt));
  jobs = store->ListUnfinishedJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 2u);
}

// Two Stores on one file, as two coordinators sharing it would have.
constexpr int kThreads = 4;
struct TwoStores {
  explicit TwoStores(const std::string& path) : a(OpenOrDie(path)), b(OpenOrDie(path)) {}
  bool ok() const { return a != nullptr && b != nullptr; }

  // Runs work(store, thread, errors) on kThreads threads, the even ones
  // through `a` and the odd ones through `b` (which exercises SQLite's
  // locking and the busy timeout), and fails the test for each error a
  // thread collected.
  void OnThreads(const std::function<void(Store&, int, std::vector<absl::Status>&)>& work) {
    std::vector<std::vector<absl::Status>> errors(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] { work(i % 2 == 0 ? *a : *b, i, errors[i]); });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < kThreads; ++i) {
      for (const absl::Status& s : errors[i]) ADD_FAILURE() << "thread " << i << ": " << s;
    }
  }

  std::unique_ptr<Store> a, b;
};

// Writers on several threads, through one Store and through a second Store
// on the same file.
TEST(StoreTest, ConcurrentWritersDoNotFail) {
  TempDir dir;
  TwoStores stores(dir.File("c.db"));
  ASSERT_TRUE(stores.ok());

  constexpr int kJobsPerThread = 20;
  stores.OnThreads([&](Store& store, int i, std::vector<absl::Status>& errors) {
    auto check = [&](absl::Status s) {
      if (!s.ok()) errors.push_back(s);
    };
    for (int n = 0; n < kJobsPerThread; ++n) {
      std::string id = absl::StrCat("t", i, "-j", n);
      JobRecord job = MakeJob(id, kBase + n);
      check(store.CreateJob(job));
      check(store.UpsertTrials({MakeTrial(id, 0), MakeTrial(id, 1)}));
      job.state = JobState::kRunning;
      check(store.UpdateJob(job));
      check(store.ListJobs(5).status());
      job.state = JobState::kSucceeded;
      check(store.FinishJob(job, MakeStrategy(absl::StrCat("sig", n % 3), id, "mbs=1"),
                            &ReplacesStoredAnswer));
    }
  });

  absl::StatusOr<std::vector<JobRecord>> jobs = stores.a->ListJobs(0);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), static_cast<size_t>(kThreads * kJobsPerThread));
  for (const JobRecord& j : *jobs) EXPECT_EQ(j.state, JobState::kSucceeded) << j.job_id;
  absl::StatusOr<std::vector<TrialRecord>> trials = stores.b->ListTrials("t3-j19");
  ASSERT_TRUE(trials.ok());
  EXPECT_EQ(trials->size(), 2u);
  absl::StatusOr<std::vector<StrategyRecord>> strategies =
      stores.a->ListStrategies(StrategyFilter(), 0);
  ASSERT_TRUE(strategies.ok());
  EXPECT_EQ(strategies->size(), 3u);
}

// Two coordinators on one file finish jobs with answers for one signature at
// once: each reads, compares and writes in one transaction, so the fastest
// answer stays whatever the interleaving (a read-then-write in two steps
// lets a slower answer overwrite a faster one written in between).
TEST(StoreTest, TwoStoresRacingOnOneFileKeepTheFastestAnswer) {
  TempDir dir;
  TwoStores stores(dir.File("race.db"));
  ASSERT_TRUE(stores.ok());

  constexpr int kJobsPerThread = 25;
  // Distinct speeds that rise and fall within each thread and interleave
  // across threads.
  auto speed = [](int thread, int n) { return 1000 + ((n * 37 + thread * 11) % 97) * 10 + thread; };
  double fastest = 0;
  std::string fastest_job;
  for (int i = 0; i < kThreads; ++i) {
    for (int n = 0; n < kJobsPerThread; ++n) {
      if (speed(i, n) > fastest) {
        fastest = speed(i, n);
        fastest_job = absl::StrCat("t", i, "-j", n);
      }
    }
  }
  stores.OnThreads([&](Store& store, int i, std::vector<absl::Status>& errors) {
    for (int n = 0; n < kJobsPerThread; ++n) {
      const std::string id = absl::StrCat("t", i, "-j", n);
      if (absl::Status s = FinishWith(store, id, Answer(id, speed(i, n), false)); !s.ok()) {
        errors.push_back(s);
      }
    }
  });
  for (Store* store : {stores.a.get(), stores.b.get()}) {
    absl::StatusOr<std::optional<StrategyRecord>> s = store->GetStrategy("sig");
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(s->has_value());
    EXPECT_EQ((*s)->metrics.tokens_per_second, fastest);
    EXPECT_EQ((*s)->job_id, fastest_job);
  }
}

}  // namespace
}  // namespace autoaccel

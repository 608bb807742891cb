// The job manager's store: writes after the lock is let go and in order,
// a database that fails, is slow or is deleted, rows that do not parse.
#include <sqlite3.h>

#include <thread>

#include "tests/job_manager_fixture.h"

namespace autoaccel {
namespace {

// A tick's dispatches are written in one transaction, and each trial is
// RUNNING in the store before its RunTrial leaves (a coordinator killed
// then finds every trial a worker runs); the answers applied together are
// written together too.
TEST_F(JobManagerTest, ATicksTrialsAreStoredInOneWriteBeforeTheirRunTrialsLeave) {
  AddWorker("a", 4);
  int writes = 0;
  store_->SetWriteTimer([&writes](absl::Duration) { ++writes; });
  std::vector<std::string> stored_when_sent;
  std::string job_id;
  executor_.on_run = [&](const v1::RunTrialRequest& request) {
    absl::StatusOr<std::vector<TrialRecord>> trials = store_->ListTrials(job_id);
    ASSERT_TRUE(trials.ok()) << trials.status();
    for (const TrialRecord& t : *trials) {
      if (t.trial_id == request.trial_id()) {
        stored_when_sent.push_back(std::string(TrialStatusName(t.status)));
      }
    }
  };
  auto job = manager_->SubmitJob(Request(600, 8));
  ASSERT_TRUE(job.ok()) << job.status();
  job_id = job->job_id();
  writes = 0;
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 4u);
  EXPECT_THAT(stored_when_sent, ::testing::ElementsAre("RUNNING", "RUNNING", "RUNNING", "RUNNING"));
  // The job's own record and its pruned candidates may take a write each;
  // the four trials one between them.
  EXPECT_LE(writes, 3);
  const int dispatch_writes = writes;
  writes = 0;
  for (int i = 0; i < 4; ++i) executor_.Succeed(1000 + i);
  EXPECT_EQ(writes, 4) << "each answer applied alone (the lock was free) is its own write";
  absl::StatusOr<std::vector<TrialRecord>> trials = store_->ListTrials(job->job_id());
  ASSERT_TRUE(trials.ok());
  int succeeded = 0;
  for (const TrialRecord& t : *trials) succeeded += t.status == TrialStatus::kSucceeded;
  EXPECT_EQ(succeeded, 4);
  EXPECT_GE(dispatch_writes, 1);
}

TEST_F(JobManagerTest, ReadersAreAnsweredWhileTheDatabaseIsSlowToWrite) {
  AddWorker("a", 1);
  const std::string job_id = StartJob(Request(600, 3));
  ASSERT_EQ(executor_.calls.size(), 1u);
  // Another process holds the database's write lock: the coordinator's
  // write of the answer below waits for it (up to the store's busy timeout,
  // after which the write would fail and end the job).
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/db.sqlite").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::thread answer([this] { executor_.Succeed(1000); });
  // The answer is seen while its write waits: no reader waits for the disk.
  bool seen = false;
  for (int i = 0; i < 200 && !seen; ++i) {
    absl::StatusOr<v1::Job> job = manager_->GetJob(job_id);
    ASSERT_TRUE(job.ok()) << job.status();
    seen = job->trials_done() == 1;
    if (!seen) absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_TRUE(seen);
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  answer.join();
  // The lock let go in time: the write went through, and the job goes on.
  manager_->Tick();
  absl::StatusOr<v1::Job> job = manager_->GetJob(job_id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), "RUNNING") << job->status_message();
  absl::StatusOr<std::vector<TrialRecord>> trials = store_->ListTrials(job_id);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(trials->front().status, TrialStatus::kSucceeded);
}

TEST_F(JobManagerTest, WritesAreStoredInTheOrderTheyWereTakenWhoeverWritesFirst) {
  AddWorker("a", 1);
  const std::string job_id = StartJob(Request(600, 3));
  absl::StatusOr<std::vector<TrialRecord>> trials = store_->ListTrials(job_id);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_FALSE(trials->empty());
  const std::string before = trials->front().reason;
  TrialRecord trial = trials->front();
  JobArchive archive(store_.get());
  JobWriter writer(store_.get(), &archive);
  trial.reason = "first hold";
  writer.Keep(trial);
  JobWriter::Batch first = writer.Take();
  trial.reason = "second hold";
  writer.Keep(trial);
  JobWriter::Batch second = writer.Take();
  const auto stored_reason = [&] { return store_->ListTrials(job_id)->front().reason; };
  std::thread late([&] { writer.Write(std::move(second)); });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(stored_reason(), before) << "the second hold's write waits for the first's";
  writer.Write(std::move(first));
  late.join();
  EXPECT_EQ(stored_reason(), "second hold") << "never rewound to an older version";
  // A batch dropped unwritten is written as it goes, never lost.
  trial.reason = "dropped";
  writer.Keep(trial);
  { JobWriter::Batch dropped = writer.Take(); }
  EXPECT_EQ(stored_reason(), "dropped");
}

TEST_F(JobManagerTest, AFailedDatabaseWriteEndsTheJobVisiblyAndNeverRewindsIt) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 3));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const std::string trial = executor_.calls.front().request.trial_id();
  // The disk fills up: the trial's result (a long reason) cannot be written.
  ASSERT_TRUE(store_->LimitSizeForTesting(0).ok());
  executor_.Answer(trial, 0, absl::OkStatus(),
                   Answered(TrialStatus::kFailed, std::string(4000, 'x')));
  manager_->Tick();
  for (int i = 0; i < 3; ++i) {
    auto j = manager_->GetJob(job->job_id());
    ASSERT_TRUE(j.ok()) << j.status();
    EXPECT_EQ(j->state(), "FAILED") << "never back to RUNNING";
    EXPECT_THAT(j->status_message(), HasSubstr("database could not be written"));
    EXPECT_EQ(j->trials_done(), 1);
    manager_->Tick();
  }
  EXPECT_TRUE(executor_.calls.empty()) << "nothing more runs for a job that cannot be kept";
  // Room again: the job is written as it ended, and read back from the store.
  ASSERT_TRUE(store_->LimitSizeForTesting(int64_t{1} << 30).ok());
  manager_->Tick();
  auto stored = store_->GetJob(job->job_id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state, JobState::kFailed);
  EXPECT_EQ(store_->ListTrials(job->job_id())->at(0).status, TrialStatus::kFailed);
}

TEST_F(JobManagerTest, ADatabaseDeletedUnderTheServerFailsTheJobAndRefusesNewOnesNamingIt) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 3));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const std::string trial = executor_.calls.front().request.trial_id();
  std::filesystem::remove(dir_ + "/db.sqlite");
  executor_.Answer(trial, 0, absl::OkStatus(), Answered(TrialStatus::kFailed, "oom"));
  manager_->Tick();
  auto j = manager_->GetJob(job->job_id());
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->state(), "FAILED");
  EXPECT_THAT(j->status_message(), AllOf(HasSubstr("database could not be written"),
                                         HasSubstr("db.sqlite' was deleted")));
  auto refused = manager_->SubmitJob(Request(600, 3));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("was deleted"));
}

TEST_F(JobManagerTest, StoredRowsThatDoNotParseAreDataLossNotHalfAnswers) {
  // A database written by a broken (or newer) server.
  JobRecord job;
  job.job_id = "job-old";
  job.state = JobState::kQueued;
  job.request_json = R"({"model": )";  // cut short
  job.created_at = clock_.Now();
  job.deadline = clock_.Now() + absl::Minutes(1);
  ASSERT_TRUE(store_->CreateJob(job).ok());
  TrialRecord trial;
  trial.trial_id = "job-old-t0000";
  trial.job_id = "job-old";
  trial.strategy_text = "mbs=banana";
  trial.status = TrialStatus::kFailed;
  ASSERT_TRUE(store_->UpsertTrial(trial).ok());
  job.state = JobState::kFailed;
  job.finished_at = clock_.Now();
  ASSERT_TRUE(store_->FinishJob(job, std::nullopt).ok());

  absl::StatusOr<v1::Job> got = manager_->GetJob("job-old");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("job job-old: stored request does not parse"));
  v1::ListTrialsRequest page;
  page.set_job_id("job-old");
  absl::StatusOr<v1::ListTrialsResponse> trials = manager_->ListTrialsPage(page);
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(trials.status().message(),
              HasSubstr("trial job-old-t0000: stored strategy 'mbs=banana' does not parse"));
}

}  // namespace
}  // namespace autoaccel

// The job manager's answers: measurements that cannot be true, workers
// distrusted, the best few measured again until the answer settles, and the
// strategy database answering a tune or taking its answer.
#include <optional>

#include "server/database_answer.h"
#include "tests/job_manager_fixture.h"

namespace autoaccel {
namespace {

TEST_F(JobManagerTest, AnImpossibleMeasurementIsNeverTheAnswer) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 1));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  v1::RunTrialResponse liar = Answered(TrialStatus::kSucceeded);
  liar.mutable_metrics()->set_tokens_per_second(1e12);
  liar.mutable_metrics()->set_step_time_median_s(1e-6);
  executor_.Answer(executor_.calls.front().request.trial_id(), 0, absl::OkStatus(), liar);
  manager_->Tick();
  auto done = manager_->GetJob(job->job_id());
  EXPECT_EQ(done->state(), "FAILED");
  EXPECT_FALSE(done->has_best());
  EXPECT_THAT(manager_->ListTrials(job->job_id())->at(0).reason(),
              HasSubstr("impossible measurement"));
}

// A worker that registered a 1 TFLOP/s device and answers a throughput
// that needs thousands of them: its trial FAILED naming the bound, and the
// worker gets no more trials (quarantined, saying why).
TEST_F(JobManagerTest, FiguresBeyondTheRegisteredPeakFailTheTrialAndDistrustTheWorker) {
  for (const char* id : {"forger", "honest"}) {
    v1::RegisterRequest r = RegisterRequestFor(id, std::string(id) + ":1", 1);
    r.mutable_devices(0)->mutable_peak_tflops()->set_fp32(1);
    r.mutable_devices(0)->mutable_peak_tflops()->set_bf16(1);
    Register(r);
  }
  auto job = manager_->SubmitJob(Request(600, 4));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);
  const auto call_to = [this](const std::string& address) {
    for (size_t i = 0; i < executor_.calls.size(); ++i) {
      if (executor_.calls[i].address == address) return i;
    }
    return executor_.calls.size();
  };
  const size_t forged = call_to("forger:1");
  ASSERT_LT(forged, executor_.calls.size());
  const std::string forged_trial = executor_.calls[forged].request.trial_id();
  v1::RunTrialResponse liar = Answered(TrialStatus::kSucceeded);
  liar.mutable_metrics()->set_tokens_per_second(1e9);
  liar.mutable_metrics()->set_step_time_median_s(1e-6);
  liar.mutable_metrics()->set_peak_memory_bytes(1 << 20);
  executor_.Answer(forged_trial, 0, absl::OkStatus(), liar);
  manager_->Tick();
  const v1::Trial t = TrialOf(job->job_id(), forged_trial);
  EXPECT_EQ(t.status(), "FAILED");
  EXPECT_THAT(t.reason(),
              AllOf(HasSubstr("impossible measurement"),
                    HasSubstr("the device's peak of 1 TFLOP/s"), HasSubstr("worker forger")));
  for (const v1::Worker& w : manager_->ListWorkers()) {
    if (w.worker_id() != "forger") continue;
    EXPECT_THAT(w.warnings(), Contains(HasSubstr("its figures cannot be true"))) << w.DebugString();
  }
  // Its device is free again, yet nothing more is sent to it.
  for (int round = 0; round < 3; ++round) {
    executor_.Succeed(1000);
    manager_->Tick();
    for (const FakeExecutor::Call& c : executor_.calls) EXPECT_EQ(c.address, "honest:1");
  }
}

// An answer a worker measured alone (the pool had no other) is withdrawn
// from the strategy database once that worker is caught forging.
TEST_F(JobManagerTest, ADistrustedWorkersUnwitnessedAnswersAreWithdrawn) {
  v1::RegisterRequest r = RegisterRequestFor("solo", "solo:1", 1);
  r.mutable_devices(0)->mutable_peak_tflops()->set_fp32(1);
  r.mutable_devices(0)->mutable_peak_tflops()->set_bf16(1);
  Register(r);
  auto first = manager_->SubmitJob(Request(600, 1));
  ASSERT_TRUE(first.ok());
  manager_->Tick();
  executor_.Succeed(1000);
  manager_->Tick();
  ASSERT_EQ(manager_->GetJob(first->job_id())->state(), "SUCCEEDED");
  const std::string signature = store_->GetJob(first->job_id())->signature;
  ASSERT_TRUE(store_->GetStrategy(signature)->has_value()) << "stored: no other worker exists";

  v1::TuneRequest again = Request(600, 1);
  again.set_force(true);
  auto second = manager_->SubmitJob(again);
  ASSERT_TRUE(second.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  v1::RunTrialResponse liar = Answered(TrialStatus::kSucceeded);
  liar.mutable_metrics()->set_tokens_per_second(1e9);
  liar.mutable_metrics()->set_step_time_median_s(1e-6);
  liar.mutable_metrics()->set_peak_memory_bytes(1 << 20);
  executor_.Answer(executor_.calls.front().request.trial_id(), 0, absl::OkStatus(), liar);
  manager_->Tick();
  EXPECT_FALSE(store_->GetStrategy(signature)->has_value()) << "withdrawn";
}

TEST_F(JobManagerTest, NegativeMemoryFailsTheTrialAndDistrustsTheWorker) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 2));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const std::string trial = executor_.calls.front().request.trial_id();
  v1::RunTrialResponse r = Answered(TrialStatus::kSucceeded);
  r.mutable_metrics()->set_tokens_per_second(1000);
  r.mutable_metrics()->set_peak_memory_bytes(-(int64_t{1} << 30));
  executor_.Answer(trial, 0, absl::OkStatus(), r);
  manager_->Tick();
  EXPECT_EQ(TrialOf(job->job_id(), trial).status(), "FAILED");
  EXPECT_THAT(TrialOf(job->job_id(), trial).reason(), HasSubstr("negative memory"));
  EXPECT_TRUE(executor_.calls.empty()) << "the only worker is distrusted";
}

// A repeat runs on another worker than the measurement it repeats; an answer
// measured by one worker of two is not stored, one measured by both is.
TEST_F(JobManagerTest, ARepeatRunsElsewhereAndOnlyAnAnswerTwoWorkersMeasuredIsStored) {
  const std::string job_id = StartWithARepeatOnTwoWorkers();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const std::string first_at = executor_.calls.front().address;
  executor_.Succeed(1000);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u) << "the confirmation";
  EXPECT_NE(executor_.calls.front().address, first_at);
  executor_.Succeed(1010);
  manager_->Tick();
  auto j = manager_->GetJob(job_id);
  ASSERT_EQ(j->state(), "SUCCEEDED") << j->status_message();
  EXPECT_THAT(j->status_message(), HasSubstr("stored in the strategy database"));
}

TEST_F(JobManagerTest, AnAnswerOneWorkerOfTwoMeasuredAloneIsNotStored) {
  AddWorker("a", 1);
  AddWorker("b", 1);
  auto job = manager_->SubmitJob(Request(600, 1));  // no confirmations (Options)
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const std::string worker = executor_.calls.front().address.substr(0, 1);
  executor_.Succeed(1000);
  manager_->Tick();
  auto j = manager_->GetJob(job->job_id());
  ASSERT_EQ(j->state(), "SUCCEEDED") << j->status_message();
  EXPECT_THAT(j->status_message(),
              HasSubstr("not stored in the strategy database: measured on worker " + worker +
                        " only, and the pool has 2"));
  EXPECT_FALSE(store_->GetStrategy(j->signature())->has_value());
}

// Two workers measure one strategy 10,000x apart: the faster claim is
// withdrawn (FAILED) and its worker distrusted; the answer is the other's.
TEST_F(JobManagerTest, OfTwoWorkersFarApartTheFasterIsDistrustedAndTheOtherAnswers) {
  const std::string job_id = StartWithARepeatOnTwoWorkers();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const std::string liar = executor_.calls.front().address == "a:1" ? "a" : "b";
  const std::string first = executor_.calls.front().request.trial_id();
  executor_.Succeed(1e7);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  executor_.Succeed(1000);
  manager_->Tick();
  EXPECT_EQ(TrialOf(job_id, first).status(), "FAILED");
  EXPECT_THAT(TrialOf(job_id, first).reason(), HasSubstr("distrusted"));
  for (const v1::Worker& w : manager_->ListWorkers()) {
    EXPECT_EQ(w.worker_id() == liar, !w.warnings().empty()) << w.DebugString();
  }
  // The honest worker measures it again until the answer settles.
  for (int i = 0; i < 5 && !executor_.calls.empty(); ++i) {
    EXPECT_NE(executor_.calls.front().address, liar + ":1");
    executor_.Succeed(1000 + i);
    manager_->Tick();
  }
  auto j = manager_->GetJob(job_id);
  EXPECT_EQ(j->state(), "SUCCEEDED") << j->status_message();
  EXPECT_NEAR(j->best_figure(), 1000, 5);
}

TEST_F(JobManagerTest, TheBestFewAreMeasuredAgainAndTheAnswerComesFromTheRepeats) {
  JobManagerOptions options = Options();
  options.confirm_top = 2;
  manager_ = std::move(*JobManager::Create(store_.get(), &executor_, &clock_, options));
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 3));
  ASSERT_TRUE(job.ok()) << job.status();
  // Three trials: an outlier (a quiet moment on a busy machine), a steady
  // fast one and a slow one.
  for (double tps : {97000.0, 66000.0, 15000.0}) {
    manager_->Tick();
    ASSERT_EQ(executor_.calls.size(), 1u);
    executor_.Succeed(tps);
  }
  manager_->Tick();
  // The search is over; the best two run again, fastest first.
  ASSERT_EQ(executor_.calls.size(), 1u);
  auto j = manager_->GetJob(job->job_id());
  EXPECT_EQ(j->state(), "RUNNING");
  EXPECT_THAT(j->status_message(), HasSubstr("measuring the best 2 again"));
  auto trials = *manager_->ListTrials(job->job_id());
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(trials[3].confirms(), trials[0].trial_id());
  EXPECT_EQ(trials[4].confirms(), trials[1].trial_id());
  EXPECT_EQ(trials[4].status(), "PENDING");
  executor_.Succeed(14000);  // the outlier, measured again
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  executor_.Succeed(65000);  // the steady one
  manager_->Tick();
  // The outlier's two measurements disagree so widely that its interval
  // still reaches the steady one's: not settled, both run once more.
  j = manager_->GetJob(job->job_id());
  EXPECT_EQ(j->state(), "RUNNING");
  EXPECT_THAT(j->status_message(), HasSubstr("not settled yet"));
  ASSERT_EQ(executor_.calls.size(), 1u);
  trials = *manager_->ListTrials(job->job_id());
  ASSERT_EQ(trials.size(), 7u);
  EXPECT_EQ(trials[5].confirms(), trials[1].trial_id()) << "the leader first";
  EXPECT_EQ(trials[6].confirms(), trials[0].trial_id());
  executor_.Succeed(65200);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  executor_.Succeed(14200);  // the first 97000 is now the one set aside
  manager_->Tick();
  j = manager_->GetJob(job->job_id());
  EXPECT_EQ(j->state(), "SUCCEEDED");
  EXPECT_EQ(j->best().strategy().text(), trials[1].strategy().text()) << "the repeats decide";
  // Of 66000, 65000 and 65200 the first is set aside; of the two kept, equally
  // close to their mean, the later trial answers.
  EXPECT_EQ(j->best().trial_id(), trials[5].trial_id());
  EXPECT_TRUE(j->best_confirmed());
  EXPECT_EQ(j->best_certainty(), "settled");
  EXPECT_EQ(j->best_measurements(), 3);
  EXPECT_NEAR(j->best_figure(), 65100, 1e-9);
  EXPECT_NEAR(j->best_spread(), (65200.0 - 65000.0) / 65000.0, 1e-9);
  EXPECT_LT(j->best_interval_low(), 65000);
  EXPECT_GT(j->best_interval_high(), 65200);
  EXPECT_THAT(j->status_message(), HasSubstr("(settled: measured 3 times"));
  // The database keeps the answering trial's figure.
  v1::QueryStrategiesRequest q;
  *q.mutable_model() = Request().model();
  q.set_seq_len(16);
  q.set_global_batch_size(4);
  auto answers = QueryStrategies(store_.get(), q);
  ASSERT_EQ(answers->size(), 1u);
  EXPECT_EQ(answers->at(0).metrics().tokens_per_second(), 65200);
  EXPECT_TRUE(answers->at(0).confirmed());
}

TEST_F(JobManagerTest, RepeatsThatNeverAgreeEndProvisionalAndAreNotStoredAsConfirmed) {
  JobManagerOptions options = Options();
  options.confirm_top = 1;
  manager_ = std::move(*JobManager::Create(store_.get(), &executor_, &clock_, options));
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 1));
  ASSERT_TRUE(job.ok());
  // 12371 tokens/s, then 3504: a busy machine. Each repeat disagrees with
  // the others until the strategy has been measured five times.
  for (double tps : {12371.0, 3504.0, 9000.0, 5000.0, 11000.0}) {
    manager_->Tick();
    ASSERT_EQ(executor_.calls.size(), 1u) << tps;
    executor_.Succeed(tps);
  }
  manager_->Tick();
  EXPECT_TRUE(executor_.calls.empty()) << "five measurements are the most";
  auto j = manager_->GetJob(job->job_id());
  EXPECT_EQ(j->state(), "SUCCEEDED");
  EXPECT_EQ(j->best_certainty(), "provisional");
  EXPECT_FALSE(j->best_confirmed());
  EXPECT_EQ(j->best_measurements(), 5);
  EXPECT_THAT(j->status_message(), HasSubstr("(provisional: measured 5 times"));
  auto model = ModelSpecFromJson("gpt2", nlohmann::json::parse(kTinyGpt));
  ASSERT_TRUE(model.ok());
  auto stored = store_->GetStrategy(ComputeSignature(*model, 16, 4, 1, "cpu"));
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_FALSE((*stored)->confirmed) << "never stored as confirmed";
}

TEST_F(JobManagerTest, AConfirmedAnswerReplacesAnOutlierInTheDatabase) {
  JobManagerOptions options = Options();
  options.confirm_top = 1;
  manager_ = std::move(*JobManager::Create(store_.get(), &executor_, &clock_, options));
  AddWorker("a", 1);
  // An answer stored by an older build: one measurement, an outlier.
  StrategyRecord outlier;
  auto model = ModelSpecFromJson("gpt2", nlohmann::json::parse(kTinyGpt));
  ASSERT_TRUE(model.ok());
  outlier.signature = ComputeSignature(*model, 16, 4, 1, "cpu");
  outlier.strategy_text =
      "mbs=4,ga=1,precision=fp32,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none";
  outlier.metrics.tokens_per_second = 1e6;
  outlier.updated_at = clock_.Now();
  JobRecord old_job;
  old_job.job_id = "job-old";
  old_job.state = JobState::kSucceeded;
  old_job.created_at = clock_.Now();
  ASSERT_TRUE(store_->CreateJob(old_job).ok());
  ASSERT_TRUE(store_->FinishJob(old_job, outlier, &ReplacesStoredAnswer).ok());

  auto job = manager_->SubmitJob(Request(600, 1));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  executor_.Succeed(500);
  manager_->Tick();
  executor_.Succeed(480);  // the repeat
  manager_->Tick();
  ASSERT_EQ(manager_->GetJob(job->job_id())->state(), "SUCCEEDED");
  auto stored = store_->GetStrategy(outlier.signature);
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_TRUE((*stored)->confirmed);
  EXPECT_EQ((*stored)->metrics.tokens_per_second, 480);
}

// Runs `r` (one trial) to its end with `tokens_per_second`; the finished job.
v1::Job RunOneTrialJob(JobManager* manager, FakeExecutor* executor, const v1::TuneRequest& r,
                       double tokens_per_second) {
  absl::StatusOr<v1::Job> job = manager->SubmitJob(r);
  EXPECT_TRUE(job.ok()) << job.status();
  if (!job.ok()) return v1::Job();
  EXPECT_EQ(job->answered_from().job_id(), "") << "expected to tune";
  manager->Tick();
  EXPECT_EQ(executor->calls.size(), 1u);
  if (executor->calls.empty()) return v1::Job();
  executor->Succeed(tokens_per_second);
  manager->Tick();
  absl::StatusOr<v1::Job> done = manager->GetJob(job->job_id());
  EXPECT_TRUE(done.ok()) << done.status();
  return done.ok() ? *done : v1::Job();
}

// The signature of the tiny model of Request() on one cpu.
std::string TinySignature() {
  auto model = ModelSpecFromJson("gpt2", nlohmann::json::parse(kTinyGpt));
  EXPECT_TRUE(model.ok());
  return model.ok() ? ComputeSignature(*model, 16, 4, 1, "cpu") : "";
}

// The strategy database's answer for TinySignature().
std::optional<StrategyRecord> StoredAnswer(Store* store) {
  auto stored = store->GetStrategy(TinySignature());
  EXPECT_TRUE(stored.ok()) << stored.status();
  return stored.ok() ? *stored : std::nullopt;
}

// Stores an answer for TinySignature() found by the finished job `job_id`
// (made here): a one-rank strategy of Request()'s space.
StrategyRecord StoreTinyAnswer(
    Store* store, const std::string& job_id, double tokens_per_second, int engine_version,
    bool confirmed, absl::Time at,
    const std::string& strategy_text =
        "mbs=4,ga=1,precision=fp32,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none") {
  StrategyRecord s;
  s.signature = TinySignature();
  s.strategy_text = strategy_text;
  s.metrics.tokens_per_second = tokens_per_second;
  s.engine_version = engine_version;
  s.confirmed = confirmed;
  s.job_id = job_id;
  s.updated_at = at;
  JobRecord job;
  job.job_id = job_id;
  job.state = JobState::kSucceeded;
  job.created_at = at;
  EXPECT_TRUE(store->CreateJob(job).ok());
  EXPECT_TRUE(store->FinishJob(job, s, &ReplacesStoredAnswer).ok());
  return s;
}

TEST_F(JobManagerTest, TuningTwiceAnswersTheSecondTimeFromTheDatabaseWithoutATrial) {
  AddWorker("a", 1);
  const v1::Job first = RunOneTrialJob(manager_.get(), &executor_, Request(600, 1), 500);
  ASSERT_EQ(first.state(), "SUCCEEDED");
  EXPECT_THAT(first.status_message(), HasSubstr("stored in the strategy database"));

  clock_.Advance(absl::Hours(1));
  auto second = manager_->SubmitJob(Request(600, 1));
  ASSERT_TRUE(second.ok()) << second.status();
  // Finished as submitted: a real job, SUCCEEDED, whose best is the stored
  // answer, saying where it came from.
  EXPECT_EQ(second->state(), "SUCCEEDED");
  EXPECT_NE(second->job_id(), first.job_id());
  EXPECT_EQ(second->trials_total(), 0);
  EXPECT_EQ(second->best().strategy().text(), first.best().strategy().text());
  EXPECT_EQ(second->best().metrics().tokens_per_second(), 500);
  EXPECT_EQ(second->best().trial_id(), "") << "no trial of this job ran";
  EXPECT_EQ(second->answered_from().job_id(), first.job_id());
  EXPECT_EQ(second->answered_from().engine_version(), absl::StrCat(kEngineVersion));
  EXPECT_EQ(second->answered_from().updated_at(), first.finished_at());
  EXPECT_EQ(second->answered_from().model_family(), "gpt2");
  EXPECT_THAT(second->status_message(),
              AllOf(HasSubstr("answered from the strategy database"), HasSubstr(first.job_id()),
                    HasSubstr(absl::StrCat("engine v", kEngineVersion)), HasSubstr("--force")));
  EXPECT_EQ(second->finished_at(), second->created_at());
  manager_->Tick();
  EXPECT_TRUE(executor_.calls.empty()) << "nothing runs";

  // It reads back the same from the store, in lists and as a watch event.
  auto again = manager_->GetJob(second->job_id());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->answered_from().job_id(), first.job_id());
  EXPECT_EQ(again->best().strategy().text(), first.best().strategy().text());
  EXPECT_THAT(*manager_->ListTrials(second->job_id()), IsEmpty());
  auto jobs = manager_->ListJobs(0);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ(jobs->at(0).job_id(), second->job_id());
  EXPECT_EQ(jobs->at(0).state(), "SUCCEEDED");
  uint64_t version = 0;
  auto event = manager_->GetJobEvent(second->job_id(), 0, false, &version);
  ASSERT_TRUE(event.ok());
  EXPECT_EQ(event->job().state(), "SUCCEEDED");
  EXPECT_EQ(version, UINT64_MAX) << "a watcher sees it finished at once";
  // The database's answer is untouched by the job it answered.
  EXPECT_EQ(StoredAnswer(store_.get())->job_id, first.job_id());
}

TEST_F(JobManagerTest, ForceTunesEvenWhenTheDatabaseHasAnAnswer) {
  AddWorker("a", 1);
  const v1::Job first = RunOneTrialJob(manager_.get(), &executor_, Request(600, 1), 500);
  ASSERT_EQ(first.state(), "SUCCEEDED");
  v1::TuneRequest forced = Request(600, 1);
  forced.set_force(true);
  const v1::Job second = RunOneTrialJob(manager_.get(), &executor_, forced, 400);
  EXPECT_EQ(second.state(), "SUCCEEDED");
  EXPECT_FALSE(second.has_answered_from());
  EXPECT_THAT(second.status_message(), HasSubstr("the strategy database keeps its answer"));
  EXPECT_EQ(StoredAnswer(store_.get())->job_id, first.job_id()) << "the faster one stays";
}

TEST_F(JobManagerTest, TheDatabaseAnswersOnlyWithAStrategyTheRequestsSpaceAllows) {
  AddWorker("a", 1);
  v1::TuneRequest fp32 = Request(600, 1);
  fp32.add_precisions("fp32");
  const v1::Job first = RunOneTrialJob(manager_.get(), &executor_, fp32, 500);
  ASSERT_EQ(first.state(), "SUCCEEDED");
  ASSERT_THAT(first.best().strategy().text(), HasSubstr("precision=fp32"));
  // A user who asks for bf16 never gets the fp32 answer: that job tunes.
  v1::TuneRequest bf16 = Request(600, 1);
  bf16.add_precisions("bf16");
  auto job = manager_->SubmitJob(bf16);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), "QUEUED");
  EXPECT_THAT(job->status_message(), HasSubstr("outside this request's candidates"));
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  EXPECT_EQ(FakeExecutor::Spec(executor_.calls.front()).strategy.precision, Precision::kBf16);
  executor_.Succeed(100);
  manager_->Tick();
  // Nor one whose methods exclude it.
  v1::TuneRequest no_fp32 = Request(600, 1);
  no_fp32.add_exclude("fp32");
  auto excluded = manager_->SubmitJob(no_fp32);
  ASSERT_TRUE(excluded.ok()) << excluded.status();
  EXPECT_FALSE(excluded->has_answered_from()) << excluded->status_message();
  // A request whose space holds the answer is answered.
  v1::TuneRequest wide = Request(600, 1);
  wide.add_precisions("bf16");
  wide.add_precisions("fp32");
  auto answered = manager_->SubmitJob(wide);
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_EQ(answered->state(), "SUCCEEDED");
  EXPECT_EQ(answered->best().strategy().text(), first.best().strategy().text());
}

TEST_F(JobManagerTest, ALoadedStrategyRunsUnlessFinetuneAsksForTheBest) {
  AddWorker("a", 1);
  const v1::Job first = RunOneTrialJob(manager_.get(), &executor_, Request(600, 1), 500);
  ASSERT_EQ(first.state(), "SUCCEEDED");
  v1::TuneRequest load = Request(600);
  load.clear_algorithm();
  load.set_load_strategy(first.best().strategy().text());
  auto run = manager_->SubmitJob(load);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_FALSE(run->has_answered_from()) << "it asks to measure that strategy";
  EXPECT_THAT(run->status_message(), HasSubstr("load_strategy runs the loaded strategy"));
  load.set_finetune(true);
  auto finetune = manager_->SubmitJob(load);
  ASSERT_TRUE(finetune.ok()) << finetune.status();
  EXPECT_EQ(finetune->answered_from().job_id(), first.job_id());
}

TEST_F(JobManagerTest, FinetuneIsAnsweredOnlyByAStoredStrategyThatKeepsTheLoadedValues) {
  AddWorker("a", 1);
  StoreTinyAnswer(
      store_.get(), "job-half", 1e6, kEngineVersion, /*confirmed=*/true, clock_.Now(),
      "mbs=4,ga=1,precision=pure_bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none");
  // The user loads bf16 autocast (ATorch's amp_native): the stored answer's
  // pure bf16 (ATorch's half) is another method, so the job tunes and says
  // why in its first status line.
  v1::TuneRequest amp = Request(600);
  amp.clear_algorithm();
  amp.set_load_strategy(R"([("amp_native", {"dtype": "bf16"})])");
  amp.set_finetune(true);
  auto tuned = manager_->SubmitJob(amp);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_FALSE(tuned->has_answered_from());
  EXPECT_EQ(tuned->state(), "QUEUED");
  EXPECT_THAT(tuned->status_message(),
              AllOf(HasSubstr("precision=pure_bf16"),
                    HasSubstr("does not keep the loaded strategy's precision=bf16")));
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  EXPECT_EQ(FakeExecutor::Spec(executor_.calls.front()).strategy.precision, Precision::kBf16)
      << "the search starts from the loaded value";
  ASSERT_TRUE(manager_->CancelJob(tuned->job_id()).ok());
  manager_->Tick();
  executor_.calls.clear();

  // Loading what the stored answer keeps is answered from the database.
  v1::TuneRequest half = amp;
  half.set_load_strategy(R"(["half"])");
  auto answered = manager_->SubmitJob(half);
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_EQ(answered->answered_from().job_id(), "job-half");
}

TEST_F(JobManagerTest, AnOlderEnginesAnswerIsTunedAgainAndReplacedEvenBySlowerFigures) {
  AddWorker("a", 1);
  // Stored before engine versions were recorded: version 0, confirmed and
  // very fast.
  StoreTinyAnswer(store_.get(), "job-legacy", 1e6, 0, /*confirmed=*/true, clock_.Now());

  auto queued = manager_->SubmitJob(Request(600, 1));
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_FALSE(queued->has_answered_from());
  EXPECT_THAT(queued->status_message(), HasSubstr("measured by an unversioned engine"));
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  executor_.Succeed(500);
  manager_->Tick();
  auto done = manager_->GetJob(queued->job_id());
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), "SUCCEEDED");
  EXPECT_THAT(done->status_message(),
              AllOf(HasSubstr("replaces the strategy database's answer measured by an "
                              "unversioned engine (job job-legacy"),
                    HasSubstr("although slower")));
  std::optional<StrategyRecord> stored = StoredAnswer(store_.get());
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->job_id, queued->job_id());
  EXPECT_EQ(stored->engine_version, kEngineVersion);
  EXPECT_EQ(stored->metrics.tokens_per_second, 500);
}

TEST_F(JobManagerTest, ANewerEnginesAnswerIsNeverReplacedByThisOnes) {
  AddWorker("a", 1);
  // Slow, but measured the newer way.
  StoreTinyAnswer(store_.get(), "job-newer", 1, kEngineVersion + 1, false, clock_.Now());

  const v1::Job job = RunOneTrialJob(manager_.get(), &executor_, Request(600, 1), 500);
  EXPECT_EQ(job.state(), "SUCCEEDED");
  EXPECT_THAT(job.status_message(),
              HasSubstr(absl::StrCat("not stored: the strategy database's answer (job job-newer, "
                                     "1 tokens/s) was measured by engine v",
                                     kEngineVersion + 1)));
  EXPECT_EQ(StoredAnswer(store_.get())->job_id, "job-newer");
}

TEST_F(JobManagerTest, AFailedJobNeverTouchesTheDatabasesAnswer) {
  AddWorker("a", 1);
  const v1::Job first = RunOneTrialJob(manager_.get(), &executor_, Request(600, 1), 500);
  ASSERT_EQ(first.state(), "SUCCEEDED");
  v1::TuneRequest forced = Request(600, 1);
  forced.set_force(true);
  auto job = manager_->SubmitJob(forced);
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  executor_.Answer(executor_.calls.front().request.trial_id(), 0, absl::OkStatus(),
                   Answered(TrialStatus::kFailed, "boom"));
  manager_->Tick();
  EXPECT_EQ(manager_->GetJob(job->job_id())->state(), "FAILED");
  EXPECT_EQ(StoredAnswer(store_.get())->job_id, first.job_id());
}

TEST_F(JobManagerTest, StrategiesAreListedWithProvenanceAndBadFiltersNameTheField) {
  AddWorker("a", 1);
  const v1::Job first = RunOneTrialJob(manager_.get(), &executor_, Request(600, 1), 500);
  ASSERT_EQ(first.state(), "SUCCEEDED");
  v1::ListStrategiesRequest q;
  auto all = ListStrategies(store_.get(), q);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  const v1::StrategyAnswer& a = all->front();
  EXPECT_EQ(a.job_id(), first.job_id());
  EXPECT_EQ(a.engine_version(), absl::StrCat(kEngineVersion));
  EXPECT_EQ(a.updated_at(), first.finished_at());
  EXPECT_EQ(a.created_at(), first.finished_at());
  EXPECT_EQ(a.model_family(), "gpt2");
  EXPECT_EQ(a.seq_len(), 16);
  EXPECT_EQ(a.global_batch_size(), 4);
  EXPECT_EQ(a.hardware(), "cpu x1");
  EXPECT_EQ(a.metrics().tokens_per_second(), 500);
  EXPECT_EQ(a.strategy().text(), first.best().strategy().text());
  q.set_model_family("llama");
  EXPECT_THAT(*ListStrategies(store_.get(), q), IsEmpty());
  q.set_model_family("gpt2");
  q.set_device_type("cuda");
  EXPECT_THAT(*ListStrategies(store_.get(), q), IsEmpty());
  q.set_device_type("cpu");
  EXPECT_THAT(*ListStrategies(store_.get(), q), SizeIs(1));
  q.set_model_family("resnet");
  EXPECT_THAT(std::string(ListStrategies(store_.get(), q).status().message()),
              StartsWith("model_family: unknown 'resnet'"));
  q.set_model_family("");
  q.set_device_type("tpu");
  EXPECT_THAT(std::string(ListStrategies(store_.get(), q).status().message()),
              StartsWith("device_type: unknown 'tpu'"));
  q.set_device_type("");
  q.set_limit(5000);
  EXPECT_THAT(std::string(ListStrategies(store_.get(), q).status().message()),
              StartsWith("limit: "));
}

}  // namespace
}  // namespace autoaccel

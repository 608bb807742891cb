// The job manager across a restart and a shutdown: jobs resumed, trials
// taken up again from the workers that kept them, or cut and run again.
#include "tests/job_manager_fixture.h"

namespace autoaccel {
namespace {

TEST_F(JobManagerTest, ARestartedCoordinatorTakesUpATorchScriptJobFromItsKeptFile) {
  const std::string file(4096, 'x');
  const std::string job_id = StartJob(TorchScriptRequest(file));
  Restart();
  ASSERT_EQ(manager_->GetJob(job_id)->state(), "WAITING_FOR_WORKERS");  // not failed
  AddWorker("a", 1);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u) << manager_->GetJob(job_id)->status_message();
  v1::RunTrialResponse missing;
  missing.set_model_file_missing(true);
  executor_.Answer(executor_.calls.front().request.trial_id(), 0, absl::OkStatus(), missing);
  ASSERT_EQ(executor_.stored.size(), 1u);
  EXPECT_EQ(executor_.stored[0].model_file(), file);

  // A file changed on disk does not match the job's signature: the job is
  // closed saying so, and the file deleted.
  const std::string second = StartJob(TorchScriptRequest(std::string(4096, 'y')));
  {
    std::ofstream out(dir_ + "/db.sqlite.model-files/" + second + ".pt", std::ios::trunc);
    out << std::string(4096, 'z');
  }
  Restart();
  EXPECT_EQ(manager_->GetJob(second)->state(), "FAILED");
  EXPECT_THAT(manager_->GetJob(second)->status_message(), HasSubstr("signature"));
  EXPECT_EQ(ModelFiles(), std::vector<std::string>{job_id + ".pt"});
}

// The coordinator is killed with two trials in flight and started again on
// the same store: the job goes on with its original deadline; its worker
// registers again reporting one of the two still running (attached to, as
// attempt 1) but not the other (run again as attempt 2), and a rank of a
// trial no job runs (cancelled); the search takes up the trials recorded (no
// strategy measured twice, the trial budget kept), and the job ends as if
// nothing happened but the retry.
TEST_F(JobManagerTest, ARestartedCoordinatorResumesItsJobsWithoutMeasuringAStrategyTwice) {
  AddWorker("a", 2);
  auto job = manager_->SubmitJob(Request(600, 5));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);
  executor_.Succeed(10);  // t0
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);  // t1, t2 in flight
  clock_.Advance(absl::Seconds(100));
  Restart();

  auto resumed = manager_->GetJob(job->job_id());
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->state(), "RUNNING");
  EXPECT_THAT(resumed->status_message(),
              HasSubstr("resumed after a coordinator restart (3 trial(s) recorded, 2 waiting for "
                        "their workers)"));
  EXPECT_EQ(resumed->deadline(), job->deadline()) << "the limit counts from submission";
  const std::string t1 = job->job_id() + "-t0001", t2 = job->job_id() + "-t0002";
  EXPECT_EQ(TrialOf(job->job_id(), t1).status(), "RUNNING");
  EXPECT_EQ(TrialOf(job->job_id(), job->job_id() + "-t0000").status(), "SUCCEEDED");

  // Nothing runs until the worker is back.
  manager_->Tick();
  EXPECT_TRUE(executor_.calls.empty());
  v1::RegisterRequest back = RegisterRequestFor("a", "a:1", 2);
  v1::RunningRank* running = back.add_running_ranks();
  running->set_trial_id(t1);
  running->set_attempt(1);
  running->set_device_index(1);
  v1::RunningRank* stray = back.add_running_ranks();
  stray->set_trial_id("job-gone-t0003");
  stray->set_attempt(2);
  Register(back);
  EXPECT_THAT(executor_.cancelled, ElementsAre("job-gone-t0003"));
  EXPECT_THAT(Holders("a"), ElementsAre("", t1)) << "the device its rank runs on is held";
  v1::Trial retried = TrialOf(job->job_id(), t2);
  EXPECT_EQ(retried.status(), "PENDING");
  EXPECT_THAT(retried.failed_attempts(),
              ElementsAre("attempt 1: interrupted by a coordinator restart (worker a registered "
                          "again without it)"));
  ASSERT_EQ(executor_.calls.size(), 1u) << "attached to at once";
  EXPECT_EQ(executor_.calls[0].request.trial_id(), t1);
  EXPECT_EQ(executor_.calls[0].request.attempt(), 1);
  EXPECT_TRUE(executor_.calls[0].request.attach_only());
  EXPECT_EQ(executor_.calls[0].request.device_index(), 1);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);
  EXPECT_EQ(executor_.calls[1].request.trial_id(), t2);
  EXPECT_EQ(executor_.calls[1].request.attempt(), 2);
  EXPECT_FALSE(executor_.calls[1].request.attach_only());
  EXPECT_EQ(executor_.calls[1].request.device_index(), 0);
  EXPECT_THAT(manager_->GetJob(job->job_id())->algorithm(),
              HasSubstr("took up 3 recorded trial(s) after a restart"));
  double tps = 20;
  while (!executor_.calls.empty()) {
    executor_.Succeed(tps++);
    manager_->Tick();
  }
  auto done = manager_->GetJob(job->job_id());
  EXPECT_EQ(done->state(), "SUCCEEDED") << done->status_message();
  auto trials = manager_->ListTrials(job->job_id());
  std::set<std::string> strategies;
  int run = 0;
  for (const v1::Trial& t : *trials) {
    if (t.status() == "PRUNED") continue;
    ++run;
    EXPECT_EQ(t.status(), "SUCCEEDED") << t.trial_id();
    EXPECT_TRUE(strategies.insert(t.strategy_json()).second)
        << "measured twice: " << t.strategy_json();
  }
  EXPECT_EQ(run, 5) << "the trial budget counts the trials before the restart";
  EXPECT_EQ(TrialOf(job->job_id(), t1).attempt(), 1) << "taken up, not run again";
  EXPECT_TRUE(TrialOf(job->job_id(), t1).failed_attempts().empty());
}

// A trial whose workers do not come back within the reattach window runs
// again as its next attempt.
TEST_F(JobManagerTest, ARestartedTrialWhoseWorkersDoNotReportItRunsAgain) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 2));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  Restart();
  const std::string t0 = job->job_id() + "-t0000";
  manager_->Tick();
  EXPECT_EQ(TrialOf(job->job_id(), t0).status(), "RUNNING");
  clock_.Advance(Options().reattach_window);
  manager_->Tick();
  v1::Trial t = TrialOf(job->job_id(), t0);
  EXPECT_EQ(t.status(), "PENDING");
  EXPECT_THAT(t.failed_attempts(),
              ElementsAre("attempt 1: interrupted by a coordinator restart (its workers did not "
                          "report it in time)"));
  AddWorker("b", 1);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  EXPECT_EQ(executor_.calls[0].request.trial_id(), t0);
  EXPECT_EQ(executor_.calls[0].request.attempt(), 2);
}

// A gang taken up after a restart: every rank is re-attached once all are
// reported, and rank 0's rendezvous port stays held, so a new gang on that
// host gets another one.
TEST_F(JobManagerTest, ARestartedGangIsTakenUpWholeAndKeepsItsRendezvousPort) {
  AddWorker("a", 2, 29500, 29501);
  auto [job_id, trial_id] = StartGang(2);
  ASSERT_FALSE(trial_id.empty());
  ASSERT_EQ(FakeExecutor::Spec(executor_.calls[0]).master_port, 29500);
  Restart();

  v1::RegisterRequest back = RegisterRequestFor("a", "a:1", 2, 29500, 29501);
  for (int rank : {0, 1}) {
    v1::RunningRank* r = back.add_running_ranks();
    r->set_trial_id(trial_id);
    r->set_attempt(1);
    r->set_rank(rank);
    r->set_device_index(rank);
    r->set_rendezvous_port(rank == 0 ? 29500 : 0);
  }
  Register(back);
  ASSERT_EQ(executor_.calls.size(), 2u) << "both ranks attached";
  for (const auto& c : executor_.calls) {
    EXPECT_TRUE(c.request.attach_only());
    EXPECT_EQ(c.request.attempt(), 1);
  }
  EXPECT_THAT(Holders("a"), ElementsAre(trial_id, trial_id));

  // Another worker on the same host, and another gang: not on 29500.
  Register(RegisterRequestFor("a2", "a:2", 2, 29500, 29501));
  ASSERT_TRUE(manager_->SubmitJob(Gang(2, 1)).ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 4u);
  EXPECT_EQ(FakeExecutor::Spec(executor_.calls[2]).master_port, 29501)
      << "the taken-up gang still serves its rendezvous on 29500";

  // Once the first gang answers, its port is free again.
  executor_.Succeed(10);
  executor_.Succeed(10);
  manager_->Tick();
  EXPECT_EQ(manager_->GetJob(job_id)->state(), "SUCCEEDED");
  EXPECT_EQ(TrialOf(job_id, trial_id).attempt(), 1);
  v1::TuneRequest third = Gang(2, 1);
  third.set_force(true);  // measured, not answered from the strategy database
  ASSERT_TRUE(manager_->SubmitJob(third).ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 4u);
  EXPECT_EQ(FakeExecutor::Spec(executor_.calls.back()).master_port, 29500);
}

// A job whose time limit passed while no coordinator ran ends at the first
// tick of the next, with what it measured; one whose stored request is
// refused now (a model family this server does not know) is closed FAILED
// saying why.
TEST_F(JobManagerTest, ARestartEndsJobsPastTheirLimitAndFailsThoseItCannotResume) {
  AddWorker("a", 2);
  auto short_job = manager_->SubmitJob(Request(60, 5));
  ASSERT_TRUE(short_job.ok());
  manager_->Tick();
  executor_.Succeed(10);
  auto broken = manager_->SubmitJob(Request(600, 5));
  ASSERT_TRUE(broken.ok());
  manager_.reset();
  executor_.calls.clear();
  absl::StatusOr<JobRecord> record = store_->GetJob(broken->job_id());
  ASSERT_TRUE(record.ok());
  record->request_json = R"({"model": {"family": "gpt9"}, "seq_len": 16})";
  ASSERT_TRUE(store_->UpdateJob(*record).ok());
  clock_.Advance(absl::Seconds(61));
  auto again = JobManager::Create(store_.get(), &executor_, &clock_, Options());
  ASSERT_TRUE(again.ok()) << again.status();
  manager_ = std::move(*again);
  auto failed = manager_->GetJob(broken->job_id());
  EXPECT_EQ(failed->state(), "FAILED");
  EXPECT_THAT(failed->status_message(),
              HasSubstr("cannot resume: its stored request is refused now"));
  manager_->Tick();
  auto ended = manager_->GetJob(short_job->job_id());
  EXPECT_EQ(ended->state(), "SUCCEEDED");
  EXPECT_THAT(ended->status_message(), HasSubstr("time limit"));
  EXPECT_TRUE(executor_.calls.empty());
}

// A shutdown that cuts a trial still awaiting its workers after a restart
// records it once: the reattach window passing later changes nothing.
TEST_F(JobManagerTest, AShutdownCutsATrialAwaitingItsWorkersOnce) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 2));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  Restart();
  manager_->Shutdown();
  EXPECT_EQ(manager_->CutRunning(), 1);
  clock_.Advance(Options().reattach_window);
  manager_->Tick();
  const v1::Trial t = TrialOf(job->job_id(), job->job_id() + "-t0000");
  EXPECT_EQ(t.status(), "PENDING");
  EXPECT_THAT(t.failed_attempts(), ElementsAre("attempt 1: cut by the coordinator's shutdown"));
}

// SIGTERM: no trial starts any more, the job stays unfinished; a trial
// still running after the drain is cut (its worker told to stop) and
// recorded as such, and the next coordinator runs it again.
TEST_F(JobManagerTest, AShutdownStartsNothingAndRecordsTheTrialsItCuts) {
  AddWorker("a", 2);
  auto job = manager_->SubmitJob(Request(600, 4));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);
  manager_->Shutdown();
  executor_.Succeed(10);  // answers still count during the drain
  manager_->Tick();
  EXPECT_EQ(executor_.calls.size(), 1u) << "no new trial once shutting down";
  EXPECT_FALSE(manager_->Drain(absl::ZeroDuration()));
  EXPECT_EQ(manager_->CutRunning(), 1);
  const std::string cut = job->job_id() + "-t0001";
  EXPECT_THAT(executor_.cancelled, ElementsAre(cut));
  v1::Trial t = TrialOf(job->job_id(), cut);
  EXPECT_EQ(t.status(), "PENDING");
  EXPECT_THAT(t.failed_attempts(), ElementsAre("attempt 1: cut by the coordinator's shutdown"));
  auto stopped = manager_->GetJob(job->job_id());
  EXPECT_EQ(stopped->state(), "RUNNING");
  EXPECT_THAT(stopped->status_message(), HasSubstr("goes on when it starts again"));
  executor_.Answer(cut, 0, absl::CancelledError("cancelled"));  // changes nothing now
  EXPECT_EQ(TrialOf(job->job_id(), cut).status(), "PENDING");

  Restart();
  AddWorker("a", 2);
  manager_->Tick();
  ASSERT_FALSE(executor_.calls.empty());
  EXPECT_EQ(executor_.calls[0].request.trial_id(), cut);
  EXPECT_EQ(executor_.calls[0].request.attempt(), 2);
}

}  // namespace
}  // namespace autoaccel

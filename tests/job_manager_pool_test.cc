// The job manager and its pool: gangs placed on workers and ports, ranks
// that fail or are lost, retries, quarantine, sessions.
#include "tests/job_manager_fixture.h"

namespace autoaccel {
namespace {

TEST_F(JobManagerTest, ALargePoolIsListedPageByPageWithTheWholePoolsCounts) {
  for (int i = 0; i < 100; ++i) {  // each listed in ~120 KiB (devices named at length)
    const std::string id = absl::StrFormat("w%03d", i);
    v1::RegisterRequest r = RegisterRequestFor(id, id + ":1", 1024);
    for (v1::Device& d : *r.mutable_devices()) d.set_name(std::string(100, 'n'));
    Register(r);
  }
  v1::ListWorkersRequest request;
  std::set<std::string> seen;
  int pages = 0;
  do {
    absl::StatusOr<v1::ListWorkersResponse> page = manager_->ListWorkers(request);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->ByteSizeLong(), size_t{2} << 20);  // 100 workers at once were ~12 MiB
    ASSERT_FALSE(page->workers().empty());
    EXPECT_EQ(page->workers_total(), 100);
    EXPECT_EQ(page->workers_healthy(), 100);
    EXPECT_EQ(page->devices_total(), 100 * 1024);
    EXPECT_EQ(page->devices_free(), 100 * 1024);
    for (const v1::Worker& w : page->workers()) EXPECT_TRUE(seen.insert(w.worker_id()).second);
    request.set_page_token(page->next_page_token());
    ++pages;
  } while (!request.page_token().empty() && pages < 100);
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_GT(pages, 1);

  request.Clear();
  request.set_limit(7);
  absl::StatusOr<v1::ListWorkersResponse> page = manager_->ListWorkers(request);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->workers_size(), 7);
  EXPECT_EQ(page->next_page_token(), "w006");
  request.set_page_token("w098");
  page = manager_->ListWorkers(request);
  ASSERT_EQ(page->workers_size(), 1);
  EXPECT_EQ(page->workers(0).worker_id(), "w099");
  EXPECT_EQ(page->next_page_token(), "");
  request.set_limit(-1);
  EXPECT_EQ(manager_->ListWorkers(request).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobManagerTest, ALostWorkersTrialIsRetriedElsewhereAsANewAttempt) {
  AddWorker("a", 1);
  AddWorker("b", 1);
  auto job = manager_->SubmitJob(Request(600, 3));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);
  if (executor_.calls[0].address != "a:1") std::swap(executor_.calls[0], executor_.calls[1]);
  const std::string on_a = executor_.calls[0].request.trial_id();
  // Only b keeps heartbeating.
  clock_.Advance(absl::Seconds(11));
  ASSERT_TRUE(Beat("b").ok());
  manager_->Tick();
  v1::Trial t = TrialOf(job->job_id(), on_a);
  EXPECT_EQ(t.status(), "PENDING") << "a lost worker says nothing about the strategy";
  EXPECT_THAT(t.failed_attempts(), ElementsAre(HasSubstr("worker a lost")));
  EXPECT_FALSE(manager_->ListWorkers()[0].healthy());
  // The RPC to the dead worker fails as well: harmless, already accounted for.
  executor_.Fail(absl::UnavailableError("connection reset"));
  executor_.Succeed(10);  // b's trial
  manager_->Tick();
  // The lost trial goes first, to b, as attempt 2, before any new proposal.
  ASSERT_EQ(executor_.calls.size(), 1u);
  EXPECT_EQ(executor_.calls[0].address, "b:1");
  EXPECT_EQ(executor_.calls[0].request.trial_id(), on_a);
  EXPECT_EQ(executor_.calls[0].request.attempt(), 2);
  executor_.Succeed(20);
  t = TrialOf(job->job_id(), on_a);
  EXPECT_EQ(t.status(), "SUCCEEDED");
  EXPECT_EQ(t.attempt(), 2);
  EXPECT_FALSE(t.infrastructure());
  auto j = manager_->GetJob(job->job_id());
  EXPECT_EQ(j->infrastructure_failures(), 1);
  EXPECT_EQ(j->trials_lost(), 0);
  EXPECT_FALSE(j->partial_evidence());
  EXPECT_EQ(j->best().trial_id(), on_a);
}

TEST_F(JobManagerTest, RankErrorsBecomeTrialStatusesAndAnUnreachableWorkerIsRetried) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 2));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  const std::string first = executor_.calls.front().request.trial_id();
  executor_.Fail(absl::UnavailableError("connection refused"));
  manager_->Tick();
  // An unreachable worker gets no new trial until it heartbeats again.
  EXPECT_TRUE(executor_.calls.empty());
  EXPECT_FALSE(manager_->ListWorkers()[0].healthy());
  EXPECT_EQ(TrialOf(job->job_id(), first).status(), "PENDING");
  ASSERT_TRUE(Beat("a").ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  EXPECT_EQ(executor_.calls.front().request.trial_id(), first);
  EXPECT_EQ(executor_.calls.front().request.attempt(), 2);
  executor_.Answer(first, 0, absl::OkStatus(),
                   Answered(TrialStatus::kOom, "tried to allocate 1 GiB"));
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const std::string second = executor_.calls.front().request.trial_id();
  executor_.Answer(second, 0, absl::OkStatus(),
                   Answered(TrialStatus::kFailed, "loss is not finite"));
  manager_->Tick();
  auto trials = manager_->ListTrials(job->job_id());
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[0].status(), "OOM");
  EXPECT_EQ((*trials)[0].reason(), "tried to allocate 1 GiB");
  EXPECT_THAT((*trials)[0].failed_attempts(),
              ElementsAre("attempt 1: worker a: connection refused"));
  EXPECT_EQ((*trials)[1].status(), "FAILED");
  EXPECT_FALSE((*trials)[1].infrastructure()) << "the strategy's own error is not retried";
  EXPECT_EQ((*trials)[1].attempt(), 1);
  auto done = manager_->GetJob(job->job_id());
  EXPECT_EQ(done->state(), "FAILED");
  EXPECT_THAT(done->status_message(), HasSubstr("no trial succeeded"));
}

TEST_F(JobManagerTest, SingleRankTrialsGetNoRendezvousPort) {
  AddWorker("a", 2);
  ASSERT_TRUE(manager_->SubmitJob(Request(60, 2)).ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);
  for (const FakeExecutor::Call& c : executor_.calls) {
    const TrialSpec spec = FakeExecutor::Spec(c);
    EXPECT_EQ(spec.world_size, 1);
    EXPECT_EQ(spec.rank, 0);
    EXPECT_EQ(spec.local_rank, 0);
    EXPECT_EQ(spec.master_port, 0);
  }
}

TEST_F(JobManagerTest, GangTrialsOnOneWorkerGetDistinctPortsReusedAfterRelease) {
  AddWorker("a", 6, 29500, 29501);  // room for three 2-rank trials, ports for two
  auto job = manager_->SubmitJob(Gang(2, 3));
  ASSERT_TRUE(job.ok()) << job.status();
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 4u);
  std::map<std::string, std::vector<TrialSpec>> by_trial;
  for (const FakeExecutor::Call& c : executor_.calls) {
    EXPECT_EQ(c.address, "a:1");
    by_trial[c.request.trial_id()].push_back(FakeExecutor::Spec(c));
  }
  ASSERT_EQ(by_trial.size(), 2u);
  std::set<int> ports;
  for (const auto& [id, specs] : by_trial) {
    ASSERT_EQ(specs.size(), 2u);
    for (const TrialSpec& spec : specs) {
      EXPECT_EQ(spec.world_size, 2);
      EXPECT_EQ(spec.local_rank, spec.rank);  // both ranks on a
      EXPECT_EQ(spec.master_addr, "a");
      EXPECT_EQ(spec.master_port, specs[0].master_port) << "ranks of one trial meet on one port";
    }
    ports.insert(specs[0].master_port);
  }
  EXPECT_EQ(ports, (std::set<int>{29500, 29501}));
  // Two devices are free but no port: the third trial waits, holding nothing.
  manager_->Tick();
  EXPECT_EQ(executor_.calls.size(), 4u);
  EXPECT_EQ(manager_->ListTrials(job->job_id())->size(), 2u);
  EXPECT_THAT(Holders("a"), ::testing::Contains("").Times(2));

  // Rank 1 of the trial on 29500 answering frees its device, not the port;
  // rank 0 answering frees the port, and the third trial gets it.
  std::string first;
  for (const auto& [id, specs] : by_trial) {
    if (specs[0].master_port == 29500) first = id;
  }
  executor_.Answer(first, 1, absl::OkStatus(), Answered(TrialStatus::kSucceeded));
  manager_->Tick();
  EXPECT_EQ(executor_.calls.size(), 3u);
  executor_.Answer(first, 0, absl::OkStatus(), Answered(TrialStatus::kSucceeded));
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 4u);
  const FakeExecutor::Call& third = executor_.calls.back();
  EXPECT_EQ(FakeExecutor::Spec(third).master_port, 29500);
  EXPECT_EQ(TrialOf(job->job_id(), first).status(), "SUCCEEDED");
}

TEST_F(JobManagerTest, RankZeroGoesToTheFirstWorkerWithAFreePort) {
  AddWorker("a", 4, 29500, 29500);
  AddWorker("b", 3, 29600, 29699);
  auto job = manager_->SubmitJob(Gang(2, 3));
  ASSERT_TRUE(job.ok()) << job.status();
  manager_->Tick();
  // Trial 0 fits b best (3 free), trial 1 then fits a (its only port); trial
  // 2 fits a's two free devices, but a has no port left: rank 0 goes to b.
  ASSERT_EQ(executor_.calls.size(), 6u);
  std::map<std::string, std::vector<std::pair<std::string, TrialSpec>>> by_trial;
  for (const FakeExecutor::Call& c : executor_.calls) {
    by_trial[c.request.trial_id()].push_back({c.address, FakeExecutor::Spec(c)});
  }
  ASSERT_EQ(by_trial.size(), 3u);
  const std::vector<std::vector<std::string>> where = {
      {"b:1", "b:1"}, {"a:1", "a:1"}, {"b:1", "a:1"}};
  const std::vector<int> ports = {29600, 29500, 29601};
  int i = 0;
  for (const auto& [id, ranks] : by_trial) {
    ASSERT_EQ(ranks.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(ranks[r].first, where[i][r]) << id << " rank " << r;
      EXPECT_EQ(ranks[r].second.rank, r);
      EXPECT_EQ(ranks[r].second.master_addr, where[i][0].substr(0, 1)) << id;
      EXPECT_EQ(ranks[r].second.master_port, ports[i]) << id;
    }
    ++i;
  }
  // Trial 2's ranks are on two workers: local rank 0 on each.
  EXPECT_EQ(by_trial.rbegin()->second[1].second.local_rank, 0);
}

TEST_F(JobManagerTest, GangRanksPackOntoFewWorkersWithLocalRanks) {
  AddWorker("a", 2);
  AddWorker("b", 3);
  auto job = manager_->SubmitJob(Gang(4, 1));
  ASSERT_TRUE(job.ok()) << job.status();
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 4u);
  std::map<int, std::pair<std::string, TrialSpec>> by_rank;
  std::set<int> devices_on_b;
  for (const FakeExecutor::Call& c : executor_.calls) {
    const TrialSpec spec = FakeExecutor::Spec(c);
    by_rank[spec.rank] = {c.address, spec};
    if (c.address == "b:1") devices_on_b.insert(c.request.device_index());
  }
  ASSERT_EQ(by_rank.size(), 4u);
  // The worker with the most free devices is filled first, rank 0 on it.
  const std::vector<std::pair<std::string, int>> expected = {
      {"b:1", 0}, {"b:1", 1}, {"b:1", 2}, {"a:1", 0}};
  for (int rank = 0; rank < 4; ++rank) {
    const auto& [address, spec] = by_rank[rank];
    EXPECT_EQ(address, expected[rank].first) << "rank " << rank;
    EXPECT_EQ(spec.local_rank, expected[rank].second) << "rank " << rank;
    EXPECT_EQ(spec.world_size, 4);
    EXPECT_EQ(spec.master_addr, "b");
    EXPECT_EQ(spec.master_port, 29500);
  }
  EXPECT_EQ(devices_on_b, (std::set<int>{0, 1, 2}));
  EXPECT_THAT(manager_->ListTrials(job->job_id())->at(0).worker_ids(),
              ElementsAre("b", "b", "b", "a"));
  EXPECT_THAT(Holders("a"), ElementsAre(Not(""), ""));
}

TEST_F(JobManagerTest, AFailingRankEndsTheTrialCancelsItsSiblingsAndNamesItself) {
  AddWorker("a", 1);
  AddWorker("b", 1);
  auto job = manager_->SubmitJob(Gang(2, 3));
  ASSERT_TRUE(job.ok()) << job.status();
  struct Case {
    absl::Status rpc;
    v1::RunTrialResponse response;
    std::string status, reason;
  };
  const std::vector<Case> cases = {
      {absl::OkStatus(), Answered(TrialStatus::kFailed, "NCCL error: boom"), "FAILED",
       "rank 1 on worker b: NCCL error: boom"},
      {absl::OkStatus(), Answered(TrialStatus::kOom, "tried to allocate 1 GiB"), "OOM",
       "rank 1 on worker b: tried to allocate 1 GiB"},
      {absl::OkStatus(), Answered(TrialStatus::kTimeout, "trial exceeded its 1m timeout"),
       "TIMEOUT", "rank 1 on worker b: trial exceeded its 1m timeout"},
  };
  for (const Case& c : cases) {
    manager_->Tick();
    ASSERT_EQ(executor_.calls.size(), 2u) << c.status;
    const std::string trial = executor_.calls[0].request.trial_id();
    executor_.cancelled_at.clear();
    executor_.Answer(trial, 1, c.rpc, c.response);
    v1::Trial t = TrialOf(job->job_id(), trial);
    EXPECT_EQ(t.status(), c.status);
    EXPECT_EQ(t.reason(), c.reason);
    EXPECT_THAT(executor_.cancelled_at, ElementsAre("a:1")) << "the sibling is told to stop";
    // Rank 0 holds its device (and the port) until its own answer comes.
    EXPECT_THAT(Holders("a"), ElementsAre(trial));
    EXPECT_THAT(Holders("b"), ElementsAre(""));
    manager_->Tick();
    EXPECT_TRUE(executor_.calls.size() == 1u) << "no new trial while rank 0 holds a";
    // Rank 0 then fails because its peer went away: the first reason stands.
    executor_.Answer(trial, 0, absl::OkStatus(),
                     Answered(TrialStatus::kFailed, "Connection reset by peer (gloo)"));
    t = TrialOf(job->job_id(), trial);
    EXPECT_EQ(t.status(), c.status);
    EXPECT_EQ(t.reason(), c.reason);
    EXPECT_THAT(Holders("a"), ElementsAre(""));
  }
  manager_->Tick();
  EXPECT_EQ(manager_->GetJob(job->job_id())->state(), "FAILED");
}

TEST_F(JobManagerTest, ARanksFailedRpcCancelsItsSiblingsAndRetriesTheTrialOnAnotherPort) {
  AddWorker("a", 1);
  AddWorker("b", 1);
  const auto [job_id, trial] = StartGang(2);
  ASSERT_FALSE(trial.empty());
  const int port = FakeExecutor::Spec(executor_.calls[0]).master_port;
  executor_.Answer(trial, 0, absl::UnavailableError("connection refused"));
  EXPECT_EQ(TrialOf(job_id, trial).status(), "RUNNING") << "rank 1 has not answered yet";
  EXPECT_THAT(executor_.cancelled_at, ElementsAre("b:1"));
  executor_.Answer(trial, 1, absl::OkStatus(), Answered(TrialStatus::kCancelled, "cancelled"));
  v1::Trial t = TrialOf(job_id, trial);
  EXPECT_EQ(t.status(), "PENDING");
  EXPECT_THAT(t.failed_attempts(),
              ElementsAre("attempt 1: rank 0 on worker a: connection refused"));
  EXPECT_THAT(Holders("b"), ElementsAre(""));
  ASSERT_TRUE(Beat("a").ok());  // reachable again
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);
  for (const FakeExecutor::Call& c : executor_.calls) {
    EXPECT_EQ(c.request.trial_id(), trial);
    EXPECT_EQ(c.request.attempt(), 2);
    EXPECT_NE(FakeExecutor::Spec(c).master_port, port) << "the port it failed on rests a while";
  }
}

TEST_F(JobManagerTest, ALostWorkerCancelsTheGangsOtherRanksAndTheTrialIsRetried) {
  AddWorker("a", 1);
  AddWorker("b", 1);
  AddWorker("c", 1);
  const auto [job_id, trial] = StartGang(2);
  ASSERT_FALSE(trial.empty());
  std::string silent = executor_.calls[1].address.substr(0, 1);
  std::string alive = executor_.calls[0].address.substr(0, 1);
  clock_.Advance(absl::Seconds(11));
  for (const char* w : {"a", "b", "c"}) {
    if (w != silent) {
      ASSERT_TRUE(Beat(w).ok());
    }
  }
  manager_->Tick();
  EXPECT_THAT(executor_.cancelled_at, ::testing::Contains(alive + ":1"));
  // Devices stay held until each rank's RPC comes back; the trial waits for
  // the surviving rank's answer before it is retried.
  EXPECT_THAT(Holders(alive), ElementsAre(trial));
  EXPECT_EQ(TrialOf(job_id, trial).status(), "RUNNING");
  executor_.Answer(trial, 0, absl::OkStatus(), Answered(TrialStatus::kCancelled, "cancelled"));
  v1::Trial t = TrialOf(job_id, trial);
  EXPECT_EQ(t.status(), "PENDING");
  EXPECT_THAT(t.failed_attempts(),
              ElementsAre(absl::StrCat("attempt 1: rank 1 on worker ", silent,
                                       ": worker lost (no heartbeat for 11s)")));
  executor_.Answer(trial, 1, absl::DeadlineExceededError("deadline exceeded"));
  EXPECT_THAT(Holders(silent), ElementsAre(""));
  manager_->Tick();  // attempt 2 on the two healthy workers
  ASSERT_EQ(executor_.calls.size(), 2u);
  for (const FakeExecutor::Call& c : executor_.calls) {
    EXPECT_NE(c.address, silent + ":1");
    EXPECT_EQ(c.request.attempt(), 2);
  }
}

TEST_F(JobManagerTest, AStrategyFailureOfOneRankWinsOverItsPeersLossOfConnection) {
  AddWorker("a", 1);
  AddWorker("b", 1);
  const auto [job_id, trial] = StartGang(2);
  ASSERT_FALSE(trial.empty());
  // Rank 0 sees its peer vanish first; rank 1's own answer says why.
  v1::RunTrialResponse lost = Answered(TrialStatus::kFailed, "Connection reset by peer (gloo)");
  lost.set_infrastructure(true);
  executor_.Answer(trial, 0, absl::OkStatus(), lost);
  executor_.Answer(trial, 1, absl::OkStatus(),
                   Answered(TrialStatus::kOom, "tried to allocate 1 GiB"));
  v1::Trial t = TrialOf(job_id, trial);
  EXPECT_EQ(t.status(), "OOM");
  EXPECT_EQ(t.reason(), "rank 1 on worker b: tried to allocate 1 GiB");
  EXPECT_TRUE(t.failed_attempts().empty());
  EXPECT_EQ(t.attempt(), 1);
}

TEST_F(JobManagerTest, ATrialFailingOutsideTheStrategyEveryTimeIsLostAndTheAnswerIsPartial) {
  AddWorker("a", 1);
  AddWorker("b", 1);
  for (const bool store_partial : {false, true}) {
    v1::TuneRequest r = Gang(2, 2);
    r.set_store_partial(store_partial);
    auto job = manager_->SubmitJob(r);
    ASSERT_TRUE(job.ok()) << job.status();
    manager_->Tick();
    ASSERT_EQ(executor_.calls.size(), 2u);
    const std::string doomed = executor_.calls[0].request.trial_id();
    v1::RunTrialResponse rendezvous =
        Answered(TrialStatus::kFailed, "rendezvous at a:29500 failed");
    rendezvous.set_infrastructure(true);
    for (int attempt = 1; attempt <= 3; ++attempt) {
      ASSERT_EQ(executor_.calls.size(), 2u) << "attempt " << attempt;
      EXPECT_EQ(executor_.calls[0].request.attempt(), attempt);
      executor_.Answer(doomed, 0, absl::OkStatus(), rendezvous);
      executor_.Answer(doomed, 1, absl::OkStatus(), Answered(TrialStatus::kCancelled, "cancelled"));
      manager_->Tick();
    }
    v1::Trial t = TrialOf(job->job_id(), doomed);
    EXPECT_EQ(t.status(), "FAILED");
    EXPECT_TRUE(t.infrastructure());
    EXPECT_EQ(t.attempt(), 3);
    EXPECT_EQ(t.failed_attempts_size(), 3);
    EXPECT_THAT(t.reason(), HasSubstr("rendezvous at a:29500 failed"));
    // The next candidate runs and succeeds: the job succeeds, saying that
    // its answer rests on partial evidence.
    ASSERT_EQ(executor_.calls.size(), 2u);
    const std::string good = executor_.calls[0].request.trial_id();
    EXPECT_NE(good, doomed);
    executor_.Answer(good, 1, absl::OkStatus(), Answered(TrialStatus::kSucceeded));
    v1::RunTrialResponse ok = Answered(TrialStatus::kSucceeded);
    ok.mutable_metrics()->set_tokens_per_second(100);
    executor_.Answer(good, 0, absl::OkStatus(), ok);
    manager_->Tick();
    auto j = manager_->GetJob(job->job_id());
    EXPECT_EQ(j->state(), "SUCCEEDED");
    EXPECT_TRUE(j->partial_evidence());
    EXPECT_EQ(j->trials_lost(), 1);
    EXPECT_EQ(j->infrastructure_failures(), 3);
    EXPECT_THAT(j->infrastructure_reasons(),
                ElementsAre(HasSubstr("rendezvous at a:29500 failed")));
    EXPECT_THAT(j->status_message(), HasSubstr("partial evidence: 1 trial(s) lost"));
    v1::QueryStrategiesRequest q;
    *q.mutable_model() = r.model();
    q.set_seq_len(r.seq_len());
    q.set_global_batch_size(r.global_batch_size());
    q.set_world_size(2);
    auto answers = QueryStrategies(store_.get(), q);
    ASSERT_TRUE(answers.ok()) << answers.status();
    EXPECT_EQ(answers->size(), store_partial ? 1u : 0u)
        << "a partial answer is stored only when asked (store_partial " << store_partial << ")";
  }
}

TEST_F(JobManagerTest, WorkersThatOversubscribeTheirHostAreWarnedAboutAndShareItsMemory) {
  // Two workers of cpu:2 on a 2-core host, each slot claiming 1 GiB of a
  // host that has 256 KiB (far too little for even the tiny model's weights).
  AddTwoWorkersOnOneHost(2, 256 << 10);
  for (const v1::Worker& w : manager_->ListWorkers()) {
    EXPECT_THAT(w.warnings(), ElementsAre(HasSubstr("4 cpu slots on 2 cores"),
                                          HasSubstr("each slot counts with its share")))
        << w.worker_id();
  }
  // The search counts each slot with its share of the host (64 KiB), not
  // the 1 GiB claimed: nothing fits, nothing runs.
  auto job = manager_->SubmitJob(Request(600));
  ASSERT_TRUE(job.ok()) << job.status();
  manager_->Tick();
  EXPECT_TRUE(executor_.calls.empty());
  auto j = manager_->GetJob(job->job_id());
  EXPECT_EQ(j->trials_pruned(), j->trials_total());
}

TEST_F(JobManagerTest, WorkersSharingAHostNeverShareARendezvousPort) {
  // Two daemons on one machine, each offering the same range (README's setup).
  AddTwoWorkersOnOneHost();
  ASSERT_TRUE(manager_->SubmitJob(Gang(2, 4)).ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 4u);  // two trials, one per worker
  std::set<int> ports;
  for (const FakeExecutor::Call& c : executor_.calls) {
    const TrialSpec spec = FakeExecutor::Spec(c);
    EXPECT_EQ(spec.master_addr, "node7");
    ports.insert(spec.master_port);
  }
  EXPECT_EQ(ports, (std::set<int>{29500, 29501}));
}

TEST_F(JobManagerTest, GangMetricsTakeRankZerosSpeedAndTheWorstRanksMemory) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  AddWorker("a", 2);
  const auto [job_id, trial] = StartGang(2);
  ASSERT_FALSE(trial.empty());
  const auto answer = [&](int rank, double tokens, int64_t peak, int64_t rss, double comm) {
    v1::RunTrialResponse r = Answered(TrialStatus::kSucceeded);
    r.mutable_metrics()->set_tokens_per_second(tokens);
    r.mutable_metrics()->set_step_time_median_s(rank == 0 ? 0.5 : 0.4);
    r.mutable_metrics()->set_peak_memory_bytes(peak);
    r.mutable_metrics()->set_peak_rss_bytes(rss);
    r.mutable_metrics()->set_comm_time_s(comm);
    r.mutable_metrics()->set_state_memory_bytes(peak / 2);
    executor_.Answer(trial, rank, absl::OkStatus(), r);
  };
  answer(1, 1, 300 * kMiB, 5000, 0.2);
  EXPECT_EQ(TrialOf(job_id, trial).status(), "RUNNING");
  answer(0, 500, 100 * kMiB, 7000, 0.1);
  const v1::Trial t = TrialOf(job_id, trial);
  EXPECT_EQ(t.status(), "SUCCEEDED");
  EXPECT_EQ(t.metrics().tokens_per_second(), 500);
  EXPECT_EQ(t.metrics().step_time_median_s(), 0.5);
  EXPECT_THAT(t.metrics().rank_peak_memory_bytes(), ElementsAre(100 * kMiB, 300 * kMiB));
  EXPECT_EQ(t.metrics().peak_memory_bytes(), 300 * kMiB);
  EXPECT_EQ(t.metrics().peak_rss_bytes(), 7000);
  EXPECT_EQ(t.metrics().comm_time_s(), 0.2);
  EXPECT_EQ(t.metrics().state_memory_bytes(), 150 * kMiB);
}

TEST_F(JobManagerTest, WorkersAdvertiseRendezvousPorts) {
  AddWorker("a", 1);  // says nothing: the default range
  AddWorker("b", 1, 40000, 40009);
  std::vector<v1::Worker> workers = manager_->ListWorkers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].rendezvous_port_min(), 29500);
  EXPECT_EQ(workers[0].rendezvous_port_max(), 29999);
  EXPECT_EQ(workers[1].rendezvous_port_min(), 40000);
  EXPECT_EQ(workers[1].rendezvous_port_max(), 40009);
  for (std::pair<int, int> bad : {std::pair{2, 1}, std::pair{0, 5}, std::pair{1, 70000}}) {
    v1::RegisterRequest r;
    r.set_worker_id("c");
    r.set_address("c:1");
    r.add_devices()->set_type("cpu");
    r.set_rendezvous_port_min(bad.first);
    r.set_rendezvous_port_max(bad.second);
    absl::Status s = manager_->RegisterWorker(r).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.first << "-" << bad.second;
    EXPECT_THAT(s.message(), HasSubstr("rendezvous_port")) << bad.first << "-" << bad.second;
  }
}

// A registration names a worker; only the worker that holds the session token
// may register under its id again or heartbeat for it while it is alive,
// and every trial sent to it carries that token.
TEST_F(JobManagerTest, ALiveWorkersIdCannotBeTakenAndItsTrialsCarryItsSessionToken) {
  AddWorker("a", 1);
  const std::string token = sessions_["a"];
  ASSERT_FALSE(token.empty());

  absl::StatusOr<v1::RegisterResponse> forged =
      manager_->RegisterWorker(RegisterRequestFor("a", "impostor:1", 1000));
  EXPECT_EQ(forged.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(forged.status().message(), HasSubstr("live worker at a:1"));
  EXPECT_EQ(manager_->ListWorkers()[0].address(), "a:1");
  EXPECT_EQ(manager_->ListWorkers()[0].devices_size(), 1);
  EXPECT_EQ(manager_->Heartbeat("a", "not-the-token").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(manager_->Heartbeat("a", "").code(), absl::StatusCode::kPermissionDenied);

  // The worker itself registers again (e.g. a raised peak): same session.
  v1::RegisterRequest again = RegisterRequestFor("a", "a:1", 1);
  again.set_session_token(token);
  absl::StatusOr<v1::RegisterResponse> resp = manager_->RegisterWorker(again);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->session_token(), token);

  ASSERT_TRUE(manager_->SubmitJob(Request(30)).ok());
  manager_->Tick();
  ASSERT_EQ(executor_.tokens.size(), 1u);
  EXPECT_EQ(executor_.tokens[0], token);

  // Once it is lost, a new worker may take the id, with a session of its own.
  clock_.Advance(absl::Seconds(11));
  manager_->Tick();
  ASSERT_FALSE(manager_->ListWorkers()[0].healthy());
  resp = manager_->RegisterWorker(RegisterRequestFor("a", "a2:1", 1));
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_NE(resp->session_token(), token);
  EXPECT_EQ(manager_->Heartbeat("a", token).code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(JobManagerTest, LostWorkersAreForgottenOnceTheyHoldNothing) {
  AddWorker("a", 1);
  AddWorker("b", 1);
  clock_.Advance(absl::Seconds(11));
  ASSERT_TRUE(Beat("b").ok());
  manager_->Tick();  // a is lost
  ASSERT_EQ(manager_->ListWorkers().size(), 2u);
  clock_.Advance(absl::Minutes(10));
  ASSERT_TRUE(Beat("b").ok());
  manager_->Tick();
  std::vector<v1::Worker> workers = manager_->ListWorkers();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].worker_id(), "b");
  EXPECT_EQ(Beat("a").code(), absl::StatusCode::kNotFound) << "so it registers again";
}

// A worker whose ranks keep failing for reasons outside their strategy gets
// no new trials for a while; its listing says why and until when.
TEST_F(JobManagerTest, AWorkerWhoseRanksKeepFailingOutsideTheStrategyIsQuarantined) {
  AddWorker("a", 1);
  ASSERT_TRUE(manager_->SubmitJob(Request(3000)).ok());
  v1::RunTrialResponse broken =
      Answered(TrialStatus::kFailed, "NCCL error: unhandled system error");
  broken.set_infrastructure(true);
  for (int i = 0; i < 5; ++i) {  // the first trial's 3 attempts, the next one's 2
    manager_->Tick();
    ASSERT_EQ(executor_.calls.size(), 1u) << "answer " << i + 1;
    executor_.Answer(executor_.calls.front().request.trial_id(), 0, absl::OkStatus(), broken);
  }
  manager_->Tick();
  EXPECT_TRUE(executor_.calls.empty()) << "no trial for a quarantined worker";
  std::vector<v1::Worker> workers = manager_->ListWorkers();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_TRUE(workers[0].healthy());
  EXPECT_THAT(workers[0].warnings(),
              Contains(AllOf(HasSubstr("quarantined for 5m"), HasSubstr("NCCL error"))));
  // After the quarantine it gets trials again.
  clock_.Advance(absl::Minutes(5));
  ASSERT_TRUE(Beat("a").ok());
  manager_->Tick();
  EXPECT_EQ(executor_.calls.size(), 1u);
}

}  // namespace
}  // namespace autoaccel

// The job manager's jobs: requests refused naming the field, the space a
// request narrows, time limits, waiting for workers, the search (algorithms,
// warm start, pruning, early stops), watch events, and what each user holds.
#include "tests/job_manager_fixture.h"

namespace autoaccel {
namespace {

TEST_F(JobManagerTest, BadRequestsNameTheFieldAndStoreNothing) {
  v1::TuneRequest r = Request();
  r.mutable_model()->set_config_json("{not json");
  EXPECT_THAT(manager_->SubmitJob(r).status().message(), HasSubstr("model_config"));
  r = Request();
  r.mutable_model()->set_family("resnet");
  EXPECT_THAT(manager_->SubmitJob(r).status().message(), HasSubstr("model"));
  r = Request(-1);
  EXPECT_THAT(manager_->SubmitJob(r).status().message(), HasSubstr("time_limit"));
  r = Request();
  r.set_global_batch_size(6);
  r.add_micro_batch_sizes(4);
  absl::Status s = manager_->SubmitJob(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("global_batch_size"));
  r = Request();
  r.set_seq_len(64);  // beyond n_positions
  EXPECT_THAT(manager_->SubmitJob(r).status().message(), HasSubstr("seq_len"));
  EXPECT_TRUE(store_->ListJobs(0)->empty());
}

TEST_F(JobManagerTest, TorchScriptFileGoesOnceToEachWorkerButNeverIntoAnswersOrTheStore) {
  const std::string file(4096, 'x');
  v1::TuneRequest r = TorchScriptRequest(file);
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  // No layers to checkpoint, no attention choice: micro-batches 4, 2, 1 only.
  EXPECT_EQ(job->trials_total(), 3);
  EXPECT_EQ(job->request().warmup_steps(), 3);  // the JIT's profiling steps are not measured
  EXPECT_TRUE(job->request().model().script().empty());
  EXPECT_EQ(job->request().model().input_spec(), "ids:int64[B,T]<64; labels=ids");
  // Kept on disk while the job is unfinished, readable by the coordinator only.
  ASSERT_EQ(ModelFiles(), std::vector<std::string>{job->job_id() + ".pt"});
  EXPECT_EQ(std::filesystem::status(dir_ + "/db.sqlite.model-files/" + job->job_id() + ".pt")
                .permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  AddWorker("a", 1);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  EXPECT_TRUE(executor_.calls.front().request.model_file().empty());  // it goes apart
  const nlohmann::json spec = nlohmann::json::parse(executor_.calls.front().request.spec_json());
  EXPECT_EQ(spec["model_family"], "torchscript");
  EXPECT_EQ(spec["model_config"]["script_digest"], ContentDigest(file));
  // The worker lacks it: it is sent, then the rank asked again.
  v1::RunTrialResponse missing;
  missing.set_model_file_missing(true);
  executor_.Answer(executor_.calls.front().request.trial_id(), 0, absl::OkStatus(), missing);
  ASSERT_EQ(executor_.stored.size(), 1u);
  EXPECT_EQ(executor_.stored_at[0], "a:1");
  EXPECT_EQ(executor_.stored[0].model_file(), file);
  EXPECT_EQ(executor_.stored[0].digest(), ContentDigest(file));
  EXPECT_TRUE(executor_.calls.empty());
  executor_.store_done[0](absl::OkStatus());
  ASSERT_EQ(executor_.calls.size(), 1u);
  executor_.Succeed(100);
  // The next trial's worker holds it now: nothing is sent again.
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  executor_.Succeed(90);
  manager_->Tick();
  executor_.Succeed(80);
  manager_->Tick();
  EXPECT_EQ(executor_.stored.size(), 1u);
  EXPECT_EQ(manager_->GetJob(job->job_id())->state(), "SUCCEEDED");
  EXPECT_TRUE(ModelFiles().empty());  // deleted when the job ended
  auto stored = store_->ListJobs(0);
  ASSERT_TRUE(stored.ok() && stored->size() == 1u);
  EXPECT_THAT(stored->front().request_json, Not(HasSubstr("\"script\"")));

  // Refused: no file, no input spec, overrides.
  r = Request();
  r.mutable_model()->set_family("torchscript");
  r.mutable_model()->set_input_spec("ids:int64[B,T]<64");
  EXPECT_THAT(manager_->SubmitJob(r).status().message(), HasSubstr("model_file"));
  r.mutable_model()->set_script(file);
  r.mutable_model()->set_input_spec("ids:int8[B]");
  EXPECT_THAT(manager_->SubmitJob(r).status().message(), HasSubstr("input_spec"));
  r.mutable_model()->set_input_spec("ids:int64[B,T]<64");
  r.mutable_model()->add_overrides("n_layer=1");
  EXPECT_THAT(manager_->SubmitJob(r).status().message(), HasSubstr("override"));
  EXPECT_TRUE(ModelFiles().empty());
}

TEST_F(JobManagerTest, ModelFilesHeldForUnfinishedJobsAreCappedPerUserAndInAll) {
  JobManagerOptions options = Options();
  options.model_file_limits.per_user_bytes = 10'000;
  options.model_file_limits.total_bytes = 15'000;
  manager_ = std::move(*JobManager::Create(store_.get(), &executor_, &clock_, options));
  ASSERT_TRUE(manager_->SubmitJob(TorchScriptRequest(std::string(6000, 'a')), "alice").ok());
  absl::Status refused =
      manager_->SubmitJob(TorchScriptRequest(std::string(6000, 'b')), "alice").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("per-user cap"));
  ASSERT_TRUE(manager_->SubmitJob(TorchScriptRequest(std::string(6000, 'c')), "bob").ok());
  refused = manager_->SubmitJob(TorchScriptRequest(std::string(4000, 'd')), "carol").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("would pass the cap"));
  EXPECT_EQ(ModelFiles().size(), 2u);  // the refused ones left nothing
  EXPECT_EQ(store_->ListJobs(0)->size(), 2u);
  // A job that ends frees its share.
  const std::string alices = store_->ListJobs(0)->back().owner == "alice"
                                 ? store_->ListJobs(0)->back().job_id
                                 : store_->ListJobs(0)->front().job_id;
  ASSERT_TRUE(manager_->CancelJob(alices).ok());
  EXPECT_TRUE(manager_->SubmitJob(TorchScriptRequest(std::string(6000, 'b')), "alice").ok());
}

TEST_F(JobManagerTest, BadCandidateListsNameTheRequestField) {
  const auto error_of = [this](v1::TuneRequest r) {
    absl::Status s = manager_->SubmitJob(r).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  v1::TuneRequest r = Request();
  r.add_precisions("bf16");
  r.add_precisions("fp4");
  EXPECT_EQ(error_of(r),
            "precisions: unknown value 'fp4' (allowed: fp32, bf16, fp16, pure_bf16, fp8)");
  r = Request();
  r.add_checkpointings("partial");
  EXPECT_THAT(error_of(r), StartsWith("checkpointings: unknown value 'partial'"));
  r = Request();
  r.add_attentions("flash");
  EXPECT_THAT(error_of(r), StartsWith("attentions: unknown value 'flash'"));
  r = Request();
  r.add_optimizers("sgd");
  EXPECT_THAT(error_of(r), StartsWith("optimizers: unknown value 'sgd'"));
  r = Request();
  r.add_offloads("nvme");
  EXPECT_THAT(error_of(r), StartsWith("offloads: unknown value 'nvme'"));
  r = Request();
  r.add_checkpoint_percents(0);
  EXPECT_THAT(error_of(r), StartsWith("checkpoint_percents:"));
  r = Request();  // a cpu device: offload has nowhere to go
  r.add_offloads("cpu");
  EXPECT_THAT(error_of(r), AllOf(StartsWith("offloads:"), HasSubstr("accelerator")));
  EXPECT_TRUE(store_->ListJobs(0)->empty());
}

TEST_F(JobManagerTest, CandidateListsNarrowTheSpace) {
  // Global batch 4: micro batches {4, 2, 1}. A cpu device leaves offload=cpu
  // out: 4 precisions x 2 attentions x 5 checkpointings x 2 optimizers.
  auto all = manager_->SubmitJob(Request());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->trials_total(), 3 * 4 * 2 * 5 * 2);

  v1::TuneRequest r = Request();
  r.set_device_type("cuda");  // offload=cpu joins the space
  auto cuda = manager_->SubmitJob(r);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(cuda->trials_total(), 2 * 3 * 4 * 2 * 5 * 2);

  r = Request();
  for (const char* p : {"fp32", "pure_bf16"}) r.add_precisions(p);
  r.add_checkpointings("selective");
  r.add_checkpoint_percents(25);
  r.add_attentions("math");
  r.add_optimizers("fused_adamw");
  r.add_offloads("none");
  auto narrow = manager_->SubmitJob(r);
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  EXPECT_EQ(narrow->trials_total(), 3 * 2);
}

TEST_F(JobManagerTest, NarrowedJobRunsExactlyTheRequestedStrategiesBestFirst) {
  v1::TuneRequest r = Request();
  r.add_micro_batch_sizes(4);
  for (const char* p : {"fp32", "pure_bf16"}) r.add_precisions(p);
  r.add_checkpointings("selective");
  r.add_checkpoint_percents(25);
  r.add_attentions("math");
  r.add_optimizers("fused_adamw");
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->trials_total(), 2);
  AddWorker("a", 1);
  for (int i = 0; i < 2; ++i) {
    manager_->Tick();
    ASSERT_EQ(executor_.calls.size(), 1u) << i;
    executor_.Succeed(100 + i);
  }
  manager_->Tick();
  auto trials = manager_->ListTrials(job->job_id());
  ASSERT_TRUE(trials.ok()) << trials.status();
  std::vector<std::string> texts;
  for (const v1::Trial& t : *trials) texts.push_back(t.strategy().text());
  EXPECT_THAT(texts, ElementsAre("mbs=4,ga=1,precision=pure_bf16,checkpoint=selective,ckpt_pct=25,"
                                 "attention=math,optimizer=fused_adamw,offload=none",
                                 "mbs=4,ga=1,precision=fp32,checkpoint=selective,ckpt_pct=25,"
                                 "attention=math,optimizer=fused_adamw,offload=none"));
  EXPECT_EQ(manager_->GetJob(job->job_id())->state(), "SUCCEEDED");
}

TEST_F(JobManagerTest, FillsEveryFreeDeviceAndRecordsTheBest) {
  AddWorker("a", 2);
  auto job = manager_->SubmitJob(Request(60, 3));
  ASSERT_TRUE(job.ok()) << job.status();
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);  // two devices, two trials in flight
  EXPECT_EQ(manager_->GetJob(job->job_id())->state(), "RUNNING");
  executor_.Succeed(100);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);  // the freed device took the third trial
  executor_.Succeed(300);
  executor_.Succeed(200);
  manager_->Tick();  // budget spent, nothing running: the job ends
  auto done = manager_->GetJob(job->job_id());
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), "SUCCEEDED");
  EXPECT_EQ(done->best().metrics().tokens_per_second(), 300);
  EXPECT_EQ(done->trials_done(), 3);
  auto stored = store_->GetStrategy(done->signature());
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->strategy_text, done->best().strategy().text());
}

TEST_F(JobManagerTest, TimeLimitEndsTheJobAndCancelsRunningTrials) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(30));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  executor_.Succeed(50);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  clock_.Advance(absl::Seconds(31));
  ASSERT_TRUE(Beat("a").ok());
  manager_->Tick();
  auto done = manager_->GetJob(job->job_id());
  EXPECT_EQ(done->state(), "SUCCEEDED");
  EXPECT_THAT(done->status_message(), HasSubstr("time limit"));
  auto trials = manager_->ListTrials(job->job_id());
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[1].status(), "CANCELLED");
  EXPECT_THAT(executor_.cancelled, ::testing::ElementsAre((*trials)[1].trial_id()));
  // The late answer of the cancelled trial frees the device and changes nothing.
  executor_.Succeed(999);
  EXPECT_EQ(manager_->GetJob(job->job_id())->best().metrics().tokens_per_second(), 50);
  EXPECT_TRUE(manager_->ListWorkers()[0].devices(0).held_by_trial().empty());
}

// A trial that answers after the time limit, before the scheduler's next tick,
// was still running at the limit: the job ends then and the trial is
// recorded CANCELLED, never as a success measured past the limit.
TEST_F(JobManagerTest, AnAnswerAfterTheTimeLimitEndsTheJobAndCountsAsCancelled) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(30));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  executor_.Succeed(50);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  clock_.Advance(absl::Seconds(31));
  executor_.Succeed(999);  // no Tick() in between
  auto done = manager_->GetJob(job->job_id());
  EXPECT_EQ(done->state(), "SUCCEEDED");
  EXPECT_THAT(done->status_message(), HasSubstr("time limit"));
  EXPECT_EQ(done->best().metrics().tokens_per_second(), 50);
  auto trials = manager_->ListTrials(job->job_id());
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[1].status(), "CANCELLED");
  EXPECT_THAT((*trials)[1].reason(), HasSubstr("time limit"));
  EXPECT_TRUE(manager_->ListWorkers()[0].devices(0).held_by_trial().empty());
}

TEST_F(JobManagerTest, WaitsForWorkersAndStartsWhenOneRegisters) {
  auto job = manager_->SubmitJob(Request(60, 1));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  auto waiting = manager_->GetJob(job->job_id());
  EXPECT_EQ(waiting->state(), "WAITING_FOR_WORKERS");
  EXPECT_THAT(waiting->status_message(), HasSubstr("waiting for a worker"));
  AddWorker("late", 1);
  manager_->Tick();
  EXPECT_EQ(executor_.calls.size(), 1u);
  EXPECT_EQ(manager_->GetJob(job->job_id())->state(), "RUNNING");
}

TEST_F(JobManagerTest, AGangLargerThanThePoolWaitsSayingWhatItNeeds) {
  AddWorker("a", 2);
  const std::string job = StartJob(GangOf(4));
  auto waiting = manager_->GetJob(job);
  EXPECT_EQ(waiting->state(), "WAITING_FOR_WORKERS");
  EXPECT_THAT(waiting->status_message(), HasSubstr("needs 4 cpu devices, the healthy pool has 2"));
  EXPECT_THAT(waiting->status_message(), HasSubstr("(until the time limit, "));
  EXPECT_TRUE(executor_.calls.empty());
  AddWorker("b", 2);
  manager_->Tick();
  EXPECT_EQ(manager_->GetJob(job)->state(), "RUNNING");
  EXPECT_EQ(executor_.calls.size(), 4u);  // one gang of four ranks
}

TEST_F(JobManagerTest, AJobThatNeverGotItsDevicesEndsNamingWhatItWaitedFor) {
  AddWorker("a", 2);
  const std::string job = StartJob(GangOf(4));
  clock_.Advance(absl::Seconds(61));
  ASSERT_TRUE(Beat("a").ok());
  manager_->Tick();
  auto ended = manager_->GetJob(job);
  EXPECT_EQ(ended->state(), "FAILED");
  EXPECT_THAT(ended->status_message(),
              AllOf(HasSubstr("time limit reached while waiting for workers: every trial needs 4 "
                              "cpu devices, the healthy pool has 2"),
                    HasSubstr("no trial ran")));
}

TEST_F(JobManagerTest, AJobOnAPoolNoisierThanItsToleranceSaysSoAsItStarts) {
  AddWorker("a", 1);
  ASSERT_TRUE(manager_->Heartbeat("a", sessions_["a"], 0.12).ok());  // measured while idle
  const std::string job = StartJob(Request(60, 1));
  EXPECT_THAT(manager_->GetJob(job)->status_message(),
              HasSubstr("running trials; measurements on this pool vary by ±12% run to run "
                        "(worker a's timing jitter): answers closer than that are ties"));
}

TEST_F(JobManagerTest, APoolQuieterThanTheJobsToleranceGoesUnmentioned) {
  AddWorker("a", 1);
  ASSERT_TRUE(manager_->Heartbeat("a", sessions_["a"], 0.12).ok());
  v1::TuneRequest loose = Request(60, 1);
  loose.set_confirm_tolerance(0.2);
  EXPECT_EQ(manager_->GetJob(StartJob(loose))->status_message(), "running trials");
}

TEST_F(JobManagerTest, WorldSizeFourTriesEveryLayoutOfFourRanksAndRunsEachOnFour) {
  AddWorker("a", 4);
  v1::TuneRequest r = Request();
  r.set_world_size(4);
  r.add_micro_batch_sizes(1);
  r.add_precisions("fp32");
  r.add_attentions("sdpa");
  r.add_checkpointings("none");
  r.add_optimizers("adamw");
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  // Tiny GPT (2 layers, 4 heads), global batch 4: dp 4 x 4 shardings; tp 2
  // (dp 2) x 4 shardings x sp off/on; pp 2 (dp 2) x shardings none and
  // zero1 (the others do not combine with pipelines; 1f1b only: interleaved
  // needs 4 chunks of 2 layers); tp 4 x sp; tp 2 x pp 2 x sp. pp 4 needs
  // more than 2 layers.
  EXPECT_EQ(job->trials_total(), 4 + 8 + 2 + 2 + 2);
  std::set<std::tuple<int, int, int>> layouts;
  std::set<Sharding> shardings;
  for (int trial = 0; trial < job->trials_total(); ++trial) {
    manager_->Tick();
    ASSERT_EQ(executor_.calls.size(), 4u) << "trial " << trial;  // one call per rank
    std::set<int> ranks;
    for (const FakeExecutor::Call& c : executor_.calls) {
      const TrialSpec spec = FakeExecutor::Spec(c);
      EXPECT_EQ(c.request.trial_id(), executor_.calls.front().request.trial_id());
      EXPECT_EQ(spec.world_size, 4);
      EXPECT_EQ(spec.strategy.world_size(), 4) << StrategyToText(spec.strategy);
      EXPECT_EQ(spec.strategy.data_parallel * spec.strategy.micro_batch_size *
                    spec.strategy.grad_accum_steps,
                4)
          << StrategyToText(spec.strategy);
      ranks.insert(spec.rank);
      layouts.insert({spec.strategy.data_parallel, spec.strategy.tensor_parallel,
                      spec.strategy.pipeline_parallel});
      shardings.insert(spec.strategy.sharding);
    }
    EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
    for (int rank = 0; rank < 4; ++rank) executor_.Succeed(100 + trial);
  }
  manager_->Tick();
  EXPECT_TRUE(executor_.calls.empty());
  EXPECT_EQ(layouts, (std::set<std::tuple<int, int, int>>{
                         {4, 1, 1}, {2, 2, 1}, {2, 1, 2}, {1, 4, 1}, {1, 2, 2}}));
  EXPECT_EQ(shardings.size(), 4u);
  auto done = manager_->GetJob(job->job_id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), "SUCCEEDED");
  // The trials' strategies carry their layouts, in text and in fields.
  auto trials = manager_->ListTrials(job->job_id());
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 18u);
  EXPECT_EQ(trials->front().strategy().text(),
            "dp=4,tp=1,pp=1,sharding=none,mbs=1,ga=1,precision=fp32,checkpoint=none,"
            "attention=sdpa,optimizer=adamw,offload=none");
  EXPECT_EQ(trials->back().strategy().tensor_parallel(), 2);
  EXPECT_EQ(trials->back().strategy().pipeline_parallel(), 2);
  EXPECT_TRUE(trials->back().strategy().sequence_parallel());
  EXPECT_EQ(done->best().strategy().text(), trials->back().strategy().text());  // fastest: last
}

TEST_F(JobManagerTest, LayoutCandidateListsNarrowTheSpaceAndBadOnesNameTheField) {
  v1::TuneRequest r = Request();
  r.set_world_size(4);
  r.add_micro_batch_sizes(1);
  r.add_precisions("fp32");
  r.add_attentions("sdpa");
  r.add_checkpointings("none");
  r.add_optimizers("adamw");
  r.add_tensor_parallel_sizes(2);
  r.add_pipeline_parallel_sizes(1);
  r.add_shardings("zero1");
  r.add_shardings("fsdp");
  r.add_sequence_parallel("on");
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->trials_total(), 2);  // dp 2 x tp 2 with sp, at zero1 and fsdp

  const auto error_of = [this](v1::TuneRequest r) {
    absl::Status s = manager_->SubmitJob(r).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  r = Request();
  r.set_world_size(4);
  r.add_shardings("zero1");
  r.add_shardings("zero3");
  EXPECT_EQ(error_of(r), "shardings: unknown value 'zero3' (allowed: none, zero1, zero2, fsdp)");
  r = Request();
  r.set_world_size(4);
  r.add_pipeline_schedules("gpipe");
  EXPECT_THAT(error_of(r), StartsWith("pipeline_schedules: unknown value 'gpipe'"));
  r = Request();
  r.set_world_size(4);
  r.add_sequence_parallel("yes");
  EXPECT_EQ(error_of(r), "sequence_parallel: unknown value 'yes' (allowed: off, on)");
  r = Request();
  r.set_world_size(4);
  r.add_tensor_parallel_sizes(3);
  EXPECT_THAT(error_of(r), StartsWith("tensor_parallel_sizes:"));
  r = Request();
  r.set_world_size(4);
  r.add_pipeline_parallel_sizes(0);
  EXPECT_THAT(error_of(r), StartsWith("pipeline_parallel_sizes:"));
  r = Request();
  r.set_world_size(4);
  r.add_virtual_stages(1);
  EXPECT_THAT(error_of(r), StartsWith("virtual_stages:"));
  r = Request();
  r.set_world_size(-2);
  EXPECT_THAT(error_of(r), StartsWith("world_size:"));
  EXPECT_EQ(store_->ListJobs(0)->size(), 1u);  // only the good one
}

TEST(StrategyProtoTest, LayoutSurvivesTheWireAndUnsetFieldsMeanOneRank) {
  Strategy s;
  s.data_parallel = 2;
  s.tensor_parallel = 2;
  s.pipeline_parallel = 2;
  s.sharding = Sharding::kZero2;
  s.pipeline_schedule = PipelineSchedule::kInterleaved;
  s.virtual_stages = 2;
  s.sequence_parallel = true;
  const v1::Strategy p = ToProto(s);
  EXPECT_EQ(p.sharding(), "zero2");
  EXPECT_EQ(p.pipeline_schedule(), "interleaved");
  EXPECT_EQ(p.text(), StrategyToText(s));
  absl::StatusOr<Strategy> back = FromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);

  // A message from before the layout fields: one rank.
  v1::Strategy old;
  old.set_micro_batch_size(4);
  old.set_grad_accum_steps(1);
  old.set_precision("fp32");
  old.set_checkpointing("none");
  old.set_attention("math");
  back = FromProto(old);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->world_size(), 1);
  EXPECT_EQ(back->sharding, Sharding::kNone);
  EXPECT_EQ(back->pipeline_schedule, PipelineSchedule::k1F1B);
  EXPECT_EQ(back->virtual_stages, 1);

  v1::Strategy bad = old;
  bad.set_sharding("zero3");
  EXPECT_THAT(std::string(FromProto(bad).status().message()), StartsWith("strategy.sharding:"));
  bad = old;
  bad.set_sharding("zero1");  // data_parallel unset: 1
  EXPECT_THAT(std::string(FromProto(bad).status().message()), StartsWith("strategy.sharding:"));
  bad = old;
  bad.set_data_parallel(-1);
  EXPECT_THAT(std::string(FromProto(bad).status().message()),
              StartsWith("strategy.data_parallel:"));

  TrialMetrics m;
  m.comm_time_s = 0.25;
  m.rank_peak_memory_bytes = {10, 30};
  m.state_memory_bytes = 20;
  const TrialMetrics m2 = FromProto(ToProto(m));
  EXPECT_EQ(m2.comm_time_s, 0.25);
  EXPECT_EQ(m2.state_memory_bytes, 20);
  EXPECT_EQ(m2.rank_peak_memory_bytes, (std::vector<int64_t>{10, 30}));
}

TEST_F(JobManagerTest, AutoIsTheDefaultAndTheJobSaysWhatItChose) {
  v1::TuneRequest r = Request(600, 5);
  r.clear_algorithm();
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->request().algorithm(), "auto");
  EXPECT_EQ(job->algorithm(), "");  // chosen once the pool can run trials
  AddWorker("a", 1);
  manager_->Tick();
  auto running = manager_->GetJob(job->job_id());
  EXPECT_THAT(running->algorithm(), StartsWith("auto: bayes"));
  r.set_algorithm("simulated_annealing");
  EXPECT_THAT(std::string(manager_->SubmitJob(r).status().message()),
              StartsWith("algorithm: unknown value"));
}

TEST_F(JobManagerTest, EachTrialKeepsItsPredictionAndTheNextJobStartsFromTheEarlierTrials) {
  AddWorker("a", 1);
  auto first = manager_->SubmitJob(Request(600, 1));
  ASSERT_TRUE(first.ok()) << first.status();
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const std::string trial_id = executor_.calls[0].request.trial_id();
  const v1::Trial proposed = TrialOf(first->job_id(), trial_id);
  ASSERT_TRUE(proposed.has_predicted());
  const v1::Prediction cold = proposed.predicted();
  EXPECT_GT(cold.step_time_s(), 0);
  EXPECT_GT(cold.peak_memory_bytes(), 0);
  EXPECT_NEAR(cold.tokens_per_second(), 4 * 16 / cold.step_time_s(), 1e-6);
  // The device turns out ten times slower than the model's priors.
  v1::RunTrialResponse r = Answered(TrialStatus::kSucceeded);
  r.mutable_metrics()->set_step_time_median_s(10 * cold.step_time_s());
  r.mutable_metrics()->set_tokens_per_second(4 * 16 / (10 * cold.step_time_s()));
  r.mutable_metrics()->set_peak_memory_bytes(3 * cold.peak_memory_bytes());
  executor_.Answer(trial_id, 0, absl::OkStatus(), r);
  manager_->Tick();
  ASSERT_EQ(manager_->GetJob(first->job_id())->state(), "SUCCEEDED");
  EXPECT_THAT(manager_->GetJob(first->job_id())->algorithm(), Not(HasSubstr("warmed")));
  // Kept beside the measurement, in the store and on the wire.
  absl::StatusOr<std::vector<TrialRecord>> stored = store_->ListTrials(first->job_id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 1u);
  ASSERT_TRUE((*stored)[0].predicted.has_value());
  EXPECT_EQ((*stored)[0].predicted->step_time_s, cold.step_time_s());
  EXPECT_EQ((*stored)[0].predicted->peak_memory_bytes, cold.peak_memory_bytes());
  const v1::Trial finished = TrialOf(first->job_id(), trial_id);
  EXPECT_EQ(finished.predicted().step_time_s(), cold.step_time_s());
  EXPECT_EQ(finished.metrics().step_time_median_s(), 10 * cold.step_time_s());

  // The same request again (forced: the strategy database would answer it):
  // its model starts from the first job's trial, so its first prediction of
  // the same strategy is the measured one, not the prior's, and the job says
  // what warmed it.
  v1::TuneRequest again = Request(600, 1);
  again.set_force(true);
  auto second = manager_->SubmitJob(again);
  ASSERT_TRUE(second.ok()) << second.status();
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const v1::Trial warm = TrialOf(second->job_id(), executor_.calls[0].request.trial_id());
  EXPECT_EQ(warm.strategy().text(), proposed.strategy().text());
  ASSERT_TRUE(warm.has_predicted());
  // One earlier observation against the priors' pull: most of the way.
  EXPECT_GT(warm.predicted().step_time_s() / cold.step_time_s(), 5);
  EXPECT_LT(warm.predicted().step_time_s() / cold.step_time_s(), 11);
  EXPECT_THAT(manager_->GetJob(second->job_id())->algorithm(),
              HasSubstr("; cost model warmed by 1 earlier trial on cpu devices"));
}

// A burst of submissions shares one read of the earlier trials; a finished
// job, or time, makes the next submission read again.
TEST_F(JobManagerTest, TheWarmStartsReadIsSharedUntilAJobFinishesOrItAges) {
  EarlierTrialsCache cache(store_.get(), &clock_);
  absl::StatusOr<std::shared_ptr<const EarlierTrials>> a = cache.Get("cpu");
  absl::StatusOr<std::shared_ptr<const EarlierTrials>> b = cache.Get("cpu");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get()) << "one read";
  EXPECT_NE(cache.Get("cuda")->get(), a->get()) << "per device type";
  cache.Invalidate();
  EXPECT_NE(cache.Get("cpu")->get(), a->get()) << "read again after a job finished";
  b = cache.Get("cpu");
  clock_.Advance(kEarlierTrialsMaxAge + absl::Seconds(1));
  EXPECT_NE(cache.Get("cpu")->get(), b->get()) << "read again once aged";
}

TEST_F(JobManagerTest, CandidatesPredictedNotToFitAreRecordedAsPrunedWithTheirReason) {
  v1::TuneRequest r = Request(600);
  // A device that holds micro-batch 2 at its most demanding (fp32, math
  // attention, no recompute) but not micro-batch 4 at the same.
  absl::StatusOr<ModelSpec> model = ModelSpecFromJson("gpt2", nlohmann::json::parse(kTinyGpt));
  ASSERT_TRUE(model.ok());
  std::vector<int64_t> estimates;
  for (int mbs : {1, 2, 4}) {
    Strategy s;
    s.micro_batch_size = mbs;
    s.grad_accum_steps = 4 / mbs;
    estimates.push_back(EstimateMemory(*model, 16, s).total());
  }
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  AddWorker("a", 1, 0, 0, estimates[1]);
  manager_->Tick();
  auto trials = manager_->ListTrials(job->job_id());
  ASSERT_TRUE(trials.ok());
  int pruned = 0;
  for (const v1::Trial& t : *trials) {
    if (t.status() != "PRUNED") continue;
    ++pruned;
    EXPECT_THAT(t.reason(), AllOf(HasSubstr("predicted"), HasSubstr("exceeds")));
    EXPECT_EQ(t.strategy().micro_batch_size(), 4) << t.strategy().text();
    EXPECT_EQ(t.attempt(), 0);
  }
  EXPECT_GT(pruned, 0);
  EXPECT_EQ(manager_->GetJob(job->job_id())->trials_pruned(), pruned);
  // The job summarises them by kind, with an example, instead of listing them.
  v1::Job summary = *manager_->GetJob(job->job_id());
  ASSERT_EQ(summary.pruned_summary_size(), 1);
  EXPECT_EQ(summary.pruned_summary(0).kind(), "predicted not to fit");
  EXPECT_EQ(summary.pruned_summary(0).count(), pruned);
  EXPECT_EQ(summary.pruned_summary(0).example().status(), "PRUNED");
  v1::ListTrialsRequest page;
  page.set_job_id(job->job_id());
  EXPECT_EQ(manager_->ListTrialsPage(page)->trials_size(),
            static_cast<int>(trials->size()) - pruned);
  page.set_include_pruned(true);
  EXPECT_EQ(manager_->ListTrialsPage(page)->trials_size(), static_cast<int>(trials->size()));
  // Nothing pruned is ever dispatched.
  std::set<std::string> pruned_texts;
  for (const v1::Trial& t : *trials) {
    if (t.status() == "PRUNED") pruned_texts.insert(t.strategy().text());
  }
  for (int i = 0; i < 10 && !executor_.calls.empty(); ++i) {
    EXPECT_EQ(
        pruned_texts.count(StrategyToText(FakeExecutor::Spec(executor_.calls.front()).strategy)),
        0u);
    executor_.Succeed(100);
    manager_->Tick();
  }
  // They are stored (attempt 0: never run), and stay once the job is over.
  ASSERT_TRUE(manager_->CancelJob(job->job_id()).ok());
  auto stored = store_->ListTrials(job->job_id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  int stored_pruned = 0;
  for (const TrialRecord& t : *stored) {
    if (t.status != TrialStatus::kPruned) continue;
    ++stored_pruned;
    EXPECT_EQ(t.attempt, 0);
    EXPECT_THAT(t.reason, HasSubstr("exceeds"));
  }
  // (More than at first: the trials' measured peaks, above the device's
  // memory in this fake, calibrated the model upwards.)
  EXPECT_GE(stored_pruned, pruned);
  EXPECT_EQ(manager_->GetJob(job->job_id())->trials_pruned(), stored_pruned);
}

TEST_F(JobManagerTest, WatchEventsCarryOnlyWhatChangedAndListsComeInPages) {
  AddWorker("a", 2);
  auto job = manager_->SubmitJob(Request(600, 5));
  ASSERT_TRUE(job.ok()) << job.status();
  manager_->Tick();
  uint64_t version = 0;
  auto first = manager_->GetJobEvent(job->job_id(), 0, false, &version);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->trials_size(), 2);  // both running
  uint64_t same = 0;
  EXPECT_EQ(manager_->GetJobEvent(job->job_id(), version, false, &same)->trials_size(), 0);
  EXPECT_EQ(same, version) << "nothing changed";
  executor_.Succeed(10);
  uint64_t after = 0;
  auto delta = manager_->GetJobEvent(job->job_id(), version, false, &after);
  EXPECT_GT(after, version);
  ASSERT_EQ(delta->trials_size(), 1) << "only the trial that finished";
  EXPECT_EQ(delta->trials(0).status(), "SUCCEEDED");
  // Pages of two, in proposal order, until the token runs out.
  for (int i = 0; i < 3; ++i) {
    executor_.Succeed(10);
    manager_->Tick();
  }
  std::vector<int> indices;
  v1::ListTrialsRequest page;
  page.set_job_id(job->job_id());
  page.set_page_size(2);
  do {
    auto answer = manager_->ListTrialsPage(page);
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_LE(answer->trials_size(), 2);
    for (const v1::Trial& t : answer->trials()) indices.push_back(t.index());
    page.set_page_token(answer->next_page_token());
  } while (!page.page_token().empty());
  EXPECT_THAT(indices, ElementsAre(0, 1, 2, 3, 4));
  page.set_page_token("not-a-token");
  EXPECT_EQ(manager_->ListTrialsPage(page).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobManagerTest, JobsSubmittedTogetherShareThePool) {
  AddWorker("a", 2);
  auto first = manager_->SubmitJob(Request(600, 4));
  auto second = manager_->SubmitJob(Request(600, 4));
  ASSERT_TRUE(first.ok() && second.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);
  std::set<std::string> jobs;
  for (const FakeExecutor::Call& c : executor_.calls) {
    jobs.insert(c.request.trial_id().substr(0, c.request.trial_id().rfind("-t")));
  }
  EXPECT_EQ(jobs, (std::set<std::string>{first->job_id(), second->job_id()}))
      << "each job gets one of the two devices";
}

TEST_F(JobManagerTest, ASlowFirstTrialStopsTheSearchOnlyUntilQuickerTrialsShowThereIsRoom) {
  // A launcher's first trial compiles what the later ones find in its
  // cache: 33 s, then 6 s per trial, in a 90 s job.
  JobManagerOptions options = Options();
  options.confirm_top = 1;
  manager_ = std::move(*JobManager::Create(store_.get(), &executor_, &clock_, options));
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(90, 0));
  ASSERT_TRUE(job.ok()) << job.status();
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  clock_.Advance(absl::Seconds(33));
  ASSERT_TRUE(Beat("a").ok());
  executor_.Succeed(14904);
  manager_->Tick();  // 33 s of 90 gone: the search stops to leave time for a repeat
  ASSERT_EQ(executor_.calls.size(), 1u);
  auto trials = *manager_->ListTrials(job->job_id());
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[1].confirms(), trials[0].trial_id());
  clock_.Advance(absl::Seconds(6));
  ASSERT_TRUE(Beat("a").ok());
  executor_.Succeed(18932);
  manager_->Tick();
  // A trial takes 6 s now: the search goes on.
  auto j = manager_->GetJob(job->job_id());
  EXPECT_THAT(j->status_message(), HasSubstr("search resumed: trials now take about 6 s"));
  ASSERT_EQ(executor_.calls.size(), 1u);
  trials = *manager_->ListTrials(job->job_id());
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_TRUE(trials[2].confirms().empty()) << "a new strategy, not a repeat";
  for (int i = 0; i < 40 && !executor_.calls.empty(); ++i) {
    clock_.Advance(absl::Seconds(6));
    ASSERT_TRUE(Beat("a").ok());
    executor_.Succeed(17000 + 100 * (i % 3));
    manager_->Tick();
  }
  j = manager_->GetJob(job->job_id());
  EXPECT_EQ(j->state(), "SUCCEEDED");
  EXPECT_GE(j->trials_done(), 8) << "the time was used";
  EXPECT_GE(j->best_measurements(), 2);
  EXPECT_LE(clock_.Now() - absl::FromUnixSeconds(1'800'000'000), absl::Seconds(90));
}

TEST_F(JobManagerTest, AJobWhoseEveryTrialFailsTheSameWayBeforeItsFirstStepStopsEarly) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 50));
  ASSERT_TRUE(job.ok()) << job.status();
  for (int i = 0; i < kTrialsToCallItBroken; ++i) {
    manager_->Tick();
    ASSERT_EQ(executor_.calls.size(), 1u) << "trial " << i;
    const std::string id = executor_.calls.front().request.trial_id();
    executor_.Answer(
        id, 0, absl::OkStatus(),
        Answered(TrialStatus::kFailed, absl::StrCat("rank 0 on worker a:", i,
                                                    ": ModuleNotFoundError: No module named "
                                                    "'trl'")));
  }
  manager_->Tick();
  EXPECT_TRUE(executor_.calls.empty()) << "no fourth trial";
  auto j = manager_->GetJob(job->job_id());
  EXPECT_EQ(j->state(), "FAILED");
  EXPECT_THAT(j->status_message(),
              AllOf(HasSubstr("stopped early"), HasSubstr("No module named 'trl'"),
                    HasSubstr("is broken, not a strategy")));
  EXPECT_LT(clock_.Now() - absl::FromUnixSeconds(1'800'000'000), absl::Seconds(600));
}

TEST_F(JobManagerTest, DifferentFailuresOrAnySuccessKeepTheJobGoing) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 4));
  ASSERT_TRUE(job.ok()) << job.status();
  const char* reasons[] = {"loss is not finite", "script exited with code 2: no zero2",
                           "loss is not finite"};
  for (const char* reason : reasons) {
    manager_->Tick();
    ASSERT_EQ(executor_.calls.size(), 1u);
    executor_.Answer(executor_.calls.front().request.trial_id(), 0, absl::OkStatus(),
                     Answered(TrialStatus::kFailed, reason));
  }
  manager_->Tick();
  EXPECT_EQ(manager_->GetJob(job->job_id())->state(), "RUNNING");
  ASSERT_EQ(executor_.calls.size(), 1u) << "the fourth trial runs";
}

TEST_F(JobManagerTest, AnOutOfMemoryTrialPrunesTheStrategiesThatNeedMore) {
  // The least demanding strategy first (the user's, fine-tuned): when even
  // it runs out of memory, every neighbour that needs as much or more is
  // pruned without running.
  v1::TuneRequest r = Request(600);
  r.clear_algorithm();
  r.set_load_strategy(
      "mbs=1,precision=fp32,checkpoint=full,ckpt_pct=100,attention=math,optimizer=adamw");
  r.set_finetune(true);
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  AddWorker("a", 1);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const TrialSpec first = FakeExecutor::Spec(executor_.calls.front());
  const std::string first_id = executor_.calls.front().request.trial_id();
  ASSERT_EQ(StrategyToText(first.strategy),
            "mbs=1,ga=4,precision=fp32,checkpoint=full,attention=math,optimizer=adamw,"
            "offload=none");
  executor_.Answer(first_id, 0, absl::OkStatus(), Answered(TrialStatus::kOom, "out of memory"));
  manager_->Tick();
  auto trials = manager_->ListTrials(job->job_id());
  ASSERT_TRUE(trials.ok());
  int pruned = 0;
  for (const v1::Trial& t : *trials) {
    if (t.status() != "PRUNED") continue;
    ++pruned;
    EXPECT_THAT(t.reason(),
                AllOf(HasSubstr("ran out of memory"), HasSubstr(StrategyToText(first.strategy))));
    EXPECT_TRUE(NeedsAtLeastAsMuchMemory(*FromProto(t.strategy()), first.strategy))
        << t.strategy().text();
  }
  // mbs 2 and 4, and mbs 1 with less recompute: 2 + 2 + 2 neighbours at most
  // two dimensions away.
  EXPECT_GE(pruned, 4);
  // What is still proposed does not need more than what ran out.
  for (const auto& call : executor_.calls) {
    EXPECT_FALSE(NeedsAtLeastAsMuchMemory(FakeExecutor::Spec(call).strategy, first.strategy));
  }
}

TEST_F(JobManagerTest, IncludeAndExcludeNarrowTheSpaceAndBadNamesAreRefused) {
  v1::TuneRequest r = Request();
  auto all = manager_->SubmitJob(r);
  ASSERT_TRUE(all.ok());
  r.add_exclude("fp32,pure_bf16");
  r.add_include("checkpoint");
  auto narrowed = manager_->SubmitJob(r);
  ASSERT_TRUE(narrowed.ok()) << narrowed.status();
  EXPECT_LT(narrowed->trials_total(), all->trials_total());
  AddWorker("a", 1);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  for (int i = 0; i < 5 && !executor_.calls.empty(); ++i) {
    const TrialSpec spec = FakeExecutor::Spec(executor_.calls.front());
    if (executor_.calls.front().request.trial_id().rfind(narrowed->job_id(), 0) == 0) {
      EXPECT_EQ(spec.strategy.precision, Precision::kBf16) << StrategyToText(spec.strategy);
      EXPECT_NE(spec.strategy.checkpointing, Checkpointing::kNone);
    }
    executor_.Succeed(100);
    manager_->Tick();
  }
  r = Request();
  r.add_exclude("zero4");
  EXPECT_THAT(std::string(manager_->SubmitJob(r).status().message()), StartsWith("exclude: "));
  r = Request();
  r.add_include("fp32");
  r.add_precisions("bf16");
  EXPECT_THAT(std::string(manager_->SubmitJob(r).status().message()),
              StartsWith("include, exclude: "));
}

TEST_F(JobManagerTest, ALoadedStrategyRunsOnceWithItsMissingDimensionsFilledIn) {
  v1::TuneRequest r = Request(600);
  r.clear_algorithm();
  r.set_load_strategy(R"(["zero2", ("amp_native", {"dtype": "bf16"}), "checkpoint"])");
  // zero2 needs data parallelism: two ranks.
  r.set_world_size(2);
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->trials_total(), 1);
  AddWorker("a", 2);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);  // one trial, two ranks
  const TrialSpec spec = FakeExecutor::Spec(executor_.calls.front());
  const std::string trial_id = executor_.calls.front().request.trial_id();
  EXPECT_EQ(spec.strategy.sharding, Sharding::kZero2);
  EXPECT_EQ(spec.strategy.precision, Precision::kBf16);
  EXPECT_EQ(spec.strategy.checkpointing, Checkpointing::kFull);
  EXPECT_THAT(manager_->GetJob(job->job_id())->algorithm(), StartsWith("load_strategy: runs"));
  executor_.Answer(trial_id, 0, absl::OkStatus(), Answered(TrialStatus::kSucceeded));
  executor_.Answer(trial_id, 1, absl::OkStatus(), Answered(TrialStatus::kSucceeded));
  manager_->Tick();
  EXPECT_EQ(manager_->GetJob(job->job_id())->state(), "SUCCEEDED");
  EXPECT_TRUE(executor_.calls.empty());

  r = Request();
  r.set_finetune(true);
  EXPECT_THAT(std::string(manager_->SubmitJob(r).status().message()), StartsWith("finetune: "));
  r = Request();
  r.clear_algorithm();
  r.set_load_strategy("precision=fp8");
  EXPECT_THAT(std::string(manager_->SubmitJob(r).status().message()),
              StartsWith("load_strategy: "));
  r.set_load_strategy("sharding=zero1");  // one rank: nothing to shard
  EXPECT_THAT(std::string(manager_->SubmitJob(r).status().message()),
              StartsWith("load_strategy: no candidate of the space matches"));
}

TEST_F(JobManagerTest, FinetuneSearchesTheLoadedStrategysNeighbourhood) {
  v1::TuneRequest r = Request(600, 4);
  r.clear_algorithm();
  r.set_load_strategy("mbs=2,precision=fp32,checkpoint=none,attention=math");
  r.set_finetune(true);
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  AddWorker("a", 1);
  manager_->Tick();
  EXPECT_THAT(manager_->GetJob(job->job_id())->algorithm(), StartsWith("finetune: greedy from"));
  ASSERT_EQ(executor_.calls.size(), 1u);
  const Strategy start = FakeExecutor::Spec(executor_.calls.front()).strategy;
  EXPECT_EQ(start.micro_batch_size, 2);
  EXPECT_EQ(start.precision, Precision::kFp32);
  executor_.Succeed(100);
  for (int i = 0; i < 3; ++i) {
    manager_->Tick();
    ASSERT_EQ(executor_.calls.size(), 1u) << i;
    EXPECT_EQ(StrategyDistance(FakeExecutor::Spec(executor_.calls.front()).strategy, start), 1);
    executor_.Succeed(50);
  }
  manager_->Tick();
  EXPECT_EQ(manager_->GetJob(job->job_id())->state(), "SUCCEEDED");
}

TEST_F(JobManagerTest, HalvingAsksForFewerMeasuredStepsInItsFirstRung) {
  v1::TuneRequest r = Request(600, 8);
  r.set_algorithm("halving");
  r.set_measured_steps(9);
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  AddWorker("a", 1);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  EXPECT_EQ(FakeExecutor::Spec(executor_.calls.front()).measured_steps, 1);
}

TEST_F(JobManagerTest, PollingAnUnchangedJobGetsAnEmptyEventAndAChangeGetsOnlyWhatChanged) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 3));
  ASSERT_TRUE(job.ok()) << job.status();
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  uint64_t version = 0;
  absl::StatusOr<v1::JobEvent> first = manager_->GetJobEvent(job->job_id(), 0, false, &version);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->job().state(), "RUNNING");
  EXPECT_EQ(first->trials_size(), 1);
  uint64_t again = 0;
  absl::StatusOr<v1::JobEvent> same = manager_->GetJobEvent(job->job_id(), version, false, &again);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(again, version);
  EXPECT_FALSE(same->has_job()) << "nothing changed: nothing rendered";
  EXPECT_EQ(same->trials_size(), 0);
  executor_.Succeed(100);
  absl::StatusOr<v1::JobEvent> changed =
      manager_->GetJobEvent(job->job_id(), version, false, &again);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_GT(again, version);
  EXPECT_EQ(changed->job().trials_done(), 1);
  ASSERT_EQ(changed->trials_size(), 1);
  EXPECT_EQ(changed->trials(0).status(), "SUCCEEDED");
}

TEST_F(JobManagerTest, JobsBelongToTheirSubmitterAndListByOwner) {
  auto alice = manager_->SubmitJob(Request(30), "alice");
  auto bob = manager_->SubmitJob(Request(30), "bob");
  ASSERT_TRUE(alice.ok() && bob.ok());
  EXPECT_EQ(alice->owner(), "alice");
  EXPECT_EQ(*manager_->JobOwner(bob->job_id()), "bob");
  EXPECT_EQ(manager_->JobOwner("nope").status().code(), absl::StatusCode::kNotFound);
  auto mine = manager_->ListJobs(0, std::string("alice"));
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].job_id(), alice->job_id());
  EXPECT_EQ(manager_->ListJobs(0)->size(), 2u);
  // The owner survives the job's end (read back from the store).
  ASSERT_TRUE(manager_->CancelJob(alice->job_id()).ok());
  EXPECT_EQ(*manager_->JobOwner(alice->job_id()), "alice");
  EXPECT_EQ(manager_->GetJob(alice->job_id())->owner(), "alice");
}

TEST_F(JobManagerTest, AUserHoldsAtMostSixtyFourUnfinishedJobs) {
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(manager_->SubmitJob(Request(30), "alice").ok()) << i;
  absl::StatusOr<v1::Job> more = manager_->SubmitJob(Request(30), "alice");
  EXPECT_THAT(more, StatusIs(absl::StatusCode::kResourceExhausted,
                             HasSubstr("jobs of user alice: 65 jobs, at most 64 allowed")));
  EXPECT_TRUE(manager_->SubmitJob(Request(30), "bob").ok()) << "another user's count";
  // A finished job frees its place.
  auto listed = manager_->ListJobs(1, std::string("alice"));
  ASSERT_TRUE(listed.ok() && !listed->empty());
  ASSERT_TRUE(manager_->CancelJob((*listed)[0].job_id()).ok());
  EXPECT_TRUE(manager_->SubmitJob(Request(30), "alice").ok());
  // The jobs a restarted coordinator goes on with still count.
  Restart();
  EXPECT_THAT(manager_->SubmitJob(Request(30), "alice"),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("jobs of user alice")));
}

TEST_F(JobManagerTest, SubmissionsArrivingTogetherDoNotPassTheUsersBound) {
  // Each record is written without the manager's lock: the submissions in
  // between still count against the bound.
  std::atomic<int> accepted{0}, refused{0};
  std::vector<std::thread> submitters;
  for (int i = 0; i < 8; ++i) {
    submitters.emplace_back([&] {
      for (int j = 0; j < 12; ++j) {
        absl::StatusOr<v1::Job> job = manager_->SubmitJob(Request(30), "alice");
        if (job.ok()) {
          ++accepted;
        } else if (absl::IsResourceExhausted(job.status())) {
          ++refused;
        }
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  EXPECT_EQ(accepted, 64);
  EXPECT_EQ(refused, 96 - 64);
}

}  // namespace
}  // namespace autoaccel

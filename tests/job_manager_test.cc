// The coordinator's scheduling logic with a fake executor and a fake clock:
// no network, no trial runner, every step taken by hand through Tick().
#include "server/job_manager.h"

#include <deque>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "search/model.h"
#include "tests/subprocess.h"

namespace autoaccel {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kTinyGpt[] = R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
  "n_positions": 32})";

class FakeExecutor : public TrialExecutor {
 public:
  struct Call {
    std::string address;
    v1::RunTrialRequest request;
    Done done;
  };
  void RunTrial(const std::string& address, const v1::RunTrialRequest& request, absl::Duration,
                Done done) override {
    calls.push_back({address, request, std::move(done)});
  }
  void CancelTrial(const std::string&, const v1::CancelTrialRequest& request) override {
    cancelled.push_back(request.trial_id());
  }
  // Completes the oldest outstanding call.
  void Succeed(double tokens_per_second) {
    Call c = std::move(calls.front());
    calls.pop_front();
    v1::RunTrialResponse r;
    r.set_status("SUCCEEDED");
    r.mutable_metrics()->set_tokens_per_second(tokens_per_second);
    r.mutable_metrics()->set_peak_memory_bytes(1 << 20);
    c.done(absl::OkStatus(), r);
  }
  void Fail(absl::Status status) {
    Call c = std::move(calls.front());
    calls.pop_front();
    c.done(status, v1::RunTrialResponse());
  }
  std::deque<Call> calls;
  std::vector<std::string> cancelled;
};

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("autoaccel-jm-");
    auto store = Store::Open(dir_ + "/db.sqlite");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    clock_.SetTime(absl::FromUnixSeconds(1'800'000'000));
    auto manager = JobManager::Create(store_.get(), &executor_, &clock_, JobManagerOptions());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void AddWorker(const std::string& id, int devices) {
    v1::RegisterRequest r;
    r.set_worker_id(id);
    r.set_address(id + ":1");
    for (int i = 0; i < devices; ++i) {
      v1::Device* d = r.add_devices();
      d->set_type("cpu");
      d->set_index(i);
      d->set_memory_bytes(int64_t{1} << 30);
    }
    ASSERT_TRUE(manager_->RegisterWorker(r).ok());
  }

  v1::TuneRequest Request(double time_limit_s = 60, int max_trials = 0) {
    v1::TuneRequest r;
    r.mutable_model()->set_family("gpt2");
    r.mutable_model()->set_config_json(kTinyGpt);
    r.set_seq_len(16);
    r.set_global_batch_size(4);
    r.set_time_limit_seconds(time_limit_s);
    r.set_max_trials(max_trials);
    return r;
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  FakeClock clock_;
  FakeExecutor executor_;
  std::unique_ptr<JobManager> manager_;
};

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

TEST_F(JobManagerTest, TorchScriptFileGoesToEveryTrialButNeverIntoAnswersOrTheStore) {
  v1::TuneRequest r = Request();
  r.mutable_model()->set_family("torchscript");
  r.mutable_model()->clear_config_json();
  const std::string file(4096, 'x');  // the coordinator does not look inside
  r.mutable_model()->set_script(file);
  r.mutable_model()->set_input_spec("ids:int64[B,T]<64; labels=ids");
  r.add_precisions("fp32");
  r.add_optimizers("adamw");
  auto job = manager_->SubmitJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  // No layers to checkpoint, no attention choice: micro-batches 4, 2, 1 only.
  EXPECT_EQ(job->trials_total(), 3);
  EXPECT_EQ(job->request().warmup_steps(), 3);  // the JIT's profiling steps are not measured
  EXPECT_TRUE(job->request().model().script().empty());
  EXPECT_EQ(job->request().model().input_spec(), "ids:int64[B,T]<64; labels=ids");
  AddWorker("a", 1);
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  EXPECT_EQ(executor_.calls.front().request.model_file(), file);
  const nlohmann::json spec = nlohmann::json::parse(executor_.calls.front().request.spec_json());
  EXPECT_EQ(spec["model_family"], "torchscript");
  EXPECT_EQ(spec["model_config"]["script_digest"], ContentDigest(file));
  executor_.Succeed(100);
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
}

TEST_F(JobManagerTest, BadCandidateListsNameTheRequestField) {
  const auto error_of = [this](v1::TuneRequest r) {
    absl::Status s = manager_->SubmitJob(r).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  v1::TuneRequest r = Request();
  r.add_precisions("bf16");
  r.add_precisions("fp8");
  EXPECT_EQ(error_of(r), "precisions: unknown value 'fp8' (allowed: fp32, bf16, fp16, pure_bf16)");
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
  ASSERT_TRUE(manager_->Heartbeat("a").ok());
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

TEST_F(JobManagerTest, LostWorkerFailsItsTrialAndOthersCarryOn) {
  AddWorker("a", 1);
  AddWorker("b", 1);
  auto job = manager_->SubmitJob(Request(600, 3));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 2u);
  const std::string on_a = executor_.calls[0].address == "a:1"
                               ? executor_.calls[0].request.trial_id()
                               : executor_.calls[1].request.trial_id();
  // Only b keeps heartbeating.
  clock_.Advance(absl::Seconds(11));
  ASSERT_TRUE(manager_->Heartbeat("b").ok());
  manager_->Tick();
  auto trials = manager_->ListTrials(job->job_id());
  for (const v1::Trial& t : *trials) {
    if (t.trial_id() == on_a) {
      EXPECT_EQ(t.status(), "FAILED");
      EXPECT_THAT(t.reason(), HasSubstr("worker a lost"));
    }
  }
  EXPECT_FALSE(manager_->ListWorkers()[0].healthy());
  // The RPC to the dead worker fails as well: harmless, already accounted for.
  if (executor_.calls[0].address == "a:1") {
    executor_.Fail(absl::UnavailableError("connection reset"));
  } else {
    std::swap(executor_.calls[0], executor_.calls[1]);
    executor_.Fail(absl::UnavailableError("connection reset"));
  }
  executor_.Succeed(10);  // b's trial
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);  // third trial went to b
  EXPECT_EQ(executor_.calls[0].address, "b:1");
}

TEST_F(JobManagerTest, RankErrorsBecomeTrialStatuses) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 2));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  executor_.Fail(absl::UnavailableError("connection refused"));
  manager_->Tick();
  // An unreachable worker gets no new trial until it heartbeats again.
  EXPECT_TRUE(executor_.calls.empty());
  EXPECT_FALSE(manager_->ListWorkers()[0].healthy());
  ASSERT_TRUE(manager_->Heartbeat("a").ok());
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  FakeExecutor::Call c = std::move(executor_.calls.front());
  executor_.calls.pop_front();
  v1::RunTrialResponse oom;
  oom.set_status("OOM");
  oom.set_reason("tried to allocate 1 GiB");
  c.done(absl::OkStatus(), oom);
  manager_->Tick();
  auto trials = manager_->ListTrials(job->job_id());
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[0].status(), "FAILED");
  EXPECT_THAT((*trials)[0].reason(), HasSubstr("connection refused"));
  EXPECT_EQ((*trials)[1].status(), "OOM");
  auto done = manager_->GetJob(job->job_id());
  EXPECT_EQ(done->state(), "FAILED");
  EXPECT_THAT(done->status_message(), HasSubstr("no trial succeeded"));
}

TEST_F(JobManagerTest, RestartMarksUnfinishedJobsFailed) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  manager_.reset();  // the server "crashes" with a trial in flight
  auto again = JobManager::Create(store_.get(), &executor_, &clock_, JobManagerOptions());
  ASSERT_TRUE(again.ok());
  auto recovered = (*again)->GetJob(job->job_id());
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->state(), "FAILED");
  EXPECT_THAT(recovered->status_message(), HasSubstr("restarted"));
  EXPECT_EQ((*again)->ListTrials(job->job_id())->at(0).status(), "FAILED");
}

}  // namespace
}  // namespace autoaccel

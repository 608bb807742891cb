// The coordinator's scheduling logic with a fake executor and a fake clock:
// no network, no trial runner, every step taken by hand through Tick().
#include "server/job_manager.h"

#include <sqlite3.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/content_digest.h"
#include "common/engine_version.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/convert.h"
#include "search/cost_model.h"
#include "search/model_spec.h"
#include "server/signature.h"
#include "server/strategy_queries.h"
#include "tests/register_request.h"
#include "tests/subprocess.h"
#include "tests/test_matchers.h"
#include "trial_contract/trial_spec.h"

namespace autoaccel {
namespace {

constexpr char kTinyGpt[] = R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
  "n_positions": 32})";

class FakeExecutor : public TrialExecutor {
 public:
  struct Call {
    std::string address;
    v1::RunTrialRequest request;
    Done done;
  };
  void RunTrial(const WorkerEndpoint& to, const v1::RunTrialRequest& request, absl::Duration,
                Done done) override {
    if (on_run) on_run(request);
    calls.push_back({to.address, request, std::move(done)});
    tokens.push_back(to.session_token);
  }
  // Called with each RunTrial as it is sent, when set.
  std::function<void(const v1::RunTrialRequest&)> on_run;
  void CancelTrial(const WorkerEndpoint& to, const v1::CancelTrialRequest& request) override {
    cancelled.push_back(request.trial_id());
    cancelled_at.push_back(to.address);
  }
  // Answers the outstanding call for `rank` of `trial_id`.
  void Answer(const std::string& trial_id, int rank, absl::Status status,
              v1::RunTrialResponse response = v1::RunTrialResponse()) {
    for (auto it = calls.begin(); it != calls.end(); ++it) {
      if (it->request.trial_id() == trial_id && Spec(*it).rank == rank) {
        Call c = std::move(*it);
        calls.erase(it);
        c.done(std::move(status), std::move(response));
        return;
      }
    }
    ADD_FAILURE() << "no call for " << trial_id << " rank " << rank;
  }
  static TrialSpec Spec(const Call& c) {
    absl::StatusOr<TrialSpec> spec =
        TrialSpecFromJson(nlohmann::json::parse(c.request.spec_json()));
    EXPECT_TRUE(spec.ok()) << spec.status();
    return spec.ok() ? *spec : TrialSpec();
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
  std::vector<std::string> cancelled;     // trial ids
  std::vector<std::string> cancelled_at;  // addresses, in the same order
  std::vector<std::string> tokens;        // session token of every RunTrial, in order
  // StoreModelFile calls: the request, and its `done` until answered.
  void StoreModelFile(const WorkerEndpoint& to, v1::StoreModelFileRequest request, absl::Duration,
                      StoreDone done) override {
    stored_at.push_back(to.address);
    stored.push_back(std::move(request));
    store_done.push_back(std::move(done));
  }
  std::vector<std::string> stored_at;
  std::vector<v1::StoreModelFileRequest> stored;
  std::vector<StoreDone> store_done;
};

v1::RunTrialResponse Answered(const std::string& status, const std::string& reason = "") {
  v1::RunTrialResponse r;
  r.set_status(status);
  r.set_reason(reason);
  return r;
}

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("autoaccel-jm-");
    auto store = Store::Open(dir_ + "/db.sqlite");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    clock_.SetTime(absl::FromUnixSeconds(1'800'000'000));
    auto manager = JobManager::Create(store_.get(), &executor_, &clock_, Options());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Most tests follow the search alone: no confirmation trials at its end
  // (their own tests below turn them on).
  JobManagerOptions Options() const {
    JobManagerOptions options;
    options.confirm_top = 0;
    options.model_file_dir = dir_ + "/db.sqlite.model-files";
    return options;
  }
  // The files in the model files' directory.
  std::vector<std::string> ModelFiles() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/db.sqlite.model-files", ec)) {
      names.push_back(e.path().filename().string());
    }
    return names;
  }

  void AddWorker(const std::string& id, int devices, int port_min = 0, int port_max = 0,
                 int64_t memory_bytes = int64_t{1} << 30) {
    Register(RegisterRequestFor(id, id + ":1", devices, port_min, port_max, memory_bytes));
  }
  // Confirmations of the best strategy (confirm_top 1), workers a and b of
  // one device each, and a job of one trial submitted and started: its id.
  std::string StartWithARepeatOnTwoWorkers() {
    JobManagerOptions options = Options();
    options.confirm_top = 1;
    manager_ = std::move(*JobManager::Create(store_.get(), &executor_, &clock_, options));
    AddWorker("a", 1);
    AddWorker("b", 1);
    auto job = manager_->SubmitJob(Request(600, 1));
    EXPECT_TRUE(job.ok()) << job.status();
    manager_->Tick();
    return job.ok() ? job->job_id() : "";
  }
  // Registers and keeps the session token for Beat.
  void Register(const v1::RegisterRequest& r) {
    absl::StatusOr<v1::RegisterResponse> resp = manager_->RegisterWorker(r);
    ASSERT_TRUE(resp.ok()) << resp.status();
    sessions_[r.worker_id()] = resp->session_token();
  }
  // The coordinator "crashes" (the RPCs it sent die with it) and a new one
  // starts on the same store.
  void Restart() {
    manager_.reset();
    executor_.calls.clear();
    auto again = JobManager::Create(store_.get(), &executor_, &clock_, Options());
    ASSERT_TRUE(again.ok()) << again.status();
    manager_ = std::move(*again);
  }
  // The worker's heartbeat, with its session token.
  absl::Status Beat(const std::string& id) { return manager_->Heartbeat(id, sessions_[id]); }
  // Submits `request` and runs one scheduling round; returns the job's id.
  std::string StartJob(const v1::TuneRequest& request) {
    auto job = manager_->SubmitJob(request);
    EXPECT_TRUE(job.ok()) << job.status();
    manager_->Tick();
    return job.ok() ? job->job_id() : "";
  }
  // A one-trial job whose every trial is a gang of `ranks` cpu devices.
  v1::TuneRequest GangOf(int ranks) {
    v1::TuneRequest request = Request(60, 1);
    request.set_world_size(ranks);
    return request;
  }

  // Two daemons on one machine ("node7"), w1 and w2, with two cpu slots of
  // 1 GiB each; the host's cores and memory as they report them (0: not).
  void AddTwoWorkersOnOneHost(int host_cores = 0, int64_t host_memory = 0) {
    for (const std::string id : {"w1", "w2"}) {
      v1::RegisterRequest r =
          RegisterRequestFor(id, std::string("node7:") + (id == "w1" ? "5001" : "5002"), 2);
      r.set_host_cpu_cores(host_cores);
      r.set_host_memory_bytes(host_memory);
      Register(r);
    }
  }

  // Trial id -> device positions it holds on `worker`.
  std::vector<std::string> Holders(const std::string& worker) {
    for (const v1::Worker& w : manager_->ListWorkers()) {
      if (w.worker_id() != worker) continue;
      std::vector<std::string> out;
      for (const v1::Device& d : w.devices()) out.push_back(d.held_by_trial());
      return out;
    }
    return {};
  }
  v1::Trial TrialOf(const std::string& job_id, const std::string& trial_id) {
    absl::StatusOr<std::vector<v1::Trial>> trials = manager_->ListTrials(job_id);
    EXPECT_TRUE(trials.ok()) << trials.status();
    for (const v1::Trial& t : trials.ok() ? *trials : std::vector<v1::Trial>()) {
      if (t.trial_id() == trial_id) return t;
    }
    ADD_FAILURE() << "no trial " << trial_id;
    return v1::Trial();
  }
  // Submits a one-trial job of `world_size` ranks and dispatches it; returns
  // the job id and the trial id (empty on failure, which is reported).
  std::pair<std::string, std::string> StartGang(int world_size) {
    auto job = manager_->SubmitJob(Gang(world_size, 1));
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return {};
    manager_->Tick();
    EXPECT_EQ(executor_.calls.size(), static_cast<size_t>(world_size));
    if (executor_.calls.empty()) return {job->job_id(), ""};
    return {job->job_id(), executor_.calls[0].request.trial_id()};
  }

  v1::TuneRequest Gang(int world_size, int max_trials) {
    v1::TuneRequest r = Request(600, max_trials);
    r.set_world_size(world_size);
    return r;
  }

  // A torchscript request: `file` as the model (the coordinator does not look
  // inside), micro-batches 4, 2, 1.
  v1::TuneRequest TorchScriptRequest(const std::string& file) {
    v1::TuneRequest r = Request();
    r.mutable_model()->set_family("torchscript");
    r.mutable_model()->clear_config_json();
    r.mutable_model()->set_script(file);
    r.mutable_model()->set_input_spec("ids:int64[B,T]<64; labels=ids");
    r.add_precisions("fp32");
    r.add_optimizers("adamw");
    return r;
  }
  v1::TuneRequest Request(double time_limit_s = 60, int max_trials = 0) {
    v1::TuneRequest r;
    r.mutable_model()->set_family("gpt2");
    r.mutable_model()->set_config_json(kTinyGpt);
    r.set_seq_len(16);
    r.set_global_batch_size(4);
    r.set_time_limit_seconds(time_limit_s);
    r.set_max_trials(max_trials);
    // The space's order, so that tests know which trial comes next; the
    // other algorithms have tests of their own below.
    r.set_algorithm("exhaustive");
    return r;
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  FakeClock clock_;
  FakeExecutor executor_;
  std::unique_ptr<JobManager> manager_;
  std::map<std::string, std::string> sessions_;  // worker id -> session token
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
  executor_.Answer(first, 0, absl::OkStatus(), Answered("OOM", "tried to allocate 1 GiB"));
  manager_->Tick();
  ASSERT_EQ(executor_.calls.size(), 1u);
  const std::string second = executor_.calls.front().request.trial_id();
  executor_.Answer(second, 0, absl::OkStatus(), Answered("FAILED", "loss is not finite"));
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
  executor_.Answer(first, 1, absl::OkStatus(), Answered("SUCCEEDED"));
  manager_->Tick();
  EXPECT_EQ(executor_.calls.size(), 3u);
  executor_.Answer(first, 0, absl::OkStatus(), Answered("SUCCEEDED"));
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
      {absl::OkStatus(), Answered("FAILED", "NCCL error: boom"), "FAILED",
       "rank 1 on worker b: NCCL error: boom"},
      {absl::OkStatus(), Answered("OOM", "tried to allocate 1 GiB"), "OOM",
       "rank 1 on worker b: tried to allocate 1 GiB"},
      {absl::OkStatus(), Answered("TIMEOUT", "trial exceeded its 1m timeout"), "TIMEOUT",
       "rank 1 on worker b: trial exceeded its 1m timeout"},
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
                     Answered("FAILED", "Connection reset by peer (gloo)"));
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
  executor_.Answer(trial, 1, absl::OkStatus(), Answered("CANCELLED", "cancelled"));
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
  executor_.Answer(trial, 0, absl::OkStatus(), Answered("CANCELLED", "cancelled"));
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
  v1::RunTrialResponse lost = Answered("FAILED", "Connection reset by peer (gloo)");
  lost.set_infrastructure(true);
  executor_.Answer(trial, 0, absl::OkStatus(), lost);
  executor_.Answer(trial, 1, absl::OkStatus(), Answered("OOM", "tried to allocate 1 GiB"));
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
    v1::RunTrialResponse rendezvous = Answered("FAILED", "rendezvous at a:29500 failed");
    rendezvous.set_infrastructure(true);
    for (int attempt = 1; attempt <= 3; ++attempt) {
      ASSERT_EQ(executor_.calls.size(), 2u) << "attempt " << attempt;
      EXPECT_EQ(executor_.calls[0].request.attempt(), attempt);
      executor_.Answer(doomed, 0, absl::OkStatus(), rendezvous);
      executor_.Answer(doomed, 1, absl::OkStatus(), Answered("CANCELLED", "cancelled"));
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
    executor_.Answer(good, 1, absl::OkStatus(), Answered("SUCCEEDED"));
    v1::RunTrialResponse ok = Answered("SUCCEEDED");
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
    v1::RunTrialResponse r = Answered("SUCCEEDED");
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

}  // namespace
}  // namespace autoaccel

namespace autoaccel {
namespace {

// ------------------------------------------------------------- the search

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
  v1::RunTrialResponse r = Answered("SUCCEEDED");
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

TEST_F(JobManagerTest, AnImpossibleMeasurementIsNeverTheAnswer) {
  AddWorker("a", 1);
  auto job = manager_->SubmitJob(Request(600, 1));
  ASSERT_TRUE(job.ok());
  manager_->Tick();
  v1::RunTrialResponse liar = Answered("SUCCEEDED");
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
  v1::RunTrialResponse liar = Answered("SUCCEEDED");
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
  v1::RunTrialResponse liar = Answered("SUCCEEDED");
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
  v1::RunTrialResponse r = Answered("SUCCEEDED");
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
  executor_.Answer(trial, 0, absl::OkStatus(), Answered("FAILED", std::string(4000, 'x')));
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
  executor_.Answer(trial, 0, absl::OkStatus(), Answered("FAILED", "oom"));
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
    executor_.Answer(id, 0, absl::OkStatus(),
                     Answered("FAILED", absl::StrCat("rank 0 on worker a:", i,
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
                     Answered("FAILED", reason));
  }
  manager_->Tick();
  EXPECT_EQ(manager_->GetJob(job->job_id())->state(), "RUNNING");
  ASSERT_EQ(executor_.calls.size(), 1u) << "the fourth trial runs";
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
  ASSERT_TRUE(store_->FinishJob(old_job, outlier).ok());

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

// ---- Answers from the strategy database (server/database_answer.h) --------

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
  EXPECT_TRUE(store->FinishJob(job, s).ok());
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
                   Answered("FAILED", "boom"));
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
  executor_.Answer(first_id, 0, absl::OkStatus(), Answered("OOM", "out of memory"));
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
  executor_.Answer(trial_id, 0, absl::OkStatus(), Answered("SUCCEEDED"));
  executor_.Answer(trial_id, 1, absl::OkStatus(), Answered("SUCCEEDED"));
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

// A worker whose ranks keep failing for reasons outside their strategy gets
// no new trials for a while; its listing says why and until when.
TEST_F(JobManagerTest, AWorkerWhoseRanksKeepFailingOutsideTheStrategyIsQuarantined) {
  AddWorker("a", 1);
  ASSERT_TRUE(manager_->SubmitJob(Request(3000)).ok());
  v1::RunTrialResponse broken = Answered("FAILED", "NCCL error: unhandled system error");
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

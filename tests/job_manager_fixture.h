// The job manager's test fixture (tests/job_manager*_test.cc): a real
// store in a temporary folder, a fake executor that records every RunTrial
// and answers when told, and a fake clock; no network, no trial runner,
// every scheduling step taken by hand through Tick().
#ifndef AUTOACCEL_TESTS_JOB_MANAGER_FIXTURE_H_
#define AUTOACCEL_TESTS_JOB_MANAGER_FIXTURE_H_

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
#include "server/job_manager.h"
#include "server/signature.h"
#include "server/strategy_queries.h"
#include "spec/model_spec.h"
#include "tests/register_request.h"
#include "tests/subprocess.h"
#include "tests/test_matchers.h"
#include "trial_contract/trial_spec.h"

namespace autoaccel {

inline constexpr char kTinyGpt[] = R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
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
    r.set_status(v1::TRIAL_STATUS_SUCCEEDED);
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

inline v1::RunTrialResponse Answered(TrialStatus status, const std::string& reason = "") {
  v1::RunTrialResponse r;
  r.set_status(ToProto(status));
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

}  // namespace autoaccel

#endif  // AUTOACCEL_TESTS_JOB_MANAGER_FIXTURE_H_

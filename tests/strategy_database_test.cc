// The strategy database as a user meets it: the coordinator's gRPC service on
// 127.0.0.1:0 with a real store and job manager, and the CLI's commands
// (client/commands.h) against it. No worker: nothing may run.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "common/engine_version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/database_answer.h"
#include "server/job_manager.h"
#include "server/service.h"
#include "server/signature.h"
#include "spec/model_spec.h"
#include "tests/in_process_coordinator.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

using nlohmann::json;

constexpr char kTinyGpt[] = R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
  "n_positions": 32})";
constexpr char kStoredStrategy[] =
    "mbs=4,ga=1,precision=fp32,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none";

// Fails the test if the coordinator ever runs a trial.
class NoTrials : public TrialExecutor {
 public:
  void RunTrial(const WorkerEndpoint&, const v1::RunTrialRequest& request, absl::Duration,
                Done) override {
    ADD_FAILURE() << "a trial was dispatched: " << request.trial_id();
  }
  void CancelTrial(const WorkerEndpoint&, const v1::CancelTrialRequest&) override {}
};

class StrategyDatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(coordinator_.Start("autoaccel-sdb-", &executor_, &auth_));
    store_ = coordinator_.store();
    stub_ = v1::TuningService::NewStub(coordinator_.Channel());
  }

  // An answer of this engine version for Request()'s signature, found by
  // "job-old" at 2026-11-20 10:00 UTC.
  void StoreAnswer() {
    auto model = ModelSpecFromJson("gpt2", nlohmann::json::parse(kTinyGpt));
    ASSERT_TRUE(model.ok());
    StrategyRecord s;
    s.signature = ComputeSignature(*model, 16, 4, 1, "cpu");
    s.model_family = "gpt2";
    s.model_config_json = model->ToConfigJson().dump();
    s.seq_len = 16;
    s.global_batch_size = 4;
    s.hardware = "cpu x1";
    s.device_type = "cpu";
    s.strategy_text = kStoredStrategy;
    s.metrics.tokens_per_second = 4321;
    s.metrics.peak_memory_bytes = 3 << 20;
    s.job_id = "job-old";
    s.updated_at = absl::FromUnixSeconds(1'795'168'800);  // 2026-11-20 10:00 UTC
    s.created_at = s.updated_at;
    s.confirmed = true;
    s.engine_version = kEngineVersion;
    JobRecord job;
    job.job_id = "job-old";
    job.state = JobState::kSucceeded;
    ASSERT_TRUE(store_->CreateJob(job).ok());
    ASSERT_TRUE(store_->FinishJob(job, s, &ReplacesStoredAnswer).ok());
  }

  static v1::TuneRequest Request() {
    v1::TuneRequest r;
    r.mutable_model()->set_family("gpt2");
    r.mutable_model()->set_config_json(kTinyGpt);
    r.set_seq_len(16);
    r.set_global_batch_size(4);
    r.set_time_limit_seconds(600);
    return r;
  }

  ClientContext Cli(bool json) {
    out_.str("");
    err_.str("");
    ClientContext c;
    c.stub = stub_.get();
    c.server = "test";
    c.json = json;
    c.out = &out_;
    c.err = &err_;
    return c;
  }

  NoTrials executor_;
  Authenticator auth_;  // none: every caller is an admin
  testing::InProcessCoordinator coordinator_;
  Store* store_ = nullptr;  // coordinator_'s
  std::unique_ptr<v1::TuningService::Stub> stub_;
  std::ostringstream out_, err_;
};

TEST_F(StrategyDatabaseTest, TuneSaysItWasAnsweredFromTheDatabaseAndRunsNothing) {
  StoreAnswer();
  EXPECT_EQ(TuneCommand(Cli(false), Request(), /*watch=*/true), 0) << err_.str();
  const std::string line =
      "answered from the strategy database: job job-old of 2026-11-20 10:00 UTC, engine v" +
      absl::StrCat(kEngineVersion);
  EXPECT_THAT(err_.str(), HasSubstr(line));
  EXPECT_THAT(out_.str(),
              AllOf(HasSubstr("SUCCEEDED"), HasSubstr(line), HasSubstr("--force to tune again"),
                    HasSubstr(std::string("best strategy: ") + kStoredStrategy),
                    HasSubstr("4321 tokens/s")));

  EXPECT_EQ(TuneCommand(Cli(true), Request(), /*watch=*/true), 0) << err_.str();
  const json job = json::parse(out_.str());
  EXPECT_EQ(job["state"], "SUCCEEDED");
  EXPECT_EQ(job["best"]["strategy"], kStoredStrategy);
  EXPECT_EQ(job["answered_from"]["job_id"], "job-old");
  EXPECT_EQ(job["answered_from"]["engine_version"], kEngineVersion);
  EXPECT_EQ(job["answered_from"]["stored_at"], 1'795'168'800.0);
  EXPECT_EQ(job["answered_from"]["confirmed"], true);
  EXPECT_EQ(job["answered_from"]["model"]["family"], "gpt2");
  EXPECT_THAT(job["trials"], IsEmpty());

  // `job` and `watch` of it show the same provenance.
  EXPECT_EQ(WatchCommand(Cli(false), job["job_id"]), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr(line));
  EXPECT_EQ(JobCommand(Cli(false), job["job_id"]), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr(line));
}

TEST_F(StrategyDatabaseTest, ForceSubmitsAJobThatTunes) {
  StoreAnswer();
  v1::TuneRequest forced = Request();
  forced.set_force(true);
  EXPECT_EQ(TuneCommand(Cli(true), forced, /*watch=*/false), 0) << err_.str();
  const json job = json::parse(out_.str());
  EXPECT_EQ(job["state"], "QUEUED");
  EXPECT_TRUE(job["answered_from"].is_null());
  EXPECT_THAT(err_.str(), HasSubstr("submitted job"));
}

TEST_F(StrategyDatabaseTest, StrategiesListsStoredAnswersWithTheirProvenance) {
  EXPECT_EQ(StrategiesCommand(Cli(false), v1::ListStrategiesRequest()), 0);
  EXPECT_EQ(out_.str(), "no strategy recorded\n");
  StoreAnswer();
  EXPECT_EQ(StrategiesCommand(Cli(false), v1::ListStrategiesRequest()), 0);
  EXPECT_THAT(out_.str(),
              AllOf(HasSubstr("engine"), HasSubstr("gpt2"), HasSubstr("cpu x1"), HasSubstr("4321"),
                    HasSubstr(absl::StrCat("v", kEngineVersion)), HasSubstr("2026-11-20 10:00 UTC"),
                    HasSubstr("job-old"), HasSubstr(kStoredStrategy)));

  v1::ListStrategiesRequest cpu;
  cpu.set_model_family("gpt2");
  cpu.set_device_type("cpu");
  EXPECT_EQ(StrategiesCommand(Cli(true), cpu), 0);
  const json list = json::parse(out_.str());
  ASSERT_EQ(list["strategies"].size(), 1u) << out_.str();
  const json& a = list["strategies"][0];
  EXPECT_EQ(a["job_id"], "job-old");
  EXPECT_EQ(a["engine_version"], kEngineVersion);
  EXPECT_EQ(a["stored_at"], 1'795'168'800.0);
  EXPECT_EQ(a["hardware"], "cpu x1");
  EXPECT_EQ(a["strategy"], kStoredStrategy);
  EXPECT_EQ(a["metrics"]["tokens_per_second"], 4321.0);
  EXPECT_EQ(a["metrics"]["peak_memory_bytes"], 3 << 20);
  EXPECT_EQ(a["model"]["seq_len"], 16);
  // The model's size, counted from its stored config.
  auto model = ModelSpecFromJson("gpt2", nlohmann::json::parse(kTinyGpt));
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(a["parameters"], model->ParameterCount());
  EXPECT_GT(model->ParameterCount(), 0);

  // A launcher's answers are listed by the name `strategies` prints.
  StrategyRecord launched = store_->GetStrategy(a["signature"].get<std::string>())->value();
  launched.signature = "another-signature";
  launched.model_family = "launcher:hf-llama:gpt2";
  launched.job_id = "job-launched";
  JobRecord job;
  job.job_id = "job-launched";
  job.state = JobState::kSucceeded;
  ASSERT_TRUE(store_->CreateJob(job).ok());
  ASSERT_TRUE(store_->FinishJob(job, launched, &ReplacesStoredAnswer).ok());
  v1::ListStrategiesRequest by_launcher;
  by_launcher.set_model_family("launcher:hf-llama");
  EXPECT_EQ(StrategiesCommand(Cli(true), by_launcher), 0) << err_.str();
  const json launched_list = json::parse(out_.str())["strategies"];
  ASSERT_EQ(launched_list.size(), 1u) << out_.str();
  EXPECT_EQ(launched_list[0]["job_id"], "job-launched");
  by_launcher.set_model_family("launcher:hf");
  EXPECT_EQ(StrategiesCommand(Cli(true), by_launcher), 0) << err_.str();
  EXPECT_THAT(json::parse(out_.str())["strategies"], IsEmpty()) << "a prefix of the name is not it";

  v1::ListStrategiesRequest cuda;
  cuda.set_device_type("cuda");
  EXPECT_EQ(StrategiesCommand(Cli(true), cuda), 0);
  EXPECT_THAT(json::parse(out_.str())["strategies"], IsEmpty());
  v1::ListStrategiesRequest bad;
  bad.set_device_type("tpu");
  EXPECT_EQ(StrategiesCommand(Cli(false), bad), 1);
  EXPECT_THAT(err_.str(), HasSubstr("invalid request: device_type: unknown 'tpu'"));

  // `best` carries the same provenance.
  v1::QueryStrategiesRequest q;
  *q.mutable_model() = Request().model();
  q.set_seq_len(16);
  q.set_global_batch_size(4);
  EXPECT_EQ(BestCommand(Cli(true), q), 0) << err_.str();
  EXPECT_EQ(json::parse(out_.str())["provenance"]["engine_version"], kEngineVersion);
  EXPECT_EQ(BestCommand(Cli(false), q), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr(absl::StrCat("engine v", kEngineVersion)));
  // Stored before certainties were recorded: said as such.
  EXPECT_THAT(out_.str(), HasSubstr("  measured again\n"));
}

}  // namespace
}  // namespace autoaccel

// `autoaccel export --job`: the job's best strategy and request sizes, asked
// of an in-process server (127.0.0.1:0) that answers GetJob; and the
// offline --strategy path's output and exit codes.
#include "client/export_command.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "proto/convert.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;

class OneJobService final : public v1::TuningService::Service {
 public:
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* req, v1::Job* out) override {
    if (req->job_id() == "job-done") {
      out->set_job_id("job-done");
      out->set_state("SUCCEEDED");
      out->mutable_request()->set_world_size(4);
      out->mutable_request()->set_global_batch_size(16);
      out->mutable_request()->set_seq_len(512);
      *out->mutable_best()->mutable_strategy() = ToProto(*ParseStrategyText(
          "dp=2,tp=2,pp=1,sharding=fsdp,mbs=2,ga=4,precision=bf16,checkpoint=full,"
          "attention=sdpa,optimizer=fused_adamw,offload=none"));
      return grpc::Status::OK;
    }
    if (req->job_id() == "job-running") {
      out->set_job_id("job-running");
      out->set_state("RUNNING");
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job " + req->job_id());
  }
};

class ExportCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    stub_ = v1::TuningService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    c_.stub = stub_.get();
    c_.server = "test";
    c_.out = &out_;
    c_.err = &err_;
  }
  void TearDown() override { server_->Shutdown(); }

  OneJobService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::TuningService::Stub> stub_;
  ClientContext c_;
  std::ostringstream out_, err_;
};

TEST_F(ExportCommandTest, ExportsTheJobsBestWithTheJobsSizes) {
  ExportFlags f;
  f.job_id = "job-done";
  f.format = "accelerate";
  c_.json = true;
  ASSERT_EQ(ExportCommand(c_, f), 0) << err_.str();
  nlohmann::json doc = nlohmann::json::parse(out_.str());
  EXPECT_EQ(doc["format"], "accelerate");
  EXPECT_THAT(doc["files"]["accelerate_config.yaml"].get<std::string>(),
              HasSubstr("num_processes: 4\n"));
  EXPECT_EQ(doc["rejected"], false);
}

TEST_F(ExportCommandTest, AJobWithNoBestExitsAsBestDoesForNothingRecorded) {
  ExportFlags f;
  f.job_id = "job-running";
  f.format = "deepspeed";
  EXPECT_EQ(ExportCommand(c_, f), kExitNothingRecorded);
  EXPECT_THAT(err_.str(), HasSubstr("job-running (RUNNING) has no best strategy"));
  f.job_id = "job-nope";
  EXPECT_EQ(ExportCommand(c_, f), 1);
  EXPECT_THAT(err_.str(), HasSubstr("not found"));
}

TEST_F(ExportCommandTest, StrategyTextNeedsNoServerAndOutNeverReplacesAFile) {
  ExportFlags f;
  f.strategy =
      "dp=2,tp=1,pp=1,sharding=zero1,mbs=4,ga=2,precision=bf16,checkpoint=none,"
      "attention=sdpa,optimizer=fused_adamw,offload=none";
  f.world_size = 2;
  f.global_batch_size = 16;
  f.seq_len = 1024;
  f.format = "deepspeed";
  f.out_dir = ::testing::TempDir() + "export_command_test_out";
  std::filesystem::remove_all(f.out_dir);
  c_.stub = nullptr;
  ASSERT_EQ(ExportCommand(c_, f), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("wrote " + f.out_dir + "/ds_config.json"));
  EXPECT_THAT(out_.str(), HasSubstr("command: deepspeed --num_nodes=1 --num_gpus=2"));
  EXPECT_THAT(out_.str(), HasSubstr("sharding               zero1        exact"));
  EXPECT_TRUE(std::filesystem::exists(f.out_dir + "/ds_config.json"));
  EXPECT_EQ(ExportCommand(c_, f), kExitBadInput);
  EXPECT_THAT(err_.str(), HasSubstr("exists"));
}

TEST_F(ExportCommandTest, RejectedAndInvalidInputExitTwo) {
  ExportFlags f;
  f.strategy =
      "dp=2,tp=1,pp=1,sharding=zero1,mbs=1,ga=1,precision=bf16,checkpoint=none,"
      "attention=sdpa,optimizer=adamw,offload=none";
  f.world_size = 2;
  f.global_batch_size = 2;
  f.seq_len = 128;
  f.format = "torchtitan";
  EXPECT_EQ(ExportCommand(c_, f), kExitBadInput);
  EXPECT_THAT(out_.str(), HasSubstr("rejected"));
  EXPECT_THAT(err_.str(), HasSubstr("torchtitan rejects this strategy"));
  f.format = "deepspeed";
  f.strategy = "mbs=1,ga=1,precision=fp4";
  EXPECT_EQ(ExportCommand(c_, f), kExitBadInput);
  EXPECT_THAT(err_.str(), HasSubstr("strategy: strategy.precision"));
}

TEST_F(ExportCommandTest, MegatronPrintsTheArchitectureAfterTheFidelityTable) {
  const std::string config = ::testing::TempDir() + "export_command_test_qwen2.json";
  std::ofstream(config) << R"({"model_type": "qwen2", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128})";
  ExportFlags f;
  f.strategy =
      "mbs=1,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
      "offload=none";
  f.world_size = 1;
  f.global_batch_size = 1;
  f.seq_len = 64;
  f.format = "megatron";
  f.model.family = "qwen2";
  f.model.config_file = config;
  c_.stub = nullptr;
  ASSERT_EQ(ExportCommand(c_, f), 0) << err_.str();
  const std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("--add-qkv-bias\n"));
  const size_t fidelity = text.find("fidelity (megatron):\n");
  const size_t architecture = text.find("architecture (megatron):\n  feature ");
  ASSERT_NE(fidelity, std::string::npos);
  ASSERT_NE(architecture, std::string::npos);
  EXPECT_LT(fidelity, architecture);
  EXPECT_THAT(text.substr(architecture), HasSubstr("biases "));
  EXPECT_THAT(text.substr(architecture), HasSubstr("q, k, v "));

  c_.json = true;
  out_.str("");
  ASSERT_EQ(ExportCommand(c_, f), 0) << err_.str();
  nlohmann::json doc = nlohmann::json::parse(out_.str());
  ASSERT_FALSE(doc["architecture"].empty());
  EXPECT_EQ(doc["architecture"][0]["feature"], "network");
  // Without a model: no section, no heading.
  f.model.family.clear();
  f.model.config_file.clear();
  c_.json = false;
  out_.str("");
  ASSERT_EQ(ExportCommand(c_, f), 0) << err_.str();
  EXPECT_THAT(out_.str(), ::testing::Not(HasSubstr("architecture (")));
}

}  // namespace
}  // namespace autoaccel

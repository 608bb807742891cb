// `autoaccel estimate` through the real CLI binary: a 7B-class Llama on 8
// H100 SXM, its --json output parsed; offline (no server runs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/subprocess.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;
using testing::RunCommand;

constexpr char kLlama7B[] = R"({
  "model_type": "llama", "architectures": ["LlamaForCausalLM"],
  "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
  "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "hidden_act": "silu",
  "tie_word_embeddings": false})";

class EstimateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("estimate_cli");
    config_ = dir_ + "/config.json";
    testing::WriteFile(config_, kLlama7B);
  }
  // Runs `autoaccel estimate` with the 7B model on 8 H100 SXM plus `extra`.
  int Run(const std::vector<std::string>& extra, std::string* out, std::string* err) {
    std::vector<std::string> argv = {AUTOACCEL_CLI_BIN,
                                     "estimate",
                                     "--model",
                                     "llama",
                                     "--model-config",
                                     config_,
                                     "--seq-len",
                                     "4096",
                                     "--global-batch-size",
                                     "64",
                                     "--world-size",
                                     "8",
                                     "--device",
                                     device_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv, dir_, out, err, absl::Seconds(60));
  }
  std::string dir_, config_;
  std::string device_ = "h100-sxm";
};

TEST_F(EstimateCli, TopFiveJsonListsFiveStrategiesThatFitWithTheirBreakdown) {
  std::string out, err;
  ASSERT_EQ(Run({"--top", "5", "--json"}, &out, &err), 0) << err;
  const nlohmann::json doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc.at("device").at("name"), "h100-sxm");
  ASSERT_EQ(doc.at("strategies").size(), 5u);
  double previous = 1e300;
  for (const nlohmann::json& s : doc.at("strategies")) {
    EXPECT_TRUE(s.at("fits").get<bool>()) << s.dump();
    const nlohmann::json& m = s.at("memory");
    const int64_t sum = m.at("parameters").get<int64_t>() + m.at("gradients").get<int64_t>() +
                        m.at("optimizer_state").get<int64_t>() +
                        m.at("activations").get<int64_t>() + m.at("logits").get<int64_t>() +
                        m.at("gathered_shards").get<int64_t>() +
                        m.at("fp8_weight_copies").get<int64_t>() + m.at("overhead").get<int64_t>();
    EXPECT_EQ(sum, m.at("total").get<int64_t>());
    EXPECT_LE(m.at("total").get<int64_t>(), int64_t{80} << 30);
    EXPECT_GT(s.at("step_time_s").get<double>(), 0);
    EXPECT_LE(s.at("tokens_per_second").get<double>(), previous);
    previous = s.at("tokens_per_second").get<double>();
    EXPECT_GT(s.at("mfu").get<double>(), 0);
    EXPECT_LT(s.at("mfu").get<double>(), 1);
    EXPECT_FALSE(s.at("strategy").get<std::string>().empty());
  }
  ASSERT_FALSE(doc.at("ruled_out").empty());
  EXPECT_EQ(doc.at("ruled_out")[0].at("kind"), "predicted not to fit");
  EXPECT_GT(doc.at("ruled_out")[0].at("count").get<int>(), 0);
}

TEST_F(EstimateCli, AnInfeasibleStrategyIsAnsweredAsNotFittingWithTheReason) {
  std::string out, err;
  ASSERT_EQ(Run({"--strategy",
                 "dp=8,tp=1,pp=1,sharding=none,mbs=8,precision=fp32,checkpoint=none,"
                 "attention=sdpa,optimizer=fused_adamw,offload=none",
                 "--json"},
                &out, &err),
            0)
      << err;
  const nlohmann::json doc = nlohmann::json::parse(out);
  ASSERT_EQ(doc.at("strategies").size(), 1u);
  const nlohmann::json& s = doc.at("strategies")[0];
  EXPECT_FALSE(s.at("fits").get<bool>());
  EXPECT_LT(s.at("margin_bytes").get<int64_t>(), 0);
  EXPECT_GT(s.at("memory").at("optimizer_state").get<int64_t>(), int64_t{40} << 30);
  EXPECT_THAT(s.at("why_not").get<std::string>(), HasSubstr("exceeds the device's"));
  // ga= was left out: it makes up the global batch (64 / (8 x 8)).
  EXPECT_THAT(s.at("strategy").get<std::string>(), HasSubstr("ga=1"));
}

TEST_F(EstimateCli, TextOutputIsATableInGiBAndMs) {
  std::string out, err;
  ASSERT_EQ(Run({"--top", "3"}, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("STEP ms"));
  EXPECT_THAT(out, HasSubstr("TOTAL"));
  EXPECT_THAT(out, HasSubstr("Ruled out:"));
}

TEST_F(EstimateCli, BadInputExitsTwoWithAMessage) {
  std::string out, err;
  device_ = "b900";
  EXPECT_EQ(Run({"--top", "5"}, &out, &err), 2);
  device_ = "h100-sxm";
  EXPECT_THAT(err, HasSubstr("no device \"b900\" in the device catalog"));
  EXPECT_EQ(Run({"--strategy", "dp=3,tp=1,pp=1"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("strategy."));
  const std::string bad = dir_ + "/bad.json";
  testing::WriteFile(bad, R"({"devices": [{"name": "x"}]})");
  EXPECT_EQ(Run({"--top", "5", "--device-catalog", bad}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr(bad + ": device \"x\": \"type\" is missing"));
}

TEST_F(EstimateCli, ListDevicesAndAUserCatalogEntry) {
  std::string out, err;
  const std::string catalog = dir_ + "/mine.json";
  testing::WriteFile(catalog, R"({"devices": [{
    "name": "h100-sxm", "type": "cuda", "memory_gib": 40, "memory_bandwidth_gb_s": 3350,
    "peak_tflops": {"fp32": 67, "bf16": 989, "fp16": 989},
    "intra_node": {"bandwidth_gb_s": 450, "latency_us": 20},
    "inter_node": {"bandwidth_gb_s": 50, "latency_us": 50},
    "devices_per_node": 4, "source": "https://example.com"}]})");
  ASSERT_EQ(RunCommand({AUTOACCEL_CLI_BIN, "estimate", "--list-devices", "--json",
                        "--device-catalog", catalog},
                       dir_, &out, &err, absl::Seconds(60)),
            0)
      << err;
  const nlohmann::json doc = nlohmann::json::parse(out);
  std::vector<std::string> names;
  for (const nlohmann::json& d : doc.at("devices")) {
    names.push_back(d.at("name"));
    if (d.at("name") == "h100-sxm") {
      EXPECT_EQ(d.at("devices_per_node"), 4);
    }
  }
  EXPECT_THAT(names, ::testing::IsSupersetOf({"a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie",
                                              "h200", "l40s", "l4"}));
}

}  // namespace
}  // namespace autoaccel

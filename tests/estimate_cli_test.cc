// `autoaccel estimate` through the real CLI binary: a 7B-class Llama on 8
// H100 SXM, and Llama 3.1 70B's shape over clusters of H100 and H200, its
// --json output parsed; offline (no server runs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "tests/hub_configs.h"
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

// A user catalog of one device named `name` with an H100's peaks and links
// and the entry's other fields in `fields` (memory, devices per node, ...).
std::string H100LikeCatalog(const std::string& name, const std::string& fields) {
  return R"({"devices": [{"name": ")" + name + R"(", "type": "cuda",
    "memory_bandwidth_gb_s": 3350, "peak_tflops": {"fp32": 67, "bf16": 989, "fp16": 989},
    "intra_node": {"bandwidth_gb_s": 450, "latency_us": 20},
    "inter_node": {"bandwidth_gb_s": 50, "latency_us": 50},
    "source": "https://example.com", )" +
         fields + "}]}";
}

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
  testing::WriteFile(catalog,
                     H100LikeCatalog("h100-sxm", R"("memory_gib": 40, "devices_per_node": 4)"));
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
  EXPECT_THAT(names,
              ::testing::IsSupersetOf({"a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200",
                                       "l40s", "l4", "b200", "gb200", "mi300x", "mi325x"}));
}

// Llama 3.1 70B's shape at sequence 8192, global batch 512, with `extra`.
int Run70B(const std::string& dir, const std::vector<std::string>& extra, std::string* out,
           std::string* err) {
  const std::string config = dir + "/llama-70b.json";
  testing::WriteFile(config, std::string(kLlama31_70bShapeConfig));
  std::vector<std::string> argv = {AUTOACCEL_CLI_BIN,     "estimate", "--model",   "llama",
                                   "--model-config",      config,     "--seq-len", "8192",
                                   "--global-batch-size", "512"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return RunCommand(argv, dir, out, err, absl::Seconds(60));
}

// The issue's question: 1T tokens of a 70B at $2.50 a GPU-hour on 64, 128
// or 256 H100 or H200, for a 30-day deadline. Each cluster's days and cost
// follow from its own tokens/s; the choice is the cheapest safe pick whose
// slow end meets the deadline, or none (exit 3).
TEST_F(EstimateCli, ASweepAnswersEachClusterWithDaysAndCostAndPicksForADeadline) {
  std::string out, err;
  const absl::Time start = absl::Now();
  const int rc = Run70B(dir_,
                        {"--tokens", "1T", "--price-per-gpu-hour", "2.5", "--world-size",
                         "64,128,256", "--device", "h100-sxm,h200", "--deadline", "30d", "--json"},
                        &out, &err);
  std::cerr << "estimate sweep of 6 clusters: " << absl::Now() - start << "\n";
  ASSERT_TRUE(rc == 0 || rc == 3) << rc << " " << err;
  const nlohmann::json doc = nlohmann::json::parse(out);
  const double band = doc.at("training_band").at("fraction");
  EXPECT_GT(band, 0);
  EXPECT_THAT(doc.at("training_band").at("source").get<std::string>(), HasSubstr("BENCHMARKS.md"));
  EXPECT_EQ(doc.at("tokens"), int64_t{1000000000000});
  const nlohmann::json& clusters = doc.at("clusters");
  ASSERT_EQ(clusters.size(), 6u);
  const std::vector<std::pair<std::string, int>> order = {{"h100-sxm", 64},  {"h100-sxm", 128},
                                                          {"h100-sxm", 256}, {"h200", 64},
                                                          {"h200", 128},     {"h200", 256}};
  std::optional<size_t> cheapest;
  double cheapest_cost = 0;
  for (size_t i = 0; i < clusters.size(); ++i) {
    const nlohmann::json& c = clusters[i];
    EXPECT_EQ(c.at("device"), order[i].first);
    EXPECT_EQ(c.at("world_size"), order[i].second);
    for (const char* which : {"fastest", "safe"}) {
      if (c.at(which).is_null()) continue;
      const nlohmann::json& e = c.at(which);
      const nlohmann::json& t = e.at("training");
      const double days = 1e12 / e.at("tokens_per_second").get<double>() / 86400;
      EXPECT_NEAR(t.at("days").get<double>(), days, days * 1e-9) << which;
      EXPECT_NEAR(t.at("days_slow").get<double>(), days * (1 + band), days * 1e-9);
      EXPECT_NEAR(t.at("days_fast").get<double>(), days * (1 - band), days * 1e-9);
      const double cost = days * 24 * 2.5 * order[i].second;
      EXPECT_NEAR(t.at("cost").get<double>(), cost, cost * 1e-9);
      EXPECT_NEAR(t.at("cost_high").get<double>(), cost * (1 + band), cost * 1e-9);
    }
    ASSERT_FALSE(c.at("safe").is_null()) << c.dump();
    EXPECT_GE(c.at("safe").at("margin_fraction").get<double>(), 0.1);
    EXPECT_LE(c.at("safe").at("tokens_per_second").get<double>(),
              c.at("fastest").at("tokens_per_second").get<double>());
    const nlohmann::json& safe = c.at("safe").at("training");
    if (safe.at("days_slow").get<double>() <= 30 &&
        (!cheapest || safe.at("cost").get<double>() < cheapest_cost)) {
      cheapest = i;
      cheapest_cost = safe.at("cost");
    }
  }
  const nlohmann::json& choice = doc.at("choice");
  EXPECT_EQ(choice.at("deadline_days"), 30);
  if (cheapest) {
    EXPECT_EQ(choice.at("cluster"), *cheapest);
    EXPECT_EQ(rc, 0);
  } else {
    EXPECT_TRUE(choice.at("cluster").is_null());
    EXPECT_EQ(rc, 3);
  }
}

// The text form: a table of clusters, the band's source, and the pick, or
// a sentence that nothing meets the deadline with exit code 3.
TEST_F(EstimateCli, ASweepPrintsATableAndSaysWhenNothingMeetsTheDeadline) {
  std::string out, err;
  ASSERT_EQ(Run70B(dir_,
                   {"--tokens", "1T", "--price-per-gpu-hour", "2.5", "--world-size", "64,128",
                    "--device", "h100-sxm", "--deadline", "1d"},
                   &out, &err),
            3)
      << err;
  EXPECT_THAT(out, HasSubstr("TO TRAIN"));
  EXPECT_THAT(out, HasSubstr("GPU priors"));
  EXPECT_THAT(out, HasSubstr("Pick: no cluster meets it"));
  ASSERT_EQ(Run70B(dir_,
                   {"--tokens", "1T", "--price-per-gpu-hour", "2.5", "--world-size", "64,128",
                    "--device", "h100-sxm", "--budget", "1e9"},
                   &out, &err),
            0)
      << err;
  EXPECT_THAT(out, HasSubstr("Pick (the fastest whose high end stays within the budget of "
                             "$1,000,000,000"));
  EXPECT_THAT(out, HasSubstr("128 x h100-sxm"));
}

TEST_F(EstimateCli, BadTokensPricesDeadlinesAndBudgetsExitTwoNamingTheFlag) {
  std::string out, err;
  EXPECT_EQ(Run({"--top", "1", "--tokens", "1X"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("--tokens: \"1X\" is not a token count"));
  EXPECT_EQ(Run({"--top", "1", "--tokens", "1T", "--price-per-gpu-hour", "-2"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("--price-per-gpu-hour"));
  EXPECT_EQ(Run({"--top", "1", "--tokens", "1T", "--deadline", "30"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("--deadline: \"30\" is not a deadline"));
  EXPECT_EQ(Run({"--top", "1", "--deadline", "30d", "--price-per-gpu-hour", "2"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("deadline_seconds: needs tokens"));
  EXPECT_EQ(Run({"--top", "1", "--tokens", "1T", "--price-per-gpu-hour", "2", "--deadline", "30d",
                 "--budget", "100"},
                &out, &err),
            2);
  EXPECT_THAT(err, HasSubstr("give one"));
  // Choosing by cost needs a price: the built-in catalog has none.
  EXPECT_EQ(Run({"--top", "1", "--tokens", "1T", "--deadline", "30d"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("\"h100-sxm\" has no price in the catalog"));
  EXPECT_EQ(Run({"--top", "1", "--safe-margin", "1.5"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("safe_margin"));
}

// Without --price-per-gpu-hour a catalog entry's price is used; without
// either, days but no cost.
TEST_F(EstimateCli, TheCatalogsPriceIsUsedWhenNoneIsGiven) {
  std::string out, err;
  const std::string catalog = dir_ + "/priced.json";
  testing::WriteFile(catalog,
                     H100LikeCatalog("rented-h100", R"("memory_gib": 80, "devices_per_node": 8,
                                                       "price_per_gpu_hour": 3)"));
  device_ = "rented-h100";
  ASSERT_EQ(
      Run({"--top", "2", "--tokens", "100B", "--device-catalog", catalog, "--json"}, &out, &err), 0)
      << err;
  nlohmann::json doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc.at("device").at("price_per_gpu_hour"), 3);
  for (const nlohmann::json& s : doc.at("strategies")) {
    const nlohmann::json& t = s.at("training");
    EXPECT_EQ(t.at("price_per_gpu_hour"), 3);
    EXPECT_NEAR(t.at("cost").get<double>(), t.at("days").get<double>() * 24 * 3 * 8, 1e-6);
  }
  device_ = "h100-sxm";
  ASSERT_EQ(Run({"--top", "1", "--tokens", "100B", "--json"}, &out, &err), 0) << err;
  doc = nlohmann::json::parse(out);
  EXPECT_GT(doc.at("strategies")[0].at("training").at("days").get<double>(), 0);
  EXPECT_FALSE(doc.at("strategies")[0].at("training").contains("cost"));
}

// --top's options differ in layout or recompute choice, and the safe pick
// (10% of memory free by default) comes beside them.
TEST_F(EstimateCli, TopJsonCarriesTheSafePickWithItsMargin) {
  std::string out, err;
  ASSERT_EQ(
      Run70B(dir_, {"--world-size", "64", "--device", "h100", "--top", "5", "--json"}, &out, &err),
      0)
      << err;
  const nlohmann::json doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc.at("safe_margin"), 0.1);
  ASSERT_FALSE(doc.at("safe").is_null());
  EXPECT_GE(doc.at("safe").at("margin_fraction").get<double>(), 0.1);
  EXPECT_GT(doc.at("groups").get<int>(), 5);
  std::set<std::string> layouts;
  for (const nlohmann::json& s : doc.at("strategies")) {
    const nlohmann::json& j = s.at("strategy_json");
    layouts.insert(j.at("data_parallel").dump() + j.at("tensor_parallel").dump() +
                   j.at("pipeline_parallel").dump() + j.at("context_parallel").dump() +
                   j.at("sharding").dump() + j.at("checkpointing").dump() +
                   j.at("checkpoint_percent").dump() + j.at("virtual_stages").dump());
  }
  EXPECT_EQ(layouts.size(), 5u);
}

// ROCm devices answer too (the cuda priors at their own figures).
TEST_F(EstimateCli, AnMi300xAnswers) {
  std::string out, err;
  device_ = "mi300x";
  ASSERT_EQ(Run({"--top", "1", "--json"}, &out, &err), 0) << err;
  const nlohmann::json doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc.at("device").at("type"), "hip");
  ASSERT_EQ(doc.at("strategies").size(), 1u);
  EXPECT_GT(doc.at("strategies")[0].at("tokens_per_second").get<double>(), 0);
}

// `report --tokens` takes the same token counts; bad input is refused
// before any RPC (no server runs here).
TEST_F(EstimateCli, ReportRefusesABadTokenCountOrPriceBeforeAnyRpc) {
  std::string out, err;
  const std::vector<std::string> report = {AUTOACCEL_CLI_BIN, "--server", "127.0.0.1:1",   "report",
                                           "job-x",           "--html",   dir_ + "/r.html"};
  const auto run = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = report;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv, dir_, &out, &err, absl::Seconds(60));
  };
  EXPECT_EQ(run({"--tokens", "1X"}), 2);
  EXPECT_THAT(err, HasSubstr("--tokens: \"1X\" is not a token count"));
  EXPECT_EQ(run({"--price-per-gpu-hour", "2.5"}), 2);
  EXPECT_THAT(err, HasSubstr("--price-per-gpu-hour: a number > 0, with --tokens"));
  // Good input goes on to the RPC, which fails here: exit 1.
  EXPECT_EQ(run({"--tokens", "1T", "--price-per-gpu-hour", "2.5"}), 1);
}

}  // namespace
}  // namespace autoaccel

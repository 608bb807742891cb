// Estimate without running (search/estimate.h): a 7B-class Llama on 8
// H100 SXM from the device catalog, and Llama 3.1 70B's shape on 64.
#include "search/estimate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "search/cost_model.h"
#include "search/space.h"
#include "tests/hub_configs.h"
#include "tests/search_test_util.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;

constexpr double kGiB = 1024.0 * 1024 * 1024;

// Llama-2-7B (tests/search_test_util.h) on 8 H100 SXM.
EstimateRequest Llama7BOn8H100() {
  EstimateRequest r;
  r.model = Llama7B();
  r.seq_len = 4096;
  r.global_batch_size = 64;
  r.world_size = 8;
  r.device = *DeviceCatalog::BuiltIn()->Find("h100-sxm");
  return r;
}

// The whole space for the request's sizes on a bf16 accelerator: every
// value of every dimension, context parallelism by powers of two.
SpaceRequest WholeSpace(const EstimateRequest& r) {
  SpaceRequest whole;
  whole.model = r.model;
  whole.seq_len = r.seq_len;
  whole.global_batch_size = r.global_batch_size;
  whole.world_size = r.world_size;
  whole.device_is_accelerator = true;
  whole.device_supports_bf16 = true;
  for (int cp = 1; cp <= r.world_size; cp *= 2) whole.context_parallel_sizes.push_back(cp);
  return whole;
}

TEST(Estimate, PlainDataParallelFp32DoesNotFitAndTheBreakdownSaysWhy) {
  absl::StatusOr<Strategy> s = ParseStrategyText(
      "dp=8,tp=1,pp=1,sharding=none,mbs=8,ga=1,precision=fp32,checkpoint=none,attention=sdpa,"
      "optimizer=fused_adamw,offload=none");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<StrategyEstimate> e = EstimateStrategy(Llama7BOn8H100(), *s);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->fits);
  EXPECT_LT(e->margin_bytes, 0);
  EXPECT_EQ(e->device_memory_bytes, int64_t{80} << 30);
  // 6.7B parameters x 16 bytes of model state, unsharded: ~100 GiB alone.
  EXPECT_GT(e->memory.model_state(), 90 * kGiB);
  EXPECT_GT(e->memory.parameters, 20 * kGiB);
  EXPECT_GT(e->memory.optimizer, 40 * kGiB);
  EXPECT_GT(e->memory.activations, 0);
  EXPECT_EQ(e->memory.total(), e->device_memory_bytes - e->margin_bytes);
  EXPECT_THAT(e->why_not, HasSubstr("exceeds the device's 80.0 GiB"));
}

// Llama-3.1-8B at 131,072 tokens on 8 H100: no layout without context
// parallelism fits (a sample's activations alone exceed the device), so
// every strategy that fits splits the sequence; its keys and values are
// model-parallel traffic.
TEST(Estimate, ALongSequenceFitsOnlyWithContextParallelism) {
  EstimateRequest r = Llama7BOn8H100();
  r.model = Parsed("llama", kLlama31_8bConfig);
  r.seq_len = 131072;
  r.global_batch_size = 8;
  absl::StatusOr<TopEstimate> top = EstimateTop(r, 5);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_FALSE(top->best.empty());
  for (const StrategyEstimate& e : top->best) {
    EXPECT_GT(e.strategy.context_parallel, 1) << StrategyToText(e.strategy);
    EXPECT_TRUE(e.fits) << StrategyToText(e.strategy);
    EXPECT_GT(e.model_parallel_bytes, 0) << StrategyToText(e.strategy);
    EXPECT_GT(e.data_parallel_bytes, 0) << StrategyToText(e.strategy);
    // The keys and values are the context-parallel part of it; the parts
    // add up to the whole.
    EXPECT_GT(e.model_parallel.context, 0) << StrategyToText(e.strategy);
    EXPECT_NEAR(e.model_parallel.total(), e.model_parallel_bytes, 1e-6 * e.model_parallel_bytes);
    EXPECT_EQ(e.model_parallel.tensor > 0, e.strategy.tensor_parallel > 1);
    EXPECT_EQ(e.model_parallel.expert, 0);
    EXPECT_EQ(e.model_parallel.pipeline, 0);
  }
  absl::StatusOr<Strategy> one = ParseStrategyText(
      "dp=8,tp=1,pp=1,sharding=fsdp,mbs=1,ga=1,precision=pure_bf16,checkpoint=full,"
      "attention=sdpa,optimizer=fused_adamw,offload=cpu");
  ASSERT_TRUE(one.ok()) << one.status();
  absl::StatusOr<StrategyEstimate> without = EstimateStrategy(r, *one);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_FALSE(without->fits);
  EXPECT_EQ(without->model_parallel_bytes, 0);
}

// A mixture of experts over expert-parallel ranks and pipeline stages:
// the model-parallel bytes are the tokens' all-to-alls and the stages'
// activations, each on its own line.
TEST(Estimate, ModelParallelBytesComeByDimension) {
  EstimateRequest r = Llama7BOn8H100();
  r.model = Parsed("qwen3_moe", kQwen3_30bA3bConfig);
  absl::StatusOr<Strategy> s = ParseStrategyText(
      "dp=4,tp=1,pp=2,sharding=zero1,ep=4,mbs=1,ga=16,precision=pure_bf16,checkpoint=full,"
      "attention=sdpa,optimizer=fused_adamw,offload=none");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<StrategyEstimate> e = EstimateStrategy(r, *s);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_GT(e->model_parallel.expert, 0);
  EXPECT_GT(e->model_parallel.pipeline, 0);
  EXPECT_EQ(e->model_parallel.tensor, 0);
  EXPECT_EQ(e->model_parallel.context, 0);
  EXPECT_NEAR(e->model_parallel.total(), e->model_parallel_bytes, 1e-6 * e->model_parallel_bytes);
}

TEST(Estimate, ZeroAndTensorParallelStrategiesFitWithTimeAndMfu) {
  const EstimateRequest r = Llama7BOn8H100();
  for (const char* text :
       {"dp=8,tp=1,pp=1,sharding=zero1,mbs=1,ga=8,precision=bf16,checkpoint=full,attention=sdpa,"
        "optimizer=fused_adamw,offload=none",
        "dp=2,tp=4,pp=1,sharding=zero1,sp=1,mbs=1,ga=32,precision=bf16,checkpoint=selective,"
        "attention=sdpa,optimizer=fused_adamw,offload=none"}) {
    absl::StatusOr<Strategy> s = ParseStrategyText(text);
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<StrategyEstimate> e = EstimateStrategy(r, *s);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_TRUE(e->fits) << text << ": " << e->why_not;
    EXPECT_GT(e->margin_bytes, 0) << text;
    EXPECT_GT(e->step_time_s, 0) << text;
    EXPECT_NEAR(e->tokens_per_second, 64.0 * 4096 / e->step_time_s, 1e-6 * e->tokens_per_second);
    // MFU is a fraction of the peak; the prior computes at 40% of it, so
    // overheads put it below that.
    EXPECT_GT(e->mfu, 0.05) << text;
    EXPECT_LT(e->mfu, 0.4) << text;
  }
}

TEST(Estimate, AStrategyTheSpaceRefusesIsAnErrorNamingTheRule) {
  absl::StatusOr<Strategy> s = ParseStrategyText("dp=4,tp=1,pp=1,sharding=zero1,mbs=1,ga=16");
  ASSERT_TRUE(s.ok());
  absl::StatusOr<StrategyEstimate> e = EstimateStrategy(Llama7BOn8H100(), *s);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("world_size"));
}

TEST(Estimate, TopFiveAreFiveStrategiesThatFitFastestFirst) {
  absl::StatusOr<TopEstimate> top = EstimateTop(Llama7BOn8H100(), 5);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->best.size(), 5u);
  std::set<std::string> seen;
  for (size_t i = 0; i < top->best.size(); ++i) {
    const StrategyEstimate& e = top->best[i];
    EXPECT_TRUE(e.fits);
    EXPECT_LE(e.memory.total(), e.device_memory_bytes);
    EXPECT_TRUE(seen.insert(StrategyToText(e.strategy)).second);
    if (i > 0) {
      EXPECT_LE(e.tokens_per_second, top->best[i - 1].tokens_per_second);
    }
  }
  // Many candidates of the space cannot hold a 7B model's state: they are
  // counted by kind, with an example.
  ASSERT_FALSE(top->ruled_out.empty());
  EXPECT_EQ(top->ruled_out[0].kind, "predicted not to fit");
  EXPECT_GT(top->ruled_out[0].count, 0);
  EXPECT_THAT(top->ruled_out[0].example_reason, HasSubstr("exceeds the device's"));
  EXPECT_EQ(top->fitting + top->ruled_out[0].count, top->candidates);
  // Nothing that did not fit is faster than the first answer... among
  // those that fit: the ranking is over every fitting candidate.
  absl::StatusOr<TopEstimate> all = EstimateTop(Llama7BOn8H100(), top->fitting);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->best.front().strategy, top->best.front().strategy);
}

// estimate leaves out of its ranking the values the cost model never ranks
// first (adamw, math attention where sdpa runs, fp32 and fp16 on a bf16
// device): its answer must be the fastest fitting strategy of the whole
// space, every value of every dimension included.
TEST(Estimate, TheRankedSpaceHoldsTheWholeSpacesFastest) {
  EstimateRequest mixtral = Llama7BOn8H100();
  mixtral.model = Parsed("mixtral", kMixtral8x7bConfig);
  mixtral.world_size = 16;
  mixtral.global_batch_size = 32;
  for (const EstimateRequest& r : {Llama7BOn8H100(), mixtral}) {
    absl::StatusOr<TopEstimate> top = EstimateTop(r, 1);
    ASSERT_TRUE(top.ok()) << top.status();
    ASSERT_EQ(top->best.size(), 1u);
    absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(WholeSpace(r));
    ASSERT_TRUE(space.ok()) << space.status();
    const CostModel model(r.model, r.seq_len, r.global_batch_size, r.device.spec);
    double fastest = 0;
    std::string which;
    for (const Strategy& s : *space) {
      const CostModel::Prediction p = model.Predict(s);
      if (model.Fits(p.memory, 0) && p.tokens_per_second > fastest) {
        fastest = p.tokens_per_second;
        which = StrategyToText(s);
      }
    }
    EXPECT_EQ(top->best[0].tokens_per_second, fastest)
        << r.model.family << ": " << StrategyToText(top->best[0].strategy) << " vs " << which;
    EXPECT_LT(top->candidates, static_cast<int>(space->size()) / 4) << r.model.family;
  }
}

// fp8 is ranked when listed, and on an H100 (fp8 peak twice bf16's) its
// best is faster than bf16's best; an A100 has no fp8 tensor cores.
TEST(Estimate, Fp8IsRankedWhenListedAndOnlyWhereTheDeviceHasIt) {
  EstimateRequest r = Llama7BOn8H100();
  absl::StatusOr<TopEstimate> bf16 = EstimateTop(r, 1);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_NE(bf16->best[0].strategy.precision, Precision::kFp8);
  r.precisions = {Precision::kPureBf16, Precision::kFp8};
  absl::StatusOr<TopEstimate> fp8 = EstimateTop(r, 1);
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_EQ(fp8->best[0].strategy.precision, Precision::kFp8);
  EXPECT_GT(fp8->best[0].tokens_per_second, bf16->best[0].tokens_per_second);
  EXPECT_GT(fp8->best[0].memory.fp8_weights, 0);

  r.device = *DeviceCatalog::BuiltIn()->Find("a100-80gb");
  r.precisions = {Precision::kFp8};
  EXPECT_THAT(EstimateTop(r, 1).status().message(),
              HasSubstr("precisions: only fp8 requested, and the device has no fp8 tensor cores"));
  r.precisions.clear();
  absl::StatusOr<StrategyEstimate> one = EstimateStrategy(r, fp8->best[0].strategy);
  EXPECT_THAT(one.status().message(), HasSubstr("strategy.precision: fp8 needs fp8 tensor cores"));
}

TEST(Estimate, FewerDevicesPerNodeMakeDataParallelSlower) {
  EstimateRequest r = Llama7BOn8H100();
  absl::StatusOr<Strategy> s = ParseStrategyText(
      "dp=8,tp=1,pp=1,sharding=zero1,mbs=1,ga=8,precision=bf16,checkpoint=full,attention=sdpa,"
      "optimizer=fused_adamw,offload=none");
  ASSERT_TRUE(s.ok());
  const double one_node = EstimateStrategy(r, *s)->step_time_s;
  r.devices_per_node = 2;
  const double four_nodes = EstimateStrategy(r, *s)->step_time_s;
  EXPECT_GT(four_nodes, one_node);
}

// Llama 3.1 70B's shape at sequence 8192, global batch 512, on 64 H100:
// the case (its fastest strategies keep a few GiB free).
EstimateRequest Llama70BOn64H100() {
  EstimateRequest r = Llama7BOn8H100();
  r.model = Parsed("llama", kLlama31_70bShapeConfig);
  r.seq_len = 8192;
  r.global_batch_size = 512;
  r.world_size = 64;
  return r;
}

// --top lists options that differ in layout or recompute choice, each the
// fastest of its kind: never one layout again with another micro-batch or
// precision.
TEST(Estimate, TopOptionsDifferInLayoutOrRecompute) {
  for (const EstimateRequest& r : {Llama7BOn8H100(), Llama70BOn64H100()}) {
    absl::StatusOr<TopEstimate> top = EstimateTop(r, 8);
    ASSERT_TRUE(top.ok()) << top.status();
    ASSERT_EQ(top->best.size(), 8u);
    EXPECT_GE(top->groups, 8);
    EXPECT_LT(top->groups, top->fitting);
    std::set<StrategyGroup> groups;
    for (const StrategyEstimate& e : top->best) {
      EXPECT_TRUE(groups.insert(StrategyGroup::Of(e.strategy)).second)
          << "same layout and recompute twice: " << StrategyToText(e.strategy);
    }
  }
}

// Each option is the fastest strategy of its layout and recompute choice
// over the whole space (every value of every dimension).
TEST(Estimate, EachTopOptionIsTheFastestOfItsLayoutAndRecomputeChoice) {
  const EstimateRequest r = Llama7BOn8H100();
  absl::StatusOr<TopEstimate> top = EstimateTop(r, 5);
  ASSERT_TRUE(top.ok()) << top.status();
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(WholeSpace(r));
  ASSERT_TRUE(space.ok()) << space.status();
  const CostModel model(r.model, r.seq_len, r.global_batch_size, r.device.spec);
  std::map<StrategyGroup, double> fastest;
  for (const Strategy& s : *space) {
    const CostModel::Prediction p = model.Predict(s);
    if (!model.Fits(p.memory, 0)) continue;
    double& f = fastest[StrategyGroup::Of(s)];
    f = std::max(f, p.tokens_per_second);
  }
  for (const StrategyEstimate& e : top->best) {
    EXPECT_EQ(e.tokens_per_second, fastest[StrategyGroup::Of(e.strategy)])
        << StrategyToText(e.strategy);
  }
}

// The safe pick keeps the margin asked for, and no option keeping it is
// faster; a margin of 0 makes it the fastest; one nothing keeps, none.
TEST(Estimate, TheSafePickIsTheFastestThatKeepsTheMargin) {
  EstimateRequest r = Llama70BOn64H100();
  absl::StatusOr<TopEstimate> top = EstimateTop(r, 1000);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_TRUE(top->safe.has_value());
  EXPECT_GE(top->safe->margin_fraction, kDefaultSafeMargin);
  EXPECT_TRUE(top->safe->fits);
  for (const StrategyEstimate& e : top->best) {
    if (e.margin_fraction >= kDefaultSafeMargin) {
      EXPECT_LE(e.tokens_per_second, top->safe->tokens_per_second) << StrategyToText(e.strategy);
    }
  }
  r.safe_margin = 0;
  absl::StatusOr<TopEstimate> any = EstimateTop(r, 1);
  ASSERT_TRUE(any.ok() && any->safe.has_value());
  EXPECT_EQ(any->safe->strategy, any->best[0].strategy);
  r.safe_margin = 0.99;
  absl::StatusOr<TopEstimate> none = EstimateTop(r, 1);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->safe.has_value());
  r.safe_margin = 1;
  EXPECT_THAT(EstimateTop(r, 1).status().message(), HasSubstr("safe_margin"));
}

// An AMD GPU is estimated with the cuda priors at its own datasheet figures;
// a cluster past one node of a device whose network is unknown is refused.
TEST(Estimate, AnInstinctGpuIsEstimatedAndAnUnknownNetworkRefusesManyNodes) {
  EstimateRequest r = Llama7BOn8H100();
  r.device = *DeviceCatalog::BuiltIn()->Find("mi300x");
  absl::StatusOr<TopEstimate> top = EstimateTop(r, 1);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->best.size(), 1u);
  EXPECT_GT(top->best[0].tokens_per_second, 0);
  EXPECT_GT(top->best[0].mfu, 0);
  EXPECT_LT(top->best[0].mfu, 1);
  r.device = *DeviceCatalog::BuiltIn()->Find("mi325x");
  EXPECT_TRUE(EstimateTop(r, 1).ok());
  r.world_size = 16;
  EXPECT_THAT(EstimateTop(r, 1).status().message(),
              HasSubstr("does not know the network between nodes of \"mi325x\""));
}

}  // namespace
}  // namespace autoaccel

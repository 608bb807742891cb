// The memory model against the papers' formulas it implements.
#include "search/cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace autoaccel {
namespace {

// GPT-2 small: 12 layers, width 768, 12 heads, vocabulary 50257.
ModelSpec Gpt2Small() {
  absl::StatusOr<ModelSpec> m = ModelSpecFromJson("gpt2", nlohmann::json{{"n_layer", 12},
                                                                         {"n_embd", 768},
                                                                         {"n_head", 12},
                                                                         {"vocab_size", 50257},
                                                                         {"n_positions", 1024}});
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

Strategy Layout(int dp, int tp, int pp, Sharding sharding) {
  Strategy s;
  s.data_parallel = dp;
  s.tensor_parallel = tp;
  s.pipeline_parallel = pp;
  s.sharding = sharding;
  s.micro_batch_size = 4;
  s.grad_accum_steps = 8;
  return s;
}

TEST(MemoryModel, ModelStateFollowsZeroArithmetic) {
  const ModelSpec m = Gpt2Small();
  const double psi = static_cast<double>(m.ParameterCount());
  constexpr int kN = 8;
  auto state = [&](Sharding sharding) {
    Strategy s = Layout(kN, 1, 1, sharding);
    s.precision = Precision::kPureBf16;  // ZeRO's mixed precision: 2 + 2 + 12 bytes
    return static_cast<double>(EstimateMemory(m, 1024, s).model_state());
  };
  EXPECT_NEAR(state(Sharding::kNone), 16 * psi, 16);
  EXPECT_NEAR(state(Sharding::kZero1), 4 * psi + 12 * psi / kN, 16);
  EXPECT_NEAR(state(Sharding::kZero2), 2 * psi + 14 * psi / kN, 16);
  EXPECT_NEAR(state(Sharding::kFsdp), 16 * psi / kN, 16);
  // fp32 and autocast keep fp32 weights and gradients: 4 + 4 + 8.
  Strategy fp32 = Layout(1, 1, 1, Sharding::kNone);
  EXPECT_NEAR(EstimateMemory(m, 1024, fp32).model_state(), 16 * psi, 16);
  // fsdp holds one gathered layer at a time on top of its shards.
  Strategy fsdp = Layout(kN, 1, 1, Sharding::kFsdp);
  EXPECT_GT(EstimateMemory(m, 1024, fsdp).gathered, 0);
  EXPECT_EQ(EstimateMemory(m, 1024, fp32).gathered, 0);
}

TEST(MemoryModel, OffloadMovesTheOptimizerOffTheDevice) {
  const ModelSpec m = Gpt2Small();
  Strategy s = Layout(1, 1, 1, Sharding::kNone);
  s.precision = Precision::kPureBf16;
  const MemoryEstimate on_device = EstimateMemory(m, 1024, s);
  s.offload = Offload::kCpu;
  const MemoryEstimate offloaded = EstimateMemory(m, 1024, s);
  EXPECT_EQ(offloaded.optimizer, 0);
  EXPECT_EQ(offloaded.parameters, on_device.parameters);
  EXPECT_EQ(on_device.optimizer, 12 * m.ParameterCount());
}

TEST(MemoryModel, TensorAndPipelineParallelismSplitTheParameters) {
  const ModelSpec m = Gpt2Small();
  const double one = EstimateMemory(m, 1024, Layout(1, 1, 1, Sharding::kNone)).parameters;
  const double tp4 = EstimateMemory(m, 1024, Layout(1, 4, 1, Sharding::kNone)).parameters;
  EXPECT_NEAR(tp4 / one, 0.25, 0.01);
  // A stage holds its 3 of 12 layers plus the embedding (38.6M of 124M).
  const double pp4 = EstimateMemory(m, 1024, Layout(1, 1, 4, Sharding::kNone)).parameters;
  ModelSpec no_layers = m;
  no_layers.n_layer = 0;
  const double outside = no_layers.ParameterCount();
  const double per_layer = (m.ParameterCount() - outside) / 12;
  EXPECT_NEAR(pp4, 4 * (3 * per_layer + outside), 8);
}

TEST(MemoryModel, ActivationsFollowKorthikanti) {
  const ModelSpec m = Gpt2Small();
  const double s = 1024, b = 4, h = 768, a = 12, L = 12;
  auto activations = [&](Strategy st) {
    st.precision = Precision::kBf16;
    return static_cast<double>(EstimateMemory(m, 1024, st).activations);
  };
  Strategy st = Layout(1, 1, 1, Sharding::kNone);
  st.attention = Attention::kMath;
  EXPECT_NEAR(activations(st), L * s * b * h * (34 + 5 * a * s / h), 1);
  st.attention = Attention::kSdpa;  // no s^2 tensors kept
  EXPECT_NEAR(activations(st), L * s * b * h * 34, 1);
  st.attention = Attention::kMath;
  st.checkpointing = Checkpointing::kSelective;
  EXPECT_NEAR(activations(st), L * s * b * h * 34, 1);
  st.checkpointing = Checkpointing::kFull;
  EXPECT_NEAR(activations(st), L * 2 * s * b * h, 1);
  st.checkpoint_percent = 50;  // 6 layers recompute, 6 keep everything
  EXPECT_NEAR(activations(st), 6 * 2 * s * b * h + 6 * s * b * h * (34 + 5 * a * s / h), 1);

  Strategy tp = Layout(1, 4, 1, Sharding::kNone);
  tp.attention = Attention::kMath;
  EXPECT_NEAR(activations(tp), L * s * b * h * (10 + 24.0 / 4 + 5 * a * s / (h * 4)), 1);
  tp.sequence_parallel = true;
  EXPECT_NEAR(activations(tp), L * s * b * h * (34.0 / 4 + 5 * a * s / (h * 4)), 1);

  // fp32 activations take twice the bytes.
  Strategy fp32 = Layout(1, 1, 1, Sharding::kNone);
  fp32.attention = Attention::kSdpa;
  EXPECT_NEAR(EstimateMemory(m, 1024, fp32).activations, 2 * L * s * b * h * 34, 1);
}

TEST(MemoryModel, PipelineStagesKeepTheirMicroBatchesInFlight) {
  const ModelSpec m = Gpt2Small();
  Strategy one = Layout(1, 1, 1, Sharding::kNone);
  one.attention = Attention::kSdpa;
  const double per_layer = EstimateMemory(m, 1024, one).activations / 12.0;
  Strategy pp4 = Layout(1, 1, 4, Sharding::kNone);
  pp4.attention = Attention::kSdpa;
  // 1F1B: stage 0 holds min(ga 8, pp 4) micro-batches of its 3 layers.
  EXPECT_NEAR(EstimateMemory(m, 1024, pp4).activations, 4 * 3 * per_layer, 4);
  pp4.grad_accum_steps = 2;
  EXPECT_NEAR(EstimateMemory(m, 1024, pp4).activations, 2 * 3 * per_layer, 4);
  pp4.grad_accum_steps = 8;
  pp4.pipeline_schedule = PipelineSchedule::kInterleaved;
  pp4.virtual_stages = 3;  // pp + ceil(3 / 3) = 5 in flight
  EXPECT_NEAR(EstimateMemory(m, 1024, pp4).activations, 5 * 3 * per_layer, 4);
}

TEST(MemoryModel, MoreOfAMonotoneDimensionNeverNeedsLess) {
  const ModelSpec m = Gpt2Small();
  Strategy s = Layout(4, 1, 1, Sharding::kNone);
  int64_t previous = 0;
  for (int mbs : {1, 2, 4, 8, 16}) {
    s.micro_batch_size = mbs;
    const int64_t total = EstimateMemory(m, 1024, s).total();
    EXPECT_GT(total, previous) << "mbs " << mbs;
    previous = total;
  }
  s.micro_batch_size = 4;
  previous = INT64_MAX;
  for (Sharding sharding : {Sharding::kNone, Sharding::kZero1, Sharding::kZero2}) {
    s.sharding = sharding;
    const int64_t total = EstimateMemory(m, 1024, s).total();
    EXPECT_LT(total, previous) << ShardingName(sharding);
    previous = total;
  }
  s.sharding = Sharding::kNone;
  previous = INT64_MAX;
  for (Checkpointing c : {Checkpointing::kNone, Checkpointing::kSelective, Checkpointing::kFull}) {
    s.checkpointing = c;
    const int64_t total = EstimateMemory(m, 1024, s).total();
    EXPECT_LT(total, previous) << CheckpointingName(c);
    previous = total;
  }
}

TEST(MemoryModel, CalibrationScalesActivationsAndAddsOverhead) {
  const ModelSpec m = Gpt2Small();
  const Strategy s = Layout(1, 1, 1, Sharding::kNone);
  const MemoryEstimate base = EstimateMemory(m, 1024, s);
  MemoryCoefficients c;
  c.activation_factor = 1.5;
  c.overhead_bytes = 1 << 30;
  const MemoryEstimate fitted = EstimateMemory(m, 1024, s, c);
  EXPECT_NEAR(fitted.activations, 1.5 * base.activations, 2);
  EXPECT_EQ(fitted.total() - fitted.activations, base.total() - base.activations + (1 << 30));
}

TEST(MemoryModel, ATorchScriptModelHasNoKnownShape) {
  ModelSpec m;
  m.family = "torchscript";
  EXPECT_EQ(EstimateMemory(m, 128, Layout(1, 1, 1, Sharding::kNone)).total(), 0);
}

}  // namespace
}  // namespace autoaccel

// The cost model: memory against the papers' formulas it implements, time
// features against the collectives' arithmetic, and the calibration against
// synthetic measurements from hidden coefficients.
#include "search/cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "search/device_catalog.h"

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

// Llama-2-7B's shape: 32 layers, width 4096, 32 heads (none grouped), MLP
// 11008.
ModelSpec Llama7B() {
  absl::StatusOr<ModelSpec> m =
      ModelSpecFromJson("llama", nlohmann::json{{"num_hidden_layers", 32},
                                                {"hidden_size", 4096},
                                                {"num_attention_heads", 32},
                                                {"num_key_value_heads", 32},
                                                {"intermediate_size", 11008},
                                                {"vocab_size", 32000},
                                                {"max_position_embeddings", 4096}});
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
  // The checkpoints, and the layer whose backward is recomputing its forward
  // (its whole activations less its checkpoint).
  const double working_set = s * b * h * (34 + 5 * a * s / h) - 2 * s * b * h;
  EXPECT_NEAR(activations(st), L * 2 * s * b * h + working_set, 1);
  st.checkpoint_percent = 50;  // 6 layers recompute, 6 keep everything
  EXPECT_NEAR(activations(st),
              6 * 2 * s * b * h + 6 * s * b * h * (34 + 5 * a * s / h) + working_set, 1);

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

TEST(MemoryModel, ContextParallelismSplitsActivationsAndShardsOverItsRanksToo) {
  const ModelSpec m = Llama7B();  // 32 layers, 32 heads of 128 (no grouping)
  const double s = 4096, b = 1, h = 4096, L = 32;
  Strategy st = Layout(1, 1, 1, Sharding::kNone);
  st.micro_batch_size = 1;
  st.precision = Precision::kBf16;
  st.attention = Attention::kSdpa;
  const MemoryEstimate one = EstimateMemory(m, 4096, st);
  st.context_parallel = 2;  // p2p: half the tokens, nothing else kept
  const MemoryEstimate ring = EstimateMemory(m, 4096, st);
  EXPECT_NEAR(double(ring.activations), one.activations / 2.0, 1);
  EXPECT_EQ(ring.logits, one.logits / 2);
  EXPECT_EQ(ring.parameters, one.parameters);
  // all_gather also keeps the other rank's keys and values (4 bytes of
  // 16-bit K and V per token and hidden unit here).
  st.context_parallel_comm = ContextParallelComm::kAllGather;
  const MemoryEstimate gathered = EstimateMemory(m, 4096, st);
  EXPECT_NEAR(double(gathered.activations), one.activations / 2.0 + L * (s / 2) * b * h * 4, 1);
  // Math attention: the rank's queries' scores against every key; the ring
  // keeps none.
  st.attention = Attention::kMath;
  const double core = L * (s / 2) * b * h * 5 * 32 * s / h;
  EXPECT_NEAR(double(EstimateMemory(m, 4096, st).activations), gathered.activations + core, 1);
  st.context_parallel_comm = ContextParallelComm::kP2p;
  EXPECT_NEAR(double(EstimateMemory(m, 4096, st).activations), ring.activations, 1);
  // Sharding spreads the model state over the data- and context-parallel
  // ranks, which hold the same weights.
  st.context_parallel = 4;
  st.sharding = Sharding::kFsdp;
  const MemoryEstimate fsdp = EstimateMemory(m, 4096, st);
  EXPECT_NEAR(double(fsdp.optimizer), one.optimizer / 4.0, 4);
  EXPECT_NEAR(double(fsdp.parameters), one.parameters / 4.0, 4);
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
  pp4.virtual_stages = 3;  // pp + (pp - 1) / vpp = 4 + 3 / 3 = 5 in flight
  EXPECT_NEAR(EstimateMemory(m, 1024, pp4).activations, 5 * 3 * per_layer, 4);
  // Megatron's warm-up with 2 chunks per rank: 2·3 + 1·4 chunk micro-batches
  // and the one computing, each half the stage: 5.5 stages' worth (of 4
  // layers: 12 layers in 8 chunks, the first stage's 2 chunks of 2).
  pp4.virtual_stages = 2;
  EXPECT_NEAR(EstimateMemory(m, 1024, pp4).activations, 5.5 * 4 * per_layer, 4);
  // fp8 weight copies are shared by the micro-batches in flight: one per
  // layer of the stage, not per micro-batch.
  pp4.pipeline_schedule = PipelineSchedule::k1F1B;
  pp4.virtual_stages = 1;
  pp4.precision = Precision::kFp8;
  ModelSpec no_layers = m;
  no_layers.n_layer = 0;
  const int64_t per_layer_params = (m.ParameterCount() - no_layers.ParameterCount()) / m.n_layer;
  EXPECT_EQ(EstimateMemory(m, 1024, pp4).fp8_weights, 3 * per_layer_params);
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

ModelSpec WithoutLayers(ModelSpec m) {
  m.n_layer = 0;
  return m;
}

// Model FLOPs per token of one layer (forward + backward) and of the rest.
double LayerFlops(const ModelSpec& m, int seq_len) {
  return (m.TrainingFlopsPerToken(seq_len) - WithoutLayers(m).TrainingFlopsPerToken(seq_len)) /
         m.n_layer;
}
double HeadFlops(const ModelSpec& m, int seq_len) {
  return WithoutLayers(m).TrainingFlopsPerToken(seq_len);
}

ModelSpec Mixtral(int experts, int per_token) {
  absl::StatusOr<ModelSpec> m =
      ModelSpecFromJson("mixtral", nlohmann::json{{"num_hidden_layers", 2},
                                                  {"hidden_size", 256},
                                                  {"num_attention_heads", 8},
                                                  {"num_key_value_heads", 8},
                                                  {"intermediate_size", 512},
                                                  {"vocab_size", 1000},
                                                  {"max_position_embeddings", 512},
                                                  {"num_local_experts", experts},
                                                  {"num_experts_per_tok", per_token}});
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

ModelSpec TorchScriptModel() {
  ModelSpec m;
  m.family = "torchscript";
  m.n_positions = ModelSpec::kTorchScriptMaxSeqLen;
  return m;
}

TEST(MemoryModel, MixtralCountsEveryExpertsWeightsAndTheRoutedExpertsActivations) {
  const double s = 512, b = 4, h = 256, f = 512, L = 2;
  Strategy st = Layout(1, 1, 1, Sharding::kNone);
  st.attention = Attention::kSdpa;
  st.precision = Precision::kBf16;  // 16-bit activations: the formulas' bytes
  auto memory = [&](int experts, int per_token) {
    return EstimateMemory(Mixtral(experts, per_token), 512, st);
  };
  // Model state: every expert's weights, gradients and moments.
  const ModelSpec m8 = Mixtral(8, 2);
  EXPECT_EQ(memory(8, 2).model_state(), 16 * m8.ParameterCount());
  EXPECT_GT(memory(16, 2).model_state(), memory(8, 2).model_state() + 16 * 8 * 3 * h * f - 1);
  // Activations: the k routed experts' SwiGLU tensors (4 of width f) and
  // their gathered input and output (h each), plus the router's logits
  // (16-bit) and probabilities (fp32) over the E experts.
  const auto expected = [&](double experts, double k) {
    return L * s * b * h * (10 + 8 + 6 * experts / h + k * (8 * f / h + 4));
  };
  EXPECT_NEAR(memory(8, 2).activations, expected(8, 2), 1);
  EXPECT_NEAR(memory(8, 1).activations, expected(8, 1), 1);
  // More experts to choose from cost only the router's share.
  EXPECT_NEAR(memory(16, 2).activations - memory(8, 2).activations, L * s * b * 6 * 8, 1);
}

TEST(MemoryModel, ExpertParallelismDividesTheExpertsStateByItsRanks) {
  const ModelSpec m = Mixtral(8, 2);
  const double experts = static_cast<double>(m.ExpertParameterCount());
  const double dense = static_cast<double>(m.ParameterCount()) - experts;
  EXPECT_EQ(experts, 2 * 8 * 3 * 256 * 512);  // 2 layers of 8 SwiGLU experts
  Strategy st = Layout(4, 1, 1, Sharding::kNone);
  st.attention = Attention::kSdpa;
  st.precision = Precision::kBf16;
  const MemoryEstimate one = EstimateMemory(m, 512, st);
  // Each of 4 expert-parallel ranks holds 2 of the 8 experts; balanced
  // routing leaves the activations as they were.
  st.expert_parallel = 4;
  const MemoryEstimate ep4 = EstimateMemory(m, 512, st);
  EXPECT_NEAR(double(ep4.model_state()), 16 * (dense + experts / 4), 16);
  EXPECT_EQ(ep4.activations, one.activations);
  // zero1 shards the dense optimizer state over the 4 data-parallel ranks
  // and the experts' over the 2 that hold the same experts (ep 2).
  st.expert_parallel = 2;
  st.sharding = Sharding::kZero1;
  const MemoryEstimate zero1 = EstimateMemory(m, 512, st);
  EXPECT_NEAR(double(zero1.optimizer), 8 * (dense / 4 + experts / 2 / 2), 8);
  EXPECT_NEAR(double(zero1.parameters), 4 * (dense + experts / 2), 4);
  // fsdp with ep = dp: the experts are not sharded (one rank per expert).
  st.expert_parallel = 4;
  st.sharding = Sharding::kFsdp;
  const MemoryEstimate fsdp = EstimateMemory(m, 512, st);
  EXPECT_NEAR(double(fsdp.parameters), 4 * (dense / 4 + experts / 4), 8);
}

// 4 layers of width 512 (8 heads) and an MLP of 1376.
absl::StatusOr<ModelSpec> SmallLlama() {
  return ModelSpecFromJson("llama", nlohmann::json{
                                        {"num_hidden_layers", 4},
                                        {"hidden_size", 512},
                                        {"num_attention_heads", 8},
                                        {"num_key_value_heads", 8},
                                        {"intermediate_size", 1376},
                                        {"vocab_size", 1000},
                                        {"max_position_embeddings", 1024},
                                    });
}

TEST(MemoryModel, LlamaMlpKeepsItsFourSwiGluTensors) {
  absl::StatusOr<ModelSpec> m = SmallLlama();
  ASSERT_TRUE(m.ok()) << m.status();
  Strategy st = Layout(1, 1, 1, Sharding::kNone);
  st.attention = Attention::kSdpa;
  st.precision = Precision::kPureBf16;
  const double s = 1024, b = 4, h = 512, f = 1376, L = 4;
  EXPECT_NEAR(EstimateMemory(*m, 1024, st).activations, L * s * b * h * (10 + 8 + 8 * f / h), 1);
}

TEST(MemoryModel, Fp8KeepsOneByteCopiesOfTheLinearLayersInputsAndWeights) {
  absl::StatusOr<ModelSpec> m = SmallLlama();
  ASSERT_TRUE(m.ok()) << m.status();
  Strategy st = Layout(1, 1, 1, Sharding::kNone);
  st.attention = Attention::kSdpa;
  st.precision = Precision::kPureBf16;
  const MemoryEstimate pure = EstimateMemory(*m, 1024, st);
  st.precision = Precision::kFp8;
  const MemoryEstimate fp8 = EstimateMemory(*m, 1024, st);
  // pure_bf16's model state.
  EXPECT_EQ(fp8.model_state(), pure.model_state());
  // q, k, v keep a copy of the attention input each (3 for 2), gate and up
  // of the MLP input (2 for 2), the output and down projections half of
  // theirs (1 for 2, f/h for 2·f/h).
  const double s = 1024, b = 4, h = 512, f = 1376, L = 4;
  EXPECT_NEAR(fp8.activations, L * s * b * h * (11 + 7 + 7 * f / h), 1);
  // Each layer's weights, 1 byte per parameter.
  const int64_t per_layer = (m->ParameterCount() - WithoutLayers(*m).ParameterCount()) / 4;
  EXPECT_EQ(fp8.fp8_weights, 4 * per_layer);
  EXPECT_EQ(pure.fp8_weights, 0);
  EXPECT_EQ(fp8.total() - pure.total(), fp8.activations - pure.activations + fp8.fp8_weights);
  // A fully recomputed layer holds its copies only while it recomputes.
  st.checkpointing = Checkpointing::kFull;
  EXPECT_EQ(EstimateMemory(*m, 1024, st).fp8_weights, per_layer);
}

TEST(MemoryModel, AGeluMlpFollowsItsWidth) {
  ModelSpec m = Gpt2Small();
  m.n_inner = 2 * m.n_embd;  // half of GPT-2's 4h: 8 instead of 16 of Korthikanti's 34
  Strategy st = Layout(1, 1, 1, Sharding::kNone);
  st.attention = Attention::kSdpa;
  st.precision = Precision::kBf16;
  const double s = 1024, b = 4, h = 768, L = 12;
  EXPECT_NEAR(EstimateMemory(m, 1024, st).activations, L * s * b * h * (34 - 8), 1);
}

TEST(TimeFeatures, NamesAreStableAndDistinct) {
  std::set<std::string> names;
  for (int k = 0; k < kNumTimeFeatures; ++k) names.insert(std::string(TimeFeatureName(k)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumTimeFeatures));
  EXPECT_EQ(TimeFeatureName(kFlopsFp32), "flops_fp32");
  EXPECT_EQ(TimeFeatureName(kFusedOptimizerParams), "fused_optimizer_params");
  EXPECT_EQ(TimeFeatureName(kStep), "step");
  EXPECT_EQ(TimeFeatureName(kNumTimeFeatures), "unknown");
}

TEST(TimeFeatures, AFusedKernelExecutesTheAttentionCoreAndItsShareGrowsWithTheSequence) {
  const ModelSpec m = Gpt2Small();
  Strategy s = Layout(1, 1, 1, Sharding::kNone);  // mbs 4, ga 8
  s.attention = Attention::kSdpa;
  // Forward: 4 · h · keys attended per token and layer (causal: (s + 1) / 2
  // on average); the fused kernel's backward recomputes the scores: 3.5x.
  const double tokens = 8 * 4 * 1024, h = 768, L = 12;
  const TimeFeatures x = StepTimeFeatures(m, 1024, s);
  EXPECT_NEAR(x[kFusedAttentionFlops] / (tokens * L * 3.5 * 4 * h * m.AttendedKeys(0, 1024)), 1.0,
              1e-12);
  EXPECT_NEAR(x[kActivationElements], tokens * h * L, 1e-6);
  // Per token, attention grows with the sequence and the rest does not.
  const TimeFeatures longer = StepTimeFeatures(m, 4096, s);
  EXPECT_GT(longer[kFusedAttentionFlops] / longer[kFlopsFp32],
            2 * x[kFusedAttentionFlops] / x[kFlopsFp32]);
  // The unfused kernel has its own feature.
  s.attention = Attention::kMath;
  EXPECT_EQ(StepTimeFeatures(m, 1024, s)[kFusedAttentionFlops], 0);
  // A full-recompute layer runs the kernel's forward once more.
  s.attention = Attention::kSdpa;
  s.checkpointing = Checkpointing::kFull;
  EXPECT_NEAR(StepTimeFeatures(m, 1024, s)[kFusedAttentionFlops] / x[kFusedAttentionFlops],
              4.5 / 3.5, 1e-12);
}

TEST(TimeModel, TheAchievedFractionFollowsTheDeviceGeneration) {
  // Keyed by fp8 tensor cores (the catalog's fp8 peak): an A100 has none.
  const DeviceSpec a100{"cuda", {19.5, 312, 312}, 0};
  const DeviceSpec h100{"cuda", {67, 989, 989, 1979}, 0};
  EXPECT_FALSE(HasFp8TensorCores(a100));
  EXPECT_TRUE(HasFp8TensorCores(h100));
  EXPECT_FALSE(HasFp8TensorCores(DeviceSpec{"cpu", {67, 989, 989, 1979}, 0}));
  EXPECT_DOUBLE_EQ(PriorTimeCoefficients(h100).seconds_per_unit[kFlopsBf16],
                   1 / (kCudaAchievedPeakFractionFp8Devices * 989e12));
  EXPECT_DOUBLE_EQ(PriorTimeCoefficients(h100).seconds_per_unit[kFlopsFp8],
                   1 / (kCudaFp8AchievedPeakFraction * 1979e12));
  // The memory-bound kernels run at the device memory's bandwidth.
  DeviceSpec fast = h100;
  fast.memory_bandwidth_bytes_per_s = 4800e9;
  EXPECT_DOUBLE_EQ(PriorTimeCoefficients(fast).seconds_per_unit[kActivationElements],
                   kCudaActivationBytesPerElement / 4800e9);
}

TEST(TimeFeatures, OneRankComputesTheModelFlopsOfItsTokens) {
  const ModelSpec m = Gpt2Small();
  Strategy s = Layout(1, 1, 1, Sharding::kNone);  // mbs 4, ga 8, fp32
  s.attention = Attention::kSdpa;
  const double tokens = 8 * 4 * 1024;
  const TimeFeatures x = StepTimeFeatures(m, 1024, s);
  EXPECT_NEAR(x[kFlopsFp32] / (tokens * m.TrainingFlopsPerToken(1024)), 1.0, 1e-12);
  EXPECT_EQ(x[kFlopsBf16], 0);
  EXPECT_EQ(x[kMathAttentionFlops], 0);  // sdpa
  EXPECT_EQ(x[kLayerPasses], 8 * 12);
  EXPECT_NEAR(x[kOptimizerParams], static_cast<double>(m.ParameterCount()), 1);
  EXPECT_EQ(x[kDataParallelBytes], 0);
  EXPECT_EQ(x[kModelParallelBytes], 0);
  EXPECT_EQ(x[kCollectives], 0);
  EXPECT_EQ(x[kStep], 1);

  // The precision picks the column; math attention pays for the whole
  // score matrix, QK^T and AV: 12·s·h per token and layer.
  s.precision = Precision::kBf16;
  s.attention = Attention::kMath;
  s.optimizer = Optimizer::kFusedAdamW;
  const TimeFeatures y = StepTimeFeatures(m, 1024, s);
  EXPECT_EQ(y[kFlopsFp32], 0);
  EXPECT_NEAR(y[kFlopsBf16], x[kFlopsFp32], 1);
  EXPECT_NEAR(y[kMathAttentionFlops], tokens * 12 * (12.0 * 1024 * 768), 1);
  EXPECT_EQ(y[kOptimizerParams], 0);
  EXPECT_NEAR(y[kFusedOptimizerParams], static_cast<double>(m.ParameterCount()), 1);
  // Offload moves the gradients down and the weights up instead.
  s.offload = Offload::kCpu;
  const TimeFeatures z = StepTimeFeatures(m, 1024, s);
  EXPECT_EQ(z[kFusedOptimizerParams], 0);
  EXPECT_NEAR(z[kOffloadBytes], 8.0 * m.ParameterCount(), 8);
}

TEST(TimeFeatures, Fp8ComputesTheLayersLinearFlopsInFp8AndTheRestInBf16) {
  const ModelSpec m = Gpt2Small();
  Strategy s = Layout(1, 1, 1, Sharding::kNone);
  s.attention = Attention::kSdpa;
  s.precision = Precision::kPureBf16;
  const TimeFeatures pure = StepTimeFeatures(m, 1024, s);
  s.precision = Precision::kFp8;
  const TimeFeatures fp8 = StepTimeFeatures(m, 1024, s);
  // The same FLOPs, split: the attention core (QK^T and AV, 3 x 4·s·h per
  // token and layer) and the LM head stay bf16.
  EXPECT_NEAR(fp8[kFlopsFp8] + fp8[kFlopsPureBf16], pure[kFlopsPureBf16], 1);
  const double tokens = 8 * 4 * 1024;
  ModelSpec no_layers = m;
  no_layers.n_layer = 0;
  const double bf16 = tokens * (12 * 3 * 4.0 * 768 * m.AttendedKeys(0, 1024) +
                                no_layers.TrainingFlopsPerToken(1024));
  EXPECT_NEAR(fp8[kFlopsPureBf16] / bf16, 1.0, 1e-9);
  EXPECT_GT(fp8[kFlopsFp8], 0);
  // bf16 weights and gradients as pure_bf16's: the rest is the same.
  for (int k = kFlopsFp8 + 1; k < kNumTimeFeatures; ++k) {
    EXPECT_EQ(fp8[k], pure[k]) << TimeFeatureName(k);
  }
  // On an H100 (fp8 peak twice bf16's) the prior predicts fp8 faster.
  const DeviceSpec h100 = DeviceCatalog::BuiltIn()->Find("h100-sxm")->spec;
  const TimeCoefficients c = PriorTimeCoefficients(h100);
  EXPECT_LT(PredictStepTime(fp8, c), PredictStepTime(pure, c));
  EXPECT_NEAR(c.seconds_per_unit[kFlopsPureBf16] / c.seconds_per_unit[kFlopsFp8],
              kCudaFp8AchievedPeakFraction * 1979.0 / (kCudaAchievedPeakFractionFp8Devices * 989),
              1e-9);
}

TEST(TimeFeatures, RecomputationAddsForwardFlopsAndPasses) {
  const ModelSpec m = Gpt2Small();
  Strategy s = Layout(1, 1, 1, Sharding::kNone);
  s.attention = Attention::kSdpa;
  const double tokens = 8 * 4 * 1024;
  const TimeFeatures none = StepTimeFeatures(m, 1024, s);
  s.checkpointing = Checkpointing::kFull;
  const TimeFeatures full = StepTimeFeatures(m, 1024, s);
  // A full-recompute layer runs its forward (a third of its FLOPs) again.
  EXPECT_NEAR(full[kFlopsFp32] - none[kFlopsFp32], tokens * 12 * LayerFlops(m, 1024) / 3,
              1e-9 * none[kFlopsFp32]);
  EXPECT_NEAR(full[kLayerPasses], 8 * (12 + 12 / 3.0), 1e-9);
  s.checkpoint_percent = 50;
  const TimeFeatures half = StepTimeFeatures(m, 1024, s);
  EXPECT_NEAR(half[kFlopsFp32] - none[kFlopsFp32], tokens * 6 * LayerFlops(m, 1024) / 3,
              1e-9 * none[kFlopsFp32]);
  // Selective recompute: the attention products' forward (causal: 2·s·h).
  s.checkpointing = Checkpointing::kSelective;
  s.checkpoint_percent = 100;
  const TimeFeatures selective = StepTimeFeatures(m, 1024, s);
  EXPECT_NEAR(selective[kFlopsFp32] - none[kFlopsFp32], tokens * 12 * 2.0 * 768 * 1024,
              1e-9 * none[kFlopsFp32]);
  EXPECT_EQ(selective[kLayerPasses], none[kLayerPasses]);
}

TEST(TimeFeatures, DataParallelCollectivesFollowRingVolumes) {
  const ModelSpec m = Gpt2Small();
  const double psi = static_cast<double>(m.ParameterCount());
  const double G = 4 * psi;  // fp32 gradients (and weights)
  auto features = [&](Sharding sharding, int ga) {
    Strategy s = Layout(4, 1, 1, sharding);
    s.grad_accum_steps = ga;
    return StepTimeFeatures(m, 1024, s);
  };
  // none: one all-reduce, 2(n-1)/n of the gradients per rank.
  EXPECT_NEAR(features(Sharding::kNone, 8)[kDataParallelBytes], 2 * 3 / 4.0 * G, 1);
  EXPECT_NEAR(features(Sharding::kNone, 1)[kDataParallelBytes], 2 * 3 / 4.0 * G, 1);
  // zero1: the same all-reduce and an all-gather of the updated shards.
  EXPECT_NEAR(features(Sharding::kZero1, 8)[kDataParallelBytes], (1.5 + 0.75) * G, 1);
  // zero2 reduce-scatters after every micro-batch.
  EXPECT_NEAR(features(Sharding::kZero2, 8)[kDataParallelBytes], (8 * 0.75 + 0.75) * G, 1);
  EXPECT_NEAR(features(Sharding::kZero2, 8)[kDataParallelBytes] -
                  features(Sharding::kZero2, 1)[kDataParallelBytes],
              7 * 0.75 * G, 1);
  // fsdp gathers each layer twice per micro-batch (the rest once) and
  // reduce-scatters the gradients.
  const double outside = static_cast<double>(WithoutLayers(m).ParameterCount());
  const double layers = psi - outside;
  EXPECT_NEAR(features(Sharding::kFsdp, 8)[kDataParallelBytes],
              8 * 0.75 * 4 * (2 * layers + outside + psi), 1);
  // pure_bf16 sends 16-bit gradients.
  Strategy pure = Layout(4, 1, 1, Sharding::kNone);
  pure.precision = Precision::kPureBf16;
  EXPECT_NEAR(StepTimeFeatures(m, 1024, pure)[kDataParallelBytes], 1.5 * 2 * psi, 1);
  // Each 25 MiB bucket is a call; zero2 calls once per bucket and micro-batch.
  const double buckets = std::ceil(G / (25 << 20));
  EXPECT_EQ(features(Sharding::kNone, 8)[kCollectives], buckets + 1);  // + the loss
  EXPECT_EQ(features(Sharding::kZero2, 8)[kCollectives], 9 * buckets + 1);
  // Sharding divides the optimizer's parameters.
  EXPECT_NEAR(features(Sharding::kZero1, 8)[kOptimizerParams], psi / 4, 1);
}

TEST(TimeFeatures, TensorParallelLayersAllReduceFourTimesPerMicroBatch) {
  const ModelSpec m12 = Gpt2Small();
  ModelSpec m6 = m12;
  m6.n_layer = 6;
  // Six more layers, ga 8 micro-batches of A = b·s·h elements, t = 2 (ring
  // factor 2(t-1)/t = 1), fp32: 4 bytes.
  const double A = 4 * 1024 * 768;
  auto more = [&](const Strategy& s, TimeFeature k) {
    return StepTimeFeatures(m12, 1024, s)[k] - StepTimeFeatures(m6, 1024, s)[k];
  };
  Strategy tp = Layout(1, 2, 1, Sharding::kNone);
  EXPECT_EQ(more(tp, kCollectives), 8 * 4 * 6);
  EXPECT_NEAR(more(tp, kModelParallelBytes), 8 * 6 * 4 * A * 4, 1);
  // Each rank computes half of the layers' FLOPs.
  EXPECT_NEAR(more(tp, kFlopsFp32), 8 * 4 * 1024 * 6 * LayerFlops(m12, 1024) / 2, 1e3);
  // Full recompute repeats the two forward all-reduces.
  tp.checkpointing = Checkpointing::kFull;
  EXPECT_EQ(more(tp, kCollectives), 8 * 6 * 6);
  EXPECT_NEAR(more(tp, kModelParallelBytes), 8 * 6 * 6 * A * 4, 1);
  // Sequence parallelism: an all-gather and a reduce-scatter for each
  // all-reduce (same bytes), plus the all-reduces of the 6 replicated
  // weights' gradients per layer (norms, row-parallel biases: 6h elements).
  Strategy sp = Layout(1, 2, 1, Sharding::kNone);
  sp.sequence_parallel = true;
  EXPECT_EQ(more(sp, kCollectives), 8 * (8 + 6) * 6);
  EXPECT_NEAR(more(sp, kModelParallelBytes), 8 * 6 * (4 * A * 4 + 6 * 768 * 4), 1);
  // autocast all-reduces 16-bit outputs forward, fp32 gradients backward.
  Strategy bf16 = Layout(1, 2, 1, Sharding::kNone);
  bf16.precision = Precision::kBf16;
  EXPECT_NEAR(more(bf16, kModelParallelBytes), 8 * 6 * (2 * A * 2 + 2 * A * 4), 1);
}

TEST(TimeFeatures, ContextParallelRanksComputeTheirShareAndExchangeKeysAndValues) {
  const ModelSpec m = Llama7B();
  Strategy s = Layout(1, 1, 1, Sharding::kNone);  // mbs 4, ga 8
  s.micro_batch_size = 1;
  s.precision = Precision::kBf16;
  s.attention = Attention::kSdpa;
  const TimeFeatures one = StepTimeFeatures(m, 4096, s);
  s.context_parallel = 4;
  const TimeFeatures ring = StepTimeFeatures(m, 4096, s);
  EXPECT_NEAR(ring[kFlopsBf16], one[kFlopsBf16] / 4, 1);
  // Per micro-batch and layer: K = 1024 tokens' K and V (2 x 4096 wide),
  // 16-bit; forward 3 K to the other ranks, backward 3 K again and the
  // fp32 gradients' 4 passes.
  const double K = 1024 * 2 * 4096.0, ga = 8, L = 32;
  EXPECT_NEAR(ring[kModelParallelBytes], ga * L * (3 * K * 2 + 3 * K * 2 + 4 * K * 4), 1);
  // The 4 ranks reduce the gradients together.
  EXPECT_NEAR(ring[kDataParallelBytes], 2.0 * 3 / 4 * static_cast<double>(m.ParameterCount()) * 4,
              1e3);
  s.context_parallel_comm = ContextParallelComm::kAllGather;
  const TimeFeatures gathered = StepTimeFeatures(m, 4096, s);
  EXPECT_NEAR(gathered[kModelParallelBytes], ga * L * (3 * K * 2 + 3 * K * 2), 1);
  EXPECT_LT(gathered[kCollectives], ring[kCollectives]);
  // The math kernel: all_gather scores every key of the sequence; the ring
  // its own block and half of each of the 3 others, (1 + 3/2) / 4.
  s.attention = Attention::kMath;
  const double math_gathered = StepTimeFeatures(m, 4096, s)[kMathAttentionFlops];
  s.context_parallel_comm = ContextParallelComm::kP2p;
  const double math_ring = StepTimeFeatures(m, 4096, s)[kMathAttentionFlops];
  EXPECT_NEAR(math_ring / math_gathered, 2.5 / 4, 1e-12);
  EXPECT_NEAR(math_gathered, ga * 1024 * L * 12.0 * 4096 * 4096, 1);
}

TEST(TimeFeatures, ExpertParallelRanksExchangeRoutedTokensAndReduceTheirExperts) {
  const ModelSpec m = Mixtral(8, 2);              // 2 layers, h 256
  Strategy s = Layout(4, 1, 1, Sharding::kNone);  // mbs 4, ga 8
  s.precision = Precision::kBf16;
  s.attention = Attention::kSdpa;
  const TimeFeatures one = StepTimeFeatures(m, 512, s);
  s.expert_parallel = 4;
  const TimeFeatures ep4 = StepTimeFeatures(m, 512, s);
  EXPECT_EQ(ep4[kFlopsBf16], one[kFlopsBf16]);
  // Per micro-batch and layer: T = 4 * 512 tokens, each sending its 2 x 256
  // routed elements, 3/4 of them to other ranks: out as a norm's fp32
  // output, back as the experts' 16-bit output, in forward and backward.
  const double T = 4 * 512, ga = 8, L = 2;
  EXPECT_NEAR(ep4[kModelParallelBytes], ga * L * 2 * (T * 2 * 256 * 0.75 * (4 + 2)), 1);
  EXPECT_EQ(one[kModelParallelBytes], 0);
  // The experts' gradients: none left to reduce with ep = dp (each rank
  // holds its own quarter), the rest over the 4 ranks.
  const double experts = static_cast<double>(m.ExpertParameterCount());
  const double dense = static_cast<double>(m.ParameterCount()) - experts;
  EXPECT_NEAR(ep4[kDataParallelBytes], 1.5 * 4 * dense, 1);
  s.expert_parallel = 2;  // 2 ranks hold each expert: a ring of 2 over half of them
  EXPECT_NEAR(StepTimeFeatures(m, 512, s)[kDataParallelBytes],
              1.5 * 4 * dense + 1.0 * 4 * experts / 2, 1);
  EXPECT_NEAR(StepTimeFeatures(m, 512, s)[kOptimizerParams], dense + experts / 2, 1);
}

TEST(TimeFeatures, PipelineBubbleScalesTheSlowestStagesCompute) {
  const ModelSpec m = Gpt2Small();
  const double tokens = 8 * 4 * 1024;
  Strategy pp4 = Layout(1, 1, 4, Sharding::kNone);  // ga 8
  pp4.attention = Attention::kSdpa;
  // The last stage is the slowest: 3 layers and the LM head.
  const double stage = tokens * (3 * LayerFlops(m, 1024) + HeadFlops(m, 1024));
  TimeFeatures x = StepTimeFeatures(m, 1024, pp4);
  EXPECT_NEAR(x[kFlopsFp32] / (stage * (1 + 3.0 / 8)), 1.0, 1e-12);
  EXPECT_NEAR(x[kLayerPasses], 8 * 3 * (1 + 3.0 / 8), 1e-9);
  // It receives activations and sends gradients back: one send of b·s·h
  // fp32 values per micro-batch, and all-reduces the tied embedding's
  // gradient with the first stage.
  EXPECT_NEAR(x[kModelParallelBytes], 8 * 4 * 1024 * 768 * 4.0 + 50257.0 * 768 * 4, 1);
  EXPECT_EQ(x[kCollectives], 8 * 2 + 1 + 1);  // send + receive, tied gradient, loss
  // Interleaving over vpp chunks shrinks the bubble to (pp - 1) / (vpp · ga).
  pp4.pipeline_schedule = PipelineSchedule::kInterleaved;
  pp4.virtual_stages = 3;
  x = StepTimeFeatures(m, 1024, pp4);
  EXPECT_NEAR(x[kFlopsFp32] / (stage * (1 + 3.0 / 24)), 1.0, 1e-12);
  // More micro-batches per step: a smaller bubble.
  pp4.pipeline_schedule = PipelineSchedule::k1F1B;
  pp4.virtual_stages = 1;
  pp4.grad_accum_steps = 32;
  pp4.micro_batch_size = 1;  // same tokens per step
  x = StepTimeFeatures(m, 1024, pp4);
  EXPECT_NEAR(x[kFlopsFp32] / (stage * (1 + 3.0 / 32)), 1.0, 1e-12);
}

TEST(TimeFeatures, LargerMicroBatchesOfTheSameBatchMakeFewerPasses) {
  const ModelSpec m = Gpt2Small();
  const CostModel model(m, 1024, 64, DeviceSpec{});
  Strategy s = Layout(1, 1, 1, Sharding::kNone);
  double passes = 1e18, seconds = 1e18;
  const double flops = StepTimeFeatures(m, 1024, s)[kFlopsFp32] * 64 / (4 * 8);
  for (int mbs : {1, 2, 4, 8, 16}) {
    s.micro_batch_size = mbs;
    s.grad_accum_steps = 64 / mbs;
    const TimeFeatures x = StepTimeFeatures(m, 1024, s);
    EXPECT_LT(x[kLayerPasses], passes) << "mbs " << mbs;
    EXPECT_NEAR(x[kFlopsFp32] / flops, 1.0, 1e-12) << "mbs " << mbs;
    const double t = model.Predict(s).step_time_s;
    EXPECT_LT(t, seconds) << "mbs " << mbs;
    passes = x[kLayerPasses];
    seconds = t;
  }
}

TEST(TimeModel, PriorsFollowTheDevicesPeak) {
  for (const char* type : {"cpu", "cuda"}) {
    for (const PeakTflops& peak : {PeakTflops{}, PeakTflops{2, 0, 0}, PeakTflops{60, 900, 900}}) {
      const TimeCoefficients c = PriorTimeCoefficients(DeviceSpec{type, peak, 0});
      for (int k = 0; k < kNumTimeFeatures; ++k) {
        // A CPU's step is what it was before the fused-attention and
        // activation-element features existed: they cost it nothing.
        if (std::string(type) == "cpu" && (k == kFusedAttentionFlops || k == kActivationElements)) {
          EXPECT_EQ(c.seconds_per_unit[k], 0) << TimeFeatureName(k);
          continue;
        }
        EXPECT_GT(c.seconds_per_unit[k], 0) << type << " " << TimeFeatureName(k);
      }
    }
  }
  const TimeCoefficients a100 = PriorTimeCoefficients(DeviceSpec{"cuda", {19.5, 312, 312}, 0});
  EXPECT_DOUBLE_EQ(a100.seconds_per_unit[kFlopsBf16], 1 / (kCudaAchievedPeakFraction * 312e12));
  EXPECT_DOUBLE_EQ(a100.seconds_per_unit[kFlopsPureBf16], 1 / (kCudaAchievedPeakFraction * 312e12));
  EXPECT_DOUBLE_EQ(a100.seconds_per_unit[kFlopsFp32], 1 / (kCudaAchievedPeakFraction * 19.5e12));
  // A V100 has no bf16 tensor cores: bf16 runs at its fp32 rate.
  const TimeCoefficients v100 = PriorTimeCoefficients(DeviceSpec{"cuda", {15.7, 0, 125}, 0});
  EXPECT_DOUBLE_EQ(v100.seconds_per_unit[kFlopsBf16], v100.seconds_per_unit[kFlopsFp32]);
  // A CPU of unknown half-precision speed emulates it at half its fp32 rate.
  const TimeCoefficients cpu = PriorTimeCoefficients(DeviceSpec{"cpu", {1, 0, 0}, 0});
  EXPECT_DOUBLE_EQ(cpu.seconds_per_unit[kFlopsBf16], 2 * cpu.seconds_per_unit[kFlopsFp32]);
  // Fused AdamW is the faster optimizer; gloo is slower than nccl.
  EXPECT_LT(cpu.seconds_per_unit[kFusedOptimizerParams], cpu.seconds_per_unit[kOptimizerParams]);
  EXPECT_GT(cpu.seconds_per_unit[kDataParallelBytes], a100.seconds_per_unit[kDataParallelBytes]);
}

TEST(CostModel, ATorchScriptModelAlwaysFitsAndTakesTime) {
  const ModelSpec m = TorchScriptModel();
  Strategy s = Layout(1, 1, 1, Sharding::kNone);
  const TimeFeatures x = StepTimeFeatures(m, 128, s);
  for (int k = 0; k < kNumTimeFeatures; ++k) {
    if (k == kStep) {
      EXPECT_EQ(x[k], 1);
    } else if (k == kLayerPasses) {
      EXPECT_EQ(x[k], 8);  // ga
    } else {
      EXPECT_EQ(x[k], 0) << TimeFeatureName(k);
    }
  }
  const CostModel model(m, 128, 32, DeviceSpec{"cuda", {}, /*memory_bytes=*/1});
  std::string reason = "untouched";
  EXPECT_TRUE(model.Fits(s, 0.0, &reason));
  EXPECT_EQ(reason, "untouched");
  const CostModel::Prediction p = model.Predict(s);
  EXPECT_GT(p.step_time_s, 0);
  EXPECT_NEAR(p.tokens_per_second, 32 * 128 / p.step_time_s, 1e-6);
}

TEST(CostModel, FitsComparesTheCalibratedEstimateWithTheDeviceAndSaysWhy) {
  const ModelSpec m = Gpt2Small();
  const Strategy s = Layout(1, 1, 1, Sharding::kNone);
  const int64_t need = EstimateMemory(m, 1024, s).total();
  const int64_t device = need * 10 / 11;  // 10% short
  const CostModel model(m, 1024, 32, DeviceSpec{"cuda", {}, device});
  std::string reason;
  EXPECT_FALSE(model.Fits(s, 0.0, &reason));
  EXPECT_THAT(reason, ::testing::StartsWith("predicted "));
  EXPECT_THAT(reason, ::testing::HasSubstr("GiB per device (activations "));
  EXPECT_THAT(reason, ::testing::HasSubstr("model state "));
  EXPECT_THAT(reason, ::testing::HasSubstr("exceeds the device's "));
  EXPECT_FALSE(model.Fits(s, 0.05, &reason));
  EXPECT_THAT(reason, ::testing::HasSubstr("with the 5% margin"));
  EXPECT_TRUE(model.Fits(s, 0.15, nullptr));
  // Less memory per device fits: full recompute drops most activations.
  Strategy full = s;
  full.checkpointing = Checkpointing::kFull;
  EXPECT_TRUE(model.Fits(full, 0.0, nullptr));
  // Unknown memory never prunes.
  const CostModel unknown(m, 1024, 32, DeviceSpec{"cuda", {}, 0});
  EXPECT_TRUE(unknown.Fits(s, 0.0, nullptr));
  // Calibration counts: an overhead that no longer fits.
  CostModel calibrated(m, 1024, 32, DeviceSpec{"cuda", {}, need * 11 / 10});
  EXPECT_TRUE(calibrated.Fits(s, 0.0, nullptr));
  for (int mbs : {1, 2, 4}) {
    Strategy observed = s;
    observed.micro_batch_size = mbs;
    TrialMetrics metrics;
    metrics.peak_memory_bytes =
        EstimateMemory(m, 1024, observed, MemoryCoefficients{1.0, int64_t{4} << 30}).total();
    calibrated.Observe(observed, metrics);
  }
  reason.clear();
  EXPECT_FALSE(calibrated.Fits(s, 0.0, &reason));
  EXPECT_THAT(reason, ::testing::HasSubstr("overhead 4.0 GiB"));
}

// Ranks 0..n-1 of `v` (no ties expected), then Pearson's correlation of
// the ranks.
double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> order(v.size());
    for (size_t i = 0; i < v.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < order.size(); ++i) r[order[i]] = static_cast<double>(i);
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size()), mean = (n - 1) / 2;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  return cov / std::sqrt(va * vb);
}

// 40 strategies of 4 ranks over a small GPT-2, varied over every dimension
// by a fixed linear congruential sequence (the same on every platform).
std::vector<Strategy> VariedStrategies(int global_batch) {
  struct Degrees {
    int dp, tp, pp;
  };
  const std::vector<Degrees> layouts = {{4, 1, 1}, {2, 2, 1}, {2, 1, 2},
                                        {1, 2, 2}, {1, 4, 1}, {1, 1, 4}};
  uint32_t state = 12345;
  auto pick = [&state](uint32_t n) {
    state = state * 1664525u + 1013904223u;
    return static_cast<int>((state >> 16) % n);
  };
  std::vector<Strategy> out;
  for (int i = 0; i < 40; ++i) {
    const Degrees d = layouts[i % layouts.size()];
    Strategy s;
    s.data_parallel = d.dp;
    s.tensor_parallel = d.tp;
    s.pipeline_parallel = d.pp;
    s.micro_batch_size = 1 << pick(4);
    s.grad_accum_steps = global_batch / (d.dp * s.micro_batch_size);
    s.precision = AllPrecisions()[pick(AllPrecisions().size())];
    s.checkpointing = AllCheckpointings()[pick(3)];
    if (s.checkpointing != Checkpointing::kNone && pick(2) == 0) s.checkpoint_percent = 50;
    s.attention = AllAttentions()[pick(2)];
    s.optimizer = AllOptimizers()[pick(2)];
    s.offload = pick(4) == 0 ? Offload::kCpu : Offload::kNone;
    if (d.dp > 1) s.sharding = AllShardings()[pick(d.pp > 1 ? 2 : 4)];
    if (d.tp > 1) s.sequence_parallel = pick(2) == 0;
    if (d.pp > 1 && s.grad_accum_steps % d.pp == 0 && pick(2) == 0) {
      s.pipeline_schedule = PipelineSchedule::kInterleaved;
      s.virtual_stages = 2;
    }
    EXPECT_TRUE(CheckLayout(s).ok()) << StrategyToText(s);
    out.push_back(s);
  }
  return out;
}

// Synthetic measurements of 40 strategies from hidden true coefficients
// (the prior's, off by factors 0.3 to 3), times 1 + a deterministic noise
// within ±noise; the even ones are observed, the odd ones predicted.
struct HeldOut {
  double prior_error = 0;  // worst relative error of the step time
  double prior_spearman = 0;
  double error = 0;
  double spearman = 0;
  int observations = 0;
};
HeldOut CalibrateOnHalf(const DeviceSpec& device, double noise) {
  absl::StatusOr<ModelSpec> m = ModelSpecFromJson("gpt2", nlohmann::json{{"n_layer", 8},
                                                                         {"n_embd", 256},
                                                                         {"n_head", 8},
                                                                         {"vocab_size", 4096},
                                                                         {"n_positions", 512}});
  EXPECT_TRUE(m.ok()) << m.status();
  constexpr int kSeq = 256, kBatch = 32;
  CostModel model(*m, kSeq, kBatch, device);

  const std::array<double, kNumTimeFeatures> factors = {0.5, 2.5, 3.0, 1.8, 2.2, 0.3, 2.0, 0.6,
                                                        1.5, 3.0, 2.5, 0.4, 3.0, 0.3, 2.0, 0.5};
  TimeCoefficients truth = model.time_coefficients();
  for (int k = 0; k < kNumTimeFeatures; ++k) truth.seconds_per_unit[k] *= factors[k];

  const std::vector<Strategy> strategies = VariedStrategies(kBatch);
  std::vector<double> measured;
  for (size_t i = 0; i < strategies.size(); ++i) {
    const double jitter = noise * (static_cast<double>((i * 37) % 21) - 10) / 10;
    measured.push_back(PredictStepTime(StepTimeFeatures(*m, kSeq, strategies[i]), truth) *
                       (1 + jitter));
  }
  // Every feature shows up in the observed half, or the test would prove
  // nothing about it.
  for (int k = 0; k < kNumTimeFeatures; ++k) {
    int seen = 0;
    for (size_t i = 0; i < strategies.size(); i += 2) {
      seen += StepTimeFeatures(*m, kSeq, strategies[i])[k] > 0;
    }
    EXPECT_GE(seen, 2) << TimeFeatureName(k);
  }

  auto predict_odd = [&](double* worst_error, double* spearman) {
    std::vector<double> predicted, actual;
    *worst_error = 0;
    for (size_t i = 1; i < strategies.size(); i += 2) {
      const CostModel::Prediction p = model.Predict(strategies[i]);
      *worst_error = std::max(*worst_error, std::abs(p.step_time_s - measured[i]) / measured[i]);
      predicted.push_back(p.tokens_per_second);
      actual.push_back(kBatch * kSeq / measured[i]);
    }
    *spearman = Spearman(predicted, actual);
  };
  HeldOut out;
  predict_odd(&out.prior_error, &out.prior_spearman);
  for (size_t i = 0; i < strategies.size(); i += 2) {
    TrialMetrics metrics;
    metrics.step_time_median_s = measured[i];
    model.Observe(strategies[i], metrics);
  }
  out.observations = model.observations();
  predict_odd(&out.error, &out.spearman);
  for (int k = 0; k < kNumTimeFeatures; ++k) {
    EXPECT_GE(model.time_coefficients().seconds_per_unit[k], 0) << TimeFeatureName(k);
  }
  return out;
}

TEST(Calibration, TwentyMeasuredTrialsPredictTwentyOthers) {
  // A CPU, where compute dominates, and a GPU, where overheads do.
  for (const DeviceSpec& device : {DeviceSpec{"cpu", {0.5, 0, 0}, int64_t{16} << 30},
                                   DeviceSpec{"cuda", {19.5, 312, 312}, int64_t{40} << 30}}) {
    SCOPED_TRACE(device.type);
    const HeldOut r = CalibrateOnHalf(device, /*noise=*/0);
    EXPECT_EQ(r.observations, 20);
    EXPECT_LE(r.error, 0.05);
    EXPECT_GE(r.spearman, 0.95);
    EXPECT_GT(r.prior_error, 0.3);            // the prior alone is badly off ...
    EXPECT_LT(r.prior_spearman, r.spearman);  // ... and ranks worse
  }
}

TEST(Calibration, MeasurementNoiseDoesNotThrowTheFitOff) {
  // ±1% noise on every observation: a coefficient the data pins down
  // poorly must not run away with it.
  const HeldOut r = CalibrateOnHalf(DeviceSpec{"cpu", {0.5, 0, 0}, 0}, /*noise=*/0.01);
  EXPECT_LE(r.error, 0.10);
  EXPECT_GE(r.spearman, 0.95);
}

TEST(Calibration, TheFirstObservationAlreadyMovesTheTimeModel) {
  const ModelSpec m = Gpt2Small();
  CostModel model(m, 1024, 32, DeviceSpec{"cuda", {19.5, 312, 312}, 0});
  Strategy s = Layout(1, 1, 1, Sharding::kNone);
  const double prior = model.Predict(s).step_time_s;
  TrialMetrics metrics;
  metrics.step_time_median_s = 3 * prior;
  model.Observe(s, metrics);
  const double after = model.Predict(s).step_time_s;
  EXPECT_NEAR(after / metrics.step_time_median_s, 1.0, 0.05);
  // A strategy the observation says little about moves in the same direction.
  Strategy other = s;
  other.micro_batch_size = 1;
  other.grad_accum_steps = 32;
  EXPECT_GT(model.Predict(other).step_time_s,
            CostModel(m, 1024, 32, model.device()).Predict(other).step_time_s);
}

// Past its first kRefitEveryObservationUpTo trials a job's time fit is
// refitted when they grew by a tenth, not at every one (a coordinator
// reports every result under its lock).
TEST(Calibration, ALongJobRefitsTheTimeModelAsItsTrialsGrowByATenth) {
  const ModelSpec m = Gpt2Small();
  CostModel model(m, 1024, 32, DeviceSpec{"cuda", {19.5, 312, 312}, 0});
  const Strategy s = Layout(1, 1, 1, Sharding::kNone);
  TrialMetrics metrics;
  metrics.step_time_median_s = 2 * model.Predict(s).step_time_s;
  for (int i = 0; i < kRefitEveryObservationUpTo; ++i) model.Observe(s, metrics);
  const double settled = model.Predict(s).step_time_s;
  metrics.step_time_median_s = 10 * settled;  // the device got much slower
  model.Observe(s, metrics);
  EXPECT_EQ(model.Predict(s).step_time_s, settled) << "not refitted at trial 65";
  const int next = static_cast<int>(std::ceil(kRefitEveryObservationUpTo * (1 + kRefitGrowth)));
  for (int i = kRefitEveryObservationUpTo + 1; i < next; ++i) model.Observe(s, metrics);
  EXPECT_GT(model.Predict(s).step_time_s, settled) << "refitted at trial " << next;
}

// The memory half follows the same schedule, and fits() says when either
// half changed (the searcher re-predicts its candidates only then); an
// out-of-memory trial refits the memory half at once.
TEST(Calibration, ALongJobRefitsTheMemoryModelAsItsTrialsGrowByATenth) {
  const ModelSpec m = Gpt2Small();
  CostModel model(m, 1024, 32, DeviceSpec{"cuda", {19.5, 312, 312}, int64_t{80} << 30});
  const Strategy s = Layout(1, 1, 1, Sharding::kNone);
  TrialMetrics metrics;
  metrics.peak_memory_bytes = 2 * model.Predict(s).memory.total();
  const uint64_t before = model.fits();
  for (int i = 0; i < kRefitEveryObservationUpTo; ++i) model.Observe(s, metrics);
  EXPECT_EQ(model.fits(), before + kRefitEveryObservationUpTo);
  const int64_t settled = model.Predict(s).memory.total();
  metrics.peak_memory_bytes = 10 * settled;
  model.Observe(s, metrics);
  EXPECT_EQ(model.Predict(s).memory.total(), settled) << "not refitted at trial 65";
  EXPECT_EQ(model.fits(), before + kRefitEveryObservationUpTo);
  const int next = static_cast<int>(std::ceil(kRefitEveryObservationUpTo * (1 + kRefitGrowth)));
  for (int i = kRefitEveryObservationUpTo + 1; i < next; ++i) model.Observe(s, metrics);
  EXPECT_GT(model.Predict(s).memory.total(), settled) << "refitted at trial " << next;
  EXPECT_EQ(model.fits(), before + kRefitEveryObservationUpTo + 1);
  model.Observe(Layout(1, 1, 1, Sharding::kNone), TrialMetrics(), TrialStatus::kOom);
  EXPECT_EQ(model.fits(), before + kRefitEveryObservationUpTo + 2);
}

TEST(Calibration, OnlySucceededMeasurementsCount) {
  const ModelSpec m = Gpt2Small();
  // Memory unknown: an out-of-memory trial bounds nothing either (see
  // AnOutOfMemoryTrialRaisesWhatTheModelPredictsForIt).
  CostModel model(m, 1024, 32, DeviceSpec{"cuda", {}, 0});
  const Strategy s = Layout(1, 1, 1, Sharding::kNone);
  const CostModel::Prediction before = model.Predict(s);
  TrialMetrics metrics;
  metrics.step_time_median_s = 100 * before.step_time_s;
  metrics.peak_memory_bytes = 10 * before.memory.total();
  model.Observe(s, metrics, TrialStatus::kOom);
  model.Observe(s, metrics, TrialStatus::kFailed);
  model.Observe(s, TrialMetrics{});  // nothing measured
  EXPECT_EQ(model.observations(), 0);
  EXPECT_EQ(model.Predict(s).step_time_s, before.step_time_s);
  EXPECT_EQ(model.Predict(s).memory.total(), before.memory.total());
}

TEST(Calibration, CoefficientsNeverGoNegative) {
  // Contradictory measurements: the strategies that communicate more ran
  // faster. Least squares would price communication below zero (and then
  // predict a heavily communicating strategy to take no time at all).
  const ModelSpec m = Gpt2Small();
  CostModel model(m, 1024, 64, DeviceSpec{"cuda", {19.5, 312, 312}, 0});
  const CostModel prior(m, 1024, 64, DeviceSpec{"cuda", {19.5, 312, 312}, 0});
  int i = 0;
  for (int mbs : {1, 2, 4, 8}) {
    for (Sharding sharding : {Sharding::kNone, Sharding::kZero1, Sharding::kZero2}) {
      Strategy s = Layout(4, 1, 1, sharding);
      s.micro_batch_size = mbs;
      s.grad_accum_steps = 16 / mbs;
      const TimeFeatures x = StepTimeFeatures(m, 1024, s);
      TrialMetrics metrics;
      metrics.step_time_median_s = prior.Predict(s).step_time_s *
                                   (1.0 - 0.4 * x[kDataParallelBytes] / (3 * 4 * 124e6)) *
                                   (1 + 0.002 * (i++ % 3));
      model.Observe(s, metrics);
    }
  }
  for (int k = 0; k < kNumTimeFeatures; ++k) {
    EXPECT_GE(model.time_coefficients().seconds_per_unit[k], 0) << TimeFeatureName(k);
  }
  Strategy chatty = Layout(4, 1, 1, Sharding::kZero2);
  chatty.micro_batch_size = 1;
  chatty.grad_accum_steps = 64;
  EXPECT_GT(model.Predict(chatty).step_time_s, 0);
}

TEST(Calibration, MemoryRecoversActivationFactorAndOverhead) {
  const ModelSpec m = Gpt2Small();
  CostModel model(m, 1024, 32, DeviceSpec{"cuda", {}, int64_t{80} << 30});
  const MemoryCoefficients truth{1.3, int64_t{50} << 20};
  std::vector<Strategy> strategies;
  for (int mbs : {1, 2, 4, 8}) {
    for (Checkpointing c : {Checkpointing::kNone, Checkpointing::kFull}) {
      Strategy s = Layout(2, 1, 1, Sharding::kZero1);
      s.micro_batch_size = mbs;
      s.grad_accum_steps = 16 / mbs;
      s.checkpointing = c;
      s.precision = mbs % 4 == 0 ? Precision::kBf16 : Precision::kFp32;
      strategies.push_back(s);
    }
  }
  for (size_t i = 0; i < strategies.size(); ++i) {
    TrialMetrics metrics;
    metrics.peak_memory_bytes = EstimateMemory(m, 1024, strategies[i], truth).total();
    model.Observe(strategies[i], metrics);
    if (i == 0) {
      // One observation cannot tell activations from overhead: the priors stand.
      EXPECT_EQ(model.memory_coefficients().activation_factor, 1.0);
      EXPECT_EQ(model.memory_coefficients().overhead_bytes, 0);
    }
  }
  EXPECT_NEAR(model.memory_coefficients().activation_factor, 1.3, 0.02 * 1.3);
  EXPECT_NEAR(static_cast<double>(model.memory_coefficients().overhead_bytes),
              static_cast<double>(truth.overhead_bytes), 0.02 * truth.overhead_bytes);
  // The calibrated model predicts a strategy it never saw.
  Strategy unseen = Layout(2, 1, 1, Sharding::kZero2);
  unseen.checkpointing = Checkpointing::kSelective;
  const double expected = static_cast<double>(EstimateMemory(m, 1024, unseen, truth).total());
  EXPECT_NEAR(model.Predict(unseen).memory.total() / expected, 1.0, 0.01);
}

TEST(Calibration, AnOutOfMemoryTrialRaisesWhatTheModelPredictsForIt) {
  const ModelSpec m = Gpt2Small();
  Strategy s = Layout(2, 1, 1, Sharding::kZero1);
  s.micro_batch_size = 8;
  s.grad_accum_steps = 2;
  const int64_t before = EstimateMemory(m, 1024, s).total();
  // A device 30% smaller than the first guess: the strategy ran out of it.
  const int64_t device = before * 13 / 10;
  CostModel model(m, 1024, 32, DeviceSpec{"cuda", {}, device});
  EXPECT_TRUE(model.Fits(s, 0.0, nullptr));
  model.Observe(s, TrialMetrics(), TrialStatus::kOom);
  EXPECT_GE(model.Predict(s).memory.total(), 0.98 * device);
  EXPECT_GT(model.memory_coefficients().activation_factor, 1.0);
  // What the model predicts for a strategy with more activations rises too.
  Strategy bigger = s;
  bigger.micro_batch_size = 16;
  bigger.grad_accum_steps = 1;
  EXPECT_GT(model.Predict(bigger).memory.total(), EstimateMemory(m, 1024, bigger).total());
  // An out-of-memory trial the model already expected changes nothing; on a
  // device of unknown memory it tells nothing.
  CostModel unknown(m, 1024, 32, DeviceSpec{"cuda", {}, 0});
  unknown.Observe(s, TrialMetrics(), TrialStatus::kOom);
  EXPECT_EQ(unknown.memory_coefficients().activation_factor, 1.0);
  CostModel expected(m, 1024, 32, DeviceSpec{"cuda", {}, before / 2});
  expected.Observe(s, TrialMetrics(), TrialStatus::kOom);
  EXPECT_EQ(expected.memory_coefficients().activation_factor, 1.0);
  EXPECT_EQ(expected.memory_coefficients().overhead_bytes, 0);
}

// ---- Warm start -------------------------------------------------------------

// A synthetic device: hidden true time coefficients (the prior's, off by
// factors 0.3 to 3) and memory coefficients, the same for every model run on
// it.
struct SyntheticDevice {
  DeviceSpec spec{"cuda", {19.5, 312, 312}, int64_t{80} << 30};
  TimeCoefficients time;
  MemoryCoefficients memory{1.3, int64_t{300} << 20};
  SyntheticDevice() {
    const std::array<double, kNumTimeFeatures> factors = {0.5, 2.5, 3.0, 1.8, 2.2, 0.3, 2.0, 0.6,
                                                          1.5, 3.0, 2.5, 0.4, 3.0, 0.3, 2.0, 0.5};
    time = PriorTimeCoefficients(spec);
    for (int k = 0; k < kNumTimeFeatures; ++k) time.seconds_per_unit[k] *= factors[k];
  }
  TrialMetrics Measure(const ModelSpec& m, int seq_len, const Strategy& s) const {
    TrialMetrics metrics;
    metrics.step_time_median_s = PredictStepTime(StepTimeFeatures(m, seq_len, s), time);
    metrics.peak_memory_bytes = EstimateMemory(m, seq_len, s, memory).total();
    return metrics;
  }
};

ModelSpec SmallGpt(int layers, int width, int heads) {
  absl::StatusOr<ModelSpec> m = ModelSpecFromJson("gpt2", nlohmann::json{{"n_layer", layers},
                                                                         {"n_embd", width},
                                                                         {"n_head", heads},
                                                                         {"vocab_size", 4096},
                                                                         {"n_positions", 2048}});
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

// Median relative errors of a model's step time and peak memory over
// `strategies` against the device's truth.
std::pair<double, double> MedianErrors(const CostModel& model, const SyntheticDevice& device,
                                       const ModelSpec& m, int seq_len,
                                       const std::vector<Strategy>& strategies) {
  std::vector<double> time, memory;
  for (const Strategy& s : strategies) {
    const TrialMetrics truth = device.Measure(m, seq_len, s);
    const TrialPrediction p = model.PredictTrial(s);
    time.push_back(std::abs(p.step_time_s - truth.step_time_median_s) / truth.step_time_median_s);
    memory.push_back(std::abs(double(p.peak_memory_bytes - truth.peak_memory_bytes)) /
                     double(truth.peak_memory_bytes));
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(time), median(memory)};
}

TEST(WarmStart, EarlierJobsOfOtherModelsMakeANewJobsFirstPredictionsCloser) {
  const SyntheticDevice device;
  // Two earlier jobs: other models, other sequence lengths, 40 trials each.
  std::vector<EarlierTrial> earlier;
  for (const auto& [m, seq] : {std::pair<ModelSpec, int>{SmallGpt(8, 256, 8), 256},
                               std::pair<ModelSpec, int>{SmallGpt(4, 512, 8), 512}}) {
    for (const Strategy& s : VariedStrategies(32)) {
      earlier.push_back(EarlierTrial{m, seq, s, device.Measure(m, seq, s)});
    }
  }
  // The new job: GPT-2 small at 1024 tokens, nothing measured yet.
  const ModelSpec job = Gpt2Small();
  const CostModel cold(job, 1024, 32, device.spec);
  CostModel warm = cold;
  EXPECT_EQ(warm.WarmStart(earlier), 80);
  EXPECT_EQ(warm.earlier_observations(), 80);
  EXPECT_EQ(warm.observations(), 0);  // the job's own
  const std::vector<Strategy> strategies = VariedStrategies(32);
  const auto [cold_time, cold_memory] = MedianErrors(cold, device, job, 1024, strategies);
  const auto [warm_time, warm_memory] = MedianErrors(warm, device, job, 1024, strategies);
  EXPECT_GT(cold_time, 0.3);   // the prior alone is badly off ...
  EXPECT_LT(warm_time, 0.05);  // ... the device's coefficients carry over
  EXPECT_GT(cold_memory, 0.05);
  EXPECT_LT(warm_memory, 0.01);
}

TEST(WarmStart, TheJobsOwnTrialsTakeOverWhereItsModelDiffers) {
  const SyntheticDevice device;
  std::vector<EarlierTrial> earlier;
  const ModelSpec other = SmallGpt(8, 256, 8);
  for (const Strategy& s : VariedStrategies(32)) {
    earlier.push_back(EarlierTrial{other, 256, s, device.Measure(other, 256, s)});
  }
  // This job's model keeps half again as many activations as the others
  // (say, kernels of its own).
  SyntheticDevice mine = device;
  mine.memory.activation_factor = 1.3 * 1.5;
  const ModelSpec job = Gpt2Small();
  CostModel warm(job, 1024, 32, device.spec);
  warm.WarmStart(earlier);
  const std::vector<Strategy> strategies = VariedStrategies(32);
  for (size_t i = 0; i < 8; ++i)
    warm.Observe(strategies[i], mine.Measure(job, 1024, strategies[i]));
  EXPECT_NEAR(warm.memory_coefficients().activation_factor, 1.3 * 1.5, 0.05 * 1.3 * 1.5);
  std::vector<Strategy> unseen(strategies.begin() + 8, strategies.end());
  EXPECT_LT(MedianErrors(warm, mine, job, 1024, unseen).second, 0.03);
}

TEST(WarmStart, TorchScriptAndUnmeasuredEarlierTrialsAreSkipped) {
  const SyntheticDevice device;
  const ModelSpec job = Gpt2Small();
  const Strategy s = Layout(1, 1, 1, Sharding::kNone);
  CostModel model(job, 1024, 32, device.spec);
  const TrialPrediction before = model.PredictTrial(s);
  const ModelSpec script = TorchScriptModel();
  TrialMetrics measured;
  measured.step_time_median_s = 100 * before.step_time_s;
  EXPECT_EQ(model.WarmStart({EarlierTrial{script, 128, s, measured},
                             EarlierTrial{job, 1024, s, TrialMetrics{}}}),
            0);
  EXPECT_EQ(model.earlier_observations(), 0);
  EXPECT_EQ(model.PredictTrial(s), before);
}

TEST(CostModel, PredictTrialIsWhatPredictSaysInARecordsTerms) {
  const ModelSpec m = Gpt2Small();
  const CostModel model(m, 1024, 32, DeviceSpec{"cuda", {19.5, 312, 312}, int64_t{80} << 30});
  const Strategy s = Layout(2, 1, 1, Sharding::kZero1);
  const CostModel::Prediction p = model.Predict(s);
  const TrialPrediction t = model.PredictTrial(s);
  EXPECT_EQ(t.step_time_s, p.step_time_s);
  EXPECT_EQ(t.tokens_per_second, p.tokens_per_second);
  EXPECT_EQ(t.peak_memory_bytes, p.memory.total());
  // A torchscript model's memory is unknown: no figure rather than a wrong one.
  const CostModel script(TorchScriptModel(), 128, 32, DeviceSpec{"cuda", {}, 0});
  EXPECT_EQ(script.PredictTrial(s).peak_memory_bytes, 0);
  EXPECT_GT(script.PredictTrial(s).step_time_s, 0);
}

}  // namespace
}  // namespace autoaccel

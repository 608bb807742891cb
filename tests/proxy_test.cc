// Proxy trials (search/proxy.h) and the extrapolation from them
// (search/proxy_extrapolation.h): what --proxy accepts, how a candidate maps
// to its proxy, what auto chooses, and that the extrapolation carries the
// measurement over by the model's ratio with the stated interval.
#include "search/proxy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "search/cost_model.h"
#include "search/proxy_extrapolation.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;

ModelSpec Llama(int layers) {
  absl::StatusOr<ModelSpec> m = ModelSpecFromJson("llama", nlohmann::json{
                                                               {"num_hidden_layers", layers},
                                                               {"hidden_size", 256},
                                                               {"intermediate_size", 768},
                                                               {"num_attention_heads", 4},
                                                               {"num_key_value_heads", 2},
                                                               {"vocab_size", 8192},
                                                               {"max_position_embeddings", 256},
                                                           });
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

TrainingSetup JobSetup(const ModelSpec& model, int world, int global_batch) {
  TrainingSetup s;
  s.model = model;
  s.seq_len = 256;
  s.global_batch_size = global_batch;
  s.world_size = world;
  s.device_is_accelerator = false;
  return s;
}

Strategy Layout(int dp, int tp, int pp, int mbs, int ga) {
  Strategy s;
  s.data_parallel = dp;
  s.tensor_parallel = tp;
  s.pipeline_parallel = pp;
  s.micro_batch_size = mbs;
  s.grad_accum_steps = ga;
  s.precision = Precision::kBf16;
  s.attention = Attention::kSdpa;
  s.optimizer = Optimizer::kFusedAdamW;
  return s;
}

TEST(ProxyRequest, ParsesAutoAndSizesAndPrintsThemBack) {
  for (const char* text : {"auto", "layers=2", "layers=2,world-size=4"}) {
    absl::StatusOr<ProxyRequest> r = ParseProxyRequest(text);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(ProxyRequestText(*r), text);
  }
  const ProxyRequest r = *ParseProxyRequest("world-size=4,layers=3");
  EXPECT_FALSE(r.automatic);
  EXPECT_EQ(r.layers, 3);
  EXPECT_EQ(r.world_size, 4);
}

TEST(ProxyRequest, RefusesMalformedValuesNamingTheFlag) {
  for (const char* text : {"", "layers=0", "layers=-1", "layers=x", "layers=", "world-size=2",
                           "layers=2,layers=3", "depth=2", "auto,layers=2", "layers=2,"}) {
    absl::StatusOr<ProxyRequest> r = ParseProxyRequest(text);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << "'" << text << "'";
    EXPECT_THAT(r.status().message(), HasSubstr("proxy: ")) << "'" << text << "'";
  }
}

TEST(ProxyModel, KeepsTheFirstLayersAndEverythingElse) {
  const ModelSpec full = Llama(8);
  absl::StatusOr<ModelSpec> proxy = ProxyModel(full, 2);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  EXPECT_EQ(proxy->n_layer, 2);
  EXPECT_EQ(proxy->n_embd, full.n_embd);
  EXPECT_EQ(proxy->vocab_size, full.vocab_size);
  // Two layers' parameters fewer than the six cut away: the embedding and
  // head stay.
  const int64_t per_layer = (full.ParameterCount() - proxy->ParameterCount()) / 6;
  EXPECT_EQ(full.ParameterCount() - proxy->ParameterCount(), 6 * per_layer);
  EXPECT_TRUE(proxy->Validate().ok());
  EXPECT_EQ(ProxyModel(full, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ProxyModel(full, 9).status().message(), HasSubstr("1 to the model's 8"));
}

TEST(ProxyModel, CutsPerLayerListsWithTheLayers) {
  absl::StatusOr<ModelSpec> gemma = ModelSpecFromJson(
      "gemma2", nlohmann::json{{"num_hidden_layers", 6},
                               {"hidden_size", 64},
                               {"intermediate_size", 128},
                               {"num_attention_heads", 4},
                               {"num_key_value_heads", 2},
                               {"head_dim", 16},
                               {"vocab_size", 512},
                               {"max_position_embeddings", 256},
                               {"sliding_window", 32},
                               {"layer_types",
                                {"sliding_attention", "full_attention", "sliding_attention",
                                 "full_attention", "sliding_attention", "full_attention"}}});
  ASSERT_TRUE(gemma.ok()) << gemma.status();
  absl::StatusOr<ModelSpec> proxy = ProxyModel(*gemma, 2);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  EXPECT_THAT(proxy->layer_types, ::testing::ElementsAre("sliding_attention", "full_attention"));
  EXPECT_TRUE(proxy->Validate().ok()) << proxy->Validate();
  // The proxy's config reads back as the same model (what a trial runs).
  absl::StatusOr<ModelSpec> back = ModelSpecFromJson("gemma2", proxy->ToConfigJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->n_layer, 2);
  EXPECT_EQ(back->layer_types, proxy->layer_types);
}

TEST(ProxyModel, AMixtureOfExpertsKeepsAnExpertLayer) {
  absl::StatusOr<ModelSpec> moe =
      ModelSpecFromJson("deepseek_v3", nlohmann::json{{"num_hidden_layers", 4},
                                                      {"hidden_size", 64},
                                                      {"intermediate_size", 128},
                                                      {"moe_intermediate_size", 32},
                                                      {"num_attention_heads", 4},
                                                      {"num_key_value_heads", 4},
                                                      {"vocab_size", 512},
                                                      {"max_position_embeddings", 256},
                                                      {"n_routed_experts", 4},
                                                      {"num_experts_per_tok", 2},
                                                      {"n_group", 1},
                                                      {"topk_group", 1},
                                                      {"first_k_dense_replace", 2},
                                                      {"q_lora_rank", nullptr},
                                                      {"kv_lora_rank", 16},
                                                      {"qk_nope_head_dim", 8},
                                                      {"qk_rope_head_dim", 8},
                                                      {"v_head_dim", 8}});
  ASSERT_TRUE(moe.ok()) << moe.status();
  absl::StatusOr<ModelSpec> two = ProxyModel(*moe, 2);
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(two.status().message(), HasSubstr("use layers=3 or more"));
  absl::StatusOr<ModelSpec> three = ProxyModel(*moe, 3);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_FALSE(three->ExpertLayer(1));
  EXPECT_TRUE(three->ExpertLayer(2));
  absl::StatusOr<ModelSpec> back = ModelSpecFromJson("deepseek_v3", three->ToConfigJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dense_mlp_layers, three->dense_mlp_layers);
}

TEST(ProxyMapping, KeepsTheRanksWorkAndShrinksReplicasAndStages) {
  const TrainingSetup full = JobSetup(Llama(8), 4, 32);
  absl::StatusOr<ProxyMapping> mapping = ProxyMapping::Create(full, {2, 2});
  ASSERT_TRUE(mapping.ok()) << mapping.status();
  EXPECT_EQ(mapping->Describe(), "2 of 8 layers on 2 of 4 ranks");

  // Data parallel 4 with fsdp: 2 replicas, still sharded; the micro-batch
  // and the accumulation kept, so the proxy's batch is half the job's.
  Strategy dp = Layout(4, 1, 1, 4, 2);
  dp.sharding = Sharding::kFsdp;
  absl::StatusOr<ProxyTrial> t = mapping->TrialOf(dp);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->strategy.data_parallel, 2);
  EXPECT_EQ(t->strategy.sharding, Sharding::kFsdp);
  EXPECT_EQ(t->strategy.micro_batch_size, 4);
  EXPECT_EQ(t->strategy.grad_accum_steps, 2);
  EXPECT_EQ(t->setup.global_batch_size, 16);
  EXPECT_EQ(t->setup.world_size, 2);
  EXPECT_EQ(t->setup.model.n_layer, 2);

  // Tensor parallel 2 over data parallel 2: one replica left, unsharded.
  Strategy tp = Layout(2, 2, 1, 4, 4);
  tp.sharding = Sharding::kZero1;
  t = mapping->TrialOf(tp);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->strategy.tensor_parallel, 2);
  EXPECT_EQ(t->strategy.data_parallel, 1);
  EXPECT_EQ(t->strategy.sharding, Sharding::kNone);
  EXPECT_EQ(t->setup.global_batch_size, 16);

  // Two stages of 4 layers: a 2-layer proxy cannot keep 4 per stage, so it
  // runs unpipelined on its 2 ranks as data parallel.
  t = mapping->TrialOf(Layout(2, 1, 2, 4, 4));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->strategy.pipeline_parallel, 1);
  EXPECT_EQ(t->strategy.data_parallel, 2);

  // A tensor-parallel group larger than the proxy cannot be proxied.
  absl::StatusOr<ProxyTrial> wide = mapping->TrialOf(Layout(1, 4, 1, 4, 8));
  EXPECT_EQ(wide.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wide.status().message(), HasSubstr("does not divide the proxy's 2 ranks"));
}

TEST(ProxyMapping, KeepsLayersPerStageWhenTheProxyHoldsTwoStages) {
  // 8 layers over 4 stages (2 each), interleaved with 2 virtual stages; a
  // 4-layer proxy on 4 ranks keeps 2 layers per stage on 2 stages.
  const TrainingSetup full = JobSetup(Llama(8), 8, 64);
  absl::StatusOr<ProxyMapping> mapping = ProxyMapping::Create(full, {4, 4});
  ASSERT_TRUE(mapping.ok()) << mapping.status();
  Strategy s = Layout(2, 1, 4, 4, 8);
  s.pipeline_schedule = PipelineSchedule::kInterleaved;
  s.virtual_stages = 2;
  absl::StatusOr<ProxyTrial> t = mapping->TrialOf(s);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->strategy.pipeline_parallel, 2);
  EXPECT_EQ(t->strategy.pipeline_schedule, PipelineSchedule::kInterleaved);
  EXPECT_EQ(t->strategy.virtual_stages, 2);
  EXPECT_EQ(t->strategy.data_parallel, 2);
  EXPECT_EQ(t->setup.model.n_layer / t->strategy.pipeline_parallel,
            full.model.n_layer / s.pipeline_parallel);
}

TEST(ProxyMapping, RefusesAProxyThatIsNotSmaller) {
  const TrainingSetup full = JobSetup(Llama(8), 4, 32);
  EXPECT_THAT(ProxyMapping::Create(full, {8, 4}).status().message(),
              HasSubstr("is the full run itself"));
  EXPECT_THAT(ProxyMapping::Create(full, {2, 3}).status().message(),
              HasSubstr("world-size must divide the job's world size (4), got 3"));
  EXPECT_THAT(ProxyMapping::Create(full, {2, 8}).status().message(),
              HasSubstr("world-size must divide"));
}

TEST(ChooseProxy, SmallestRanksAndLayersThatKeepWhatTheCandidatesNeed) {
  const TrainingSetup full = JobSetup(Llama(8), 4, 32);
  const std::vector<Strategy> candidates = {Layout(4, 1, 1, 4, 2), Layout(2, 2, 1, 4, 4),
                                            Layout(1, 1, 4, 4, 8), Layout(2, 1, 2, 4, 4)};
  absl::StatusOr<ProxyShape> shape = ChooseProxy(full, candidates, 4);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->world_size, 2);  // holds tp 2, and measures data parallelism
  EXPECT_EQ(shape->layers, 2);      // one stage of the 4-stage pipeline
  // Without pipelines the fewest layers is 2; a 4-wide tensor group needs 4 ranks.
  shape = ChooseProxy(full, {Layout(1, 4, 1, 4, 8), Layout(4, 1, 1, 4, 2)}, 4);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->world_size, 4);
  EXPECT_EQ(shape->layers, 2);
  absl::StatusOr<ProxyShape> none = ChooseProxy(full, candidates, 1);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("pool's 1 devices"));
}

// A CPU cost model of the 8-layer model on 4 ranks, measuring 2-layer
// proxies on 2 ranks.
CostModel ProxyCostModel() {
  const TrainingSetup full = JobSetup(Llama(8), 4, 32);
  DeviceSpec cpu;
  cpu.type = "cpu";
  cpu.memory_bytes = int64_t{8} << 30;
  CostModel model(full.model, full.seq_len, full.global_batch_size, cpu);
  model.UseProxy(*ProxyMapping::Create(full, {2, 2}));
  return model;
}

TEST(Extrapolation, ScalesTheMeasurementByTheModelsRatio) {
  const CostModel model = ProxyCostModel();
  const Strategy s = Layout(4, 1, 1, 4, 2);
  const CostModel::Prediction proxy = *model.PredictProxy(s);
  const CostModel::Prediction target = model.Predict(s);
  ASSERT_GT(target.step_time_s, proxy.step_time_s);  // 4x the layers, more replicas

  // The proxy measured 1.3x what the model says of it, and 100 MiB more.
  TrialMetrics measured;
  measured.measured_steps = 5;
  measured.step_time_median_s = 1.3 * proxy.step_time_s;
  measured.step_time_min_s = 1.2 * proxy.step_time_s;
  measured.step_time_max_s = 1.4 * proxy.step_time_s;
  measured.step_time_spread = 0.1;
  measured.peak_memory_bytes = proxy.memory.total() + (int64_t{100} << 20);
  measured.peak_tflops = 2 * 0.4;  // 2 ranks of 0.4 TFLOP/s
  absl::StatusOr<Extrapolation> e = Extrapolate(model, s, measured);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->metrics.step_time_median_s, 1.3 * target.step_time_s, 1e-9);
  EXPECT_NEAR(e->model_ratio, target.step_time_s / proxy.step_time_s, 1e-12);
  EXPECT_EQ(e->metrics.peak_memory_bytes, target.memory.total() + (int64_t{100} << 20));
  EXPECT_NEAR(e->metrics.tokens_per_second, 32.0 * 256 / e->metrics.step_time_median_s, 1e-6);
  EXPECT_NEAR(e->metrics.peak_tflops, 4 * 0.4, 1e-12);  // the full world's peak
  EXPECT_NEAR(e->metrics.mfu, e->metrics.achieved_tflops / 1.6, 1e-12);
  EXPECT_EQ(e->proxy, "2 of 8 layers on 2 of 4 ranks");
  EXPECT_EQ(e->proxy_strategy.data_parallel, 2);
  // No validated fit yet: the model's error is kUnvalidatedModelError, on
  // the share of the step the model supplies; half the spread from the
  // measurement.
  const double changed = 1 - proxy.step_time_s / target.step_time_s;
  const double r = std::hypot(0.05, kUnvalidatedModelError * changed);
  EXPECT_NEAR(e->relative_uncertainty, r, 1e-12);
  EXPECT_NEAR(e->step_time_low_s, e->metrics.step_time_median_s / (1 + r), 1e-9);
  EXPECT_NEAR(e->step_time_high_s, e->metrics.step_time_median_s * (1 + r), 1e-9);
}

TEST(Extrapolation, RefusesWhatHasNoProxyOrNoMeasurement) {
  const CostModel model = ProxyCostModel();
  TrialMetrics measured;
  measured.step_time_median_s = 1;
  EXPECT_EQ(Extrapolate(model, Layout(1, 4, 1, 4, 8), measured).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Extrapolate(model, Layout(4, 1, 1, 4, 2), TrialMetrics{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  CostModel plain(Llama(8), 256, 32, DeviceSpec{});
  EXPECT_EQ(Extrapolate(plain, Layout(4, 1, 1, 4, 2), measured).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(Extrapolation, TheModelCalibratesOnTheProxiesMeasurements) {
  // Proxy trials that all run 2x slower than the priors say: the calibrated
  // model's prediction of each proxy comes to the measurement, and its full
  // prediction doubles with it.
  CostModel model = ProxyCostModel();
  const std::vector<Strategy> strategies = {
      Layout(4, 1, 1, 1, 8),  Layout(4, 1, 1, 2, 4), Layout(4, 1, 1, 4, 2), Layout(4, 1, 1, 8, 1),
      Layout(2, 2, 1, 1, 16), Layout(2, 2, 1, 2, 8), Layout(2, 2, 1, 4, 4), Layout(2, 2, 1, 8, 2)};
  const double before = model.Predict(strategies[2]).step_time_s;
  std::vector<double> measured;
  for (const Strategy& s : strategies) measured.push_back(2 * model.PredictProxy(s)->step_time_s);
  for (size_t i = 0; i < strategies.size(); ++i) {
    TrialMetrics m;
    m.step_time_median_s = measured[i];
    model.Observe(strategies[i], m);
  }
  EXPECT_EQ(model.observations(), 8);
  for (size_t i = 0; i < strategies.size(); ++i) {
    EXPECT_NEAR(model.PredictProxy(strategies[i])->step_time_s / measured[i], 1, 0.02)
        << StrategyToText(strategies[i]);
  }
  EXPECT_NEAR(model.Predict(strategies[2]).step_time_s / before, 2, 0.1);
  EXPECT_GT(model.time_fit_error(), 0);
  EXPECT_LT(model.time_fit_error(), 0.05);
  // A fit that explains the proxies within 5% says nothing of the step to
  // the full run: the interval keeps the least model error.
  TrialMetrics m2;
  m2.step_time_median_s = measured[2];
  const double changed =
      1 - model.PredictProxy(strategies[2])->step_time_s / model.Predict(strategies[2]).step_time_s;
  EXPECT_NEAR(Extrapolate(model, strategies[2], m2)->relative_uncertainty,
              kUnvalidatedModelError * changed, 1e-9);
  // A candidate the proxy cannot run teaches nothing.
  TrialMetrics m;
  m.step_time_median_s = 100;
  model.Observe(Layout(1, 4, 1, 4, 8), m);
  EXPECT_EQ(model.observations(), 8);
}

}  // namespace
}  // namespace autoaccel

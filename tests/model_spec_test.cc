// Model specs (spec/model_spec.h): reading each family's config.json,
// the checks, and the parameter and FLOP counts.
#include "spec/model_spec.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "search/cost_model.h"
#include "spec/config_override.h"
#include "spec/model_families.h"
#include "tests/hub_configs.h"
#include "tests/search_test_util.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

TEST(ModelConfig, Gpt2SmallParameterCountMatchesHuggingFace) {
  const ModelSpec m = Gpt2Small();
  EXPECT_EQ(m.family, "gpt2");
  EXPECT_EQ(m.n_layer, 12);
  EXPECT_EQ(m.n_head, 12);
  EXPECT_EQ(m.n_inner, 4 * 768);             // n_inner: null means the default
  EXPECT_EQ(m.ParameterCount(), 124439808);  // sum(p.numel()) of HF "gpt2"
}

TEST(ModelConfig, TrainingFlopsPerTokenOfGpt2Small) {
  const ModelSpec m = Gpt2Small();
  // 6 * (12 * (4 * 768^2 + 2 * 768 * 3072) + 50257 * 768) + 6 * 12 * 768 * 1024
  EXPECT_DOUBLE_EQ(m.TrainingFlopsPerToken(1024), 797815296.0);
}

TEST(ModelConfig, NormalizedConfigParsesBackToTheSameModel) {
  const ModelSpec m = Gpt2Small();
  absl::StatusOr<ModelSpec> again = ModelSpecFromJson("gpt2", m.ToConfigJson());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ToConfigJson(), m.ToConfigJson());
  EXPECT_EQ(again->ParameterCount(), m.ParameterCount());
}

TEST(ModelConfig, ErrorsNameTheField) {
  EXPECT_THAT(ParseModelConfig("gpt2", R"({"n_layer": 2, "n_embd": 64,
                                           "vocab_size": 100, "n_positions": 32})")
                  .status(),
              InvalidArgument(HasSubstr("n_head")));
  EXPECT_THAT(ParseModelConfig("gpt2", "{not json").status(), InvalidArgument(HasSubstr("JSON")));
  EXPECT_THAT(ParseModelConfig("llama", kGpt2SmallConfig).status(),
              InvalidArgument(AllOf(HasSubstr("llama"), HasSubstr("gpt2"))));
  EXPECT_THAT(ParseModelConfig("gpt2", R"({"n_layer": 2, "n_embd": 770, "n_head": 12,
                                           "vocab_size": 100, "n_positions": 32})")
                  .status(),
              InvalidArgument(AllOf(HasSubstr("n_head"), HasSubstr("770"))));
  EXPECT_THAT(ParseModelConfig("gpt2", R"({"n_layer": -2, "n_embd": 64, "n_head": 4,
                                           "vocab_size": 100, "n_positions": 32})")
                  .status(),
              InvalidArgument(HasSubstr("n_layer")));
  EXPECT_THAT(ParseModelConfig("gpt2", "[]").status(), InvalidArgument(HasSubstr("object")));
}

TEST(ModelConfig, KnownFamilies) {
  EXPECT_THAT(KnownModelFamilies(),
              ElementsAre("gpt2", "llama", "bert", "mixtral", "mistral", "qwen2", "qwen3", "phi3",
                          "gemma", "gemma2", "qwen3_moe", "deepseek_v3", "gpt_oss", "torchscript"));
  for (const std::string& name : KnownModelFamilies()) {
    absl::StatusOr<const ModelFamilyInfo*> f = ParseModelFamily(name);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->name, name);
  }
  // An unknown family says which exist and what to do instead.
  EXPECT_THAT(ParseModelFamily("t5").status(),
              InvalidArgument(AllOf(HasSubstr("'t5'"),
                                    HasSubstr("gpt2, llama, bert, mixtral, mistral, qwen2, qwen3, "
                                              "phi3, gemma, gemma2, qwen3_moe, deepseek_v3, "
                                              "gpt_oss, torchscript"),
                                    HasSubstr("--launcher"), HasSubstr("examples/hf_trainer"),
                                    HasSubstr("--model torchscript"))));
}

TEST(ModelConfig, LlamaReadsTransformersKeys) {
  const ModelSpec m = Parsed("llama", kLlama2_7bConfig);
  EXPECT_EQ(m.family, "llama");
  EXPECT_EQ(m.n_layer, 32);
  EXPECT_EQ(m.n_embd, 4096);
  EXPECT_EQ(m.n_head, 32);
  EXPECT_EQ(m.n_kv_head, 32);
  EXPECT_EQ(m.n_inner, 11008);
  EXPECT_EQ(m.n_positions, 4096);
  EXPECT_DOUBLE_EQ(m.layer_norm_epsilon, 1e-5);
  EXPECT_DOUBLE_EQ(m.rope_theta, 10000.0);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_TRUE(m.IsCausal());
  EXPECT_EQ(m.MaxPositionsKey(), "max_position_embeddings");
  // transformers' num_parameters() of LlamaForCausalLM for this config.
  EXPECT_EQ(m.ParameterCount(), 6738415616);
}

TEST(ModelConfig, LlamaDefaultsFollowTransformers) {
  // No num_key_value_heads: one per attention head; no rope settings: theta
  // 10000; no rms_norm_eps: 1e-6.
  const ModelSpec m = Parsed("llama", Edited(kLlama2_7bConfig, {{"num_key_value_heads", nullptr},
                                                                {"rope_parameters", nullptr},
                                                                {"rms_norm_eps", nullptr},
                                                                {"tie_word_embeddings", nullptr}}));
  EXPECT_EQ(m.n_kv_head, 32);
  EXPECT_DOUBLE_EQ(m.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(m.layer_norm_epsilon, 1e-6);
  EXPECT_FALSE(m.tie_word_embeddings);
  // transformers 4 spelled the base at the top level.
  EXPECT_DOUBLE_EQ(Parsed("llama", Edited(kLlama2_7bConfig,
                                          {{"rope_parameters", nullptr}, {"rope_theta", 500000.0}}))
                       .rope_theta,
                   500000.0);
  // MixtralConfig's default is 8 key/value heads; an explicit null means one
  // per attention head.
  EXPECT_EQ(
      Parsed("mixtral", Edited(kMixtral8x7bConfig, {{"num_key_value_heads", nullptr}})).n_kv_head,
      8);
  EXPECT_EQ(Parsed("mixtral",
                   R"({"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "num_key_value_heads": null,
                       "vocab_size": 100, "max_position_embeddings": 32,
                       "num_local_experts": 4, "num_experts_per_tok": 2})")
                .n_kv_head,
            4);
  EXPECT_DOUBLE_EQ(
      Parsed("mixtral", Edited(kMixtral8x7bConfig, {{"rope_theta", nullptr}})).rope_theta, 1e6);
}

// transformers trains a mixture of experts with its load-balancing loss
// added only when output_router_logits is true, weighted by
// router_aux_loss_coef (the hub configs carry false, with 0.02 for
// Mixtral-8x7B and 0.001 for Qwen3-30B-A3B); the spec keeps the weight, which round-trips through
// the config the workers receive. DeepSeek-V3's model adds no such loss: the key only returns the
// logits.
TEST(ModelConfig, ARouterLossIsTrainedWithItsCoefficient) {
  for (const auto& [family, config, coefficient] :
       {std::tuple<const char*, absl::string_view, double>{"mixtral", kMixtral8x7bConfig, 0.02},
        {"qwen3_moe", kQwen3_30bA3bConfig, 0.001}}) {
    EXPECT_EQ(Parsed(family, config).router_aux_loss_coef, 0) << family;
    const ModelSpec with = Parsed(family, Edited(config, {{"output_router_logits", true}}));
    EXPECT_DOUBLE_EQ(with.router_aux_loss_coef, coefficient) << family;
    EXPECT_DOUBLE_EQ(Parsed(family, with.ToConfigJson().dump()).router_aux_loss_coef, coefficient)
        << family;
    EXPECT_DOUBLE_EQ(Parsed(family, Edited(config, {{"output_router_logits", true},
                                                    {"router_aux_loss_coef", 0.25}}))
                         .router_aux_loss_coef,
                     0.25)
        << family;
    EXPECT_THAT(ParseModelConfig(family, Edited(config, {{"output_router_logits", true},
                                                         {"router_aux_loss_coef", -1}}))
                    .status(),
                InvalidArgument(HasSubstr("router_aux_loss_coef")))
        << family;
  }
  EXPECT_EQ(Parsed("deepseek_v3", Edited(kDeepSeekV3Config, {{"output_router_logits", true}}))
                .router_aux_loss_coef,
            0);
}

TEST(ModelConfig, ParameterCountsMatchTransformers) {
  // Each number is num_parameters() of the transformers model built from the
  // same config (on the meta device: no weights, no download).
  EXPECT_EQ(Parsed("mixtral", kMixtral8x7bConfig).ParameterCount(), 46702792704);
  EXPECT_EQ(Parsed("bert", kBertBaseConfig).ParameterCount(), 109514298);  // BertForMaskedLM
  // TinyLlama-1.1B: grouped-query attention (4 key/value heads).
  EXPECT_EQ(Parsed("llama", Edited(kLlama2_7bConfig, {{"hidden_size", 2048},
                                                      {"intermediate_size", 5632},
                                                      {"num_hidden_layers", 22},
                                                      {"num_key_value_heads", 4},
                                                      {"head_dim", 64}}))
                .ParameterCount(),
            1100048384);
  // Llama-3.2-1B shape: tied embeddings count once.
  EXPECT_EQ(Parsed("llama", Edited(kLlama2_7bConfig, {{"hidden_size", 2048},
                                                      {"intermediate_size", 8192},
                                                      {"num_hidden_layers", 16},
                                                      {"num_key_value_heads", 8},
                                                      {"head_dim", 64},
                                                      {"vocab_size", 128256},
                                                      {"tie_word_embeddings", true}}))
                .ParameterCount(),
            1235814400);
}

TEST(ModelConfig, MixtralAndBertReadTheirKeys) {
  const ModelSpec mixtral = Parsed("mixtral", kMixtral8x7bConfig);
  EXPECT_EQ(mixtral.num_local_experts, 8);
  EXPECT_EQ(mixtral.num_experts_per_tok, 2);
  EXPECT_EQ(mixtral.n_kv_head, 8);
  EXPECT_DOUBLE_EQ(mixtral.rope_theta, 1e6);
  const ModelSpec bert = Parsed("bert", kBertBaseConfig);
  EXPECT_EQ(bert.n_layer, 12);
  EXPECT_EQ(bert.n_inner, 3072);
  EXPECT_EQ(bert.type_vocab_size, 2);
  EXPECT_DOUBLE_EQ(bert.layer_norm_epsilon, 1e-12);
  EXPECT_FALSE(bert.IsCausal());
}

TEST(ModelConfig, TrainingFlopsPerTokenOfEachFamily) {
  const double T = 2048;
  // Llama-2-7B: 6 * (32 * (2 * 4096^2 + 2 * 4096 * 4096 + 3 * 4096 * 11008) + 32000 * 4096)
  //             + 6 * 32 * 4096 * 2048 (causal attention)
  const ModelSpec llama = Parsed("llama", kLlama2_7bConfig);
  EXPECT_DOUBLE_EQ(llama.TrainingFlopsPerToken(2048),
                   6.0 * (32.0 * (4 * 4096.0 * 4096 + 3 * 4096.0 * 11008) + 32000.0 * 4096) +
                       6.0 * 32 * 4096 * T);
  // Mixtral counts the router and only the 2 experts a token uses, not all 8:
  // FLOPs are those of ~13B active parameters, not 47B.
  const ModelSpec mixtral = Parsed("mixtral", kMixtral8x7bConfig);
  const double d = 4096, kv = 8 * 128, f = 14336;
  EXPECT_DOUBLE_EQ(
      mixtral.TrainingFlopsPerToken(2048),
      6.0 * (32 * (2 * d * d + 2 * d * kv + d * 8 + 2 * 3 * d * f) + 32000 * d) + 6.0 * 32 * d * T);
  ModelSpec more_experts = mixtral;
  more_experts.num_local_experts = 64;  // same top-2: only the router grows
  EXPECT_DOUBLE_EQ(more_experts.TrainingFlopsPerToken(2048) - mixtral.TrainingFlopsPerToken(2048),
                   6.0 * 32 * d * (64 - 8));
  // BERT attends both ways: the full score matrix counts (12, not 6), and
  // the MLM transform is a matmul too.
  const ModelSpec bert = Parsed("bert", kBertBaseConfig);
  EXPECT_DOUBLE_EQ(bert.TrainingFlopsPerToken(512),
                   6.0 * (12 * (4 * 768.0 * 768 + 2 * 768.0 * 3072) + 768.0 * 768 + 30522.0 * 768) +
                       12.0 * 12 * 768 * 512);
}

TEST(ModelConfig, EveryFamilyRoundTripsThroughItsNormalizedConfig) {
  ModelSpec tied = Parsed("llama", kLlama2_7bConfig);
  tied.tie_word_embeddings = true;
  tied.n_kv_head = 8;
  tied.rope_theta = 500000.0;
  for (const ModelSpec& m :
       {Gpt2Small(), Parsed("llama", kLlama2_7bConfig), tied, Parsed("mixtral", kMixtral8x7bConfig),
        Parsed("bert", kBertBaseConfig)}) {
    const nlohmann::json j = m.ToConfigJson();
    EXPECT_EQ(j.at("model_type"), m.family);
    absl::StatusOr<ModelSpec> again = ModelSpecFromJson(m.family, j);
    ASSERT_TRUE(again.ok()) << m.family << ": " << again.status();
    EXPECT_EQ(again->ToConfigJson(), j) << m.family;
    EXPECT_EQ(again->ParameterCount(), m.ParameterCount()) << m.family;
    EXPECT_EQ(again->TrainingFlopsPerToken(128), m.TrainingFlopsPerToken(128)) << m.family;
    EXPECT_EQ(again->n_kv_head, m.n_kv_head) << m.family;
    EXPECT_EQ(again->rope_theta, m.rope_theta) << m.family;
    EXPECT_EQ(again->tie_word_embeddings, m.tie_word_embeddings) << m.family;
    EXPECT_EQ(again->type_vocab_size, m.type_vocab_size) << m.family;
    EXPECT_EQ(again->num_local_experts, m.num_local_experts) << m.family;
    EXPECT_EQ(again->num_experts_per_tok, m.num_experts_per_tok) << m.family;
  }
}

TEST(ModelConfig, FamilyErrorsNameTheField) {
  auto llama = [](const nlohmann::json& changes) {
    return ParseModelConfig("llama", Edited(kLlama2_7bConfig, changes)).status();
  };
  EXPECT_THAT(llama({{"num_key_value_heads", 5}}),
              InvalidArgument(AllOf(HasSubstr("model_config.num_key_value_heads"),
                                    HasSubstr("must divide num_attention_heads (32)"))));
  EXPECT_THAT(llama({{"hidden_size", nullptr}}),
              InvalidArgument(HasSubstr("model_config.hidden_size: missing")));
  EXPECT_THAT(llama({{"hidden_act", "relu"}}),
              InvalidArgument(HasSubstr("model_config.hidden_act")));
  EXPECT_THAT(llama({{"head_dim", 0}}), InvalidArgument(HasSubstr("model_config.head_dim")));
  EXPECT_THAT(llama({{"head_dim", 3}}),  // an odd head size has no rotary pairs
              InvalidArgument(AllOf(HasSubstr("model_config.head_dim"), HasSubstr("even"))));
  EXPECT_THAT(llama({{"attention_bias", 1}}),
              InvalidArgument(HasSubstr("model_config.attention_bias")));
  EXPECT_THAT(llama({{"rope_parameters", {{"rope_type", "ntk"}, {"factor", 8.0}}}}),
              InvalidArgument(
                  AllOf(HasSubstr("model_config.rope_parameters.rope_type"), HasSubstr("ntk"),
                        HasSubstr("allowed: default, linear, dynamic, llama3, yarn, longrope"))));
  EXPECT_THAT(llama({{"rope_parameters", {{"rope_type", "llama3"}, {"factor", 8.0}}}}),
              InvalidArgument(HasSubstr("model_config.rope_parameters.low_freq_factor: missing")));
  EXPECT_THAT(llama({{"rope_theta", -1}}), InvalidArgument(HasSubstr("model_config.rope_theta")));
  EXPECT_THAT(llama({{"tie_word_embeddings", "yes"}}),
              InvalidArgument(HasSubstr("model_config.tie_word_embeddings")));
  EXPECT_THAT(llama({{"num_attention_heads", 4096}, {"head_dim", nullptr}}),  // head size 1
              InvalidArgument(HasSubstr("must be even")));
  EXPECT_THAT(ParseModelConfig("llama", kMixtral8x7bConfig).status(),
              InvalidArgument(AllOf(HasSubstr("model_config.model_type"), HasSubstr("mixtral"),
                                    HasSubstr("llama"))));

  auto mixtral = [](const nlohmann::json& changes) {
    return ParseModelConfig("mixtral", Edited(kMixtral8x7bConfig, changes)).status();
  };
  EXPECT_THAT(mixtral({{"num_experts_per_tok", 9}}),
              InvalidArgument(AllOf(HasSubstr("model_config.num_experts_per_tok"),
                                    HasSubstr("num_local_experts = 8"))));
  EXPECT_THAT(mixtral({{"num_local_experts", nullptr}}),
              InvalidArgument(HasSubstr("model_config.num_local_experts: missing")));
  EXPECT_THAT(mixtral({{"sliding_window", -1}}),
              InvalidArgument(HasSubstr("model_config.sliding_window")));

  auto bert = [](const nlohmann::json& changes) {
    return ParseModelConfig("bert", Edited(kBertBaseConfig, changes)).status();
  };
  EXPECT_THAT(bert({{"type_vocab_size", 0}}),
              InvalidArgument(HasSubstr("model_config.type_vocab_size")));
  EXPECT_THAT(bert({{"num_attention_heads", 7}}),
              InvalidArgument(AllOf(HasSubstr("model_config.num_attention_heads"),
                                    HasSubstr("hidden_size (768)"))));
  EXPECT_THAT(bert({{"position_embedding_type", "relative_key"}}),
              InvalidArgument(HasSubstr("model_config.position_embedding_type")));
  EXPECT_THAT(bert({{"tie_word_embeddings", false}}),
              InvalidArgument(HasSubstr("model_config.tie_word_embeddings")));
  EXPECT_THAT(bert({{"layer_norm_eps", 0}}),
              InvalidArgument(HasSubstr("model_config.layer_norm_eps")));

  // A spec built by hand gets the same checks.
  ModelSpec m = Parsed("llama", kLlama2_7bConfig);
  m.n_kv_head = 0;
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("num_key_value_heads")));
  m.family = "gpt3";
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("gpt3")));
  EXPECT_THAT(Gpt2Small().Validate(), IsOk());
}

TEST(ModelConfig, TodaysDecodersAreAcceptedAndCountedAsTransformersDoes) {
  const struct {
    absl::string_view family;
    absl::string_view config;
    int64_t parameters;
  } cases[] = {{"qwen2", kQwen2_7bConfig, kQwen2_7bParameters},
               {"qwen3", kQwen3_8bConfig, kQwen3_8bParameters},
               {"mistral", kMistral7bConfig, kMistral7bParameters},
               {"phi3", kPhi3MiniConfig, kPhi3MiniParameters},
               {"gemma2", kGemma2_9bConfig, kGemma2_9bParameters},
               {"gemma", kGemma7bConfig, kGemma7bParameters},
               {"llama", kLlama31_8bConfig, kLlama31_8bParameters}};
  for (const auto& c : cases) {
    absl::StatusOr<ModelSpec> m = ParseModelConfig(c.family, c.config);
    ASSERT_THAT(m, IsOk()) << c.family;
    EXPECT_EQ(m->ParameterCount(), c.parameters) << c.family;
    EXPECT_TRUE(m->IsDecoder());
    EXPECT_TRUE(m->IsCausal());
  }
}

TEST(ModelConfig, DecoderFeaturesAreReadFromEachFamilysKeys) {
  const ModelSpec qwen2 = Parsed("qwen2", kQwen2_7bConfig);
  EXPECT_TRUE(qwen2.Info().qkv_bias);  // q, k, v biases with no key saying so
  EXPECT_FALSE(qwen2.attention_bias);  // (no o bias)
  EXPECT_EQ(qwen2.n_kv_head, 4);
  EXPECT_EQ(qwen2.sliding_window, 0);  // use_sliding_window false
  EXPECT_DOUBLE_EQ(qwen2.rope_theta, 1e6);

  const ModelSpec qwen3 = Parsed("qwen3", kQwen3_8bConfig);
  EXPECT_TRUE(qwen3.Info().qk_norm);
  EXPECT_EQ(qwen3.HeadDim(), 128);
  // Qwen3Config's head_dim default is 128 whatever the width: a config
  // without the key keeps it, and a narrower model then has a query width
  // (32 x 128) that is not its hidden size.
  const ModelSpec narrow =
      Parsed("qwen3", Edited(kQwen3_8bConfig, {{"head_dim", nullptr}, {"hidden_size", 2048}}));
  EXPECT_EQ(narrow.HeadDim(), 128);
  EXPECT_EQ(narrow.head_dim, 128);

  const ModelSpec gemma2 = Parsed("gemma2", kGemma2_9bConfig);
  EXPECT_EQ(gemma2.HeadDim(), 256);
  EXPECT_EQ(gemma2.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(gemma2.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(gemma2.attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(gemma2.final_logit_softcapping, 30.0);
  EXPECT_DOUBLE_EQ(gemma2.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(gemma2.sliding_window, 4096);
  // layer_types absent: sliding, full, sliding, ... (Gemma2Config's default).
  EXPECT_TRUE(gemma2.SlidingLayer(0));
  EXPECT_FALSE(gemma2.SlidingLayer(1));
  EXPECT_TRUE(gemma2.SlidingLayer(40));
  // Absent keys take Gemma2Config's defaults, not "none".
  const ModelSpec bare =
      Parsed("gemma2", Edited(kGemma2_9bConfig, {{"attn_logit_softcapping", nullptr},
                                                 {"final_logit_softcapping", nullptr},
                                                 {"query_pre_attn_scalar", nullptr},
                                                 {"sliding_window", nullptr},
                                                 {"head_dim", nullptr},
                                                 {"tie_word_embeddings", nullptr}}));
  EXPECT_DOUBLE_EQ(bare.attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(bare.final_logit_softcapping, 30.0);
  EXPECT_EQ(bare.sliding_window, 4096);
  EXPECT_EQ(bare.HeadDim(), 256);
  EXPECT_TRUE(bare.tie_word_embeddings);
  // An explicit null turns soft-capping off.
  nlohmann::json uncapped = nlohmann::json::parse(kGemma2_9bConfig);
  uncapped["attn_logit_softcapping"] = nullptr;
  absl::StatusOr<ModelSpec> off = ModelSpecFromJson("gemma2", uncapped);
  ASSERT_THAT(off, IsOk());
  EXPECT_EQ(off->attn_logit_softcapping, 0);
  EXPECT_DOUBLE_EQ(off->final_logit_softcapping, 30.0);

  const ModelSpec gemma = Parsed("gemma", Edited(kGemma7bConfig, {{"hidden_act", "gelu"}}));
  EXPECT_EQ(gemma.hidden_act, "gelu_pytorch_tanh");  // GemmaConfig's reading of "gelu"
  EXPECT_EQ(gemma.HeadDim() * gemma.n_head, 4096);   // wider than hidden_size 3072

  const ModelSpec mistral = Parsed("mistral", kMistral7bConfig);
  EXPECT_EQ(mistral.sliding_window, 4096);
  EXPECT_TRUE(mistral.SlidingLayer(0));
  EXPECT_TRUE(mistral.SlidingLayer(31));
  EXPECT_EQ(
      Parsed("mistral", Edited(kMistral7bConfig, {{"sliding_window", nullptr}})).sliding_window,
      4096);  // absent: MistralConfig's 4096

  const ModelSpec phi3 = Parsed("phi3", kPhi3MiniConfig);
  EXPECT_TRUE(phi3.Info().fused_projections);
  EXPECT_EQ(phi3.sliding_window, 2047);
  EXPECT_DOUBLE_EQ(
      Parsed("phi3",
             Edited(kPhi3MiniConfig,
                    {{"rope_parameters", {{"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}}}}))
          .partial_rotary_factor,
      0.5);
}

TEST(ModelConfig, QwenSlidingLayersFollowUseSlidingWindowAndMaxWindowLayers) {
  const ModelSpec m = Parsed("qwen2", Edited(kQwen2_7bConfig, {{"use_sliding_window", true},
                                                               {"sliding_window", 4096},
                                                               {"max_window_layers", 20}}));
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_FALSE(m.SlidingLayer(19));
  EXPECT_TRUE(m.SlidingLayer(20));
  EXPECT_TRUE(m.SlidingLayer(27));
  // Every layer at or past max_window_layers: none slides.
  EXPECT_EQ(Parsed("qwen2", Edited(kQwen2_7bConfig,
                                   {{"use_sliding_window", true}, {"sliding_window", 4096}}))
                .sliding_window,
            0);
  // layer_types that slide need the window turned on.
  nlohmann::json types = nlohmann::json::array();
  for (int i = 0; i < 28; ++i) types.push_back(i < 2 ? "sliding_attention" : "full_attention");
  EXPECT_THAT(ParseModelConfig("qwen2", Edited(kQwen2_7bConfig, {{"layer_types", types}})).status(),
              InvalidArgument(
                  AllOf(HasSubstr("model_config.layer_types"), HasSubstr("use_sliding_window"))));
}

TEST(ModelConfig, Llama31RopeScalingIsReadInBothTransformersForms) {
  const ModelSpec v5 = Parsed("llama", kLlama31_8bConfig);
  EXPECT_EQ(v5.rope_type, "llama3");
  EXPECT_DOUBLE_EQ(v5.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(v5.rope_factor, 8.0);
  EXPECT_DOUBLE_EQ(v5.rope_low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(v5.rope_high_freq_factor, 4.0);
  EXPECT_EQ(v5.rope_original_max_positions, 8192);
  // transformers 4: rope_theta at the top level, rope_scaling beside it.
  const ModelSpec v4 =
      Parsed("llama", Edited(kLlama31_8bConfig, {{"rope_parameters", nullptr},
                                                 {"rope_theta", 500000.0},
                                                 {"rope_scaling",
                                                  {{"rope_type", "llama3"},
                                                   {"factor", 8.0},
                                                   {"low_freq_factor", 1.0},
                                                   {"high_freq_factor", 4.0},
                                                   {"original_max_position_embeddings", 8192}}}}));
  EXPECT_EQ(v4.ToConfigJson(), v5.ToConfigJson());
  // Without the pretraining length: max_position_embeddings, as transformers.
  nlohmann::json rope = nlohmann::json::parse(kLlama31_8bConfig)["rope_parameters"];
  rope.erase("original_max_position_embeddings");
  EXPECT_EQ(Parsed("llama", Edited(kLlama31_8bConfig, {{"rope_parameters", rope}}))
                .rope_original_max_positions,
            131072);
}

// Llama 3.1 8B with `rope` as its rope_parameters (transformers 5) or its
// rope_scaling beside a top-level rope_theta (transformers 4).
ModelSpec LlamaWithRope(const nlohmann::json& rope, bool transformers4 = false) {
  if (transformers4) {
    return Parsed("llama", Edited(kLlama31_8bConfig, {{"rope_parameters", nullptr},
                                                      {"rope_theta", 500000.0},
                                                      {"rope_scaling", rope}}));
  }
  nlohmann::json with_theta = rope;
  with_theta["rope_theta"] = 500000.0;
  return Parsed("llama", Edited(kLlama31_8bConfig, {{"rope_parameters", with_theta}}));
}

TEST(ModelConfig, YarnTakesTransformersDefaultsAndItsAttentionFactor) {
  const ModelSpec yarn = LlamaWithRope(
      {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}});
  EXPECT_EQ(yarn.rope_type, "yarn");
  EXPECT_DOUBLE_EQ(yarn.rope_factor, 4.0);
  EXPECT_EQ(yarn.rope_original_max_positions, 32768);
  EXPECT_DOUBLE_EQ(yarn.rope_beta_fast, 32);
  EXPECT_DOUBLE_EQ(yarn.rope_beta_slow, 1);
  EXPECT_TRUE(yarn.rope_truncate);
  EXPECT_DOUBLE_EQ(yarn.rope_attention_factor, 0.1 * std::log(4.0) + 1);  // get_mscale(factor)
  // transformers 4's spelling ("type") reads the same.
  EXPECT_EQ(LlamaWithRope(
                {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}},
                /*transformers4=*/true)
                .ToConfigJson(),
            yarn.ToConfigJson());
  // mscale and mscale_all_dim (DeepSeek's): their ratio, when both are set.
  const ModelSpec ratio = LlamaWithRope({{"rope_type", "yarn"},
                                         {"factor", 40.0},
                                         {"original_max_position_embeddings", 4096},
                                         {"beta_fast", 16},
                                         {"beta_slow", 2},
                                         {"truncate", false},
                                         {"mscale", 1.0},
                                         {"mscale_all_dim", 0.5}});
  EXPECT_DOUBLE_EQ(ratio.rope_attention_factor,
                   (0.1 * std::log(40.0) + 1) / (0.05 * std::log(40.0) + 1));
  EXPECT_DOUBLE_EQ(ratio.rope_beta_fast, 16);
  EXPECT_DOUBLE_EQ(ratio.rope_beta_slow, 2);
  EXPECT_FALSE(ratio.rope_truncate);
  // mscale_all_dim 0 (unset): the factor's alone; an explicit
  // attention_factor over everything; a null factor: the context's stretch.
  EXPECT_DOUBLE_EQ(
      LlamaWithRope(
          {{"rope_type", "yarn"}, {"factor", 40.0}, {"mscale", 1.0}, {"mscale_all_dim", 0}})
          .rope_attention_factor,
      0.1 * std::log(40.0) + 1);
  EXPECT_DOUBLE_EQ(
      LlamaWithRope(
          {{"rope_type", "yarn"}, {"factor", 40.0}, {"mscale", 1.0}, {"attention_factor", 0.75}})
          .rope_attention_factor,
      0.75);
  const ModelSpec stretch = LlamaWithRope(
      {{"rope_type", "yarn"}, {"factor", nullptr}, {"original_max_position_embeddings", 32768}});
  EXPECT_DOUBLE_EQ(stretch.rope_factor, 131072.0 / 32768);
  // Without the pretraining length: max_position_embeddings, as transformers.
  EXPECT_EQ(LlamaWithRope({{"rope_type", "yarn"}, {"factor", 4.0}}).rope_original_max_positions,
            131072);
}

TEST(ModelConfig, DynamicNtkGrowsItsBaseOnlyPastMaxPositionEmbeddings) {
  const ModelSpec dynamic = LlamaWithRope({{"rope_type", "dynamic"}, {"factor", 2.0}});
  EXPECT_EQ(dynamic.rope_type, "dynamic");
  EXPECT_DOUBLE_EQ(dynamic.rope_factor, 2.0);
  EXPECT_DOUBLE_EQ(dynamic.RopeBase(131072), 500000.0);
  EXPECT_DOUBLE_EQ(dynamic.RopeBase(4096), 500000.0);
  // transformers' base * (factor * T / max - (factor - 1))^(d / (d - 2)).
  // (In fp32, as transformers' forward computes it.)
  const double grown = 500000.0 * std::pow(3.0, 128.0 / 126.0);
  EXPECT_NEAR(dynamic.RopeBase(2 * 131072), grown, 1e-6 * grown);
  // The network is defined past max_position_embeddings: the search and
  // the trainer take such sequences, as transformers does.
  EXPECT_GT(dynamic.MaxSeqLen(), 131072);
  EXPECT_EQ(Parsed("llama", kLlama31_8bConfig).MaxSeqLen(), 131072);
  EXPECT_THAT(ParseModelConfig("llama", Edited(kLlama31_8bConfig,
                                               {{"rope_parameters", {{"rope_type", "dynamic"}}}}))
                  .status(),
              InvalidArgument(HasSubstr("model_config.rope_parameters.factor: missing")));
  ModelSpec two_dims = dynamic;  // d / (d - 2) has no value
  two_dims.head_dim = 2;
  EXPECT_THAT(two_dims.Validate(),
              InvalidArgument(AllOf(HasSubstr("model_config.rope_parameters.rope_type"),
                                    HasSubstr("above 2"))));
}

// Phi-3 mini 128k's shape: 96-wide heads, so 48 factors of each kind.
std::string Phi3LongRope(const nlohmann::json& rope, const nlohmann::json& top = nullptr) {
  nlohmann::json config =
      nlohmann::json::parse(Edited(kPhi3MiniConfig, {
                                                        {"max_position_embeddings", 131072},
                                                        {"rope_parameters", rope},
                                                    }));
  if (top.is_null()) {
    config.erase("original_max_position_embeddings");
  } else {
    config["original_max_position_embeddings"] = top;
  }
  return config.dump();
}

TEST(ModelConfig, LongRopeReadsPhi3sFactorsAndItsTopLevelPretrainingLength) {
  std::vector<double> short_factor(48, 1.05), long_factor(48, 4.0);
  long_factor[47] = 60.5;
  const nlohmann::json rope = {{"rope_type", "longrope"},
                               {"rope_theta", 10000.0},
                               {"short_factor", short_factor},
                               {"long_factor", long_factor}};
  // Phi3Config: original_max_position_embeddings 4096 unless the top level
  // says otherwise, and over rope_parameters' own; the attention factor
  // from max / original.
  const ModelSpec phi3 = Parsed("phi3", Phi3LongRope(rope));
  EXPECT_EQ(phi3.rope_type, "longrope");
  EXPECT_EQ(phi3.rope_short_factor, short_factor);
  EXPECT_EQ(phi3.rope_long_factor, long_factor);
  EXPECT_EQ(phi3.rope_original_max_positions, 4096);
  EXPECT_DOUBLE_EQ(phi3.rope_attention_factor,
                   std::sqrt(1 + std::log(131072.0 / 4096) / std::log(4096.0)));
  nlohmann::json rope_8192 = rope;
  rope_8192["original_max_position_embeddings"] = 8192;
  EXPECT_EQ(Parsed("phi3", Phi3LongRope(rope_8192)).rope_original_max_positions, 4096);
  EXPECT_EQ(Parsed("phi3", Phi3LongRope(rope_8192, 2048)).rope_original_max_positions, 2048);
  // An explicit factor or attention_factor.
  nlohmann::json with_factor = rope;
  with_factor["factor"] = 8.0;
  EXPECT_DOUBLE_EQ(Parsed("phi3", Phi3LongRope(with_factor)).rope_attention_factor,
                   std::sqrt(1 + std::log(8.0) / std::log(4096.0)));
  with_factor["attention_factor"] = 1.5;
  EXPECT_DOUBLE_EQ(Parsed("phi3", Phi3LongRope(with_factor)).rope_attention_factor, 1.5);
  // Older Phi-3 configs' "yarn" is longrope, as Phi3Config reads it.
  nlohmann::json old = rope;
  old.erase("rope_type");
  old["type"] = "yarn";
  EXPECT_EQ(Parsed("phi3", Phi3LongRope(old)).ToConfigJson(), phi3.ToConfigJson());
  // A list of the wrong length, a missing list, a bad entry.
  nlohmann::json short_list = rope;
  short_list["short_factor"] = std::vector<double>(47, 1.0);
  EXPECT_THAT(ParseModelConfig("phi3", Phi3LongRope(short_list)).status(),
              InvalidArgument(AllOf(HasSubstr("model_config.rope_parameters.short_factor"),
                                    HasSubstr("48"), HasSubstr("got 47"))));
  nlohmann::json no_long = rope;
  no_long.erase("long_factor");
  EXPECT_THAT(ParseModelConfig("phi3", Phi3LongRope(no_long)).status(),
              InvalidArgument(HasSubstr("model_config.rope_parameters.long_factor: missing")));
  nlohmann::json bad_entry = rope;
  bad_entry["long_factor"][3] = "x";
  EXPECT_THAT(ParseModelConfig("phi3", Phi3LongRope(bad_entry)).status(),
              InvalidArgument(HasSubstr("model_config.rope_parameters.long_factor")));
  // Phi3Config refuses the other scalings; Llama's takes longrope.
  EXPECT_THAT(
      ParseModelConfig("phi3", Phi3LongRope({{"rope_type", "linear"}, {"factor", 2.0}})).status(),
      InvalidArgument(AllOf(HasSubstr("model_config.rope_parameters.rope_type"),
                            HasSubstr("allowed: default, longrope"))));
  std::vector<double> llama_factors(64, 2.0);
  const ModelSpec llama = LlamaWithRope({{"rope_type", "longrope"},
                                         {"short_factor", llama_factors},
                                         {"long_factor", llama_factors},
                                         {"original_max_position_embeddings", 8192}});
  EXPECT_EQ(llama.rope_original_max_positions, 8192);
  EXPECT_DOUBLE_EQ(llama.rope_attention_factor,
                   std::sqrt(1 + std::log(131072.0 / 8192) / std::log(8192.0)));
}

TEST(ModelConfig, RopeKeysAreCheckedByName) {
  auto error = [](const nlohmann::json& rope) {
    return ParseModelConfig("llama", Edited(kLlama31_8bConfig, {{"rope_parameters", rope}}))
        .status();
  };
  const nlohmann::json yarn = {{"rope_type", "yarn"}, {"factor", 4.0}};
  for (const char* key : {"beta_fast", "beta_slow", "attention_factor", "factor"}) {
    nlohmann::json bad = yarn;
    bad[key] = -1;
    EXPECT_THAT(error(bad), InvalidArgument(HasSubstr(absl::StrCat("model_config.rope_parameters.",
                                                                   key, ": expected a positive"))))
        << key;
  }
  nlohmann::json bad = yarn;
  bad["truncate"] = "no";
  EXPECT_THAT(error(bad),
              InvalidArgument(HasSubstr("model_config.rope_parameters.truncate: expected true")));
  bad = yarn;
  bad["mscale"] = -1;
  EXPECT_THAT(error(bad), InvalidArgument(HasSubstr("model_config.rope_parameters.mscale")));
  bad = yarn;
  bad["original_max_position_embeddings"] = 0;
  EXPECT_THAT(
      error(bad),
      InvalidArgument(HasSubstr("model_config.rope_parameters.original_max_position_embeddings")));
  // A spec built by hand: factors only with longrope, attention_factor 1
  // for the types without one.
  ModelSpec linear = LlamaWithRope({{"rope_type", "linear"}, {"factor", 2.0}});
  linear.rope_attention_factor = 2;
  EXPECT_THAT(linear.Validate(),
              InvalidArgument(HasSubstr("model_config.rope_parameters.attention_factor")));
  linear.rope_attention_factor = 1;
  linear.rope_long_factor = {1.0};
  EXPECT_THAT(linear.Validate(),
              InvalidArgument(HasSubstr("model_config.rope_parameters.short_factor")));
}

TEST(ModelConfig, TrainingFlopsUseTheAttentionWidthAndSlidingWindows) {
  // gemma-7b: 16 heads of 256 = 4096-wide attention on a 3072-wide model.
  const ModelSpec gemma = Parsed("gemma", kGemma7bConfig);
  const double d = 3072, A = 4096, L = 28, f = 24576, V = 256000, S = 4096;
  EXPECT_DOUBLE_EQ(gemma.TrainingFlopsPerToken(4096),
                   6.0 * (L * (2 * d * A + 2 * d * A + 3 * d * f) + V * d) + 6.0 * L * A * S);
  // mistral-7b at 8192 tokens with its 4096 window: each query attends to
  // W - W^2 / 2S = 3072 keys on average, not S / 2 = 4096.
  const ModelSpec mistral = Parsed("mistral", kMistral7bConfig);
  EXPECT_DOUBLE_EQ(mistral.AttendedKeys(0, 8192), 3072.0);
  EXPECT_DOUBLE_EQ(mistral.AttendedKeys(0, 4096), 2048.0);  // the window covers it all
  ModelSpec full = mistral;
  full.sliding_window = 0;
  EXPECT_DOUBLE_EQ(full.TrainingFlopsPerToken(8192) - mistral.TrainingFlopsPerToken(8192),
                   12.0 * 4096 * 32 * (4096 - 3072));
  // gemma2: only its sliding (even) layers are shortened.
  const ModelSpec gemma2 = Parsed("gemma2", kGemma2_9bConfig);
  EXPECT_DOUBLE_EQ(gemma2.AttendedKeys(0, 8192), 3072.0);
  EXPECT_DOUBLE_EQ(gemma2.AttendedKeys(1, 8192), 4096.0);
}

TEST(ModelConfig, ActivationMemoryFollowsTheAttentionWidth) {
  // gemma-7b's attention is 16 x 256 = 4096 wide on a 3072-wide model: its
  // Q, K, V and projection input (Korthikanti's 8 units of s*b*h) are 4/3
  // as big as with 192-wide heads, the rest of the layer unchanged.
  const ModelSpec wide = Parsed("gemma", kGemma7bConfig);
  ModelSpec narrow = wide;
  narrow.head_dim = 0;  // 3072 / 16 = 192
  const Strategy s = MakeStrategy(1, 1, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  const double sbh = 1024.0 * 1 * 3072;
  EXPECT_NEAR(double(EstimateMemory(wide, 1024, s).activations -
                     EstimateMemory(narrow, 1024, s).activations),
              28 * sbh * 8 * (4096.0 / 3072 - 1), 64);
}

TEST(ModelConfig, NewFamiliesRoundTripThroughTheirNormalizedConfig) {
  ModelSpec bias_llama =
      Parsed("llama", Edited(kLlama2_7bConfig, {{"attention_bias", true}, {"mlp_bias", true}}));
  ModelSpec sliding_qwen = Parsed("qwen2", Edited(kQwen2_7bConfig, {{"use_sliding_window", true},
                                                                    {"sliding_window", 1024},
                                                                    {"max_window_layers", 3}}));
  ModelSpec gemma2_off = Parsed("gemma2", Edited(kGemma2_9bConfig, {{"sliding_window", nullptr}}));
  gemma2_off.sliding_window = 0;
  gemma2_off.attn_logit_softcapping = 0;
  gemma2_off.final_logit_softcapping = 0;
  gemma2_off.query_pre_attn_scalar = 224;
  ModelSpec qwen3_wide = Parsed("qwen3", kQwen3_8bConfig);
  qwen3_wide.head_dim = 64;
  ModelSpec phi3_partial = Parsed("phi3", kPhi3MiniConfig);
  phi3_partial.partial_rotary_factor = 0.5;
  phi3_partial.sliding_window = 0;
  const ModelSpec yarn = LlamaWithRope({{"rope_type", "yarn"},
                                        {"factor", 40.0},
                                        {"original_max_position_embeddings", 4096},
                                        {"beta_fast", 16},
                                        {"truncate", false},
                                        {"mscale", 1.0},
                                        {"mscale_all_dim", 0.5}});
  const ModelSpec dynamic = LlamaWithRope({{"rope_type", "dynamic"}, {"factor", 2.5}});
  std::vector<double> short_factor(48), long_factor(48);
  for (int i = 0; i < 48; ++i) short_factor[i] = 1 + i / 100.0, long_factor[i] = 2 + i / 7.0;
  ModelSpec longrope = Parsed("phi3", Phi3LongRope({{"rope_type", "longrope"},
                                                    {"short_factor", short_factor},
                                                    {"long_factor", long_factor}},
                                                   2048));
  ASSERT_EQ(longrope.rope_original_max_positions, 2048);
  for (const ModelSpec& m : {yarn, dynamic, longrope, Parsed("qwen2", kQwen2_7bConfig),
                             Parsed("qwen3", kQwen3_8bConfig), Parsed("mistral", kMistral7bConfig),
                             Parsed("phi3", kPhi3MiniConfig), Parsed("gemma2", kGemma2_9bConfig),
                             Parsed("gemma", kGemma7bConfig), Parsed("llama", kLlama31_8bConfig),
                             bias_llama, sliding_qwen, gemma2_off, qwen3_wide, phi3_partial}) {
    ASSERT_THAT(m.Validate(), IsOk()) << m.family;
    const nlohmann::json j = m.ToConfigJson();
    absl::StatusOr<ModelSpec> again = ModelSpecFromJson(m.family, j);
    ASSERT_THAT(again, IsOk()) << j.dump();
    EXPECT_EQ(again->ToConfigJson(), j) << m.family;
    EXPECT_EQ(again->ParameterCount(), m.ParameterCount()) << j.dump();
    EXPECT_EQ(again->TrainingFlopsPerToken(4096), m.TrainingFlopsPerToken(4096)) << j.dump();
    EXPECT_EQ(again->HeadDim(), m.HeadDim()) << j.dump();
    EXPECT_EQ(again->hidden_act, m.hidden_act) << j.dump();
    EXPECT_EQ(again->attention_bias, m.attention_bias) << j.dump();
    EXPECT_EQ(again->mlp_bias, m.mlp_bias) << j.dump();
    EXPECT_EQ(again->rope_type, m.rope_type) << j.dump();
    EXPECT_EQ(again->rope_factor, m.rope_factor) << j.dump();
    EXPECT_EQ(again->rope_original_max_positions, m.rope_original_max_positions) << j.dump();
    EXPECT_EQ(again->rope_beta_fast, m.rope_beta_fast) << j.dump();
    EXPECT_EQ(again->rope_beta_slow, m.rope_beta_slow) << j.dump();
    EXPECT_EQ(again->rope_truncate, m.rope_truncate) << j.dump();
    EXPECT_EQ(again->rope_attention_factor, m.rope_attention_factor) << j.dump();
    EXPECT_EQ(again->rope_short_factor, m.rope_short_factor) << j.dump();
    EXPECT_EQ(again->rope_long_factor, m.rope_long_factor) << j.dump();
    EXPECT_EQ(again->partial_rotary_factor, m.partial_rotary_factor) << j.dump();
    EXPECT_EQ(again->sliding_window, m.sliding_window) << j.dump();
    for (int layer = 0; layer < m.n_layer; ++layer) {
      EXPECT_EQ(again->SlidingLayer(layer), m.SlidingLayer(layer)) << j.dump() << layer;
    }
    EXPECT_EQ(again->attn_logit_softcapping, m.attn_logit_softcapping) << j.dump();
    EXPECT_EQ(again->final_logit_softcapping, m.final_logit_softcapping) << j.dump();
    EXPECT_EQ(again->query_pre_attn_scalar, m.query_pre_attn_scalar) << j.dump();
  }
  // A Llama config without the newer features normalizes as it did before
  // they existed (its strategy-database signature is unchanged).
  EXPECT_EQ(Parsed("llama", kLlama2_7bConfig).ToConfigJson(),
            nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 4096,
                "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
                "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false})"));
}

TEST(ModelConfig, AnotherFamilysConfigUnderAChangedModelTypeIsRefused) {
  // The old workaround: a qwen2 config with model_type llama would build a
  // Llama without qwen2's q/k/v biases. Its own keys give it away.
  nlohmann::json qwen = nlohmann::json::parse(kQwen2_7bConfig);
  ASSERT_THAT(ApplyOverrides({{"model_type", "llama"}}, &qwen), IsOk());
  EXPECT_THAT(
      ModelSpecFromJson("llama", qwen).status(),
      InvalidArgument(AllOf(HasSubstr("model_config.max_window_layers"),
                            HasSubstr("llama configs have no such key"), HasSubstr("qwen2"))));
  // ... and so do the transformers classes a hub config names.
  nlohmann::json named = nlohmann::json::parse(kLlama2_7bConfig);
  named["architectures"] = {"Qwen2ForCausalLM"};
  EXPECT_THAT(ModelSpecFromJson("llama", named).status(),
              InvalidArgument(AllOf(HasSubstr("model_config.architectures"),
                                    HasSubstr("'Qwen2ForCausalLM' is a qwen2 model"),
                                    HasSubstr("--model qwen2"))));
  named["architectures"] = {"LlamaForCausalLM"};
  EXPECT_THAT(ModelSpecFromJson("llama", named), IsOk());
  named["architectures"] = {"FalconForCausalLM"};
  EXPECT_THAT(ModelSpecFromJson("llama", named).status(),
              InvalidArgument(AllOf(HasSubstr("FalconForCausalLM"), HasSubstr("torchscript"))));
  // gemma2's soft-capping under model_type gemma would be dropped.
  nlohmann::json gemma2 = nlohmann::json::parse(kGemma2_9bConfig);
  gemma2["model_type"] = "gemma";
  EXPECT_THAT(ModelSpecFromJson("gemma", gemma2).status(),
              InvalidArgument(HasSubstr("model_config.attn_logit_softcapping")));
  // mistral's window under llama: refused, unless it is null (no window).
  EXPECT_THAT(
      ParseModelConfig("llama", Edited(kLlama2_7bConfig, {{"sliding_window", 4096}})).status(),
      InvalidArgument(AllOf(HasSubstr("model_config.sliding_window"), HasSubstr("mistral"))));
  nlohmann::json no_window = nlohmann::json::parse(kLlama2_7bConfig);
  no_window["sliding_window"] = nullptr;
  EXPECT_THAT(ModelSpecFromJson("llama", no_window), IsOk());
  // A model_type naming a family that does not exist says what does.
  EXPECT_THAT(
      ParseModelConfig("llama", Edited(kLlama2_7bConfig, {{"model_type", "falcon"}})).status(),
      InvalidArgument(AllOf(HasSubstr("model_config.model_type: 'falcon' is not supported"),
                            HasSubstr("supported: gpt2, llama"), HasSubstr("gemma2"),
                            HasSubstr("--model torchscript"))));
  EXPECT_THAT(
      ParseModelConfig("llama", kQwen2_7bConfig).status(),
      InvalidArgument(HasSubstr("'qwen2' does not match model 'llama' (use --model qwen2)")));
}

TEST(ModelConfig, FeaturesAFamilyDoesNotHaveAreRefusedNamingTheKey) {
  EXPECT_THAT(
      ParseModelConfig("gemma2", Edited(kGemma2_9bConfig, {{"use_bidirectional_attention", true}}))
          .status(),
      InvalidArgument(HasSubstr("model_config.use_bidirectional_attention")));
  EXPECT_THAT(
      ParseModelConfig("llama", Edited(kLlama2_7bConfig,
                                       {{"rope_parameters",
                                         {{"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}}}}))
          .status(),
      InvalidArgument(HasSubstr("model_config.partial_rotary_factor")));
  EXPECT_THAT(ParseModelConfig("qwen3", Edited(kQwen3_8bConfig, {{"hidden_act", "relu"}})).status(),
              InvalidArgument(AllOf(HasSubstr("model_config.hidden_act"), HasSubstr("relu"))));
  EXPECT_THAT(
      ParseModelConfig("gemma2", Edited(kGemma2_9bConfig, {{"layer_types", {"x"}}})).status(),
      InvalidArgument(HasSubstr("model_config.layer_types")));
  // A spec built by hand gets the same checks.
  ModelSpec m = Parsed("mistral", kMistral7bConfig);
  m.attn_logit_softcapping = 30;
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("attn_logit_softcapping")));
  m = Parsed("qwen2", kQwen2_7bConfig);
  m.attention_bias = true;
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("attention_bias")));
  m = Parsed("gemma2", kGemma2_9bConfig);
  m.layer_types = {"full_attention"};
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("layer_types")));
}

// Tiny configs of the mixture-of-experts families, as the reference check
// (tests/reference/check.py) builds them: qwen3_moe with layers 0 and 2
// dense (decoder_sparse_step 2) and 3 too (mlp_only_layers); deepseek_v3
// with a query bottleneck, attention biases, layer 0 dense.
constexpr absl::string_view kTinyQwen3Moe = R"({"model_type": "qwen3_moe", "hidden_size": 32,
  "intermediate_size": 56, "moe_intermediate_size": 24, "num_hidden_layers": 4,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 12, "num_experts": 4,
  "num_experts_per_tok": 2, "decoder_sparse_step": 2, "mlp_only_layers": [3],
  "vocab_size": 96, "max_position_embeddings": 64})";
constexpr absl::string_view kTinyDeepSeekV3 = R"({"model_type": "deepseek_v3", "hidden_size": 32,
  "intermediate_size": 56, "moe_intermediate_size": 16, "num_hidden_layers": 3,
  "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 16, "kv_lora_rank": 12,
  "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6, "n_routed_experts": 8,
  "n_group": 4, "topk_group": 2, "num_experts_per_tok": 3, "first_k_dense_replace": 1,
  "n_shared_experts": 2, "attention_bias": true, "vocab_size": 96,
  "max_position_embeddings": 64})";

// `config` with "q_lora_rank": null (no query bottleneck).
std::string NullQLoraRank(absl::string_view config) {
  nlohmann::json j = nlohmann::json::parse(config);
  j["q_lora_rank"] = nullptr;
  return j.dump();
}

TEST(ModelConfig, MoeFamiliesCountParametersAsTransformersAndTheModelCards) {
  // num_parameters() of Qwen3MoeForCausalLM / DeepseekV3ForCausalLM built
  // from the same configs by transformers 5.23 on the meta device.
  EXPECT_EQ(Parsed("qwen3_moe", kTinyQwen3Moe).ParameterCount(), 50432);
  EXPECT_EQ(Parsed("deepseek_v3", kTinyDeepSeekV3).ParameterCount(), 52948);
  EXPECT_EQ(
      Parsed("deepseek_v3", NullQLoraRank(Edited(kTinyDeepSeekV3, {{"attention_bias", false}})))
          .ParameterCount(),
      53476);
  const ModelSpec qwen = Parsed("qwen3_moe", kQwen3_30bA3bConfig);
  EXPECT_EQ(qwen.ParameterCount(), kQwen3_30bA3bParameters);
  EXPECT_NEAR(qwen.ParameterCount() / 30.5e9, 1.0, 0.02);
  EXPECT_NEAR(qwen.ActiveParameterCount() / 3.3e9, 1.0, 0.03);
  const ModelSpec deepseek = Parsed("deepseek_v3", kDeepSeekV3Config);
  EXPECT_EQ(deepseek.ParameterCount(), kDeepSeekV3Parameters);
  EXPECT_NEAR(deepseek.ParameterCount() / 671e9, 1.0, 0.02);
  EXPECT_NEAR(deepseek.ActiveParameterCount() / 37e9, 1.0, 0.03);
  // Dense models use every parameter.
  const ModelSpec llama = Parsed("llama", kLlama2_7bConfig);
  EXPECT_EQ(llama.ActiveParameterCount(), llama.ParameterCount());
}

constexpr absl::string_view kTinyGptOss = R"({"model_type": "gpt_oss", "hidden_size": 32,
  "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 12, "num_local_experts": 4, "num_experts_per_tok": 2,
  "vocab_size": 96, "max_position_embeddings": 32})";

TEST(ModelConfig, GptOssTakesGptOssConfigsDefaults) {
  const ModelSpec m = Parsed("gpt_oss", kTinyGptOss);
  // GptOssConfig's YaRN when the config has no rope_parameters.
  EXPECT_EQ(m.rope_type, "yarn");
  EXPECT_DOUBLE_EQ(m.rope_theta, 150000.0);
  EXPECT_DOUBLE_EQ(m.rope_factor, 32.0);
  EXPECT_EQ(m.rope_original_max_positions, 4096);
  EXPECT_DOUBLE_EQ(m.rope_beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(m.rope_beta_slow, 1.0);
  EXPECT_FALSE(m.rope_truncate);
  EXPECT_NEAR(m.rope_attention_factor, 0.1 * std::log(32.0) + 1, 1e-12);
  EXPECT_TRUE(m.attention_bias);
  EXPECT_DOUBLE_EQ(m.swiglu_alpha, 1.702);
  EXPECT_DOUBLE_EQ(m.swiglu_limit, 7.0);
  EXPECT_DOUBLE_EQ(m.layer_norm_epsilon, 1e-5);
  EXPECT_EQ(m.sliding_window, 128);
  EXPECT_THAT(m.layer_types, ElementsAre("sliding_attention", "full_attention"));
  EXPECT_EQ(m.router_aux_loss_coef, 0);
  EXPECT_DOUBLE_EQ(
      Parsed("gpt_oss", Edited(kTinyGptOss, {{"output_router_logits", true}})).router_aux_loss_coef,
      0.001);
  // A rope given is read as given (the default type too).
  EXPECT_EQ(
      Parsed("gpt_oss", Edited(kTinyGptOss, {{"rope_parameters", {{"rope_type", "default"}}}}))
          .rope_type,
      "default");
  // The normalized config reads back to the same spec, rope and biases
  // included, whichever way they differ from the defaults.
  for (const std::string& config :
       {std::string(kTinyGptOss),
        Edited(kTinyGptOss, {{"attention_bias", false},
                             {"swiglu_limit", 3.0},
                             {"rope_parameters", {{"rope_type", "default"}}}})}) {
    const ModelSpec spec = Parsed("gpt_oss", config);
    const ModelSpec back = Parsed("gpt_oss", spec.ToConfigJson().dump());
    EXPECT_EQ(back.ToConfigJson(), spec.ToConfigJson());
    EXPECT_EQ(back.rope_type, spec.rope_type);
    EXPECT_EQ(back.attention_bias, spec.attention_bias);
    EXPECT_EQ(back.swiglu_limit, spec.swiglu_limit);
  }
  // Attention sinks need the math kernel.
  EXPECT_FALSE(m.SdpaComputes());
  EXPECT_TRUE(Parsed("llama", kLlama2_7bConfig).SdpaComputes());
  // Keys of other families' networks are refused; swiglu_limit is gpt_oss's.
  EXPECT_THAT(ParseModelConfig("gpt_oss", Edited(kTinyGptOss, {{"norm_topk_prob", true}})).status(),
              InvalidArgument(HasSubstr("norm_topk_prob")));
  EXPECT_THAT(
      ParseModelConfig("mixtral", Edited(kMixtral8x7bConfig, {{"swiglu_limit", 7.0}})).status(),
      InvalidArgument(AllOf(HasSubstr("swiglu_limit"), HasSubstr("gpt_oss"))));
  EXPECT_THAT(ParseModelConfig("gpt_oss", Edited(kTinyGptOss, {{"swiglu_alpha", 0}})).status(),
              InvalidArgument(HasSubstr("swiglu_alpha")));
}

TEST(ModelConfig, GptOssCountsParametersAsTransformers) {
  // num_parameters() of GptOssForCausalLM from the same configs
  // (transformers 5.23): sinks, the router's bias and the experts' biases
  // included.
  EXPECT_EQ(Parsed("gpt_oss", kTinyGptOss).ParameterCount(), 28848);
  EXPECT_EQ(Parsed("gpt_oss", Edited(kTinyGptOss, {{"attention_bias", false}})).ParameterCount(),
            28592);
  const ModelSpec m = Parsed("gpt_oss", kGptOss20bConfig);
  EXPECT_EQ(m.ParameterCount(), kGptOss20bParameters);
  // The card's 3.61B active parameters leave out the token embedding (a
  // lookup), which ActiveParameterCount() counts.
  EXPECT_NEAR((m.ActiveParameterCount() - 201088.0 * 2880) / 3.61e9, 1.0, 0.01);
  EXPECT_DOUBLE_EQ(m.router_aux_loss_coef, 0);  // output_router_logits false
  EXPECT_EQ(m.rope_type, "yarn");               // rope_scaling, transformers 4's spelling
  // Matrix products: the active parameters less the embedding, norms,
  // biases, sinks and the router's bias.
  const double d = 2880, layers = 24, experts = 32;
  const double attention_biases = 64 * 64 + 2 * 8 * 64 + d;
  const double expert_biases = 4 * (2 * 2880 + d);
  const double outside = layers * (2 * d + attention_biases + 64 + experts + expert_biases) + d;
  EXPECT_NEAR(m.TrainingFlopsPerToken(1) / 6, m.ActiveParameterCount() - 201088.0 * d - outside,
              1e-4 * 3.6e9);
}

TEST(ModelConfig, MoeFamiliesCountTheFlopsOfTheExpertsATokenUses) {
  // Weights in matrix products: the active parameters less the token
  // embedding (a lookup), the norms; at one token attention adds little.
  const ModelSpec qwen = Parsed("qwen3_moe", kQwen3_30bA3bConfig);
  const double qwen_norms = 48.0 * (2 * 2048 + 2 * 128) + 2048;
  EXPECT_NEAR(qwen.TrainingFlopsPerToken(1) / 6,
              qwen.ActiveParameterCount() - 151936.0 * 2048 - qwen_norms, 1e-4 * 3e9);
  const ModelSpec deepseek = Parsed("deepseek_v3", kDeepSeekV3Config);
  const double deepseek_norms = 61.0 * (2 * 7168 + 1536 + 512) + 7168;
  EXPECT_NEAR(deepseek.TrainingFlopsPerToken(1) / 6,
              deepseek.ActiveParameterCount() - 129280.0 * 7168 - deepseek_norms, 1e-4 * 37e9);
  // Latent attention's products: queries and keys of 128 + 64, values of
  // 128, over half the sequence on average (causal), 3 passes.
  EXPECT_DOUBLE_EQ(deepseek.TrainingFlopsPerToken(4096) - deepseek.TrainingFlopsPerToken(2048),
                   6.0 * 128 * (192 + 128) * 61 * (2048 - 1024));
  // More experts at the same top-k: only the routers of the 58 expert
  // layers grow; a dense layer more costs its MLP less the token's experts.
  ModelSpec more_experts = deepseek;
  more_experts.num_local_experts = 512;
  EXPECT_DOUBLE_EQ(more_experts.TrainingFlopsPerToken(64) - deepseek.TrainingFlopsPerToken(64),
                   6.0 * 58 * 7168 * 256);
  ModelSpec one_more_dense = deepseek;
  one_more_dense.dense_mlp_layers.push_back(3);
  const double d = 7168, dense = 3 * d * 18432, routed = d * 256 + 9 * 3 * d * 2048;
  EXPECT_DOUBLE_EQ(one_more_dense.TrainingFlopsPerToken(64) - deepseek.TrainingFlopsPerToken(64),
                   6.0 * (dense - routed));
}

TEST(ModelConfig, MoeActivationMemoryFollowsEachLayersMlp) {
  // Qwen3-30B-A3B: every layer's 8 experts of 768 (8 * (8 * 768 / 2048 + 4)
  // units of s*b*h, and 6 * 128 / 2048 for the router); a dense layer
  // instead (mlp_only_layers) keeps its 6144-wide gated MLP's 8 * 3.
  const ModelSpec sparse = Parsed("qwen3_moe", kQwen3_30bA3bConfig);
  ModelSpec one_dense = sparse;
  one_dense.dense_mlp_layers = {0};
  const Strategy s = MakeStrategy(1, 1, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  const double sbh = 1024.0 * 1 * 2048;
  EXPECT_NEAR(double(EstimateMemory(one_dense, 1024, s).activations -
                     EstimateMemory(sparse, 1024, s).activations),
              sbh * (8 * 3.0 - 8 * (8 * 0.375 + 4) - 6 * 128 / 2048.0), 64);
  // DeepSeek-V3: latent attention's widths (128 x (192 + 128) / 2 on 7168)
  // and the shared expert; estimated, not refused.
  const ModelSpec deepseek = Parsed("deepseek_v3", kDeepSeekV3Config);
  const MemoryEstimate e = EstimateMemory(deepseek, 4096, s);
  EXPECT_GT(e.activations, 0);
  // Every expert's weights, in fp32 under bf16 autocast (per layer, the
  // layers' average rounded down).
  EXPECT_NEAR(double(e.parameters), 4.0 * kDeepSeekV3Parameters, 4.0 * 61);
}

TEST(ModelConfig, MoeFamiliesReadTheirKeysWithTransformersDefaults) {
  const ModelSpec qwen = Parsed("qwen3_moe", kQwen3_30bA3bConfig);
  EXPECT_EQ(qwen.num_local_experts, 128);  // "num_experts"
  EXPECT_EQ(qwen.num_experts_per_tok, 8);
  EXPECT_EQ(qwen.n_inner, 6144);
  EXPECT_EQ(qwen.ExpertWidth(), 768);
  EXPECT_TRUE(qwen.norm_topk_prob);
  EXPECT_TRUE(qwen.dense_mlp_layers.empty());
  EXPECT_TRUE(qwen.ExpertLayer(0) && qwen.ExpertLayer(47));
  EXPECT_EQ(qwen.HeadDim(), 128);
  EXPECT_EQ(qwen.n_kv_head, 4);
  EXPECT_EQ(qwen.sliding_window, 0);
  EXPECT_DOUBLE_EQ(qwen.rope_theta, 1e6);
  EXPECT_TRUE(qwen.Info().qk_norm);
  // Qwen3MoeConfig's defaults: norm_topk_prob false; use_sliding_window
  // turns a window on for every layer (max_window_layers is not read).
  EXPECT_FALSE(Parsed("qwen3_moe", Edited(kQwen3_30bA3bConfig, {{"norm_topk_prob", nullptr}}))
                   .norm_topk_prob);
  const ModelSpec sliding = Parsed(
      "qwen3_moe",
      Edited(kQwen3_30bA3bConfig,
             {{"use_sliding_window", true}, {"sliding_window", 4096}, {"max_window_layers", 2}}));
  EXPECT_EQ(sliding.sliding_window, 4096);
  EXPECT_TRUE(sliding.SlidingLayer(0) && sliding.SlidingLayer(47));
  // transformers writes num_local_experts (its attribute_map's alias).
  EXPECT_EQ(Parsed("qwen3_moe", Edited(kQwen3_30bA3bConfig,
                                       {{"num_experts", nullptr}, {"num_local_experts", 64}}))
                .num_local_experts,
            64);
  const ModelSpec tiny = Parsed("qwen3_moe", kTinyQwen3Moe);
  EXPECT_THAT(tiny.dense_mlp_layers, ElementsAre(0, 2, 3));
  EXPECT_TRUE(tiny.ExpertLayer(1));
  EXPECT_FALSE(tiny.ExpertLayer(3));

  const ModelSpec deepseek = Parsed("deepseek_v3", kDeepSeekV3Config);
  EXPECT_EQ(deepseek.num_local_experts, 256);  // "n_routed_experts"
  EXPECT_EQ(deepseek.ExpertWidth(), 2048);
  EXPECT_THAT(deepseek.dense_mlp_layers, ElementsAre(0, 1, 2));
  EXPECT_EQ(deepseek.n_group, 8);
  EXPECT_EQ(deepseek.topk_group, 4);
  EXPECT_DOUBLE_EQ(deepseek.routed_scaling_factor, 2.5);
  EXPECT_EQ(deepseek.n_shared_experts, 1);
  EXPECT_TRUE(deepseek.norm_topk_prob);
  EXPECT_EQ(deepseek.q_lora_rank, 1536);
  EXPECT_EQ(deepseek.kv_lora_rank, 512);
  EXPECT_EQ(deepseek.QkHeadDim(), 192);
  EXPECT_EQ(deepseek.VHeadDim(), 128);
  EXPECT_EQ(deepseek.RotaryDim(), 64);
  EXPECT_TRUE(deepseek.rope_interleave);  // DeepseekV3Config's default
  // rope_scaling's yarn: factor 40 over 4096 positions; mscale = mscale_all_dim
  // gives cos and sin a factor 1, and the softmax mscale_all_dim's.
  EXPECT_EQ(deepseek.rope_type, "yarn");
  EXPECT_DOUBLE_EQ(deepseek.rope_factor, 40);
  EXPECT_EQ(deepseek.rope_original_max_positions, 4096);
  EXPECT_DOUBLE_EQ(deepseek.rope_attention_factor, 1.0);
  EXPECT_DOUBLE_EQ(deepseek.rope_mscale_all_dim, 1.0);
  // q_lora_rank null: q_proj; transformers' head_dim (its copy of
  // qk_rope_head_dim) is not read.
  const ModelSpec no_q_rank =
      Parsed("deepseek_v3", NullQLoraRank(Edited(kTinyDeepSeekV3, {{"head_dim", 64}})));
  EXPECT_EQ(no_q_rank.q_lora_rank, 0);
  EXPECT_EQ(no_q_rank.RotaryDim(), 4);
  // Defaults: DeepseekV3Config's.
  const ModelSpec defaults =
      Parsed("deepseek_v3", Edited(kDeepSeekV3Config, {{"first_k_dense_replace", nullptr},
                                                       {"n_shared_experts", nullptr},
                                                       {"routed_scaling_factor", nullptr},
                                                       {"norm_topk_prob", nullptr}}));
  EXPECT_EQ(defaults.dense_mlp_layers.size(), 3u);
  EXPECT_EQ(defaults.n_shared_experts, 1);
  EXPECT_DOUBLE_EQ(defaults.routed_scaling_factor, 2.5);
  EXPECT_TRUE(defaults.norm_topk_prob);
}

TEST(ModelConfig, MoeFamilyErrorsNameTheKey) {
  auto qwen = [](const nlohmann::json& changes) {
    return ParseModelConfig("qwen3_moe", Edited(kQwen3_30bA3bConfig, changes)).status();
  };
  EXPECT_THAT(qwen({{"num_experts", nullptr}}),
              InvalidArgument(HasSubstr("model_config.num_experts: missing")));
  EXPECT_THAT(qwen({{"num_experts_per_tok", 200}}),
              InvalidArgument(AllOf(HasSubstr("model_config.num_experts_per_tok"),
                                    HasSubstr("num_experts = 128"))));
  EXPECT_THAT(qwen({{"num_local_experts", 64}}),
              InvalidArgument(HasSubstr("model_config.num_local_experts: must equal num_experts")));
  EXPECT_THAT(qwen({{"moe_intermediate_size", nullptr}}),
              InvalidArgument(HasSubstr("model_config.moe_intermediate_size: missing")));
  EXPECT_THAT(qwen({{"mlp_only_layers", {48}}}),
              InvalidArgument(HasSubstr("model_config.mlp_only_layers")));
  EXPECT_THAT(qwen({{"decoder_sparse_step", 0}}),
              InvalidArgument(HasSubstr("model_config.decoder_sparse_step")));
  EXPECT_THAT(qwen({{"hidden_act", "gelu"}}),
              InvalidArgument(AllOf(HasSubstr("model_config.hidden_act"), HasSubstr("silu"))));
  auto deepseek = [](const nlohmann::json& changes) {
    return ParseModelConfig("deepseek_v3", Edited(kDeepSeekV3Config, changes)).status();
  };
  EXPECT_THAT(deepseek({{"n_group", 3}}), InvalidArgument(HasSubstr("model_config.n_group")));
  EXPECT_THAT(deepseek({{"n_group", 256}}),  // groups of one expert
              InvalidArgument(HasSubstr("model_config.n_group")));
  EXPECT_THAT(deepseek({{"topk_group", 9}}), InvalidArgument(HasSubstr("model_config.topk_group")));
  EXPECT_THAT(deepseek({{"topk_group", 1}, {"num_experts_per_tok", 40}}),
              InvalidArgument(HasSubstr("model_config.num_experts_per_tok")));
  EXPECT_THAT(deepseek({{"num_key_value_heads", 8}}),
              InvalidArgument(AllOf(HasSubstr("model_config.num_key_value_heads"),
                                    HasSubstr("latent attention"))));
  EXPECT_THAT(deepseek({{"q_lora_rank", nullptr}}),  // erased: missing, not null
              InvalidArgument(HasSubstr("model_config.q_lora_rank: missing")));
  EXPECT_THAT(deepseek({{"kv_lora_rank", 0}}),
              InvalidArgument(HasSubstr("model_config.kv_lora_rank")));
  EXPECT_THAT(deepseek({{"qk_rope_head_dim", 63}}),
              InvalidArgument(HasSubstr("must be even for rotary embeddings")));
  EXPECT_THAT(
      deepseek({{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}, {"mscale_all_dim", 1.0}}}}),
      InvalidArgument(HasSubstr("model_config.rope_scaling.mscale_all_dim")));
  EXPECT_THAT(deepseek({{"first_k_dense_replace", -1}}),
              InvalidArgument(HasSubstr("model_config.first_k_dense_replace")));
  // A spec built by hand gets the same checks: deepseek_v3's dense layers
  // are the first ones; features the family lacks stay off.
  ModelSpec m = Parsed("deepseek_v3", kDeepSeekV3Config);
  m.dense_mlp_layers = {0, 5};
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("first_k_dense_replace")));
  m = Parsed("qwen3_moe", kQwen3_30bA3bConfig);
  m.n_shared_experts = 1;
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("n_shared_experts")));
  m = Parsed("mixtral", kMixtral8x7bConfig);
  m.moe_intermediate_size = 512;
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("moe_intermediate_size")));
  m = Parsed("llama", kLlama2_7bConfig);
  m.kv_lora_rank = 512;
  EXPECT_THAT(m.Validate(), InvalidArgument(HasSubstr("kv_lora_rank")));
}

TEST(ModelConfig, MoeFamiliesRoundTripThroughTheirNormalizedConfig) {
  ModelSpec no_interleave = Parsed("deepseek_v3", kTinyDeepSeekV3);
  no_interleave.rope_interleave = false;
  no_interleave.norm_topk_prob = false;
  no_interleave.q_lora_rank = 0;
  for (const ModelSpec& m :
       {Parsed("qwen3_moe", kQwen3_30bA3bConfig), Parsed("qwen3_moe", kTinyQwen3Moe),
        Parsed("deepseek_v3", kDeepSeekV3Config), Parsed("deepseek_v3", kTinyDeepSeekV3),
        no_interleave}) {
    ASSERT_THAT(m.Validate(), IsOk()) << m.family;
    const nlohmann::json j = m.ToConfigJson();
    absl::StatusOr<ModelSpec> again = ModelSpecFromJson(m.family, j);
    ASSERT_THAT(again, IsOk()) << j.dump();
    EXPECT_EQ(again->ToConfigJson(), j) << m.family;
    EXPECT_EQ(again->ParameterCount(), m.ParameterCount()) << j.dump();
    EXPECT_EQ(again->TrainingFlopsPerToken(4096), m.TrainingFlopsPerToken(4096)) << j.dump();
    EXPECT_EQ(again->dense_mlp_layers, m.dense_mlp_layers) << j.dump();
    EXPECT_EQ(again->norm_topk_prob, m.norm_topk_prob) << j.dump();
    EXPECT_EQ(again->ExpertWidth(), m.ExpertWidth()) << j.dump();
    EXPECT_EQ(again->n_group, m.n_group) << j.dump();
    EXPECT_EQ(again->topk_group, m.topk_group) << j.dump();
    EXPECT_EQ(again->routed_scaling_factor, m.routed_scaling_factor) << j.dump();
    EXPECT_EQ(again->n_shared_experts, m.n_shared_experts) << j.dump();
    EXPECT_EQ(again->q_lora_rank, m.q_lora_rank) << j.dump();
    EXPECT_EQ(again->rope_interleave, m.rope_interleave) << j.dump();
    EXPECT_EQ(again->rope_mscale_all_dim, m.rope_mscale_all_dim) << j.dump();
    EXPECT_EQ(again->rope_attention_factor, m.rope_attention_factor) << j.dump();
  }
}

TEST(ModelConfig, MoeConfigsUnderAnotherFamilyAreRefused) {
  // A DeepSeek-V3 config passed off as llama would lose latent attention
  // and the experts; a Qwen3-MoE config as qwen3 its experts.
  nlohmann::json deepseek = nlohmann::json::parse(kDeepSeekV3Config);
  deepseek.erase("architectures");
  deepseek["model_type"] = "llama";
  EXPECT_THAT(ModelSpecFromJson("llama", deepseek).status(),
              InvalidArgument(
                  AllOf(HasSubstr("llama configs have no such key"), HasSubstr("deepseek_v3"))));
  nlohmann::json qwen = nlohmann::json::parse(kQwen3_30bA3bConfig);
  qwen.erase("architectures");
  qwen["model_type"] = "qwen3";
  EXPECT_THAT(
      ModelSpecFromJson("qwen3", qwen).status(),
      InvalidArgument(AllOf(HasSubstr("qwen3 configs have no such key"), HasSubstr("qwen3_moe"))));
  // The hub's class names say which family a config is.
  EXPECT_THAT(ParseModelConfig(
                  "qwen3", Edited(kQwen3_8bConfig, {{"architectures", {"Qwen3MoeForCausalLM"}}}))
                  .status(),
              InvalidArgument(HasSubstr("'Qwen3MoeForCausalLM' is a qwen3_moe model")));
}

}  // namespace
}  // namespace autoaccel

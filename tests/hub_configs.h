// Real models' config.json, as transformers writes them, for the search
// library's tests (search_test), and two helpers to read and vary them.
#ifndef AUTOACCEL_TESTS_HUB_CONFIGS_H_
#define AUTOACCEL_TESTS_HUB_CONFIGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spec/model_spec.h"

namespace autoaccel {

// Configs as transformers 5.23 writes them (config.to_json_string()), trimmed
// of keys the engine ignores.
inline constexpr absl::string_view kLlama2_7bConfig = R"({
  "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
  "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
  "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "head_dim": 128,
  "hidden_act": "silu", "attention_bias": false, "mlp_bias": false,
  "tie_word_embeddings": false, "attention_dropout": 0.0, "pad_token_id": null
})";

inline constexpr absl::string_view kMixtral8x7bConfig = R"({
  "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
  "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
  "vocab_size": 32000, "max_position_embeddings": 32768, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "num_local_experts": 8, "num_experts_per_tok": 2,
  "sliding_window": null, "router_aux_loss_coef": 0.02, "output_router_logits": false,
  "tie_word_embeddings": false, "hidden_act": "silu"
})";

inline constexpr absl::string_view kBertBaseConfig = R"({
  "model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12,
  "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522,
  "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
  "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
  "pad_token_id": 0, "is_decoder": false, "tie_word_embeddings": true
})";

inline ModelSpec Parsed(absl::string_view family, absl::string_view config) {
  absl::StatusOr<ModelSpec> m = ParseModelConfig(family, config);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.value_or(ModelSpec{});
}

// `base` with `changes` merged in (null erases a key).
inline std::string Edited(absl::string_view base, const nlohmann::json& changes) {
  nlohmann::json j = nlohmann::json::parse(base);
  for (const auto& [key, value] : changes.items()) {
    if (value.is_null()) {
      j.erase(key);
    } else {
      j[key] = value;
    }
  }
  return j.dump();
}

// Configs of today's common decoders as transformers 5.23 writes them
// (Qwen2Config(...).to_json_string() with the sizes of the hub's
// Qwen2.5-7B, Qwen3-8B, Mistral-7B-v0.1, Phi-3-mini-4k, gemma-2-9b,
// gemma-7b and Llama-3.1-8B), trimmed of token ids, dropout and layer_types
// (left to their defaults). Next to each: num_parameters() of the
// transformers model of the same config (built on the meta device).
inline constexpr absl::string_view kQwen2_7bConfig = R"({
  "hidden_act": "silu", "hidden_size": 3584, "intermediate_size": 18944,
  "max_position_embeddings": 131072, "max_window_layers": 28, "model_type": "qwen2",
  "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
  "sliding_window": null, "tie_word_embeddings": false, "use_sliding_window": false,
  "vocab_size": 152064})";
inline constexpr int64_t kQwen2_7bParameters = 7615616512;

inline constexpr absl::string_view kQwen3_8bConfig = R"({
  "attention_bias": false, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 12288, "max_position_embeddings": 40960, "max_window_layers": 28,
  "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}, "sliding_window": null,
  "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 151936})";
inline constexpr int64_t kQwen3_8bParameters = 8190735360;

inline constexpr absl::string_view kMistral7bConfig = R"({
  "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "sliding_window": 4096,
  "tie_word_embeddings": false, "vocab_size": 32000})";
inline constexpr int64_t kMistral7bParameters = 7241732096;

inline constexpr absl::string_view kPhi3MiniConfig = R"({
  "embd_pdrop": 0.0, "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 8192,
  "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
  "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
  "rope_parameters": {"partial_rotary_factor": 1.0, "rope_theta": 10000.0, "rope_type": "default"},
  "sliding_window": 2047, "tie_word_embeddings": false, "vocab_size": 32064})";
inline constexpr int64_t kPhi3MiniParameters = 3821079552;

inline constexpr absl::string_view kGemma2_9bConfig = R"({
  "attention_bias": false, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
  "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584,
  "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "gemma2",
  "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "sliding_window": 4096,
  "tie_word_embeddings": true, "use_bidirectional_attention": null, "vocab_size": 256000})";
inline constexpr int64_t kGemma2_9bParameters = 9241705984;

inline constexpr absl::string_view kGemma7bConfig = R"({
  "attention_bias": false, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
  "hidden_size": 3072, "intermediate_size": 24576, "max_position_embeddings": 8192,
  "model_type": "gemma", "num_attention_heads": 16, "num_hidden_layers": 28,
  "num_key_value_heads": 16, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
  "tie_word_embeddings": true, "use_bidirectional_attention": null, "vocab_size": 256000})";
inline constexpr int64_t kGemma7bParameters = 8537680896;

inline constexpr absl::string_view kLlama31_8bConfig = R"({
  "attention_bias": false, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_parameters": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                      "original_max_position_embeddings": 8192, "rope_theta": 500000.0,
                      "rope_type": "llama3"},
  "tie_word_embeddings": false, "vocab_size": 128256})";
inline constexpr int64_t kLlama31_8bParameters = 8030261248;

// Llama 3.1 70B's shape, from the "70B / Model Info" table of
// https://github.com/oumi-ai/oumi/blob/dbb5aea5a1267d61b0933e032b60ac2f11e9c6d3/configs/recipes/llama3_1/README.md
// (vocabulary 128,256, hidden 8192, MLP 28,672, 80 layers, 64 attention and
// 8 KV heads, no weight tying, 131,072 positions). Only those keys: the
// rest (norm epsilon, RoPE) do not change an estimate. Llama 3 70B has the
// same shape with 8192 positions.
inline constexpr absl::string_view kLlama31_70bShapeConfig = R"({
  "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
  "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
  "vocab_size": 128256, "max_position_embeddings": 131072, "tie_word_embeddings": false})";

// Mixture-of-experts configs exactly as published on the Hugging Face hub
// (config.json of Qwen/Qwen3-30B-A3B and deepseek-ai/DeepSeek-V3, written by
// transformers 4.51 and DeepSeek's own code: num_experts rather than
// num_local_experts, rope_scaling with "type", fp8 quantization_config and
// keys transformers ignores). Next to each: num_parameters() of the
// transformers 5.23 model of the config (Qwen3MoeForCausalLM,
// DeepseekV3ForCausalLM, built on the meta device; DeepSeek-V3's
// multi-token-prediction layer is not part of it), and the totals their model
// cards give.
inline constexpr absl::string_view kQwen3_30bA3bConfig = R"({
  "architectures": [
    "Qwen3MoeForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "decoder_sparse_step": 1,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 6144,
  "max_position_embeddings": 40960,
  "max_window_layers": 48,
  "mlp_only_layers": [],
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 768,
  "norm_topk_prob": true,
  "num_attention_heads": 32,
  "num_experts": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 48,
  "num_key_value_heads": 4,
  "output_router_logits": false,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.001,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";
inline constexpr int64_t kQwen3_30bA3bParameters = 30532122624;  // card: 30.5B, 3.3B active

inline constexpr absl::string_view kDeepSeekV3Config = R"({
  "architectures": [
    "DeepseekV3ForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "auto_map": {
    "AutoConfig": "configuration_deepseek.DeepseekV3Config",
    "AutoModel": "modeling_deepseek.DeepseekV3Model",
    "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"
  },
  "aux_loss_alpha": 0.001,
  "bos_token_id": 0,
  "eos_token_id": 1,
  "ep_size": 1,
  "first_k_dense_replace": 3,
  "hidden_act": "silu",
  "hidden_size": 7168,
  "initializer_range": 0.02,
  "intermediate_size": 18432,
  "kv_lora_rank": 512,
  "max_position_embeddings": 163840,
  "model_type": "deepseek_v3",
  "moe_intermediate_size": 2048,
  "moe_layer_freq": 1,
  "n_group": 8,
  "n_routed_experts": 256,
  "n_shared_experts": 1,
  "norm_topk_prob": true,
  "num_attention_heads": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 61,
  "num_key_value_heads": 128,
  "num_nextn_predict_layers": 1,
  "q_lora_rank": 1536,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "quantization_config": {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [
      128,
      128
    ]
  },
  "rms_norm_eps": 1e-06,
  "rope_scaling": {
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 40,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4096,
    "type": "yarn"
  },
  "rope_theta": 10000,
  "routed_scaling_factor": 2.5,
  "scoring_func": "sigmoid",
  "seq_aux": true,
  "tie_word_embeddings": false,
  "topk_group": 4,
  "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16",
  "transformers_version": "4.33.1",
  "use_cache": true,
  "v_head_dim": 128,
  "vocab_size": 129280
})";
inline constexpr int64_t kDeepSeekV3Parameters = 671026404352;  // card: 671B, 37B active

// openai/gpt-oss-20b's config.json, written here from the published values
// (not fetched: no network), its mxfp4 quantization_config left out (the
// experts' storage format, not the architecture). Its num_parameters()
// under transformers 5.23 (meta device) matches the model card's 21B
// (3.6B active).
inline constexpr absl::string_view kGptOss20bConfig = R"({
  "architectures": ["GptOssForCausalLM"],
  "attention_bias": true,
  "attention_dropout": 0.0,
  "eos_token_id": 200002,
  "experts_per_token": 4,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2880,
  "initial_context_length": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 2880,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention",
                  "sliding_attention", "full_attention", "sliding_attention", "full_attention",
                  "sliding_attention", "full_attention", "sliding_attention", "full_attention",
                  "sliding_attention", "full_attention", "sliding_attention", "full_attention",
                  "sliding_attention", "full_attention", "sliding_attention", "full_attention",
                  "sliding_attention", "full_attention", "sliding_attention", "full_attention"],
  "max_position_embeddings": 131072,
  "model_type": "gpt_oss",
  "num_attention_heads": 64,
  "num_experts_per_tok": 4,
  "num_hidden_layers": 24,
  "num_key_value_heads": 8,
  "num_local_experts": 32,
  "output_router_logits": false,
  "pad_token_id": 199999,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                   "original_max_position_embeddings": 4096, "rope_type": "yarn",
                   "truncate": false},
  "rope_theta": 150000,
  "router_aux_loss_coef": 0.9,
  "sliding_window": 128,
  "swiglu_limit": 7.0,
  "tie_word_embeddings": false,
  "transformers_version": "4.55.0.dev0",
  "use_cache": true,
  "vocab_size": 201088
})";
inline constexpr int64_t kGptOss20bParameters = 20914757184;  // card: 21B, 3.6B active

}  // namespace autoaccel

#endif  // AUTOACCEL_TESTS_HUB_CONFIGS_H_

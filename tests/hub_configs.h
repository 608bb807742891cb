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

}  // namespace autoaccel

#endif  // AUTOACCEL_TESTS_HUB_CONFIGS_H_

// Model description shared by the coordinator (validation, cost figures) and
// the trial runner (which builds the network from it).
#ifndef AUTOACCEL_SEARCH_MODEL_H_
#define AUTOACCEL_SEARCH_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace autoaccel {

// A GPT-2 style decoder as described by a Hugging Face config.json.
struct ModelSpec {
  std::string family;  // "gpt2"
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int vocab_size = 0;
  int n_positions = 0;
  int n_inner = 0;  // MLP width; HF default 4 * n_embd
  double layer_norm_epsilon = 1e-5;

  // Number of trainable parameters (tied input/output embedding counted once).
  int64_t ParameterCount() const;

  // Model FLOPs of one training step (forward + backward) per token at
  // sequence length `seq_len`:
  //   6 * N_matmul + 6 * n_layer * n_embd * seq_len
  // where N_matmul counts every weight that takes part in a matrix multiply
  // (all transformer-block weights and the tied LM head, not the position
  // embedding); the second term is the attention score and value products
  // (2 * 2 * seq_len * n_embd per layer forward with causal masking not
  // exploited, times 3 for forward + backward, halved because only the lower
  // triangle carries information, as in PaLM's appendix B accounting of
  // 12 * L * H * Q * T / 2).
  double TrainingFlopsPerToken(int seq_len) const;

  // The normalized config that the trial runner reads back.
  nlohmann::json ToConfigJson() const;
};

// Lists the families this build understands ("gpt2").
const std::vector<std::string>& KnownModelFamilies();

// Parses a Hugging Face style config.json text for `family`.
// Errors are INVALID_ARGUMENT and name the field, e.g.
//   "model_config.n_head: missing", "model: unknown family 'foo' (allowed: gpt2)".
absl::StatusOr<ModelSpec> ParseModelConfig(absl::string_view family,
                                           absl::string_view config_json);
absl::StatusOr<ModelSpec> ModelSpecFromJson(absl::string_view family,
                                            const nlohmann::json& config);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_MODEL_H_

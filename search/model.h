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

  // Model FLOPs of one training step (forward + backward = 3x forward) per
  // token at sequence length `seq_len`:
  //   6 * N_matmul + 6 * n_layer * n_embd * seq_len
  // N_matmul counts the weights that take part in a matrix multiply: every
  // transformer-block weight and the tied LM head (vocab_size * n_embd), not
  // the position embedding. The second term is attention's QK^T and AV
  // products (4 * seq_len * n_embd per token and layer forward), times 3 for
  // forward + backward, halved because causal masking leaves half the score
  // matrix useful (PaLM, appendix B). Recomputation is not counted: this is
  // model FLOPs, as MFU is defined.
  double TrainingFlopsPerToken(int seq_len) const;

  // The normalized config that the trial runner reads back.
  nlohmann::json ToConfigJson() const;
};

// Lists the families this build understands ("gpt2").
const std::vector<std::string>& KnownModelFamilies();

// Parses a Hugging Face style config.json text for `family`.
// Errors are INVALID_ARGUMENT and name the field, e.g.
//   "model_config.n_head: missing", "model: unknown family 'foo' (allowed: gpt2)".
absl::StatusOr<ModelSpec> ParseModelConfig(absl::string_view family, absl::string_view config_json);
absl::StatusOr<ModelSpec> ModelSpecFromJson(absl::string_view family, const nlohmann::json& config);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_MODEL_H_

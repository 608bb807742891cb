// What model_spec.cc (ModelSpec's checks and arithmetic) and model_config.cc
// (reading and writing a Hugging Face config.json) share: the config keys of
// the fields every family has, and how their errors are worded. Not for
// other users.
#ifndef AUTOACCEL_SEARCH_MODEL_SPEC_INTERNAL_H_
#define AUTOACCEL_SEARCH_MODEL_SPEC_INTERNAL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "search/model_families.h"
#include "search/model_spec.h"

namespace autoaccel::model_spec_internal {

inline constexpr char kOtherArchitectures[] =
    "for another Hugging Face architecture (DeepSeek-V3, GPT-OSS, Llama 4, ...) tune your own "
    "training script with --launcher (docs/LAUNCHERS.md; examples/hf_trainer is a Hugging Face "
    "Trainer script to start from); a traced module that takes token ids can run as --model "
    "torchscript";

inline std::string SupportedFamilies() { return absl::StrJoin(KnownModelFamilies(), ", "); }

// The config keys of the fields every family has (see the table in model_spec.h).
struct CommonKeys {
  const char* n_layer;
  const char* n_embd;
  const char* n_head;
  const char* n_positions;
  const char* n_inner;
  const char* layer_norm_epsilon;
};

inline CommonKeys KeysOf(Network network) {
  switch (network) {
    case Network::kGpt2:
      return {"n_layer", "n_embd", "n_head", "n_positions", "n_inner", "layer_norm_epsilon"};
    case Network::kDecoder:
      return {"num_hidden_layers",       "hidden_size",       "num_attention_heads",
              "max_position_embeddings", "intermediate_size", "rms_norm_eps"};
    case Network::kBert:
      return {"num_hidden_layers",       "hidden_size",       "num_attention_heads",
              "max_position_embeddings", "intermediate_size", "layer_norm_eps"};
    case Network::kTorchScript:
      break;
  }
  return {};
}

inline absl::Status FieldError(absl::string_view key, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("model_config.", key, ": ", problem));
}

}  // namespace autoaccel::model_spec_internal

#endif  // AUTOACCEL_SEARCH_MODEL_SPEC_INTERNAL_H_

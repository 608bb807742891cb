// What model_spec.cc (ModelSpec's checks and arithmetic) and model_config.cc
// (reading and writing a Hugging Face config.json) share: the config keys of
// the fields every family has, and how their errors are worded. Not for
// other users.
#ifndef AUTOACCEL_SPEC_MODEL_SPEC_INTERNAL_H_
#define AUTOACCEL_SPEC_MODEL_SPEC_INTERNAL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "spec/model_families.h"
#include "spec/model_spec.h"

namespace autoaccel::model_spec_internal {

inline constexpr char kOtherArchitectures[] =
    "for another Hugging Face architecture (Llama 4, Falcon, ...) tune your own "
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

// The rope types the engine computes (engine/llama.cc turns them into
// frequencies) and the rope_parameters keys each one reads besides rope_type
// and rope_theta: the reader reads, Validate() checks and the writer writes
// exactly these.
struct RopeType {
  const char* name;
  bool factor = false;            // factor
  bool llama3_bands = false;      // low_freq_factor, high_freq_factor
  bool original_max = false;      // original_max_position_embeddings
  bool yarn_ramp = false;         // beta_fast, beta_slow, truncate
  bool attention_factor = false;  // attention_factor (cos and sin scaled by it)
  bool short_long = false;        // short_factor, long_factor
};
inline constexpr RopeType kRopeTypes[] = {
    {"default"},
    {"linear", /*factor=*/true},
    {"dynamic", /*factor=*/true},
    {"llama3", /*factor=*/true, /*llama3_bands=*/true, /*original_max=*/true},
    {"yarn", /*factor=*/true, false, /*original_max=*/true, /*yarn_ramp=*/true,
     /*attention_factor=*/true},
    {"longrope", false, false, /*original_max=*/true, false, /*attention_factor=*/true,
     /*short_long=*/true},
};

// The row of `name`, or nullptr.
inline const RopeType* FindRopeType(absl::string_view name) {
  for (const RopeType& t : kRopeTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

// "default, linear, ..." for error messages.
inline std::string RopeTypeNames() {
  return absl::StrJoin(kRopeTypes, ", ",
                       [](std::string* out, const RopeType& t) { out->append(t.name); });
}

inline absl::Status FieldError(absl::string_view key, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("model_config.", key, ": ", problem));
}

}  // namespace autoaccel::model_spec_internal

#endif  // AUTOACCEL_SPEC_MODEL_SPEC_INTERNAL_H_

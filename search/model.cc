#include "search/model.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace autoaccel {
namespace {

absl::Status Field(const nlohmann::json& config, const char* key, int* out, bool required) {
  auto it = config.find(key);
  if (it == config.end()) {
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("model_config.", key, ": missing"));
  }
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (1 << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_config.", key, ": expected a positive integer, got ", it->dump()));
  }
  *out = it->get<int>();
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& KnownModelFamilies() {
  static const auto* families = new std::vector<std::string>{"gpt2"};
  return *families;
}

int64_t ModelSpec::ParameterCount() const {
  const int64_t d = n_embd, f = n_inner, L = n_layer;
  const int64_t per_layer = 2 * d                // ln_1
                            + d * 3 * d + 3 * d  // c_attn
                            + d * d + d          // attn c_proj
                            + 2 * d              // ln_2
                            + d * f + f          // mlp c_fc
                            + f * d + d;         // mlp c_proj
  return int64_t{vocab_size} * d + int64_t{n_positions} * d + L * per_layer + 2 * d;
}

double ModelSpec::TrainingFlopsPerToken(int seq_len) const {
  const double d = n_embd, f = n_inner, L = n_layer;
  const double matmul_params = L * (4 * d * d + 2 * d * f) + double(vocab_size) * d;
  return 6.0 * matmul_params + 6.0 * L * d * seq_len;
}

nlohmann::json ModelSpec::ToConfigJson() const {
  return nlohmann::json{{"model_type", family},     {"n_layer", n_layer},
                        {"n_embd", n_embd},         {"n_head", n_head},
                        {"vocab_size", vocab_size}, {"n_positions", n_positions},
                        {"n_inner", n_inner},       {"layer_norm_epsilon", layer_norm_epsilon}};
}

absl::StatusOr<ModelSpec> ModelSpecFromJson(absl::string_view family,
                                            const nlohmann::json& config) {
  const auto& known = KnownModelFamilies();
  if (std::find(known.begin(), known.end(), family) == known.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: unknown family '", family, "' (allowed: ", absl::StrJoin(known, ", "), ")"));
  }
  if (!config.is_object()) {
    return absl::InvalidArgumentError("model_config: expected a JSON object");
  }
  ModelSpec m;
  m.family = std::string(family);
  RETURN_IF_ERROR(Field(config, "n_layer", &m.n_layer, true));
  RETURN_IF_ERROR(Field(config, "n_embd", &m.n_embd, true));
  RETURN_IF_ERROR(Field(config, "n_head", &m.n_head, true));
  RETURN_IF_ERROR(Field(config, "vocab_size", &m.vocab_size, true));
  RETURN_IF_ERROR(Field(config, "n_positions", &m.n_positions, true));
  m.n_inner = 4 * m.n_embd;
  auto inner = config.find("n_inner");
  if (inner != config.end() && !inner->is_null()) {
    RETURN_IF_ERROR(Field(config, "n_inner", &m.n_inner, true));
  }
  auto eps = config.find("layer_norm_epsilon");
  if (eps != config.end()) {
    if (!eps->is_number() || eps->get<double>() <= 0) {
      return absl::InvalidArgumentError(
          "model_config.layer_norm_epsilon: expected a positive number");
    }
    m.layer_norm_epsilon = eps->get<double>();
  }
  if (m.n_embd % m.n_head != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model_config.n_head: n_embd (", m.n_embd,
                                                   ") must be divisible by n_head (", m.n_head,
                                                   ")"));
  }
  return m;
}

absl::StatusOr<ModelSpec> ParseModelConfig(absl::string_view family,
                                           absl::string_view config_json) {
  nlohmann::json config = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) {
    return absl::InvalidArgumentError("model_config: not valid JSON");
  }
  return ModelSpecFromJson(family, config);
}

}  // namespace autoaccel

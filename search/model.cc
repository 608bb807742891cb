#include "search/model.h"

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "search/input_spec.h"

namespace autoaccel {
namespace {

constexpr std::pair<ModelFamily, absl::string_view> kFamilies[] = {
    {ModelFamily::kGpt2, "gpt2"},
    {ModelFamily::kLlama, "llama"},
    {ModelFamily::kBert, "bert"},
    {ModelFamily::kMixtral, "mixtral"},
    {ModelFamily::kTorchScript, "torchscript"},
};

// The config keys of the fields every family has (see the table in model.h).
struct CommonKeys {
  const char* n_layer;
  const char* n_embd;
  const char* n_head;
  const char* n_positions;
  const char* n_inner;
  const char* layer_norm_epsilon;
};

CommonKeys KeysOf(ModelFamily family) {
  switch (family) {
    case ModelFamily::kGpt2:
      return {"n_layer", "n_embd", "n_head", "n_positions", "n_inner", "layer_norm_epsilon"};
    case ModelFamily::kLlama:
    case ModelFamily::kMixtral:
      return {"num_hidden_layers",       "hidden_size",       "num_attention_heads",
              "max_position_embeddings", "intermediate_size", "rms_norm_eps"};
    case ModelFamily::kBert:
      return {"num_hidden_layers",       "hidden_size",       "num_attention_heads",
              "max_position_embeddings", "intermediate_size", "layer_norm_eps"};
    case ModelFamily::kTorchScript:
      break;
  }
  return {};
}

absl::Status FieldError(absl::string_view key, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("model_config.", key, ": ", problem));
}

// The value of `key`, or nullptr when it is absent or null.
const nlohmann::json* Find(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  return it == config.end() || it->is_null() ? nullptr : &*it;
}

// A positive integer. A missing key is an error when `required`, else leaves
// `*out` as it is. (A null value is "expected a positive integer" here:
// callers whose key means "default" when null check that first.)
absl::Status Int(const nlohmann::json& config, const char* key, int* out, bool required) {
  auto it = config.find(key);
  if (it == config.end()) {
    if (!required) return absl::OkStatus();
    return FieldError(key, "missing");
  }
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (1 << 30)) {
    return FieldError(key, absl::StrCat("expected a positive integer, got ", it->dump()));
  }
  *out = it->get<int>();
  return absl::OkStatus();
}

// Optional positive number.
absl::Status Positive(const nlohmann::json& config, const char* key, double* out) {
  const nlohmann::json* v = Find(config, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_number() || !(v->get<double>() > 0)) {
    return FieldError(key, absl::StrCat("expected a positive number, got ", v->dump()));
  }
  *out = v->get<double>();
  return absl::OkStatus();
}

// Optional boolean.
absl::Status Bool(const nlohmann::json& config, const char* key, bool* out) {
  const nlohmann::json* v = Find(config, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_boolean())
    return FieldError(key, absl::StrCat("expected true or false, got ", v->dump()));
  *out = v->get<bool>();
  return absl::OkStatus();
}

// An optional string key that, when present, must be one of `allowed`: the
// engine implements only those.
absl::Status OneOf(const nlohmann::json& config, const char* key, absl::string_view family,
                   std::initializer_list<const char*> allowed) {
  const nlohmann::json* v = Find(config, key);
  if (v == nullptr) return absl::OkStatus();
  if (v->is_string()) {
    for (const char* a : allowed) {
      if (v->get<std::string>() == a) return absl::OkStatus();
    }
  }
  return FieldError(key, absl::StrCat(v->dump(), " is not supported for ", family,
                                      " (allowed: ", absl::StrJoin(allowed, ", "), ")"));
}

// An optional boolean key that must not be true.
absl::Status NotTrue(const nlohmann::json& config, const char* key, absl::string_view family) {
  bool value = false;
  RETURN_IF_ERROR(Bool(config, key, &value));
  if (value) return FieldError(key, absl::StrCat("true is not supported for ", family));
  return absl::OkStatus();
}

// Rotary settings: rope_theta at the top level (transformers 4) or inside
// rope_parameters (transformers 5); only the default rotary type.
absl::Status ReadRope(const nlohmann::json& config, ModelSpec* m) {
  RETURN_IF_ERROR(Positive(config, "rope_theta", &m->rope_theta));
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const nlohmann::json* rope = Find(config, key);
    if (rope == nullptr) continue;
    if (!rope->is_object()) return FieldError(key, "expected an object");
    for (const char* type_key : {"rope_type", "type"}) {
      const nlohmann::json* type = Find(*rope, type_key);
      if (type != nullptr && (!type->is_string() || type->get<std::string>() != "default")) {
        return FieldError(absl::StrCat(key, ".", type_key),
                          absl::StrCat(type->dump(), " is not supported (allowed: default)"));
      }
    }
    const nlohmann::json* theta = Find(*rope, "rope_theta");
    if (theta != nullptr) {
      if (!theta->is_number() || !(theta->get<double>() > 0)) {
        return FieldError(absl::StrCat(key, ".rope_theta"), "expected a positive number");
      }
      m->rope_theta = theta->get<double>();
    }
  }
  return absl::OkStatus();
}

absl::Status ReadGpt2(const nlohmann::json& config, ModelSpec* m) {
  m->n_inner = 4 * m->n_embd;
  if (Find(config, "n_inner") != nullptr)
    RETURN_IF_ERROR(Int(config, "n_inner", &m->n_inner, true));
  RETURN_IF_ERROR(Positive(config, "layer_norm_epsilon", &m->layer_norm_epsilon));
  // gelu_new and gelu_pytorch_tanh are the same function (tanh approximation).
  RETURN_IF_ERROR(OneOf(config, "activation_function", "gpt2", {"gelu_new", "gelu_pytorch_tanh"}));
  bool tied = true;
  RETURN_IF_ERROR(Bool(config, "tie_word_embeddings", &tied));
  if (!tied) return FieldError("tie_word_embeddings", "false is not supported for gpt2");
  m->n_kv_head = m->n_head;
  return absl::OkStatus();
}

// llama and mixtral.
absl::Status ReadLlama(const nlohmann::json& config, ModelFamily family, ModelSpec* m) {
  const bool mixtral = family == ModelFamily::kMixtral;
  const absl::string_view name = mixtral ? "mixtral" : "llama";
  // transformers' defaults (LlamaConfig, MixtralConfig).
  m->layer_norm_epsilon = mixtral ? 1e-5 : 1e-6;
  m->rope_theta = mixtral ? 1e6 : 1e4;
  m->tie_word_embeddings = false;
  RETURN_IF_ERROR(Int(config, "intermediate_size", &m->n_inner, true));
  // Absent: MixtralConfig's default is 8 key/value heads; null or a Llama
  // config without it: one per attention head.
  m->n_kv_head = m->n_head;
  if (config.contains("num_key_value_heads")) {
    if (Find(config, "num_key_value_heads") != nullptr) {
      RETURN_IF_ERROR(Int(config, "num_key_value_heads", &m->n_kv_head, true));
    }
  } else if (mixtral) {
    m->n_kv_head = 8;
  }
  RETURN_IF_ERROR(Positive(config, "rms_norm_eps", &m->layer_norm_epsilon));
  RETURN_IF_ERROR(ReadRope(config, m));
  RETURN_IF_ERROR(Bool(config, "tie_word_embeddings", &m->tie_word_embeddings));
  if (const nlohmann::json* head_dim = Find(config, "head_dim"); head_dim != nullptr) {
    if (!head_dim->is_number_integer() || m->n_embd % m->n_head != 0 ||
        head_dim->get<int64_t>() != m->n_embd / m->n_head) {
      return FieldError("head_dim", absl::StrCat(head_dim->dump(),
                                                 " is not supported: the head size must be "
                                                 "hidden_size / num_attention_heads"));
    }
  }
  RETURN_IF_ERROR(OneOf(config, "hidden_act", name, {"silu"}));
  RETURN_IF_ERROR(NotTrue(config, "attention_bias", name));
  RETURN_IF_ERROR(NotTrue(config, "mlp_bias", name));
  if (Find(config, "sliding_window") != nullptr) {
    return FieldError("sliding_window",
                      "sliding-window attention is not supported (set it to null to train with "
                      "full causal attention)");
  }
  if (mixtral) {
    RETURN_IF_ERROR(Int(config, "num_local_experts", &m->num_local_experts, true));
    RETURN_IF_ERROR(Int(config, "num_experts_per_tok", &m->num_experts_per_tok, true));
  }
  return absl::OkStatus();
}

absl::Status ReadBert(const nlohmann::json& config, ModelSpec* m) {
  m->layer_norm_epsilon = 1e-12;  // BertConfig's defaults
  m->type_vocab_size = 2;
  m->n_kv_head = m->n_head;
  RETURN_IF_ERROR(Int(config, "intermediate_size", &m->n_inner, true));
  RETURN_IF_ERROR(Int(config, "type_vocab_size", &m->type_vocab_size, false));
  RETURN_IF_ERROR(Positive(config, "layer_norm_eps", &m->layer_norm_epsilon));
  RETURN_IF_ERROR(OneOf(config, "hidden_act", "bert", {"gelu"}));
  RETURN_IF_ERROR(OneOf(config, "position_embedding_type", "bert", {"absolute"}));
  RETURN_IF_ERROR(NotTrue(config, "is_decoder", "bert"));
  bool tied = true;
  RETURN_IF_ERROR(Bool(config, "tie_word_embeddings", &tied));
  if (!tied) return FieldError("tie_word_embeddings", "false is not supported for bert");
  return absl::OkStatus();
}

// torchscript: the config is what ToConfigJson() writes.
absl::Status ReadTorchScript(const nlohmann::json& config, ModelSpec* m) {
  const nlohmann::json* spec = Find(config, "input_spec");
  if (spec == nullptr || !spec->is_string()) {
    return absl::InvalidArgumentError("input_spec: missing (--input-spec)");
  }
  ASSIGN_OR_RETURN(const InputSpec parsed, ParseInputSpec(spec->get<std::string>()));
  m->input_spec = InputSpecToText(parsed);
  if (const nlohmann::json* d = Find(config, "script_digest"); d != nullptr && d->is_string()) {
    m->script_digest = d->get<std::string>();
  }
  if (const nlohmann::json* n = Find(config, "script_bytes"); n != nullptr) {
    if (!n->is_number_integer()) return FieldError("script_bytes", "expected an integer");
    m->script_bytes = n->get<int64_t>();
  }
  m->n_positions = ModelSpec::kTorchScriptMaxSeqLen;
  return Int(config, "max_seq_len", &m->n_positions, /*required=*/false);
}

absl::Status ValidateTorchScript(const ModelSpec& m) {
  RETURN_IF_ERROR(ParseInputSpec(m.input_spec).status());
  if (m.script_digest.empty() || m.script_bytes <= 0) {
    return absl::InvalidArgumentError("model_file: missing or empty (--model-file FILE.pt)");
  }
  if (m.n_positions <= 0) {
    return FieldError("max_seq_len",
                      absl::StrCat("expected a positive integer, got ", m.n_positions));
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t Fnv1a64(absl::string_view bytes, uint64_t hash) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string ContentDigest(absl::string_view bytes) {
  return absl::StrFormat("fnv1a64:%016x", Fnv1a64(bytes));
}

absl::string_view ModelFamilyName(ModelFamily family) {
  return EnumName(kFamilies, family, "unknown");
}

absl::StatusOr<ModelFamily> ParseModelFamily(absl::string_view name) {
  if (std::optional<ModelFamily> f = EnumFromName(kFamilies, name)) return *f;
  return absl::InvalidArgumentError(
      absl::StrCat("model: unknown family '", name, "' (allowed: ", EnumNameList(kFamilies), ")"));
}

const std::vector<std::string>& KnownModelFamilies() {
  static const auto* families = [] {
    auto* v = new std::vector<std::string>;
    for (const auto& [value, name] : kFamilies) v->emplace_back(name);
    return v;
  }();
  return *families;
}

absl::string_view ModelSpec::MaxPositionsKey() const {
  return family == "gpt2" ? "n_positions" : "max_position_embeddings";
}

absl::Status ModelSpec::Validate() const {
  ASSIGN_OR_RETURN(ModelFamily f, Family());
  if (f == ModelFamily::kTorchScript) return ValidateTorchScript(*this);
  const CommonKeys keys = KeysOf(f);
  for (const auto& [key, value] :
       std::initializer_list<std::pair<const char*, int>>{{keys.n_layer, n_layer},
                                                          {keys.n_embd, n_embd},
                                                          {keys.n_head, n_head},
                                                          {"vocab_size", vocab_size},
                                                          {keys.n_positions, n_positions},
                                                          {keys.n_inner, n_inner}}) {
    if (value <= 0) {
      return FieldError(key, absl::StrCat("expected a positive integer, got ", value));
    }
  }
  if (!(layer_norm_epsilon > 0)) {
    return FieldError(keys.layer_norm_epsilon, "expected a positive number");
  }
  if (n_embd % n_head != 0) {
    return FieldError(
        keys.n_head, absl::StrCat(keys.n_embd, " (", n_embd, ") must be divisible by ", keys.n_head,
                                  " (", n_head, ")"));
  }
  if (f == ModelFamily::kLlama || f == ModelFamily::kMixtral) {
    if (n_kv_head <= 0 || n_head % n_kv_head != 0) {
      return FieldError("num_key_value_heads", absl::StrCat("must divide num_attention_heads (",
                                                            n_head, "), got ", n_kv_head));
    }
    if ((n_embd / n_head) % 2 != 0) {
      return FieldError("num_attention_heads",
                        absl::StrCat("the head size hidden_size / num_attention_heads (",
                                     n_embd / n_head, ") must be even for rotary embeddings"));
    }
    if (!(rope_theta > 0)) return FieldError("rope_theta", "expected a positive number");
  }
  if (f == ModelFamily::kBert && type_vocab_size <= 0) {
    return FieldError("type_vocab_size",
                      absl::StrCat("expected a positive integer, got ", type_vocab_size));
  }
  if (f == ModelFamily::kMixtral) {
    if (num_local_experts <= 0) {
      return FieldError("num_local_experts",
                        absl::StrCat("expected a positive integer, got ", num_local_experts));
    }
    if (num_experts_per_tok <= 0 || num_experts_per_tok > num_local_experts) {
      return FieldError("num_experts_per_tok",
                        absl::StrCat("must be in [1, num_local_experts = ", num_local_experts,
                                     "], got ", num_experts_per_tok));
    }
  }
  return absl::OkStatus();
}

int64_t ModelSpec::ParameterCount() const {
  if (IsTorchScript()) return 0;
  const int64_t d = n_embd, f = n_inner, L = n_layer, V = vocab_size, P = n_positions;
  if (family == "llama" || family == "mixtral") {
    const int64_t kv_width = int64_t{n_kv_head} * (d / n_head);
    const int64_t attention = d * d + 2 * d * kv_width + d * d;  // q, k, v, o; no biases
    const int64_t mlp = family == "mixtral"
                            ? d * num_local_experts + int64_t{num_local_experts} * 3 * d * f
                            : 3 * d * f;                // gate, up, down
    const int64_t per_layer = attention + mlp + 2 * d;  // + two RMSNorm weights
    return V * d + L * per_layer + d + (tie_word_embeddings ? 0 : V * d);
  }
  if (family == "bert") {
    const int64_t embeddings = (V + P + type_vocab_size) * d + 2 * d;
    const int64_t per_layer = 4 * (d * d + d) + 2 * d  // q, k, v, output dense; LayerNorm
                              + d * f + f + f * d + d  // intermediate, output dense
                              + 2 * d;                 // LayerNorm
    const int64_t mlm_head = d * d + d + 2 * d + V;    // transform dense, LayerNorm, bias
    return embeddings + L * per_layer + mlm_head;
  }
  const int64_t per_layer = 2 * d                // ln_1
                            + d * 3 * d + 3 * d  // c_attn
                            + d * d + d          // attn c_proj
                            + 2 * d              // ln_2
                            + d * f + f          // mlp c_fc
                            + f * d + d;         // mlp c_proj
  return V * d + P * d + L * per_layer + 2 * d;
}

double ModelSpec::TrainingFlopsPerToken(int seq_len) const {
  if (IsTorchScript()) return 0;
  const double d = n_embd, f = n_inner, L = n_layer, V = vocab_size;
  double per_layer = 4 * d * d + 2 * d * f;  // gpt2, bert
  double outside_layers = V * d;             // LM head / MLM decoder
  if (family == "llama" || family == "mixtral") {
    const double kv_width = double(n_kv_head) * (d / n_head);
    const double attention = 2 * d * d + 2 * d * kv_width;
    per_layer =
        attention +
        (family == "mixtral" ? d * num_local_experts + num_experts_per_tok * 3 * d * f : 3 * d * f);
  } else if (family == "bert") {
    outside_layers += d * d;  // MLM transform
  }
  const double attention_products = (IsCausal() ? 6.0 : 12.0) * L * d * seq_len;
  return 6.0 * (L * per_layer + outside_layers) + attention_products;
}

nlohmann::json ModelSpec::ToConfigJson() const {
  if (IsTorchScript()) {
    return nlohmann::json{{"model_type", family},
                          {"input_spec", input_spec},
                          {"script_digest", script_digest},
                          {"script_bytes", script_bytes},
                          {"max_seq_len", n_positions}};
  }
  if (family == "llama" || family == "mixtral") {
    nlohmann::json j{{"model_type", family},
                     {"hidden_size", n_embd},
                     {"intermediate_size", n_inner},
                     {"num_hidden_layers", n_layer},
                     {"num_attention_heads", n_head},
                     {"num_key_value_heads", n_kv_head},
                     {"vocab_size", vocab_size},
                     {"max_position_embeddings", n_positions},
                     {"rms_norm_eps", layer_norm_epsilon},
                     {"rope_theta", rope_theta},
                     {"tie_word_embeddings", tie_word_embeddings}};
    if (family == "mixtral") {
      j["num_local_experts"] = num_local_experts;
      j["num_experts_per_tok"] = num_experts_per_tok;
    }
    return j;
  }
  if (family == "bert") {
    return nlohmann::json{{"model_type", family},
                          {"hidden_size", n_embd},
                          {"num_hidden_layers", n_layer},
                          {"num_attention_heads", n_head},
                          {"intermediate_size", n_inner},
                          {"vocab_size", vocab_size},
                          {"max_position_embeddings", n_positions},
                          {"type_vocab_size", type_vocab_size},
                          {"layer_norm_eps", layer_norm_epsilon}};
  }
  return nlohmann::json{{"model_type", family},     {"n_layer", n_layer},
                        {"n_embd", n_embd},         {"n_head", n_head},
                        {"vocab_size", vocab_size}, {"n_positions", n_positions},
                        {"n_inner", n_inner},       {"layer_norm_epsilon", layer_norm_epsilon}};
}

absl::StatusOr<ModelSpec> ModelSpecFromJson(absl::string_view family,
                                            const nlohmann::json& config) {
  ASSIGN_OR_RETURN(ModelFamily f, ParseModelFamily(family));
  if (!config.is_object()) {
    return absl::InvalidArgumentError("model_config: expected a JSON object");
  }
  if (const nlohmann::json* type = Find(config, "model_type"); type != nullptr) {
    if (!type->is_string() || type->get<std::string>() != family) {
      return FieldError("model_type",
                        absl::StrCat(type->dump(), " does not match model '", family, "'"));
    }
  }
  ModelSpec m;
  m.family = std::string(family);
  if (f == ModelFamily::kTorchScript) {
    RETURN_IF_ERROR(ReadTorchScript(config, &m));
    RETURN_IF_ERROR(m.Validate());
    return m;
  }
  const CommonKeys keys = KeysOf(f);
  RETURN_IF_ERROR(Int(config, keys.n_layer, &m.n_layer, true));
  RETURN_IF_ERROR(Int(config, keys.n_embd, &m.n_embd, true));
  RETURN_IF_ERROR(Int(config, keys.n_head, &m.n_head, true));
  RETURN_IF_ERROR(Int(config, "vocab_size", &m.vocab_size, true));
  RETURN_IF_ERROR(Int(config, keys.n_positions, &m.n_positions, true));
  switch (f) {
    case ModelFamily::kGpt2:
      RETURN_IF_ERROR(ReadGpt2(config, &m));
      break;
    case ModelFamily::kLlama:
    case ModelFamily::kMixtral:
      RETURN_IF_ERROR(ReadLlama(config, f, &m));
      break;
    case ModelFamily::kBert:
      RETURN_IF_ERROR(ReadBert(config, &m));
      break;
    case ModelFamily::kTorchScript:
      break;
  }
  RETURN_IF_ERROR(m.Validate());
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

absl::StatusOr<std::pair<std::string, std::string>> ParseOverride(absl::string_view text) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("override: expected key=value, got '", text, "'"));
  }
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

absl::Status ApplyOverrides(const std::vector<std::pair<std::string, std::string>>& kv,
                            nlohmann::json* config) {
  if (config == nullptr || !config->is_object()) {
    return absl::InvalidArgumentError("model_config: expected a JSON object");
  }
  nlohmann::json result = *config;
  for (size_t i = 0; i < kv.size(); ++i) {
    const auto& [key, text] = kv[i];
    const std::string where = absl::StrCat("override[", i, "] (", key, "=", text, ")");
    const std::vector<std::string> path = absl::StrSplit(key, '.');
    nlohmann::json* node = &result;
    for (size_t p = 0; p < path.size(); ++p) {
      if (path[p].empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": empty key"));
      }
      if (!node->is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": '", absl::StrJoin(path.begin(), path.begin() + p, "."),
                         "' is not an object"));
      }
      nlohmann::json& child = (*node)[path[p]];  // inserts null when absent
      if (p + 1 < path.size() && child.is_null()) child = nlohmann::json::object();
      node = &child;
    }
    nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    *node = value.is_discarded() ? nlohmann::json(text) : std::move(value);
  }
  *config = std::move(result);
  return absl::OkStatus();
}

}  // namespace autoaccel

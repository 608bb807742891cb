// ModelSpec <-> Hugging Face config.json: ModelSpecFromJson,
// ParseModelConfig and ModelSpec::ToConfigJson (declared in model_spec.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "spec/input_spec.h"
#include "spec/model_families.h"
#include "spec/model_spec.h"
#include "spec/model_spec_internal.h"

namespace autoaccel {
namespace {

using model_spec_internal::FieldError;
using model_spec_internal::FindRopeType;
using model_spec_internal::kOtherArchitectures;
using model_spec_internal::RopeType;
using model_spec_internal::RopeTypeNames;
using model_spec_internal::SupportedFamilies;

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

// An optional positive integer whose null means 0 ("none"); absent leaves
// `*out` (the family's default).
absl::Status IntOrNull(const nlohmann::json& config, const char* key, int* out) {
  auto it = config.find(key);
  if (it == config.end()) return absl::OkStatus();
  if (it->is_null()) {
    *out = 0;
    return absl::OkStatus();
  }
  return Int(config, key, out, true);
}

// Optional positive number.
absl::Status Positive(const nlohmann::json& config, const char* key, double* out) {
  const nlohmann::json* v = Find(config, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>())) {
    return FieldError(key, absl::StrCat("expected a positive number, got ", v->dump()));
  }
  *out = v->get<double>();
  return absl::OkStatus();
}

// Optional number >= 0.
absl::Status NonNegative(const nlohmann::json& config, const char* key, double* out) {
  const nlohmann::json* v = Find(config, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_number() || !(v->get<double>() >= 0) || !std::isfinite(v->get<double>())) {
    return FieldError(key, absl::StrCat("expected a number >= 0, got ", v->dump()));
  }
  *out = v->get<double>();
  return absl::OkStatus();
}

// An optional positive number whose null means 0 ("none"); absent leaves
// `*out` (the family's default).
absl::Status PositiveOrNull(const nlohmann::json& config, const char* key, double* out) {
  auto it = config.find(key);
  if (it == config.end()) return absl::OkStatus();
  if (it->is_null()) {
    *out = 0;
    return absl::OkStatus();
  }
  return Positive(config, key, out);
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

// The config's own name for its architecture must be `family`'s: model_type
// and, when present, the transformers classes in "architectures".
absl::Status CheckConfigFamily(const nlohmann::json& config, const ModelFamilyInfo& family) {
  if (const nlohmann::json* type = Find(config, "model_type"); type != nullptr) {
    const std::string name = type->is_string() ? type->get<std::string>() : type->dump();
    const ModelFamilyInfo* named = FindModelFamily(name);
    if (named == nullptr) {
      return FieldError("model_type",
                        absl::StrCat("'", name, "' is not supported (supported: ",
                                     SupportedFamilies(), "); ", kOtherArchitectures));
    }
    if (named != &family) {
      return FieldError("model_type", absl::StrCat("'", name, "' does not match model '",
                                                   family.name, "' (use --model ", name, ")"));
    }
  }
  if (const nlohmann::json* classes = Find(config, "architectures");
      classes != nullptr && family.network != Network::kTorchScript) {
    if (!classes->is_array()) return FieldError("architectures", "expected a list of class names");
    for (const nlohmann::json& c : *classes) {
      if (!c.is_string()) return FieldError("architectures", "expected a list of class names");
      const std::string name = c.get<std::string>();
      const ModelFamilyInfo* of = FamilyOfArchitecture(name);
      if (of == nullptr) {
        return FieldError("architectures",
                          absl::StrCat("'", name, "' is not a model of a supported family (",
                                       SupportedFamilies(), "); ", kOtherArchitectures));
      }
      if (of != &family) {
        return FieldError("architectures",
                          absl::StrCat("'", name, "' is a ", of->name, " model, not ", family.name,
                                       " (use --model ", of->name, ")"));
      }
    }
  }
  if (family.network != Network::kDecoder) return absl::OkStatus();
  // A key that only other decoder families read, set to something that
  // would change their network: this is their config with model_type
  // changed, and building `family` from it would silently drop a feature.
  const std::vector<std::string> own = DecoderFeatureKeys(family);
  for (const auto& [key, value] : config.items()) {
    if (value.is_null() || (value.is_boolean() && !value.get<bool>())) continue;
    if (std::find(own.begin(), own.end(), key) != own.end()) continue;
    std::vector<std::string> readers;
    for (const ModelFamilyInfo& other : ModelFamilies()) {
      if (other.network != Network::kDecoder) continue;
      const std::vector<std::string> keys = DecoderFeatureKeys(other);
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) readers.push_back(other.name);
    }
    if (readers.empty()) continue;
    return FieldError(
        key,
        absl::StrCat(family.name, " configs have no such key; ", absl::StrJoin(readers, ", "),
                     " configs do, and ", family.name,
                     " would ignore it: use the config's own family (--model ", readers.front(),
                     ", model_type '", readers.front(), "'), or set it to null"));
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

// YaRN's default attention factor for a context stretched `scale` times
// (transformers' get_mscale).
double YarnMscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// The keys of rope type `type` (kRopeTypes) from `rope` (the config's
// rope_parameters or rope_scaling object, named `key`), with transformers
// 5.23's defaults for those left out; the attention factor resolved.
absl::Status ReadRopeType(const nlohmann::json& config, const nlohmann::json& rope, const char* key,
                          const RopeType& type, const ModelFamilyInfo& family, ModelSpec* m) {
  auto field = [&](const char* name) { return absl::StrCat(key, ".", name); };
  auto number = [&](const char* name, double* out, bool zero_ok = false) -> absl::Status {
    const nlohmann::json* v = Find(rope, name);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_number() || !std::isfinite(v->get<double>()) ||
        !(v->get<double>() > 0 || (zero_ok && v->get<double>() == 0))) {
      return FieldError(field(name),
                        absl::StrCat("expected a ", zero_ok ? "non-negative" : "positive",
                                     " number, got ", v->dump()));
    }
    *out = v->get<double>();
    return absl::OkStatus();
  };
  const ModelSpec defaults;
  m->rope_factor = defaults.rope_factor;
  m->rope_low_freq_factor = m->rope_high_freq_factor = 0;
  m->rope_original_max_positions = 0;
  m->rope_beta_fast = defaults.rope_beta_fast;
  m->rope_beta_slow = defaults.rope_beta_slow;
  m->rope_truncate = defaults.rope_truncate;
  m->rope_attention_factor = defaults.rope_attention_factor;
  m->rope_short_factor.clear();
  m->rope_long_factor.clear();
  m->rope_mscale_all_dim = 0;
  if (family.latent_attention) {
    // Latent attention scales its softmax by mscale_all_dim (yarn's key).
    double mscale_all_dim = 0;
    RETURN_IF_ERROR(number("mscale_all_dim", &mscale_all_dim, /*zero_ok=*/true));
    if (mscale_all_dim != 0 && !type.yarn_ramp) {
      return FieldError(field("mscale_all_dim"),
                        absl::StrCat("is only supported with rope_type yarn, not ", type.name));
    }
    m->rope_mscale_all_dim = mscale_all_dim;
  }
  if (type.original_max) {
    // As transformers: the pretraining length from the rope dict, else the
    // model's; phi3's top-level key (with its default) over both.
    m->rope_original_max_positions = m->n_positions;
    if (rope.contains("original_max_position_embeddings")) {
      // Int()'s check, the error naming the rope dict's key.
      int original = 0;
      const absl::Status read =
          Int(rope, "original_max_position_embeddings", &original, /*required=*/true);
      if (!read.ok()) {
        return FieldError(field("original_max_position_embeddings"),
                          absl::StrCat("expected a positive integer, got ",
                                       rope["original_max_position_embeddings"].dump()));
      }
      m->rope_original_max_positions = original;
    }
    if (family.phi3_rope_original_max > 0) {
      m->rope_original_max_positions = family.phi3_rope_original_max;
      RETURN_IF_ERROR(
          Int(config, "original_max_position_embeddings", &m->rope_original_max_positions, false));
    }
  }
  const double original = m->rope_original_max_positions;
  if (type.factor) {
    m->rope_factor = 0;
    RETURN_IF_ERROR(number("factor", &m->rope_factor));
    // yarn: a null factor is the context's stretch (the key itself is
    // required, as transformers requires it).
    if (type.yarn_ramp && rope.contains("factor") && rope["factor"].is_null()) {
      m->rope_factor = m->n_positions / original;
    }
    if (m->rope_factor <= 0) return FieldError(field("factor"), "missing");
  }
  if (type.llama3_bands) {
    RETURN_IF_ERROR(number("low_freq_factor", &m->rope_low_freq_factor));
    RETURN_IF_ERROR(number("high_freq_factor", &m->rope_high_freq_factor));
    if (m->rope_low_freq_factor <= 0) return FieldError(field("low_freq_factor"), "missing");
    if (m->rope_high_freq_factor <= 0) return FieldError(field("high_freq_factor"), "missing");
  }
  if (type.yarn_ramp) {
    RETURN_IF_ERROR(number("beta_fast", &m->rope_beta_fast));
    RETURN_IF_ERROR(number("beta_slow", &m->rope_beta_slow));
    if (auto it = rope.find("truncate"); it != rope.end()) {
      if (!it->is_boolean() && !it->is_null()) {
        return FieldError(field("truncate"),
                          absl::StrCat("expected true or false, got ", it->dump()));
      }
      m->rope_truncate = it->is_boolean() && it->get<bool>();  // null: false, as transformers
    }
  }
  if (type.short_long) {
    for (const auto& [name, out] : {std::pair{"short_factor", &m->rope_short_factor},
                                    std::pair{"long_factor", &m->rope_long_factor}}) {
      const nlohmann::json* list = Find(rope, name);
      if (list == nullptr) return FieldError(field(name), "missing");
      if (!list->is_array()) return FieldError(field(name), "expected a list of positive numbers");
      for (const nlohmann::json& v : *list) {
        if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) {
          return FieldError(field(name),
                            absl::StrCat("expected a list of positive numbers, got ", v.dump()));
        }
        out->push_back(v.get<double>());
      }
    }
  }
  if (type.attention_factor) {
    m->rope_attention_factor = 0;
    RETURN_IF_ERROR(number("attention_factor", &m->rope_attention_factor));
    if (m->rope_attention_factor == 0 && type.yarn_ramp) {
      // transformers' _compute_yarn_parameters: mscale / mscale_all_dim
      // when both are set (non-zero), else from the factor alone.
      double mscale = 0, mscale_all_dim = 0;
      RETURN_IF_ERROR(number("mscale", &mscale, /*zero_ok=*/true));
      RETURN_IF_ERROR(number("mscale_all_dim", &mscale_all_dim, /*zero_ok=*/true));
      m->rope_attention_factor =
          mscale != 0 && mscale_all_dim != 0
              ? YarnMscale(m->rope_factor, mscale) / YarnMscale(m->rope_factor, mscale_all_dim)
              : YarnMscale(m->rope_factor, 1);
    } else if (m->rope_attention_factor == 0) {
      // transformers' _compute_longrope_parameters: from factor, by default
      // the context's stretch.
      double factor = m->n_positions / original;
      RETURN_IF_ERROR(number("factor", &factor));
      m->rope_attention_factor =
          factor <= 1 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(original));
    }
  }
  return absl::OkStatus();
}

// Rotary settings: rope_theta (and phi3's partial_rotary_factor) at the top
// level (transformers 4) or inside rope_parameters (transformers 5; older
// configs: rope_scaling), with the scaling types the engine computes.
absl::Status ReadRope(const nlohmann::json& config, const ModelFamilyInfo& family, ModelSpec* m) {
  RETURN_IF_ERROR(Positive(config, "rope_theta", &m->rope_theta));
  RETURN_IF_ERROR(Positive(config, "partial_rotary_factor", &m->partial_rotary_factor));
  // A family whose config class fills in rope_parameters when the config
  // has none (GptOssConfig's YaRN) reads that instead.
  nlohmann::json default_rope;
  if (family.default_rope != nullptr && Find(config, "rope_scaling") == nullptr &&
      Find(config, "rope_parameters") == nullptr) {
    default_rope = nlohmann::json::parse(family.default_rope);
  }
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const nlohmann::json* rope = Find(config, key);
    if (rope == nullptr && key == std::string("rope_parameters") && !default_rope.is_null()) {
      rope = &default_rope;
    }
    if (rope == nullptr) continue;
    if (!rope->is_object()) return FieldError(key, "expected an object");
    for (const char* name : {"rope_theta", "partial_rotary_factor"}) {
      const nlohmann::json* v = Find(*rope, name);
      if (v == nullptr) continue;
      if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>())) {
        return FieldError(absl::StrCat(key, ".", name),
                          absl::StrCat("expected a positive number, got ", v->dump()));
      }
      *(name == std::string("rope_theta") ? &m->rope_theta : &m->partial_rotary_factor) =
          v->get<double>();
    }
    std::string type_name = "default";
    for (const char* type_key : {"type", "rope_type"}) {  // rope_type wins
      const nlohmann::json* t = Find(*rope, type_key);
      if (t == nullptr) continue;
      std::string name = t->is_string() ? t->get<std::string>() : "";
      // Phi3Config reads "yarn" as longrope (older Phi-3 configs' name).
      if (family.phi3_rope_original_max > 0 && name == "yarn") name = "longrope";
      if (FindRopeType(name) == nullptr) {
        return FieldError(
            absl::StrCat(key, ".", type_key),
            absl::StrCat(t->dump(), " is not supported (allowed: ", RopeTypeNames(), ")"));
      }
      type_name = name;
    }
    m->rope_type = type_name;
    RETURN_IF_ERROR(ReadRopeType(config, *rope, key, *FindRopeType(type_name), family, m));
  }
  if (m->partial_rotary_factor != 1.0 && !family.partial_rotary) {
    return FieldError("partial_rotary_factor",
                      absl::StrCat("is not supported for ", family.name, " (allowed: 1)"));
  }
  return absl::OkStatus();
}

// The layer types of a decoder with sliding-window attention, normalized:
// sliding_window 0 when no layer slides, layer_types empty when all do.
absl::Status ReadSlidingWindow(const nlohmann::json& config, const ModelFamilyInfo& family,
                               ModelSpec* m) {
  m->sliding_window = family.sliding_window_default;
  m->layer_types.clear();
  switch (family.sliding) {
    case SlidingLayers::kNone:
      m->sliding_window = 0;
      return absl::OkStatus();
    case SlidingLayers::kAll:
      return IntOrNull(config, "sliding_window", &m->sliding_window);
    case SlidingLayers::kUseSlidingWindow: {
      RETURN_IF_ERROR(IntOrNull(config, "sliding_window", &m->sliding_window));
      bool use = false;
      RETURN_IF_ERROR(Bool(config, "use_sliding_window", &use));
      if (!use) m->sliding_window = 0;  // as transformers: the window needs use_sliding_window
      return absl::OkStatus();
    }
    case SlidingLayers::kQwen:
    case SlidingLayers::kLayerTypes:
      break;
  }
  RETURN_IF_ERROR(IntOrNull(config, "sliding_window", &m->sliding_window));
  std::vector<std::string> types;
  if (const nlohmann::json* given = Find(config, "layer_types"); given != nullptr) {
    if (!given->is_array() || given->size() != static_cast<size_t>(m->n_layer)) {
      return FieldError("layer_types", absl::StrCat("expected a list of num_hidden_layers (",
                                                    m->n_layer, ") entries"));
    }
    for (const nlohmann::json& t : *given) {
      if (!t.is_string() || (t.get<std::string>() != "full_attention" &&
                             t.get<std::string>() != "sliding_attention")) {
        return FieldError("layer_types", absl::StrCat(t.dump(),
                                                      " is not supported (allowed: full_attention, "
                                                      "sliding_attention)"));
      }
      types.push_back(t.get<std::string>());
    }
  }
  if (family.sliding == SlidingLayers::kQwen) {
    bool use = false;
    RETURN_IF_ERROR(Bool(config, "use_sliding_window", &use));
    if (!use) m->sliding_window = 0;  // as transformers: the window needs use_sliding_window
    int first_sliding = 28;           // max_window_layers
    RETURN_IF_ERROR(Int(config, "max_window_layers", &first_sliding, false));
    if (types.empty()) {
      for (int i = 0; i < m->n_layer; ++i) {
        types.push_back(m->sliding_window > 0 && i >= first_sliding ? "sliding_attention"
                                                                    : "full_attention");
      }
    }
  } else if (types.empty()) {  // gemma2: sliding, full, sliding, ...
    for (int i = 0; i < m->n_layer; ++i) {
      types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
    }
  }
  const auto sliding = std::count(types.begin(), types.end(), "sliding_attention");
  if (sliding > 0 && m->sliding_window == 0) {
    return FieldError("layer_types",
                      family.sliding == SlidingLayers::kQwen
                          ? "sliding_attention layers need use_sliding_window true and a "
                            "sliding_window"
                          : "sliding_attention layers need a sliding_window");
  }
  if (sliding == 0) {
    m->sliding_window = 0;
  } else if (sliding < m->n_layer) {
    m->layer_types = std::move(types);
  }
  return absl::OkStatus();
}

// A non-negative integer; absent leaves `*out`.
absl::Status NonNegativeInt(const nlohmann::json& config, const char* key, int* out) {
  auto it = config.find(key);
  if (it == config.end()) return absl::OkStatus();
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > (1 << 30)) {
    return FieldError(key, absl::StrCat("expected a non-negative integer, got ", it->dump()));
  }
  *out = it->get<int>();
  return absl::OkStatus();
}

// The mixture of experts of a family whose row has experts, with
// transformers' defaults for the keys that change its behaviour (the sizes
// are required).
absl::Status ReadExperts(const nlohmann::json& config, const ModelFamilyInfo& family,
                         ModelSpec* m) {
  // The family's key, or num_local_experts, which transformers' attribute_map
  // aliases to it (Qwen3MoeConfig writes that one).
  const std::string key = family.experts_key;
  const bool own = config.contains(key), alias = config.contains("num_local_experts");
  RETURN_IF_ERROR(
      Int(config, own || !alias ? key.c_str() : "num_local_experts", &m->num_local_experts, true));
  if (own && alias && key != "num_local_experts") {
    int aliased = 0;
    RETURN_IF_ERROR(Int(config, "num_local_experts", &aliased, true));
    if (aliased != m->num_local_experts) {
      return FieldError(
          "num_local_experts",
          absl::StrCat("must equal ", key, " (", m->num_local_experts, "), got ", aliased));
    }
  }
  RETURN_IF_ERROR(Int(config, "num_experts_per_tok", &m->num_experts_per_tok, true));
  // With output_router_logits true transformers adds router_aux_loss_coef
  // times its load-balancing loss to the loss (families whose row has
  // router_aux_loss; deepseek_v3's only returns the logits). A coefficient
  // of 0 adds nothing.
  bool router_loss = false;
  RETURN_IF_ERROR(Bool(config, "output_router_logits", &router_loss));
  m->router_aux_loss_coef = 0;
  if (router_loss && family.router_aux_loss) {
    m->router_aux_loss_coef = family.router_aux_loss_default;
    RETURN_IF_ERROR(NonNegative(config, "router_aux_loss_coef", &m->router_aux_loss_coef));
  }
  if (family.moe_width) {
    RETURN_IF_ERROR(Int(config, "moe_intermediate_size", &m->moe_intermediate_size, true));
  }
  if (family.norm_topk_key) {
    m->norm_topk_prob = family.norm_topk_default;
    RETURN_IF_ERROR(Bool(config, "norm_topk_prob", &m->norm_topk_prob));
  }
  m->dense_mlp_layers.clear();
  switch (family.dense_layers) {
    case DenseMlpLayers::kNone:
      break;
    case DenseMlpLayers::kQwenSparseStep: {
      int step = 1;
      RETURN_IF_ERROR(Int(config, "decoder_sparse_step", &step, false));
      std::vector<bool> dense(m->n_layer, false);
      if (const nlohmann::json* only = Find(config, "mlp_only_layers"); only != nullptr) {
        if (!only->is_array()) return FieldError("mlp_only_layers", "expected a list of layers");
        for (const nlohmann::json& layer : *only) {
          if (!layer.is_number_integer() || layer.get<int64_t>() < 0 ||
              layer.get<int64_t>() >= m->n_layer) {
            return FieldError("mlp_only_layers",
                              absl::StrCat("expected layers in [0, num_hidden_layers = ",
                                           m->n_layer, "), got ", layer.dump()));
          }
          dense[layer.get<int>()] = true;
        }
      }
      for (int layer = 0; layer < m->n_layer; ++layer) {
        if (dense[layer] || (layer + 1) % step != 0) m->dense_mlp_layers.push_back(layer);
      }
      break;
    }
    case DenseMlpLayers::kFirstK: {
      int first_dense = 3;  // DeepseekV3Config's default
      RETURN_IF_ERROR(NonNegativeInt(config, "first_k_dense_replace", &first_dense));
      for (int layer = 0; layer < std::min(first_dense, m->n_layer); ++layer) {
        m->dense_mlp_layers.push_back(layer);
      }
      break;
    }
  }
  if (family.router == MoeRouter::kGroupedSigmoid) {  // DeepseekV3Config's defaults
    m->n_group = 8;
    m->topk_group = 4;
    m->routed_scaling_factor = 2.5;
    RETURN_IF_ERROR(Int(config, "n_group", &m->n_group, false));
    RETURN_IF_ERROR(Int(config, "topk_group", &m->topk_group, false));
    RETURN_IF_ERROR(Positive(config, "routed_scaling_factor", &m->routed_scaling_factor));
  }
  if (family.clamped_swiglu) {
    m->swiglu_alpha = family.swiglu_alpha_default;
    m->swiglu_limit = family.swiglu_limit_default;
    RETURN_IF_ERROR(Positive(config, "swiglu_alpha", &m->swiglu_alpha));
    RETURN_IF_ERROR(Positive(config, "swiglu_limit", &m->swiglu_limit));
  }
  if (family.shared_experts) {
    m->n_shared_experts = 1;
    RETURN_IF_ERROR(Int(config, "n_shared_experts", &m->n_shared_experts, false));
  }
  return absl::OkStatus();
}

// Multi-head latent attention's sizes. head_dim is not read: transformers
// sets it to qk_rope_head_dim whatever the config says.
absl::Status ReadLatentAttention(const nlohmann::json& config, ModelSpec* m) {
  if (!config.contains("q_lora_rank")) return FieldError("q_lora_rank", "missing");
  RETURN_IF_ERROR(IntOrNull(config, "q_lora_rank", &m->q_lora_rank));
  RETURN_IF_ERROR(Int(config, "kv_lora_rank", &m->kv_lora_rank, true));
  RETURN_IF_ERROR(Int(config, "qk_nope_head_dim", &m->qk_nope_head_dim, true));
  RETURN_IF_ERROR(Int(config, "qk_rope_head_dim", &m->qk_rope_head_dim, true));
  RETURN_IF_ERROR(Int(config, "v_head_dim", &m->v_head_dim, true));
  m->rope_interleave = true;  // DeepseekV3Config's default
  RETURN_IF_ERROR(Bool(config, "rope_interleave", &m->rope_interleave));
  m->head_dim = 0;
  return absl::OkStatus();
}

// Every Llama-style decoder, from its family's row.
absl::Status ReadDecoder(const nlohmann::json& config, const ModelFamilyInfo& family,
                         ModelSpec* m) {
  m->layer_norm_epsilon = family.rms_norm_eps;
  m->rope_theta = family.rope_theta;
  m->tie_word_embeddings = family.tie_word_embeddings;
  RETURN_IF_ERROR(Int(config, "intermediate_size", &m->n_inner, true));
  // Absent: the config class's default (8 for MistralConfig, ...); null:
  // one per attention head.
  m->n_kv_head = family.kv_heads_default > 0 ? family.kv_heads_default : m->n_head;
  if (config.contains("num_key_value_heads")) {
    m->n_kv_head = m->n_head;
    if (Find(config, "num_key_value_heads") != nullptr) {
      RETURN_IF_ERROR(Int(config, "num_key_value_heads", &m->n_kv_head, true));
    }
  }
  m->head_dim = family.head_dim_default;
  RETURN_IF_ERROR(IntOrNull(config, "head_dim", &m->head_dim));
  RETURN_IF_ERROR(Positive(config, "rms_norm_eps", &m->layer_norm_epsilon));
  RETURN_IF_ERROR(ReadRope(config, family, m));
  RETURN_IF_ERROR(Bool(config, "tie_word_embeddings", &m->tie_word_embeddings));
  // gelu_new computes the tanh approximation as gelu_pytorch_tanh does;
  // Gemma's "gelu" means it too (GemmaConfig rewrites it).
  m->hidden_act = family.activation_default;
  RETURN_IF_ERROR(OneOf(config, family.activation_key, family.name,
                        {"silu", "gelu", "gelu_pytorch_tanh", "gelu_new"}));
  if (const nlohmann::json* act = Find(config, family.activation_key); act != nullptr) {
    m->hidden_act = act->get<std::string>();
  }
  if (m->hidden_act == "gelu_new" || (family.gemma_norm && m->hidden_act == "gelu")) {
    m->hidden_act = "gelu_pytorch_tanh";
  }
  if (family.attention_bias_key) {
    m->attention_bias = family.attention_bias_default;
    RETURN_IF_ERROR(Bool(config, "attention_bias", &m->attention_bias));
  }
  if (family.mlp_bias_key) RETURN_IF_ERROR(Bool(config, "mlp_bias", &m->mlp_bias));
  if (family.bidirectional_key) {
    RETURN_IF_ERROR(NotTrue(config, "use_bidirectional_attention", family.name));
  }
  RETURN_IF_ERROR(ReadSlidingWindow(config, family, m));
  if (family.soft_capping) {
    m->attn_logit_softcapping = family.attn_softcap_default;
    m->final_logit_softcapping = family.final_softcap_default;
    m->query_pre_attn_scalar = family.query_scalar_default;
    RETURN_IF_ERROR(PositiveOrNull(config, "attn_logit_softcapping", &m->attn_logit_softcapping));
    RETURN_IF_ERROR(PositiveOrNull(config, "final_logit_softcapping", &m->final_logit_softcapping));
    RETURN_IF_ERROR(Positive(config, "query_pre_attn_scalar", &m->query_pre_attn_scalar));
  }
  if (family.experts) RETURN_IF_ERROR(ReadExperts(config, family, m));
  if (family.latent_attention) RETURN_IF_ERROR(ReadLatentAttention(config, m));
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
  // "": a model nobody describes (a launcher job's without a model config,
  // server/launcher_job.h); requests for a torchscript module must give one.
  if (!spec->get<std::string>().empty()) {
    ASSIGN_OR_RETURN(const InputSpec parsed, ParseInputSpec(spec->get<std::string>()));
    m->input_spec = InputSpecToText(parsed);
  }
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

}  // namespace

nlohmann::json ModelSpec::ToConfigJson() const {
  if (IsTorchScript()) {
    return nlohmann::json{{"model_type", family},
                          {"input_spec", input_spec},
                          {"script_digest", script_digest},
                          {"script_bytes", script_bytes},
                          {"max_seq_len", n_positions}};
  }
  if (IsDecoder()) {
    const ModelFamilyInfo& info = Info();
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
    if (info.experts) {
      j[info.experts_key] = num_local_experts;
      j["num_experts_per_tok"] = num_experts_per_tok;
      if (info.moe_width) j["moe_intermediate_size"] = moe_intermediate_size;
      if (info.norm_topk_key) j["norm_topk_prob"] = norm_topk_prob;
      if (router_aux_loss_coef > 0) {
        j["output_router_logits"] = true;
        j["router_aux_loss_coef"] = router_aux_loss_coef;
      }
      switch (info.dense_layers) {
        case DenseMlpLayers::kNone:
          break;
        case DenseMlpLayers::kQwenSparseStep:  // decoder_sparse_step left at 1
          j["mlp_only_layers"] = dense_mlp_layers;
          break;
        case DenseMlpLayers::kFirstK:
          j["first_k_dense_replace"] = dense_mlp_layers.size();
          break;
      }
      if (info.router == MoeRouter::kGroupedSigmoid) {
        j["n_group"] = n_group;
        j["topk_group"] = topk_group;
        j["routed_scaling_factor"] = routed_scaling_factor;
      }
      if (info.shared_experts) j["n_shared_experts"] = n_shared_experts;
      if (info.clamped_swiglu) {
        j["swiglu_alpha"] = swiglu_alpha;
        j["swiglu_limit"] = swiglu_limit;
      }
    }
    if (info.latent_attention) {
      j["q_lora_rank"] = q_lora_rank > 0 ? nlohmann::json(q_lora_rank) : nlohmann::json();
      j["kv_lora_rank"] = kv_lora_rank;
      j["qk_nope_head_dim"] = qk_nope_head_dim;
      j["qk_rope_head_dim"] = qk_rope_head_dim;
      j["v_head_dim"] = v_head_dim;
      j["rope_interleave"] = rope_interleave;
    }
    // The features, where reading the config without the key would give
    // another value (the row's defaults).
    auto or_null = [](auto v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(); };
    const int derived_head = n_head > 0 && n_embd % n_head == 0 ? n_embd / n_head : 0;
    if (!info.latent_attention &&
        HeadDim() != (info.head_dim_default > 0 ? info.head_dim_default : derived_head)) {
      j["head_dim"] = HeadDim();
    }
    if (hidden_act != info.activation_default) j[info.activation_key] = hidden_act;
    if (attention_bias != info.attention_bias_default) j["attention_bias"] = attention_bias;
    if (mlp_bias) j["mlp_bias"] = true;
    if (const RopeType* t = FindRopeType(rope_type); t != nullptr && rope_type != "default") {
      // The type's keys (kRopeTypes), the attention factor resolved.
      nlohmann::json rope{{"rope_type", rope_type}};
      if (t->factor) rope["factor"] = rope_factor;
      if (t->llama3_bands) {
        rope["low_freq_factor"] = rope_low_freq_factor;
        rope["high_freq_factor"] = rope_high_freq_factor;
      }
      if (t->original_max) {
        rope["original_max_position_embeddings"] = rope_original_max_positions;
        // phi3 reads its top-level key, not the dict's.
        if (info.phi3_rope_original_max > 0) {
          j["original_max_position_embeddings"] = rope_original_max_positions;
        }
      }
      if (t->yarn_ramp) {
        rope["beta_fast"] = rope_beta_fast;
        rope["beta_slow"] = rope_beta_slow;
        rope["truncate"] = rope_truncate;
      }
      if (t->attention_factor) rope["attention_factor"] = rope_attention_factor;
      if (rope_mscale_all_dim != 0) rope["mscale_all_dim"] = rope_mscale_all_dim;
      if (t->short_long) {
        rope["short_factor"] = rope_short_factor;
        rope["long_factor"] = rope_long_factor;
      }
      j["rope_parameters"] = rope;
    } else if (info.default_rope != nullptr) {
      // Without it the family's own default rope would be read back.
      j["rope_parameters"] = nlohmann::json{{"rope_type", "default"}};
    }
    if (partial_rotary_factor != 1.0) j["partial_rotary_factor"] = partial_rotary_factor;
    std::vector<std::string> types = layer_types;
    if (sliding_window > 0 && types.empty()) types.assign(n_layer, "sliding_attention");
    switch (info.sliding) {
      case SlidingLayers::kNone:
        break;
      case SlidingLayers::kAll:
        if (sliding_window != info.sliding_window_default)
          j["sliding_window"] = or_null(sliding_window);
        break;
      case SlidingLayers::kUseSlidingWindow:
        if (sliding_window > 0) {
          j["use_sliding_window"] = true;
          j["sliding_window"] = sliding_window;
        }
        break;
      case SlidingLayers::kQwen:
        if (sliding_window > 0) {
          j["use_sliding_window"] = true;
          j["sliding_window"] = sliding_window;
          j["layer_types"] = types;
        }
        break;
      case SlidingLayers::kLayerTypes:
        j["sliding_window"] = or_null(sliding_window);
        if (sliding_window == 0) types.assign(n_layer, "full_attention");
        j["layer_types"] = types;
        break;
    }
    if (info.soft_capping) {
      if (attn_logit_softcapping != info.attn_softcap_default) {
        j["attn_logit_softcapping"] = or_null(attn_logit_softcapping);
      }
      if (final_logit_softcapping != info.final_softcap_default) {
        j["final_logit_softcapping"] = or_null(final_logit_softcapping);
      }
      if (query_pre_attn_scalar != info.query_scalar_default) {
        j["query_pre_attn_scalar"] = query_pre_attn_scalar;
      }
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
  ASSIGN_OR_RETURN(const ModelFamilyInfo* info, ParseModelFamily(family));
  if (!config.is_object()) {
    return absl::InvalidArgumentError("model_config: expected a JSON object");
  }
  RETURN_IF_ERROR(CheckConfigFamily(config, *info));
  ModelSpec m;
  m.family = std::string(family);
  if (info->network == Network::kTorchScript) {
    RETURN_IF_ERROR(ReadTorchScript(config, &m));
    RETURN_IF_ERROR(m.Validate());
    return m;
  }
  const auto keys = model_spec_internal::KeysOf(info->network);
  RETURN_IF_ERROR(Int(config, keys.n_layer, &m.n_layer, true));
  RETURN_IF_ERROR(Int(config, keys.n_embd, &m.n_embd, true));
  RETURN_IF_ERROR(Int(config, keys.n_head, &m.n_head, true));
  RETURN_IF_ERROR(Int(config, "vocab_size", &m.vocab_size, true));
  RETURN_IF_ERROR(Int(config, keys.n_positions, &m.n_positions, true));
  switch (info->network) {
    case Network::kGpt2:
      RETURN_IF_ERROR(ReadGpt2(config, &m));
      break;
    case Network::kDecoder:
      RETURN_IF_ERROR(ReadDecoder(config, *info, &m));
      // One spelling of the usual head size, so that equal models normalize
      // (and sign) alike whether or not their config spells head_dim out.
      if (m.head_dim > 0 && m.n_embd % m.n_head == 0 && m.head_dim == m.n_embd / m.n_head) {
        m.head_dim = 0;
      }
      break;
    case Network::kBert:
      RETURN_IF_ERROR(ReadBert(config, &m));
      break;
    case Network::kTorchScript:
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

}  // namespace autoaccel

#include "spec/model_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spec/input_spec.h"
#include "spec/model_spec_internal.h"

namespace autoaccel {
namespace {

using model_spec_internal::FieldError;
using model_spec_internal::FindRopeType;
using model_spec_internal::RopeType;
using model_spec_internal::RopeTypeNames;

absl::Status ValidateTorchScript(const ModelSpec& m) {
  // No inputs, file or digest: a model nobody describes, the model of a
  // launcher job without a config (server/launcher_job.h). The search
  // treats it as any torchscript model (no shape); the engine cannot run
  // it (it has no file), and is never sent one.
  if (m.input_spec.empty() && m.script_digest.empty() && m.script_bytes == 0 && m.n_positions > 0) {
    return absl::OkStatus();
  }
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

absl::StatusOr<const ModelFamilyInfo*> ParseModelFamily(absl::string_view name) {
  if (const ModelFamilyInfo* f = FindModelFamily(name)) return f;
  return absl::InvalidArgumentError(absl::StrCat(
      "model: unknown family '", name, "' (supported: ", model_spec_internal::SupportedFamilies(),
      "); ", model_spec_internal::kOtherArchitectures));
}

const std::vector<std::string>& KnownModelFamilies() {
  static const auto* families = [] {
    auto* v = new std::vector<std::string>;
    for (const ModelFamilyInfo& f : ModelFamilies()) v->emplace_back(f.name);
    return v;
  }();
  return *families;
}

const ModelFamilyInfo& ModelSpec::Info() const {
  const ModelFamilyInfo* f = FindModelFamily(family);
  if (f == nullptr) std::abort();  // REQUIRES: a known family
  return *f;
}

bool ModelSpec::IsDecoder() const {
  const ModelFamilyInfo* f = FindModelFamily(family);
  return f != nullptr && f->network == Network::kDecoder;
}

int ModelSpec::MaxSeqLen() const {
  return IsDecoder() && rope_type == "dynamic" ? kTorchScriptMaxSeqLen : n_positions;
}

double ModelSpec::RopeBase(int64_t seq_len) const {
  if (rope_type != "dynamic" || seq_len <= n_positions) return rope_theta;
  // transformers' _compute_dynamic_ntk_parameters, in fp32 as its forward
  // computes it (the sequence length is a tensor there).
  const double d = RotaryDim();
  const float grown = static_cast<float>(rope_factor) * static_cast<float>(seq_len) /
                          static_cast<float>(n_positions) -
                      static_cast<float>(rope_factor - 1);
  return static_cast<float>(rope_theta) * std::pow(grown, static_cast<float>(d / (d - 2)));
}

bool ModelSpec::SlidingLayer(int layer) const {
  if (sliding_window <= 0) return false;
  if (layer_types.empty()) return true;
  return layer >= 0 && layer < static_cast<int>(layer_types.size()) &&
         layer_types[layer] == "sliding_attention";
}

bool ModelSpec::SdpaComputes() const {
  const ModelFamilyInfo* f = FindModelFamily(family);
  return attn_logit_softcapping <= 0 && (f == nullptr || !f->attention_sinks);
}

absl::string_view ModelSpec::MaxPositionsKey() const {
  return family == "gpt2" ? "n_positions" : "max_position_embeddings";
}

namespace {

// The rope type's keys (kRopeTypes), named as transformers 5 spells them.
absl::Status ValidateRope(const ModelSpec& m, const ModelFamilyInfo& info) {
  const RopeType* type = FindRopeType(m.rope_type);
  if (type == nullptr) {
    return FieldError(
        "rope_parameters.rope_type",
        absl::StrCat("'", m.rope_type, "' is not supported (allowed: ", RopeTypeNames(), ")"));
  }
  if (info.phi3_rope_original_max > 0 && m.rope_type != "default" && m.rope_type != "longrope") {
    return FieldError("rope_parameters.rope_type",
                      absl::StrCat("'", m.rope_type, "' is not supported for ", m.family,
                                   " (allowed: default, longrope; transformers' ",
                                   info.architecture, "Config refuses the others)"));
  }
  auto positive = [](double v) { return v > 0 && std::isfinite(v); };
  if (type->factor && !positive(m.rope_factor)) {
    return FieldError("rope_parameters.factor", "expected a positive number");
  }
  const int rotary = m.RotaryDim();
  if (m.rope_type == "dynamic" && rotary <= 2) {
    return FieldError("rope_parameters.rope_type",
                      absl::StrCat("dynamic needs a rotary size above 2 (its base is raised to d / "
                                   "(d - 2)), got ",
                                   rotary));
  }
  if (type->llama3_bands &&
      (!(m.rope_low_freq_factor > 0) || !(m.rope_high_freq_factor > m.rope_low_freq_factor))) {
    return FieldError("rope_parameters.high_freq_factor",
                      absl::StrCat("must be greater than low_freq_factor (", m.rope_low_freq_factor,
                                   "), got ", m.rope_high_freq_factor));
  }
  if (type->original_max && m.rope_original_max_positions <= 0) {
    return FieldError("rope_parameters.original_max_position_embeddings",
                      "expected a positive integer");
  }
  if (type->yarn_ramp) {
    if (!positive(m.rope_beta_fast)) {
      return FieldError("rope_parameters.beta_fast", "expected a positive number");
    }
    if (!positive(m.rope_beta_slow)) {
      return FieldError("rope_parameters.beta_slow", "expected a positive number");
    }
  }
  if (type->attention_factor ? !positive(m.rope_attention_factor)
                             : m.rope_attention_factor != 1.0) {
    return FieldError("rope_parameters.attention_factor",
                      type->attention_factor ? "expected a positive number"
                                             : absl::StrCat("must be 1 for rope_type ", m.rope_type,
                                                            ", got ", m.rope_attention_factor));
  }
  if (type->short_long) {
    for (const auto& [key, factors] : {std::pair{"short_factor", &m.rope_short_factor},
                                       std::pair{"long_factor", &m.rope_long_factor}}) {
      const std::string field = absl::StrCat("rope_parameters.", key);
      if (factors->size() != static_cast<size_t>(rotary / 2)) {
        return FieldError(field,
                          absl::StrCat("expected one entry per rotary frequency (rotary "
                                       "size ",
                                       rotary, " / 2 = ", rotary / 2, "), got ", factors->size()));
      }
      for (double v : *factors) {
        if (!positive(v)) {
          return FieldError(field, absl::StrCat("expected positive numbers, got ", v));
        }
      }
    }
  } else if (!m.rope_short_factor.empty() || !m.rope_long_factor.empty()) {
    return FieldError("rope_parameters.short_factor",
                      absl::StrCat("is only read for rope_type longrope, not ", m.rope_type));
  }
  return absl::OkStatus();
}

// The mixture of experts of a family whose row has experts.
absl::Status ValidateExperts(const ModelSpec& m, const ModelFamilyInfo& f) {
  const char* experts_key = f.experts_key;
  if (m.hidden_act != "silu") {  // engine/moe.h's experts are SwiGLU
    return FieldError(f.activation_key, absl::StrCat("'", m.hidden_act, "' is not supported for ",
                                                     m.family, "'s experts (allowed: silu)"));
  }
  if (m.num_local_experts <= 0) {
    return FieldError(experts_key,
                      absl::StrCat("expected a positive integer, got ", m.num_local_experts));
  }
  if (m.num_experts_per_tok <= 0 || m.num_experts_per_tok > m.num_local_experts) {
    return FieldError("num_experts_per_tok",
                      absl::StrCat("must be in [1, ", experts_key, " = ", m.num_local_experts,
                                   "], got ", m.num_experts_per_tok));
  }
  if (m.moe_intermediate_size < 0 || (f.moe_width && m.moe_intermediate_size == 0)) {
    return FieldError("moe_intermediate_size",
                      absl::StrCat("expected a positive integer, got ", m.moe_intermediate_size));
  }
  for (size_t i = 0; i < m.dense_mlp_layers.size(); ++i) {
    const int layer = m.dense_mlp_layers[i];
    if (layer < 0 || layer >= m.n_layer || (i > 0 && layer <= m.dense_mlp_layers[i - 1])) {
      return FieldError(
          "mlp_only_layers",
          absl::StrCat("expected ascending distinct layers in [0, ", m.n_layer, "), got ", layer));
    }
    // deepseek_v3 says how many, not which: the first ones.
    if (f.dense_layers == DenseMlpLayers::kFirstK && layer != static_cast<int>(i)) {
      return FieldError("first_k_dense_replace",
                        absl::StrCat("the dense layers must be the first ones, got layer ", layer));
    }
  }
  if (f.router == MoeRouter::kGroupedSigmoid) {
    if (m.n_group <= 0 || m.num_local_experts % m.n_group != 0 ||
        m.num_local_experts / m.n_group < 2) {
      // Groups are ranked by their two best experts' scores.
      return FieldError("n_group",
                        absl::StrCat("must divide ", experts_key, " (", m.num_local_experts,
                                     ") into groups of 2 or more, got ", m.n_group));
    }
    if (m.topk_group <= 0 || m.topk_group > m.n_group) {
      return FieldError("topk_group", absl::StrCat("must be in [1, n_group = ", m.n_group,
                                                   "], got ", m.topk_group));
    }
    const int reachable = m.topk_group * (m.num_local_experts / m.n_group);
    if (m.num_experts_per_tok > reachable) {
      return FieldError("num_experts_per_tok",
                        absl::StrCat("must be at most the experts of topk_group groups (",
                                     reachable, "), got ", m.num_experts_per_tok));
    }
    if (!(m.routed_scaling_factor > 0) || !std::isfinite(m.routed_scaling_factor)) {
      return FieldError("routed_scaling_factor", "expected a positive number");
    }
  }
  if (f.clamped_swiglu) {
    for (const auto& [key, value] :
         {std::pair{"swiglu_alpha", m.swiglu_alpha}, std::pair{"swiglu_limit", m.swiglu_limit}}) {
      if (!(value > 0) || !std::isfinite(value)) {
        return FieldError(key, absl::StrCat("expected a positive number, got ", value));
      }
    }
  }
  if (f.shared_experts && m.n_shared_experts <= 0) {
    return FieldError("n_shared_experts",
                      absl::StrCat("expected a positive integer, got ", m.n_shared_experts));
  }
  return absl::OkStatus();
}

// Multi-head latent attention's sizes.
absl::Status ValidateLatentAttention(const ModelSpec& m) {
  if (m.q_lora_rank < 0) {
    return FieldError("q_lora_rank",
                      absl::StrCat("expected a positive integer or null, got ", m.q_lora_rank));
  }
  for (const auto& [key, value] :
       std::initializer_list<std::pair<const char*, int>>{{"kv_lora_rank", m.kv_lora_rank},
                                                          {"qk_nope_head_dim", m.qk_nope_head_dim},
                                                          {"qk_rope_head_dim", m.qk_rope_head_dim},
                                                          {"v_head_dim", m.v_head_dim}}) {
    if (value <= 0) {
      return FieldError(key, absl::StrCat("expected a positive integer, got ", value));
    }
  }
  if (m.n_kv_head != m.n_head) {
    // kv_b_proj expands the latent into every head's keys and values.
    return FieldError("num_key_value_heads",
                      absl::StrCat("must equal num_attention_heads (", m.n_head,
                                   ") for multi-head latent attention, got ", m.n_kv_head));
  }
  if (m.rope_mscale_all_dim < 0 || !std::isfinite(m.rope_mscale_all_dim) ||
      (m.rope_mscale_all_dim != 0 && m.rope_type != "yarn")) {
    return FieldError("rope_parameters.mscale_all_dim",
                      absl::StrCat("must be a non-negative number, read with rope_type yarn only, "
                                   "got ",
                                   m.rope_mscale_all_dim, " with ", m.rope_type));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ModelSpec::Validate() const {
  ASSIGN_OR_RETURN(const ModelFamilyInfo* f, Family());
  if (f->network == Network::kTorchScript) return ValidateTorchScript(*this);
  const auto keys = model_spec_internal::KeysOf(f->network);
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
  const bool decoder = f->network == Network::kDecoder;
  if (head_dim < 0 || (head_dim > 0 && !decoder)) {
    return FieldError("head_dim", absl::StrCat(head_dim, " is not supported for ", family));
  }
  if (head_dim == 0 && n_embd % n_head != 0 && !f->latent_attention) {
    return FieldError(
        keys.n_head, absl::StrCat(keys.n_embd, " (", n_embd, ") must be divisible by ", keys.n_head,
                                  " (", n_head, ")"));
  }
  if (f->network == Network::kBert && type_vocab_size <= 0) {
    return FieldError("type_vocab_size",
                      absl::StrCat("expected a positive integer, got ", type_vocab_size));
  }
  // Features the family's network does not have stay off.
  auto absent = [&](bool on, const char* key) {
    return on ? FieldError(key, absl::StrCat("is not supported for ", family)) : absl::OkStatus();
  };
  RETURN_IF_ERROR(absent(attention_bias && !f->attention_bias_key, "attention_bias"));
  RETURN_IF_ERROR(absent(mlp_bias && !f->mlp_bias_key, "mlp_bias"));
  RETURN_IF_ERROR(
      absent(sliding_window != 0 && f->sliding == SlidingLayers::kNone, "sliding_window"));
  RETURN_IF_ERROR(
      absent(!f->soft_capping && (attn_logit_softcapping != 0 || final_logit_softcapping != 0 ||
                                  query_pre_attn_scalar != 0),
             "attn_logit_softcapping"));
  RETURN_IF_ERROR(
      absent(partial_rotary_factor != 1.0 && !f->partial_rotary, "partial_rotary_factor"));
  RETURN_IF_ERROR(absent(!f->experts && (num_local_experts != 0 || num_experts_per_tok != 0),
                         "num_local_experts"));
  RETURN_IF_ERROR(absent(!f->moe_width && moe_intermediate_size != 0, "moe_intermediate_size"));
  RETURN_IF_ERROR(absent(f->dense_layers == DenseMlpLayers::kNone && !dense_mlp_layers.empty(),
                         "mlp_only_layers"));
  RETURN_IF_ERROR(absent(!f->norm_topk_key && !norm_topk_prob, "norm_topk_prob"));
  RETURN_IF_ERROR(absent(!f->router_aux_loss && router_aux_loss_coef != 0, "router_aux_loss_coef"));
  if (!(router_aux_loss_coef >= 0) || !std::isfinite(router_aux_loss_coef)) {
    return FieldError("router_aux_loss_coef",
                      absl::StrCat("expected a number >= 0, got ", router_aux_loss_coef));
  }
  RETURN_IF_ERROR(absent(f->router != MoeRouter::kGroupedSigmoid &&
                             (n_group != 0 || topk_group != 0 || routed_scaling_factor != 1.0),
                         "n_group"));
  RETURN_IF_ERROR(absent(!f->shared_experts && n_shared_experts != 0, "n_shared_experts"));
  RETURN_IF_ERROR(
      absent(!f->clamped_swiglu && (swiglu_alpha != 0 || swiglu_limit != 0), "swiglu_limit"));
  RETURN_IF_ERROR(absent(
      !f->latent_attention &&
          (q_lora_rank != 0 || kv_lora_rank != 0 || qk_nope_head_dim != 0 ||
           qk_rope_head_dim != 0 || v_head_dim != 0 || rope_interleave || rope_mscale_all_dim != 0),
      "kv_lora_rank"));
  if (!decoder) return absl::OkStatus();

  if (f->latent_attention) RETURN_IF_ERROR(ValidateLatentAttention(*this));
  if (n_kv_head <= 0 || n_head % n_kv_head != 0) {
    return FieldError("num_key_value_heads", absl::StrCat("must divide num_attention_heads (",
                                                          n_head, "), got ", n_kv_head));
  }
  if (hidden_act != "silu" && hidden_act != "gelu" && hidden_act != "gelu_pytorch_tanh") {
    return FieldError(f->activation_key, absl::StrCat("'", hidden_act,
                                                      "' is not supported (allowed: silu, gelu, "
                                                      "gelu_pytorch_tanh)"));
  }
  if (!(rope_theta > 0)) return FieldError("rope_theta", "expected a positive number");
  if (!(partial_rotary_factor > 0 && partial_rotary_factor <= 1)) {
    return FieldError("partial_rotary_factor", "expected a number in (0, 1]");
  }
  const int rotary = RotaryDim();
  if (rotary <= 0 || rotary % 2 != 0) {
    return FieldError(head_dim > 0 ? "head_dim" : "num_attention_heads",
                      absl::StrCat("the rotary size (head size ", HeadDim(),
                                   partial_rotary_factor != 1.0 ? " x partial_rotary_factor" : "",
                                   " = ", rotary, ") must be even for rotary embeddings"));
  }
  RETURN_IF_ERROR(ValidateRope(*this, *f));
  if (sliding_window < 0) return FieldError("sliding_window", "expected a positive integer");
  if (!layer_types.empty()) {
    if (layer_types.size() != static_cast<size_t>(n_layer)) {
      return FieldError("layer_types", absl::StrCat("expected num_hidden_layers (", n_layer,
                                                    ") entries, got ", layer_types.size()));
    }
    for (const std::string& t : layer_types) {
      if (t != "full_attention" && t != "sliding_attention") {
        return FieldError("layer_types",
                          absl::StrCat("'", t,
                                       "' is not supported (allowed: full_attention, "
                                       "sliding_attention)"));
      }
    }
  }
  if (attn_logit_softcapping < 0 || final_logit_softcapping < 0 || query_pre_attn_scalar < 0) {
    return FieldError("attn_logit_softcapping",
                      "soft-caps and query_pre_attn_scalar must not be "
                      "negative");
  }
  if (f->experts) RETURN_IF_ERROR(ValidateExperts(*this, *f));
  return absl::OkStatus();
}

bool ModelSpec::ExpertLayer(int layer) const {
  const ModelFamilyInfo* f = FindModelFamily(family);
  return f != nullptr && f->experts && layer >= 0 && layer < n_layer &&
         !std::binary_search(dense_mlp_layers.begin(), dense_mlp_layers.end(), layer);
}

namespace {

// One decoder layer's attention weights: all of them, or (`matmul_only`)
// those that take part in a matrix multiply (not norms, not biases).
int64_t DecoderAttentionParameters(const ModelSpec& m, bool matmul_only) {
  const ModelFamilyInfo& info = m.Info();
  const int64_t d = m.n_embd, heads = m.n_head;
  const int64_t bias = m.attention_bias && !matmul_only ? 1 : 0;
  const int64_t norm = matmul_only ? 0 : 1;
  if (info.latent_attention) {
    const int64_t qk = m.QkHeadDim(), v = m.v_head_dim, q_rank = m.q_lora_rank;
    const int64_t kv_rank = m.kv_lora_rank, rope = m.qk_rope_head_dim;
    // q_a_proj, q_a_layernorm, q_b_proj; or q_proj.
    int64_t n = q_rank > 0 ? d * q_rank + bias * q_rank + norm * q_rank + q_rank * heads * qk
                           : d * heads * qk;
    // kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj.
    n += (d + bias) * (kv_rank + rope) + norm * kv_rank +
         kv_rank * heads * (m.qk_nope_head_dim + v) + heads * v * d + bias * d;
    return n;
  }
  const int64_t head = m.HeadDim();
  const int64_t q_width = heads * head, kv_width = int64_t{m.n_kv_head} * head;
  int64_t n = d * q_width + 2 * d * kv_width + q_width * d;  // q, k, v, o
  if (matmul_only) return n;
  if (info.qkv_bias || m.attention_bias) n += q_width + 2 * kv_width;
  if (m.attention_bias) n += d;  // o
  if (info.qk_norm) n += 2 * head;
  if (info.attention_sinks) n += heads;
  return n;
}

// Layer `layer`'s MLP weights (`matmul_only`: those in a matrix multiply);
// of its experts only the num_experts_per_tok a token uses when `active`.
int64_t DecoderMlpParameters(const ModelSpec& m, int layer, bool matmul_only, bool active) {
  const int64_t d = m.n_embd;
  if (!m.ExpertLayer(layer)) {
    const int64_t f = m.n_inner;
    return 3 * d * f + (m.mlp_bias && !matmul_only ? 2 * f + d : 0);  // gate, up, down
  }
  const ModelFamilyInfo& info = m.Info();
  const int64_t experts = active ? m.num_experts_per_tok : m.num_local_experts;
  const int64_t expert = 3 * d * m.ExpertWidth();
  int64_t n = d * m.num_local_experts + experts * expert + int64_t{m.n_shared_experts} * expert;
  if (matmul_only) return n;
  // gpt_oss: the router's bias, each expert's gate/up and down biases.
  if (info.router == MoeRouter::kTopKSoftmax) n += m.num_local_experts;
  if (info.clamped_swiglu) n += experts * (2 * int64_t{m.ExpertWidth()} + d);
  return n;
}

// A decoder's parameters (`active`: a token's, see ActiveParameterCount).
int64_t DecoderParameters(const ModelSpec& m, bool active) {
  const int64_t d = m.n_embd, V = m.vocab_size;
  const int64_t norms = (m.Info().sandwich_norm ? 4 : 2) * d;
  const int64_t attention = DecoderAttentionParameters(m, /*matmul_only=*/false);
  int64_t n = V * d + d + (m.tie_word_embeddings ? 0 : V * d);
  for (int layer = 0; layer < m.n_layer; ++layer) {
    n += attention + norms + DecoderMlpParameters(m, layer, /*matmul_only=*/false, active);
  }
  return n;
}

}  // namespace

int64_t ModelSpec::ActiveParameterCount() const {
  return IsDecoder() ? DecoderParameters(*this, /*active=*/true) : ParameterCount();
}

int64_t ModelSpec::ParameterCount() const {
  if (IsTorchScript()) return 0;
  const int64_t d = n_embd, f = n_inner, L = n_layer, V = vocab_size, P = n_positions;
  if (IsDecoder()) return DecoderParameters(*this, /*active=*/false);
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

int64_t ModelSpec::ExpertParameterCount() const {
  if (!IsDecoder() || !Info().experts) return 0;
  int64_t n = 0;
  for (int layer = 0; layer < n_layer; ++layer) {
    if (!ExpertLayer(layer)) continue;
    n += int64_t{num_local_experts} * 3 * n_embd * ExpertWidth();
    if (Info().clamped_swiglu) n += int64_t{num_local_experts} * (2 * ExpertWidth() + n_embd);
  }
  return n;
}

double ModelSpec::AttendedKeys(int layer, int seq_len) const {
  const double S = seq_len;
  if (!IsCausal()) return S;
  if (SlidingLayer(layer) && sliding_window < seq_len) {
    const double W = sliding_window;
    return W - W * W / (2 * S);
  }
  return S / 2;
}

double ModelSpec::TrainingFlopsPerToken(int seq_len) const {
  if (IsTorchScript()) return 0;
  const double d = n_embd, f = n_inner, L = n_layer, V = vocab_size;
  double per_layer = 4 * d * d + 2 * d * f;  // gpt2, bert
  double outside_layers = V * d;             // LM head / MLM decoder
  double attention_widths = 2 * d;           // QK^T's and AV's: n_embd each
  double layers = L * per_layer;
  if (IsDecoder()) {
    attention_widths = double(n_head) * (QkHeadDim() + VHeadDim());
    const double attention = DecoderAttentionParameters(*this, /*matmul_only=*/true);
    layers = 0;
    for (int layer = 0; layer < n_layer; ++layer) {
      layers += attention + DecoderMlpParameters(*this, layer, /*matmul_only=*/true,
                                                 /*active=*/true);
    }
  } else if (family == "bert") {
    outside_layers += d * d;  // MLM transform
  }
  double attended = 0;
  for (int layer = 0; layer < n_layer; ++layer) attended += AttendedKeys(layer, seq_len);
  const double attention_products = 6.0 * attention_widths * attended;
  return 6.0 * (layers + outside_layers) + attention_products;
}

}  // namespace autoaccel

// The model families, as data: one row per family in kModelFamilies
// (model_families.cc). A row says which network the engine builds for the
// family, the Hugging Face class names it answers to, transformers' defaults
// for the keys a config.json may leave out, and which features the network
// has. The config reader (model_config.cc), the search space's rules
// (space.cc), the cost figures (ModelSpec, memory_estimate.cc, step_time.cc)
// and the engine's decoder (engine/llama.cc) read the row; none of them
// switches on a family's name.
//
// Adding a Llama-style family whose differences are features already listed
// here is one row. A feature the engine does not have yet is a field here,
// read in model_config.cc and built in engine/llama.cc.
#ifndef AUTOACCEL_SPEC_MODEL_FAMILIES_H_
#define AUTOACCEL_SPEC_MODEL_FAMILIES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace autoaccel {

// The networks the engine builds. Every family is one of them.
enum class Network {
  kGpt2,         // GPT-2: learned positions, LayerNorm, GELU MLP, tied LM head
  kBert,         // BERT encoder with its masked-LM head
  kDecoder,      // Llama-style decoder: RMSNorm, rotary positions, gated MLP,
                 // grouped-query attention, and the features of the row
  kTorchScript,  // the user's own module (spec/input_spec.h)
};

// Which layers of a decoder use sliding-window attention, and how the config
// says so.
enum class SlidingLayers {
  kNone,  // none; a non-null sliding_window is refused
  kAll,   // every layer when sliding_window is not null (mistral, mixtral, phi3)
  // use_sliding_window (default false) turns it on; layer_types, or else
  // layers from max_window_layers (default 28) on, are sliding (qwen2, qwen3)
  kQwen,
  // layer_types, by default alternating sliding (even layers) and full (gemma2)
  kLayerTypes,
  // use_sliding_window (default false) turns it on for every layer;
  // max_window_layers is read by nothing (qwen3_moe, as Qwen3MoeConfig)
  kUseSlidingWindow,
};

// How a mixture-of-experts decoder's router picks a token's experts and
// weighs them (engine/moe.h computes them).
enum class MoeRouter {
  // Softmax over every expert in fp32, the top num_experts_per_tok kept,
  // renormalised to sum to 1 when norm_topk_prob (mixtral, qwen3_moe).
  kSoftmax,
  // DeepSeek-V3's: sigmoid scores; experts chosen by score plus
  // e_score_correction_bias within the topk_group of n_group groups with the
  // highest two-best sums; the chosen scores renormalised when
  // norm_topk_prob, times routed_scaling_factor (deepseek_v3).
  kGroupedSigmoid,
  // GPT-OSS's: a linear layer with a bias ("router": weight and bias); the
  // top num_experts_per_tok of its logits, then a softmax over those k
  // alone (gpt_oss).
  kTopKSoftmax,
};

// Which layers of a mixture-of-experts decoder have a dense MLP (width
// intermediate_size) instead of experts.
enum class DenseMlpLayers {
  kNone,  // none (mixtral)
  // those in mlp_only_layers, and those whose index + 1 is not a multiple of
  // decoder_sparse_step (qwen3_moe)
  kQwenSparseStep,
  kFirstK,  // the first first_k_dense_replace layers (deepseek_v3)
};

struct ModelFamilyInfo {
  const char* name = "";  // model_type and --model
  Network network = Network::kDecoder;
  const char* architecture = "";  // transformers' class prefix: "Qwen2" (Qwen2ForCausalLM)

  // kDecoder: transformers' config-class defaults for absent keys.
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  int kv_heads_default = 0;  // num_key_value_heads absent; 0: one per attention head
  int head_dim_default = 0;  // head_dim absent; 0: hidden_size / num_attention_heads
  const char* activation_key = "hidden_act";
  const char* activation_default = "silu";

  // kDecoder features.
  bool qkv_bias = false;                // q, k, v projections always have biases (qwen2)
  bool attention_bias_key = false;      // reads attention_bias: biases on q, k, v and o
  bool attention_bias_default = false;  // attention_bias absent (gpt_oss: true)
  bool mlp_bias_key = false;            // reads mlp_bias: biases on gate, up and down
  bool qk_norm = false;                 // RMSNorm over each head's q and k (q_norm, k_norm)
  // Gemma's conventions: RMSNorm scales by (1 + weight) in fp32 (weights
  // initialised to 0); the token embedding is multiplied by sqrt(hidden_size);
  // "gelu" means the tanh approximation.
  bool gemma_norm = false;
  bool sandwich_norm = false;      // also pre/post feed-forward norms, post-attention norm
  bool fused_projections = false;  // qkv_proj [q; k; v] and gate_up_proj [gate; up] (phi3)
  // attn_logit_softcapping, final_logit_softcapping, query_pre_attn_scalar
  // (gemma2), with their defaults.
  bool soft_capping = false;
  double attn_softcap_default = 0, final_softcap_default = 0, query_scalar_default = 0;
  bool partial_rotary = false;  // partial_rotary_factor (phi3)
  // The rope_parameters of a config that has neither rope_parameters nor
  // rope_scaling (JSON; null: the default rope). GptOssConfig's YaRN.
  const char* default_rope = nullptr;
  // Attention sinks: a learned logit per head ("self_attn.sinks" [heads])
  // joins each query's scores as one more column of the softmax and is then
  // dropped, so a query's weights sum to less than 1 (gpt_oss).
  bool attention_sinks = false;
  // GPT-OSS's experts: biases on both projections, gate and up interleaved
  // in one [experts, hidden, 2 * width] weight (gate the even columns, up
  // the odd), down [experts, width, hidden], and the clamped SwiGLU
  // (up.clamp(-limit, limit) + 1) * g * sigmoid(alpha * g), g =
  // gate.clamp(max=limit); swiglu_alpha and swiglu_limit with these
  // defaults (gpt_oss).
  bool clamped_swiglu = false;
  double swiglu_alpha_default = 0, swiglu_limit_default = 0;
  // Phi3Config's rope rules, when > 0: rope types default and longrope only
  // ("yarn" is read as longrope, as transformers does), and longrope's
  // pretraining length is the top-level original_max_position_embeddings
  // (absent: this default), over rope_parameters' own.
  int phi3_rope_original_max = 0;
  bool experts = false;  // sparse mixture-of-experts MLP (mixtral)
  // experts: the config key of the number of experts; num_local_experts is
  // read too where transformers' attribute_map aliases it.
  const char* experts_key = "num_local_experts";
  bool moe_width = false;  // moe_intermediate_size is the experts' width
  // norm_topk_prob is read (default norm_topk_default); else the chosen
  // experts' weights are always renormalised (mixtral).
  bool norm_topk_key = false;
  bool norm_topk_default = true;
  MoeRouter router = MoeRouter::kSoftmax;
  // output_router_logits true adds router_aux_loss_coef (default
  // router_aux_loss_default) times transformers' load-balancing loss to the
  // training loss (engine/router_loss.h; mixtral, qwen3_moe). Without it the
  // key only makes transformers return the router's logits (deepseek_v3).
  bool router_aux_loss = false;
  double router_aux_loss_default = 0;
  DenseMlpLayers dense_layers = DenseMlpLayers::kNone;
  // n_shared_experts x moe_intermediate_size dense MLP ("shared_experts")
  // beside the routed experts, its output added (deepseek_v3).
  bool shared_experts = false;
  // Multi-head latent attention in place of q/k/v projections
  // (engine/latent_attention.h; deepseek_v3).
  bool latent_attention = false;
  bool bidirectional_key = false;  // use_bidirectional_attention (must not be true)
  SlidingLayers sliding = SlidingLayers::kNone;
  int sliding_window_default = 0;  // sliding_window absent; 0: null

  // Parallel layouts the engine runs the family in (search/space.cc).
  bool tensor_parallel = false;
  bool pipeline_parallel = false;
  bool context_parallel = false;  // causal attention over the sequence's shards

  // Setters, so that a row of the table reads as one expression.
  template <typename T, typename V>
  constexpr ModelFamilyInfo Set(T ModelFamilyInfo::*field, V value) const {
    ModelFamilyInfo f = *this;
    f.*field = value;
    return f;
  }
  using F = ModelFamilyInfo;
  constexpr F Eps(double v) const { return Set(&F::rms_norm_eps, v); }
  constexpr F Theta(double v) const { return Set(&F::rope_theta, v); }
  constexpr F Tied() const { return Set(&F::tie_word_embeddings, true); }
  constexpr F KvHeads(int v) const { return Set(&F::kv_heads_default, v); }
  constexpr F HeadDim(int v) const { return Set(&F::head_dim_default, v); }
  constexpr F Act(const char* key, const char* value) const {
    return Set(&F::activation_key, key).Set(&F::activation_default, value);
  }
  constexpr F QkvBias() const { return Set(&F::qkv_bias, true); }
  constexpr F AttentionBiasKey(bool default_value = false) const {
    return Set(&F::attention_bias_key, true).Set(&F::attention_bias_default, default_value);
  }
  constexpr F MlpBiasKey() const { return Set(&F::mlp_bias_key, true); }
  constexpr F QkNorm() const { return Set(&F::qk_norm, true); }
  constexpr F GemmaNorm() const {
    return Set(&F::gemma_norm, true).Set(&F::bidirectional_key, true);
  }
  constexpr F SandwichNorm() const { return Set(&F::sandwich_norm, true); }
  constexpr F Fused() const { return Set(&F::fused_projections, true); }
  constexpr F SoftCap(double attn, double final_logits, double query_scalar) const {
    return Set(&F::soft_capping, true)
        .Set(&F::attn_softcap_default, attn)
        .Set(&F::final_softcap_default, final_logits)
        .Set(&F::query_scalar_default, query_scalar);
  }
  constexpr F PartialRotary() const { return Set(&F::partial_rotary, true); }
  constexpr F Phi3Rope(int original_max_default) const {
    return Set(&F::phi3_rope_original_max, original_max_default);
  }
  constexpr F DefaultRope(const char* rope_parameters_json) const {
    return Set(&F::default_rope, rope_parameters_json);
  }
  constexpr F Sinks() const { return Set(&F::attention_sinks, true); }
  constexpr F ClampedSwiGlu(double alpha, double limit) const {
    return Set(&F::clamped_swiglu, true)
        .Set(&F::swiglu_alpha_default, alpha)
        .Set(&F::swiglu_limit_default, limit);
  }
  constexpr F Experts() const { return Set(&F::experts, true); }
  constexpr F ExpertsKey(const char* key) const { return Set(&F::experts_key, key); }
  constexpr F MoeWidth() const { return Set(&F::moe_width, true); }
  constexpr F NormTopK(bool default_value) const {
    return Set(&F::norm_topk_key, true).Set(&F::norm_topk_default, default_value);
  }
  constexpr F Router(MoeRouter r) const { return Set(&F::router, r); }
  constexpr F RouterAuxLoss(double coefficient_default) const {
    return Set(&F::router_aux_loss, true).Set(&F::router_aux_loss_default, coefficient_default);
  }
  constexpr F Dense(DenseMlpLayers d) const { return Set(&F::dense_layers, d); }
  constexpr F SharedExperts() const { return Set(&F::shared_experts, true); }
  constexpr F LatentAttention() const { return Set(&F::latent_attention, true); }
  constexpr F Sliding(SlidingLayers s, int window_default) const {
    return Set(&F::sliding, s).Set(&F::sliding_window_default, window_default);
  }
  constexpr F Parallel() const {
    return Set(&F::tensor_parallel, true).Set(&F::pipeline_parallel, true).ContextParallel();
  }
  constexpr F ContextParallel() const { return Set(&F::context_parallel, true); }
};

// The row of `name` (a model_type), or nullptr.
const ModelFamilyInfo* FindModelFamily(absl::string_view name);

// Every row, in table order.
const std::vector<ModelFamilyInfo>& ModelFamilies();

// The family whose transformers class `class_name` is (an entry of a
// config's "architectures": "Qwen2ForCausalLM" -> qwen2), or nullptr.
const ModelFamilyInfo* FamilyOfArchitecture(absl::string_view class_name);

// The config keys a decoder family reads (or checks) because they change its
// network, beyond the sizes every decoder has; derived from the row's
// features. A config with a key that some other decoder family reads and
// `family` does not is another family's config (ModelSpecFromJson refuses
// it).
std::vector<std::string> DecoderFeatureKeys(const ModelFamilyInfo& family);

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_MODEL_FAMILIES_H_

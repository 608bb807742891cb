#include "spec/model_families.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"

namespace autoaccel {
namespace {

constexpr ModelFamilyInfo Family(const char* name, Network network, const char* architecture) {
  ModelFamilyInfo f;
  f.name = name;
  f.network = network;
  f.architecture = architecture;
  return f;
}

constexpr ModelFamilyInfo Decoder(const char* name, const char* architecture) {
  return Family(name, Network::kDecoder, architecture);
}

// Defaults are transformers 5.23's config classes' (LlamaConfig, ...).
// The first four keep the order they had before the table existed (error
// messages list families in this order).
const ModelFamilyInfo kModelFamilies[] = {
    Family("gpt2", Network::kGpt2, "GPT2").Parallel(),
    Decoder("llama", "Llama").AttentionBiasKey().MlpBiasKey().Parallel(),
    Family("bert", Network::kBert, "Bert"),
    Decoder("mixtral", "Mixtral")
        .Eps(1e-5)
        .Theta(1e6)
        .KvHeads(8)
        .Experts()
        .RouterAuxLoss(0.001)
        .Sliding(SlidingLayers::kAll, 0)
        .Parallel(),
    Decoder("mistral", "Mistral").KvHeads(8).Sliding(SlidingLayers::kAll, 4096).Parallel(),
    Decoder("qwen2", "Qwen2").KvHeads(32).QkvBias().Sliding(SlidingLayers::kQwen, 4096).Parallel(),
    Decoder("qwen3", "Qwen3")
        .KvHeads(32)
        .HeadDim(128)
        .QkNorm()
        .AttentionBiasKey()
        .Sliding(SlidingLayers::kQwen, 4096)
        .Parallel(),
    Decoder("phi3", "Phi3")
        .Eps(1e-5)
        .Fused()
        .PartialRotary()
        .Phi3Rope(4096)
        .Sliding(SlidingLayers::kAll, 0)
        .Parallel(),
    Decoder("gemma", "Gemma")
        .KvHeads(16)
        .HeadDim(256)
        .Tied()
        .Act("hidden_act", "gelu_pytorch_tanh")
        .GemmaNorm()
        .AttentionBiasKey()
        .Parallel(),
    Decoder("gemma2", "Gemma2")
        .KvHeads(4)
        .HeadDim(256)
        .Tied()
        .Act("hidden_activation", "gelu_pytorch_tanh")
        .GemmaNorm()
        .SandwichNorm()
        .AttentionBiasKey()
        .SoftCap(50.0, 30.0, 256.0)
        .Sliding(SlidingLayers::kLayerTypes, 4096)
        .Parallel(),
    // Qwen3-30B-A3B's network: qwen3's attention, experts of their own width
    // (moe_intermediate_size) on the layers decoder_sparse_step and
    // mlp_only_layers leave sparse.
    Decoder("qwen3_moe", "Qwen3Moe")
        .KvHeads(4)
        .QkNorm()
        .AttentionBiasKey()
        .Experts()
        .ExpertsKey("num_experts")
        .MoeWidth()
        .NormTopK(false)
        .RouterAuxLoss(0.001)
        .Dense(DenseMlpLayers::kQwenSparseStep)
        .Sliding(SlidingLayers::kUseSlidingWindow, 4096)
        .Parallel(),
    Decoder("deepseek_v3", "DeepseekV3")
        .KvHeads(128)
        .AttentionBiasKey()
        .Experts()
        .ExpertsKey("n_routed_experts")
        .MoeWidth()
        .NormTopK(true)
        .Router(MoeRouter::kGroupedSigmoid)
        .Dense(DenseMlpLayers::kFirstK)
        .SharedExperts()
        .LatentAttention()
        .Parallel(),
    // GPT-OSS: attention sinks, alternating sliding (window 128) and full
    // layers, q/k/v/o biases by default, YaRN by default; experts on every
    // layer with a biased top-k-then-softmax router and clamped SwiGLU.
    Decoder("gpt_oss", "GptOss")
        .Eps(1e-5)
        .Theta(150000.0)
        .KvHeads(8)
        .HeadDim(64)
        .AttentionBiasKey(/*default_value=*/true)
        .DefaultRope(R"({"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,)"
                     R"( "beta_slow": 1.0, "truncate": false,)"
                     R"( "original_max_position_embeddings": 4096})")
        .Sinks()
        .Experts()
        .Router(MoeRouter::kTopKSoftmax)
        .ClampedSwiGlu(1.702, 7.0)
        .RouterAuxLoss(0.001)
        .Sliding(SlidingLayers::kLayerTypes, 128)
        .Parallel(),
    Family("torchscript", Network::kTorchScript, ""),
};

}  // namespace

const std::vector<ModelFamilyInfo>& ModelFamilies() {
  static const auto* families =
      new std::vector<ModelFamilyInfo>(std::begin(kModelFamilies), std::end(kModelFamilies));
  return *families;
}

const ModelFamilyInfo* FindModelFamily(absl::string_view name) {
  // Names measured once: the cost model looks a family up per candidate.
  static const auto* names = [] {
    auto* v = new std::vector<std::pair<absl::string_view, const ModelFamilyInfo*>>();
    for (const ModelFamilyInfo& f : kModelFamilies) v->emplace_back(f.name, &f);
    return v;
  }();
  for (const auto& [family, info] : *names) {
    if (family == name) return info;
  }
  return nullptr;
}

const ModelFamilyInfo* FamilyOfArchitecture(absl::string_view class_name) {
  for (const ModelFamilyInfo& f : kModelFamilies) {
    const absl::string_view prefix = f.architecture;
    if (prefix.empty() || !absl::StartsWith(class_name, prefix)) continue;
    // "Qwen2ForCausalLM", "Qwen2Model", "GPT2LMHeadModel" — not "Qwen2MoeForCausalLM".
    const absl::string_view rest = class_name.substr(prefix.size());
    if (absl::StartsWith(rest, "For") || rest == "Model" || rest == "LMHeadModel" ||
        rest == "PreTrainedModel") {
      return &f;
    }
  }
  return nullptr;
}

std::vector<std::string> DecoderFeatureKeys(const ModelFamilyInfo& f) {
  // Not the activation key: gemma2's configs carry an unused hidden_act
  // beside their hidden_activation.
  std::vector<std::string> keys = {"num_key_value_heads", "head_dim",     "rms_norm_eps",
                                   "rope_parameters",     "rope_scaling", "rope_theta",
                                   "tie_word_embeddings"};
  if (f.attention_bias_key) keys.push_back("attention_bias");
  if (f.mlp_bias_key) keys.push_back("mlp_bias");
  if (f.soft_capping) {
    keys.insert(keys.end(),
                {"attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"});
  }
  if (f.partial_rotary) keys.push_back("partial_rotary_factor");
  if (f.phi3_rope_original_max > 0) keys.push_back("original_max_position_embeddings");
  if (f.experts) {
    keys.insert(keys.end(), {"num_local_experts", "num_experts_per_tok", "output_router_logits"});
    if (f.experts_key != absl::string_view("num_local_experts")) keys.push_back(f.experts_key);
  }
  if (f.moe_width) keys.push_back("moe_intermediate_size");
  if (f.clamped_swiglu) keys.insert(keys.end(), {"swiglu_alpha", "swiglu_limit"});
  if (f.norm_topk_key) keys.push_back("norm_topk_prob");
  if (f.router == MoeRouter::kGroupedSigmoid) {
    keys.insert(keys.end(), {"n_group", "topk_group", "routed_scaling_factor"});
  }
  switch (f.dense_layers) {
    case DenseMlpLayers::kNone:
      break;
    case DenseMlpLayers::kQwenSparseStep:
      keys.insert(keys.end(), {"decoder_sparse_step", "mlp_only_layers"});
      break;
    case DenseMlpLayers::kFirstK:
      keys.push_back("first_k_dense_replace");
      break;
  }
  if (f.shared_experts) keys.push_back("n_shared_experts");
  if (f.latent_attention) {
    keys.insert(keys.end(), {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                             "v_head_dim", "rope_interleave"});
  }
  if (f.bidirectional_key) keys.push_back("use_bidirectional_attention");
  switch (f.sliding) {
    case SlidingLayers::kNone:
      break;
    case SlidingLayers::kAll:
      keys.push_back("sliding_window");
      break;
    case SlidingLayers::kQwen:
      keys.insert(keys.end(),
                  {"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"});
      break;
    case SlidingLayers::kLayerTypes:
      keys.insert(keys.end(), {"sliding_window", "layer_types"});
      break;
    case SlidingLayers::kUseSlidingWindow:
      keys.insert(keys.end(), {"use_sliding_window", "sliding_window", "max_window_layers"});
      break;
  }
  return keys;
}

}  // namespace autoaccel
